"""Options of the ``sparkafka`` Spark data source, parsed and validated on the driver.

How it works: Spark hands the data source its options as a case-insensitive map of strings.
``SinkOptions.parse`` sorts them into the fixed topic, the producer config (every ``kafka.<key>``
with the prefix removed, Java key names) and a few sink settings under ``sparkafka.``. The producer
config is validated at once with ``ProducerConfig.from_mapping`` so a typo such as
``kafka.lnger.ms`` fails the query before any task runs, with the producer's suggestion. Any other
option is an error naming it. The result is a small frozen, picklable object shipped to the tasks.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass

from sparkafka.config import ProducerConfig
from sparkafka.errors import ConfigError

__all__ = [
    "BOOTSTRAP_OPTION",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "FAIL_FIRST_ATTEMPT_OPTION",
    "IDLE_TIMEOUT_OPTION",
    "SUMMARY_PATH_OPTION",
    "TOPIC_OPTION",
    "SinkOptions",
]

TOPIC_OPTION = "topic"
BOOTSTRAP_OPTION = "kafka.bootstrap.servers"
SUMMARY_PATH_OPTION = "sparkafka.summary.path"
"""The driver appends one JSON line per committed or aborted write (see ``commit.WriteSummary``)."""
IDLE_TIMEOUT_OPTION = "sparkafka.producer.idle.timeout.ms"
"""Close an executor's cached producer after it has been unused this long (default 60000)."""
FAIL_FIRST_ATTEMPT_OPTION = "sparkafka.fault.fail.first.attempt.after.records"
"""Fault injection for tests: the first attempt of every task sends this many records, flushes,
then raises, so Spark retries the task."""

DEFAULT_IDLE_TIMEOUT_MS = 60_000
_KAFKA_PREFIX = "kafka."
_SINK_OPTIONS = (TOPIC_OPTION, SUMMARY_PATH_OPTION, IDLE_TIMEOUT_OPTION, FAIL_FIRST_ATTEMPT_OPTION)
# Set by Spark itself for streaming queries; not the user's business to be rejected for.
_SPARK_OPTIONS = frozenset({"checkpointlocation"})
# Kafka keys that make no sense for this sink, with the reason.
_REFUSED_KAFKA_KEYS = {
    "key.serializer": "keys are sent as the bytes of the 'key' column (strings as UTF-8)",
    "value.serializer": "values are sent as the bytes of the 'value' column (strings as UTF-8)",
    "transactional.id": "the sink is at-least-once and does not use transactions",
}


def _int_option(name: str, text: str, low: int) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise ConfigError(f"option {name!r} must be an integer, got {text!r}", name) from None
    if value < low:
        raise ConfigError(f"option {name!r} must be >= {low}, got {value}", name)
    return value


@dataclass(frozen=True)
class SinkOptions:
    """Validated options of one write."""

    producer_config: tuple[tuple[str, str], ...]
    """``kafka.*`` options without the prefix, sorted: the producer cache's key."""
    topic: str | None = None
    summary_path: str | None = None
    idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS
    fail_first_attempt_after: int | None = None

    @property
    def producer_config_dict(self) -> dict[str, str]:
        return dict(self.producer_config)

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> SinkOptions:
        """Sort and validate the data source's options; ``ConfigError`` names the bad option."""
        kafka: dict[str, str] = {}
        sink: dict[str, str] = {}
        for raw_name, value in options.items():
            name = raw_name.strip().lower()
            if name.startswith(_KAFKA_PREFIX):
                key = name[len(_KAFKA_PREFIX):]
                if key in _REFUSED_KAFKA_KEYS:
                    raise ConfigError(
                        f"option {raw_name!r} is not supported: {_REFUSED_KAFKA_KEYS[key]}", raw_name)
                kafka[key] = value
            elif name in _SINK_OPTIONS:
                sink[name] = value
            elif name == "path":
                raise ConfigError(
                    "the sparkafka sink takes no path (save() was given one): name the topic with the "
                    f"{TOPIC_OPTION!r} option or a 'topic' column", "path")
            elif name not in _SPARK_OPTIONS:
                known = [*_SINK_OPTIONS, BOOTSTRAP_OPTION]
                close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                raise ConfigError(
                    f"unknown option {raw_name!r} for the sparkafka sink{hint} (producer settings are "
                    f"passed as 'kafka.<producer config>', e.g. {BOOTSTRAP_OPTION!r})", raw_name)
        if not kafka.get("bootstrap.servers", "").strip():
            raise ConfigError(
                f"option {BOOTSTRAP_OPTION!r} is required (comma-separated host:port list)",
                BOOTSTRAP_OPTION)
        validate_producer_config(kafka)
        topic = sink.get(TOPIC_OPTION)
        if topic is not None and not topic.strip():
            raise ConfigError(f"option {TOPIC_OPTION!r} is empty", TOPIC_OPTION)
        idle = sink.get(IDLE_TIMEOUT_OPTION)
        fail = sink.get(FAIL_FIRST_ATTEMPT_OPTION)
        return cls(
            producer_config=tuple(sorted(kafka.items())),
            topic=topic,
            summary_path=sink.get(SUMMARY_PATH_OPTION) or None,
            idle_timeout_ms=(DEFAULT_IDLE_TIMEOUT_MS if idle is None
                             else _int_option(IDLE_TIMEOUT_OPTION, idle, 0)),
            fail_first_attempt_after=(None if fail is None
                                      else _int_option(FAIL_FIRST_ATTEMPT_OPTION, fail, 0)),
        )


def validate_producer_config(kafka: Mapping[str, str]) -> None:
    """Build the producer config once so bad ``kafka.*`` options fail on the driver, naming the option."""
    try:
        ProducerConfig.from_mapping(dict(kafka))
    except ConfigError as exc:
        option = f"{_KAFKA_PREFIX}{exc.key}" if exc.key else None
        where = f"option {option!r}" if option else "the kafka.* options"
        raise ConfigError(f"{where}: {exc}", option) from exc
