"""Options of the ``sparkafka`` Spark data source, parsed and validated on the driver.

How it works: Spark hands the data source its options as a case-insensitive map of strings.
``SinkOptions.parse`` sorts them into the fixed topic, the producer config (every ``kafka.<key>``
with the prefix removed, Java key names) and a few sink settings under ``sparkafka.``. The producer
config is validated at once with ``ProducerConfig.from_mapping`` so a typo such as
``kafka.lnger.ms`` fails the query before any task runs, with the producer's suggestion. Any other
option is an error naming it. The result is a small frozen, picklable object shipped to the tasks.

Exactly-once (``sparkafka.guarantee=exactly_once``, see ``spark.exactly_once``) adds the sink id
(``sparkafka.sink.id``: letters, digits, ``.``, ``_``, ``-``; it names the sink's transactional ids and its
decision log entry), the decision log topic, and a ``transaction.timeout.ms`` of 900000 (the broker's
default ``transaction.max.timeout.ms``) unless ``kafka.transaction.timeout.ms`` is given: a task's
transaction stays open until the driver commits the whole write, far longer than a producer's usual 60 s.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from sparkafka.config import ProducerConfig
from sparkafka.errors import ConfigError

__all__ = [
    "BOOTSTRAP_OPTION",
    "DEFAULT_IDLE_TIMEOUT_MS",
    "AT_LEAST_ONCE",
    "EXACTLY_ONCE",
    "EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS",
    "FAIL_FIRST_ATTEMPT_OPTION",
    "GUARANTEE_OPTION",
    "IDLE_TIMEOUT_OPTION",
    "DRIVER_EXIT_OPTION",
    "KILL_FIRST_ATTEMPT_OPTION",
    "LOG_TOPIC_OPTION",
    "SINK_ID_OPTION",
    "STALL_FIRST_ATTEMPT_MS_OPTION",
    "STALL_FIRST_ATTEMPT_OPTION",
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

KILL_FIRST_ATTEMPT_OPTION = "sparkafka.fault.kill.first.attempt.after.records"
"""Fault injection for tests: the first attempt of every task sends this many records, flushes, then
its Python worker process exits at once (``os._exit``), as a killed executor would."""
STALL_FIRST_ATTEMPT_OPTION = "sparkafka.fault.stall.first.attempt.of.partition"
"""Fault injection for tests: the first attempt of the task of this Spark partition sends all its records,
flushes (under exactly-once its transaction is then open with all of them), then sleeps for
``sparkafka.fault.stall.first.attempt.ms`` before it returns: a straggler, which a speculative copy of the task
(``spark.speculation``) overtakes, after which Spark kills it."""
STALL_FIRST_ATTEMPT_MS_OPTION = "sparkafka.fault.stall.first.attempt.ms"
"""How long the stalled first attempt sleeps (default 300000)."""
DEFAULT_STALL_MS = 300_000
DRIVER_EXIT_OPTION = "sparkafka.fault.driver.exit.after.commits"
"""Fault injection for tests (exactly-once): the driver's commit process records PREPARED, commits this many
transactions, then exits at once (``os._exit``); its abort process exits at once too. As a driver killed
between the commit point and COMMITTED; a later run with the same sink id finishes the commit."""
GUARANTEE_OPTION = "sparkafka.guarantee"
"""``at_least_once`` (the default) or ``exactly_once``."""
SINK_ID_OPTION = "sparkafka.sink.id"
"""Exactly-once: the sink's stable identity (transactional ids, decision log key)."""
LOG_TOPIC_OPTION = "sparkafka.sink.log.topic"
"""Exactly-once: the compacted topic holding the sinks' decisions (default ``sparkafka-sink-decisions``)."""
AT_LEAST_ONCE = "at_least_once"
EXACTLY_ONCE = "exactly_once"
EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS = 900_000
"""The broker's default transaction.max.timeout.ms (Kafka's TransactionStateManagerConfig)."""

DEFAULT_IDLE_TIMEOUT_MS = 60_000
_KAFKA_PREFIX = "kafka."
_SINK_OPTIONS = (TOPIC_OPTION, SUMMARY_PATH_OPTION, IDLE_TIMEOUT_OPTION, FAIL_FIRST_ATTEMPT_OPTION,
                 KILL_FIRST_ATTEMPT_OPTION, STALL_FIRST_ATTEMPT_OPTION, STALL_FIRST_ATTEMPT_MS_OPTION,
                 DRIVER_EXIT_OPTION, GUARANTEE_OPTION, SINK_ID_OPTION, LOG_TOPIC_OPTION)
_CHECKPOINT_OPTION = "checkpointlocation"
# Set by Spark itself for streaming queries; not the user's business to be rejected for.
_SPARK_OPTIONS = frozenset({_CHECKPOINT_OPTION})
# Kafka keys that make no sense for this sink, with the reason.
_REFUSED_KAFKA_KEYS = {
    "key.serializer": "keys are sent as the bytes of the 'key' column (strings as UTF-8)",
    "value.serializer": "values are sent as the bytes of the 'value' column (strings as UTF-8)",
    "transactional.id": (f"with {GUARANTEE_OPTION}={EXACTLY_ONCE} the sink derives one transactional id per "
                         f"task from {SINK_ID_OPTION}; at-least-once uses no transactions"),
}
_SINK_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")


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
    kill_first_attempt_after: int | None = None
    stall_first_attempt_of: int | None = None
    stall_first_attempt_ms: int = DEFAULT_STALL_MS
    driver_exit_after_commits: int | None = None
    guarantee: str = AT_LEAST_ONCE
    sink_id: str | None = None
    log_topic: str | None = None
    checkpoint_location: str | None = None
    skip_write: bool = False
    """Exactly-once batch write: the sink id's write was committed by an earlier run; tasks send nothing."""

    @property
    def producer_config_dict(self) -> dict[str, str]:
        return dict(self.producer_config)

    @property
    def exactly_once(self) -> bool:
        return self.guarantee == EXACTLY_ONCE

    def with_sink_id(self, sink_id: str) -> SinkOptions:
        return replace(self, sink_id=check_sink_id(sink_id))

    def transactional_config(self, transactional_id: str) -> dict[str, str]:
        """A task's producer config under exactly-once."""
        config = dict(self.producer_config)
        config.setdefault("transaction.timeout.ms", str(EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS))
        config["transactional.id"] = transactional_id
        return config

    def driver_config(self) -> dict[str, str]:
        """The connection and security settings for the driver's finisher and decision log."""
        config = dict(self.producer_config)
        config.setdefault("transaction.timeout.ms", str(EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS))
        return config

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
        kill = sink.get(KILL_FIRST_ATTEMPT_OPTION)
        stall = sink.get(STALL_FIRST_ATTEMPT_OPTION)
        stall_ms = sink.get(STALL_FIRST_ATTEMPT_MS_OPTION)
        if stall_ms is not None and stall is None:
            raise ConfigError(f"option {STALL_FIRST_ATTEMPT_MS_OPTION!r} needs {STALL_FIRST_ATTEMPT_OPTION!r} (the "
                              "partition whose first attempt stalls)", STALL_FIRST_ATTEMPT_MS_OPTION)
        driver_exit = sink.get(DRIVER_EXIT_OPTION)
        guarantee = sink.get(GUARANTEE_OPTION, AT_LEAST_ONCE).strip().lower().replace("-", "_")
        if guarantee not in (AT_LEAST_ONCE, EXACTLY_ONCE):
            raise ConfigError(f"option {GUARANTEE_OPTION!r} must be {AT_LEAST_ONCE!r} or {EXACTLY_ONCE!r}, got "
                              f"{sink[GUARANTEE_OPTION]!r}", GUARANTEE_OPTION)
        sink_id = sink.get(SINK_ID_OPTION)
        log_topic = sink.get(LOG_TOPIC_OPTION)
        if guarantee != EXACTLY_ONCE:
            for name in (SINK_ID_OPTION, LOG_TOPIC_OPTION, KILL_FIRST_ATTEMPT_OPTION, DRIVER_EXIT_OPTION):
                if name in sink:
                    raise ConfigError(f"option {name!r} needs {GUARANTEE_OPTION}={EXACTLY_ONCE!r} (the sink is "
                                      "at-least-once without it)", name)
        if guarantee == EXACTLY_ONCE:  # e.g. kafka.acks=1 cannot go with a transactional producer
            try:
                ProducerConfig.from_mapping({"transaction.timeout.ms": str(EXACTLY_ONCE_TRANSACTION_TIMEOUT_MS),
                                             **kafka, "transactional.id": "sparkafka-check"})
            except ConfigError as exc:
                raise ConfigError(f"option {GUARANTEE_OPTION!r}={EXACTLY_ONCE!r} needs transactional producers, "
                                  f"which the kafka.* options do not allow: {exc}", GUARANTEE_OPTION) from exc
        if log_topic is not None and not log_topic.strip():
            raise ConfigError(f"option {LOG_TOPIC_OPTION!r} is empty", LOG_TOPIC_OPTION)
        checkpoint = next((v for k, v in options.items() if k.strip().lower() == _CHECKPOINT_OPTION), None)
        return cls(
            producer_config=tuple(sorted(kafka.items())),
            topic=topic,
            summary_path=sink.get(SUMMARY_PATH_OPTION) or None,
            idle_timeout_ms=(DEFAULT_IDLE_TIMEOUT_MS if idle is None
                             else _int_option(IDLE_TIMEOUT_OPTION, idle, 0)),
            fail_first_attempt_after=(None if fail is None
                                      else _int_option(FAIL_FIRST_ATTEMPT_OPTION, fail, 0)),
            kill_first_attempt_after=(None if kill is None
                                      else _int_option(KILL_FIRST_ATTEMPT_OPTION, kill, 0)),
            stall_first_attempt_of=None if stall is None else _int_option(STALL_FIRST_ATTEMPT_OPTION, stall, 0),
            stall_first_attempt_ms=(DEFAULT_STALL_MS if stall_ms is None
                                    else _int_option(STALL_FIRST_ATTEMPT_MS_OPTION, stall_ms, 0)),
            driver_exit_after_commits=(None if driver_exit is None
                                       else _int_option(DRIVER_EXIT_OPTION, driver_exit, 0)),
            guarantee=guarantee,
            sink_id=None if sink_id is None else check_sink_id(sink_id),
            log_topic=None if log_topic is None else log_topic.strip(),
            checkpoint_location=checkpoint,
        )


def check_sink_id(sink_id: str) -> str:
    """A sink id is 1-200 letters, digits, '.', '_' or '-' (it is part of transactional ids)."""
    if not _SINK_ID.fullmatch(sink_id):
        raise ConfigError(f"option {SINK_ID_OPTION!r} must be 1-200 letters, digits, '.', '_' or '-', got "
                          f"{sink_id!r}", SINK_ID_OPTION)
    return sink_id


def validate_producer_config(kafka: Mapping[str, str]) -> None:
    """Build the producer config once so bad ``kafka.*`` options fail on the driver, naming the option."""
    try:
        ProducerConfig.from_mapping(dict(kafka))
    except ConfigError as exc:
        option = f"{_KAFKA_PREFIX}{exc.key}" if exc.key else None
        where = f"option {option!r}" if option else "the kafka.* options"
        raise ConfigError(f"{where}: {exc}", option) from exc
