"""librdkafka's producer properties mapped to sparkafka's (Java's), for ``sparkafka.compat.confluent``.

How it works: ``PROPERTIES`` is the one table: each librdkafka property with an equivalent names the
Java key it becomes and, where the units or special values differ, how its value converts (librdkafka's
0 for "OS default" socket buffers is Java's -1, its 0 for "never" is Java's -1 or the largest timeout,
``linger.ms`` may be fractional). Properties the compat ``Producer`` itself honours (the partitioner,
the queue limits, the callbacks, ``log_level``, ``delivery.report.only.error``) map to ``None`` and come
back in ``CompatSettings``; so do properties accepted only at values that change nothing here
(``enable.random.seed``, ``socket.keepalive.enable`` false, ``broker.address.family`` any), which are
only checked: their other values are a ``ConfigError`` saying why. ``translate`` walks a confluent config dict
once: a numeric property's value is first checked against librdkafka's range for it (``_Range`` in the table:
the error names the property as given, with librdkafka's range, before any conversion; an empty value, None or
"", is refused as librdkafka refuses it, and an integer property's fraction is cut off as librdkafka's parse
does); a Java key sparkafka knows and librdkafka has no property of that name is passed through
(``max.block.ms``, ``buffer.memory``, ``ssl.context``); a consumer property is ignored with a warning, as
librdkafka does; anything else is a ``ConfigError`` naming the property, with the reason or the setting to use
instead. Last, the timeouts: librdkafka takes any
``message.timeout.ms`` above ``linger.ms`` (0: infinite, Java's largest ``delivery.timeout.ms``), while
Java wants ``delivery.timeout.ms >= linger.ms + request.timeout.ms``; so a message timeout below that sum
lowers the ``request.timeout.ms`` passed on to ``message.timeout.ms - linger.ms`` (librdkafka too
bounds a ProduceRequest's timeout by its first record's message timeout), and a ``linger.ms`` left at
its default is lowered below the message timeout, as librdkafka does. Java's ``request.timeout.ms`` is
one timeout where librdkafka has two: ``socket.timeout.ms`` (how long the client waits for any request's
response) and ``request.timeout.ms`` (the produce ack timeout sent to the broker); either sets it, and
both set to different values is a ``ConfigError``.
"""

from __future__ import annotations

import difflib
import functools
import logging
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from sparkafka.config import INT32_MAX, KEYS_BY_NAME
from sparkafka.errors import ConfigError
from sparkafka.producer.librdkafka_partitioners import LIBRDKAFKA_PARTITIONERS

__all__ = ["CompatSettings", "PROPERTIES", "translate", "with_default_port"]

log = logging.getLogger("sparkafka.compat")

DEFAULT_PORT: Final = 9092


def with_default_port(servers: object) -> object:
    """librdkafka's and kafka-python's bootstrap entries may omit the port: 9092 is added."""
    if isinstance(servers, str):
        items: list[object] = list(servers.split(","))
    elif isinstance(servers, (list, tuple)):
        items = list(servers)
    else:
        return servers  # the config reports the type
    out: list[object] = []
    for item in items:
        if isinstance(item, str):
            item = item.strip()
            rest = item.split("://", 1)[-1]
            if rest and (rest.endswith("]") if rest.startswith("[") else ":" not in rest):
                item = f"{item}:{DEFAULT_PORT}"
        out.append(item)
    return out


def _milliseconds(name: str, value: Any) -> Any:
    """librdkafka takes fractional milliseconds for linger.ms; Java whole ones (rounded up)."""
    number = _number(name, value)
    if number is None:
        return value
    whole = math.ceil(number)
    if whole != number:
        log.debug("%s %s ms rounded up to %d ms (whole milliseconds)", name, value, whole)
    return whole


def _zero_is_os_default(name: str, value: Any) -> Any:
    number = _number(name, value)
    return -1 if number == 0 else value


def _zero_is_never(name: str, value: Any) -> Any:
    number = _number(name, value)
    return -1 if number == 0 else value


def _zero_is_forever(name: str, value: Any) -> Any:
    number = _number(name, value)
    return INT32_MAX if number == 0 else value


def _minus_one_is_forever(name: str, value: Any) -> Any:
    number = _number(name, value)
    return INT32_MAX if number == -1 else value


def _codec(name: str, value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == "inherit":
        return None  # the topic-level default: the producer's codec
    return value


def _number(name: str, value: Any) -> float | None:
    if isinstance(value, bool):
        raise ConfigError(f"{name!r} must be a number, got {value!r}", name)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            raise ConfigError(f"{name!r} must be a number, got {value!r}", name) from None
    return None


Convert = Callable[[str, Any], Any]


@dataclass(frozen=True)
class _Range:
    """librdkafka's range for a numeric property (its CONFIGURATION.md; the real library refuses a value
    outside it with 'value X is outside allowed range LOW..HIGH')."""

    low: int
    high: int
    fractional: bool = False
    """librdkafka's float properties (linger.ms); an integer property's fraction is cut off (strtol)."""


def _in_range(name: str, value: Any, limits: _Range) -> int | float:
    """``value`` as a number within librdkafka's range for property ``name``, else a ConfigError naming
    ``name`` (the property as the user gave it) and the range. An int is taken as is; a float or a numeric
    str is parsed, and for an integer property its fraction cut off as librdkafka's strtol parse does
    ("1500.7" is 1500, -0.5 is 0). None and "" are refused, as librdkafka refuses an empty value."""
    kind = "a number" if limits.fractional else "an integer"
    rule = f"{name!r} must be {kind} from {limits.low} to {limits.high} (librdkafka's range)"
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ConfigError(f"{rule}, got {value!r}: librdkafka refuses an empty value", name)
    number: int | float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            pass
    if number is None or (isinstance(number, float) and not math.isfinite(number)):
        raise ConfigError(f"{rule}, got {value!r}", name)
    if not limits.fractional:
        number = int(number)  # toward zero, as strtol
    if not limits.low <= number <= limits.high:
        raise ConfigError(f"{rule}, got {value!r}", name)
    return number


@dataclass(frozen=True)
class _Prop:
    java: str | None
    """The Java key, or None: honoured by the compat Producer (CompatSettings)."""
    convert: Convert | None = None
    """Applied to the value (checked against ``limits`` first) before it is passed on."""
    limits: _Range | None = None
    """librdkafka's range, for a numeric property."""
    empty: bool = True
    """None is accepted and leaves the property at its default, as librdkafka takes an empty string property;
    False: librdkafka refuses an empty value (its bool and enum properties)."""


PROPERTIES: Final[dict[str, _Prop]] = {
    "bootstrap.servers": _Prop("bootstrap.servers", lambda n, v: with_default_port(v)),
    "metadata.broker.list": _Prop("bootstrap.servers", lambda n, v: with_default_port(v)),
    "client.id": _Prop("client.id"),
    "client.dns.lookup": _Prop("client.dns.lookup", empty=False),
    "acks": _Prop("acks", empty=False),
    "request.required.acks": _Prop("acks", empty=False),
    "enable.idempotence": _Prop("enable.idempotence", empty=False),
    "transactional.id": _Prop("transactional.id"),
    "transaction.timeout.ms": _Prop("transaction.timeout.ms", limits=_Range(1000, INT32_MAX)),
    "linger.ms": _Prop("linger.ms", _milliseconds, _Range(0, 900000, fractional=True)),
    "queue.buffering.max.ms": _Prop("linger.ms", _milliseconds, _Range(0, 900000, fractional=True)),
    "batch.size": _Prop("batch.size", limits=_Range(1, INT32_MAX)),
    "message.max.bytes": _Prop("max.request.size", limits=_Range(1000, 1000000000)),
    "message.timeout.ms": _Prop("delivery.timeout.ms", _zero_is_forever, _Range(0, INT32_MAX)),
    "delivery.timeout.ms": _Prop("delivery.timeout.ms", _zero_is_forever, _Range(0, INT32_MAX)),
    "request.timeout.ms": _Prop("request.timeout.ms", limits=_Range(1, 900000)),
    # librdkafka: "Default timeout for network requests" (its Metadata, InitProducerId, transaction
    # requests; a ProduceRequest's too, bounded by its first record's message.timeout.ms); Java's
    # request.timeout.ms is that timeout for every request (and the ack timeout of a ProduceRequest)
    "socket.timeout.ms": _Prop("request.timeout.ms", limits=_Range(10, 300000)),
    "compression.type": _Prop("compression.type", _codec, empty=False),
    "compression.codec": _Prop("compression.type", _codec, empty=False),
    "compression.level": _Prop(None, limits=_Range(-1, 12)),
    "retries": _Prop("retries", limits=_Range(0, INT32_MAX)),
    "message.send.max.retries": _Prop("retries", limits=_Range(0, INT32_MAX)),
    "retry.backoff.ms": _Prop("retry.backoff.ms", limits=_Range(1, 300000)),
    "retry.backoff.max.ms": _Prop("retry.backoff.max.ms", limits=_Range(1, 300000)),
    "reconnect.backoff.ms": _Prop("reconnect.backoff.ms", limits=_Range(0, 3600000)),
    "reconnect.backoff.max.ms": _Prop("reconnect.backoff.max.ms", limits=_Range(0, 3600000)),
    "max.in.flight.requests.per.connection": _Prop("max.in.flight.requests.per.connection", limits=_Range(1, 1000000)),
    "max.in.flight": _Prop("max.in.flight.requests.per.connection", limits=_Range(1, 1000000)),
    "socket.send.buffer.bytes": _Prop("send.buffer.bytes", _zero_is_os_default, _Range(0, 100000000)),
    "socket.receive.buffer.bytes": _Prop("receive.buffer.bytes", _zero_is_os_default, _Range(0, 100000000)),
    "socket.connection.setup.timeout.ms": _Prop("socket.connection.setup.timeout.ms", limits=_Range(1000, INT32_MAX)),
    "connections.max.idle.ms": _Prop("connections.max.idle.ms", _zero_is_never, _Range(0, INT32_MAX)),
    "metadata.max.age.ms": _Prop("metadata.max.age.ms", limits=_Range(1, 86400000)),
    "topic.metadata.refresh.interval.ms": _Prop("metadata.max.age.ms", _minus_one_is_forever, _Range(-1, 3600000)),
    "security.protocol": _Prop("security.protocol", empty=False),
    "sasl.mechanisms": _Prop("sasl.mechanism", empty=False),
    "sasl.mechanism": _Prop("sasl.mechanism", empty=False),
    "sasl.username": _Prop("sasl.username"),
    "sasl.password": _Prop("sasl.password"),
    "sasl.oauthbearer.config": _Prop(None),
    "oauth_cb": _Prop(None),
    "ssl.ca.location": _Prop("ssl.ca.location"),
    "ssl.certificate.location": _Prop("ssl.certificate.location"),
    "ssl.key.location": _Prop("ssl.key.location"),
    "ssl.key.password": _Prop("ssl.key.password"),
    "ssl.endpoint.identification.algorithm": _Prop(
        "ssl.endpoint.identification.algorithm",
        lambda n, v: "" if isinstance(v, str) and v.strip().lower() == "none" else v, empty=False),
    "partitioner": _Prop(None),
    "sticky.partitioning.linger.ms": _Prop(None, limits=_Range(0, 900000)),
    "queue.buffering.max.messages": _Prop(None, limits=_Range(0, INT32_MAX)),
    "queue.buffering.max.kbytes": _Prop(None, limits=_Range(1, INT32_MAX)),
    "allow.auto.create.topics": _Prop(None),
    "on_delivery": _Prop(None),
    "dr_cb": _Prop(None),
    "dr_msg_cb": _Prop(None),
    "error_cb": _Prop(None),
    "logger": _Prop(None),
    "api.version.request": _Prop(None),
    # librdkafka's log lines at or below this syslog level (default 6, info) reach `logger`: the compat
    # Producer forwards sparkafka's records the same way (CompatSettings.log_level); without a logger
    # sparkafka's records go to Python logging, whose configuration filters them, so it changes nothing
    "log_level": _Prop(None, limits=_Range(0, 7)),
    # served by the compat Producer: only failed records' reports call on_delivery (CompatSettings)
    "delivery.report.only.error": _Prop(None),
    # librdkafka seeds the C library's PRNG (srand) once at startup when true (the default); sparkafka
    # never uses that PRNG (its randomness, partitioners and backoff jitter, is Python's `random`, which the
    # interpreter seeds from the OS at startup), so true and false alike change nothing: only checked to be
    # a boolean
    "enable.random.seed": _Prop(None),
    # false (librdkafka's default) is sparkafka's behaviour: no SO_KEEPALIVE; true is refused
    "socket.keepalive.enable": _Prop(None),
    # any (librdkafka's default) is sparkafka's behaviour: every address a name resolves to; v4/v6 refused
    "broker.address.family": _Prop(None),
}
"""librdkafka property -> what it becomes (see the module docstring)."""

_NO_EQUIVALENT: Final[dict[str, str]] = {
    "batch.num.messages": "batches are bounded in bytes only: use batch.size",
    "statistics.interval.ms": "librdkafka's statistics JSON has no equivalent: use producer.metrics() "
                              "(Java's metric names)",
    "stats_cb": "librdkafka's statistics JSON has no equivalent: use producer.metrics() (Java's metric names)",
    "throttle_cb": "throttle events are not reported",
    "debug": "use logging.getLogger('sparkafka').setLevel(logging.DEBUG) (and log_level 7 with a logger)",
    "enable.ssl.certificate.verification": "certificates are always verified: pass your own ssl.SSLContext "
                                           "as ssl.context to change that",
    "ssl.ca.pem": "write the PEM to a file and use ssl.ca.location, or pass an ssl.SSLContext as ssl.context",
    "ssl.certificate.pem": "write the PEM to a file and use ssl.certificate.location",
    "ssl.key.pem": "write the PEM to a file and use ssl.key.location",
    "ssl.cipher.suites": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.curves.list": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.sigalgs.list": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.crl.location": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.keystore.location": "use ssl.certificate.location and ssl.key.location (PEM)",
    "ssl.engine.location": "OpenSSL engines are not supported",
    "ssl.providers": "build an ssl.SSLContext and pass it as ssl.context",
    "enable.gapless.guarantee": "with idempotence, a gap fails only the partition's records and renumbers them "
                                "(see docs/DESIGN.md)",
    "queuing.strategy": "records are always sent in order (fifo)",
    "produce.offset.report": "the offset is always reported",
    "sasl.oauthbearer.method": "give oauth_cb (or sasl.oauthbearer.token.provider) a function that returns "
                               "the token",
    "queue.buffering.backpressure.threshold": "the Sender sends as soon as a request is ready",
    "socket.nagle.disable": "Nagle is always disabled",
}
"""librdkafka properties with no equivalent that users set often, and what to do instead."""

_NO_EQUIVALENT_FAMILIES: Final = (
    ("sasl.kerberos.", "GSSAPI (Kerberos) is not supported"),
    ("sasl.oauthbearer.", "give oauth_cb (or sasl.oauthbearer.token.provider) a function that returns "
                          "the token"),
    ("ssl_engine", "OpenSSL engines are not supported"),
    ("plugin.", "librdkafka plugins are not supported"),
    ("interceptor", "interceptors are not supported"),
)

_CONSUMER_ONLY: Final = frozenset({
    "group.id", "group.instance.id", "group.protocol", "group.remote.assignor", "partition.assignment.strategy",
    "session.timeout.ms", "heartbeat.interval.ms", "group.protocol.type", "coordinator.query.interval.ms",
    "max.poll.interval.ms", "enable.auto.commit", "auto.commit.interval.ms", "enable.auto.offset.store",
    "queued.min.messages", "queued.max.messages.kbytes", "fetch.wait.max.ms", "fetch.queue.backoff.ms",
    "fetch.message.max.bytes", "max.partition.fetch.bytes", "fetch.max.bytes", "fetch.min.bytes",
    "fetch.error.backoff.ms", "isolation.level", "enable.partition.eof", "check.crcs", "auto.offset.reset",
    "client.rack", "on_commit", "rebalance_cb", "offset_commit_cb",
    "consume.callback.max.messages",
})
"""Consumer properties: librdkafka ignores them on a producer with a warning; so does the compat layer."""


@dataclass
class CompatSettings:
    """What the compat ``Producer`` honours itself, with librdkafka's defaults."""

    partitioner: str = "consistent_random"
    sticky_linger_ms: int | None = None
    """None: librdkafka's default, twice linger.ms (at most 900000)."""
    max_messages: int = 100000
    """0: no limit (librdkafka: "A value of 0 disables this limit")."""
    max_kbytes: int = 1048576
    on_delivery: Callable[..., Any] | None = None
    error_cb: Callable[..., Any] | None = None
    logger: logging.Logger | None = None
    compression_level: int | None = None
    log_level: int = 6
    """The syslog level up to which sparkafka's records reach ``logger`` (librdkafka's default: 6, info)."""
    dr_only_error: bool = False
    """``delivery.report.only.error``: successful records' reports are served without calling back."""
    oauth_cb: Callable[..., Any] | None = None
    oauthbearer_config: str = ""
    java: dict[str, Any] = field(default_factory=dict)
    """The Java-named settings for the inner KafkaProducer."""
    sources: dict[str, str] = field(default_factory=dict)
    """Java key -> the librdkafka property that set it (``message.max.bytes`` for ``max.request.size``), so an
    error the inner KafkaProducer's config raises about a Java key can name what the user set."""


def _bool(name: str, value: Any) -> bool:
    """librdkafka's booleans: True/False or the strings true/t/1 and false/f/0."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "t", "1"):
        return True
    if text in ("false", "f", "0"):
        return False
    raise ConfigError(f"{name!r} must be a boolean (true or false), got {value!r}", name)


def _callable(name: str, value: Any) -> Callable[..., Any]:
    if not callable(value):
        raise ConfigError(f"{name!r} must be a callable, got {type(value).__name__}", name)
    result: Callable[..., Any] = value
    return result


def _flatten(conf: Mapping[str, Any]) -> dict[str, Any]:
    """The config with a legacy ``default.topic.config`` dict merged in (top-level entries win)."""
    if not isinstance(conf, Mapping):
        raise TypeError(f"Producer expects a dict of librdkafka properties, got {type(conf).__name__}")
    out: dict[str, Any] = {}
    nested = conf.get("default.topic.config")
    if nested is not None:
        if not isinstance(nested, Mapping):
            raise ConfigError("'default.topic.config' must be a dict", "default.topic.config")
        out.update(nested)
    for name, value in conf.items():
        if name != "default.topic.config":
            out[name] = value
    return out


def _compat_value(settings: CompatSettings, name: str, value: Any) -> None:
    if name == "partitioner":
        if value not in LIBRDKAFKA_PARTITIONERS:
            raise ConfigError(f"'partitioner' must be one of {', '.join(LIBRDKAFKA_PARTITIONERS)}, got {value!r}",
                              name)
        settings.partitioner = value
    elif name == "sticky.partitioning.linger.ms":
        settings.sticky_linger_ms = int(value)  # checked by the table, as the ones below
    elif name == "queue.buffering.max.messages":
        settings.max_messages = int(value)
    elif name == "queue.buffering.max.kbytes":
        settings.max_kbytes = int(value)
    elif name in ("on_delivery", "dr_cb", "dr_msg_cb"):
        settings.on_delivery = _callable(name, value)
    elif name == "error_cb":
        settings.error_cb = _callable(name, value)
    elif name == "logger":
        if value is None:
            return  # confluent-kafka takes None: no logger
        if not isinstance(value, logging.Logger):
            raise ConfigError(f"'logger' must be a logging.Logger, got {type(value).__name__}", name)
        settings.logger = value
    elif name == "compression.level":
        level = int(value)
        settings.compression_level = None if level == -1 else level
    elif name == "oauth_cb":
        settings.oauth_cb = _callable(name, value)
    elif name == "sasl.oauthbearer.config":
        settings.oauthbearer_config = str(value)
    elif name == "allow.auto.create.topics":
        # librdkafka's producer asks for metadata without auto-creation when false; sparkafka's metadata
        # requests always allow it (as Java's producer), so false cannot be honoured: refused, not ignored
        if not _bool(name, value):
            raise ConfigError("'allow.auto.create.topics' false cannot be honoured: sparkafka's metadata "
                              "requests let the broker create a missing topic (as Java's producer does); turn "
                              "auto-creation off on the broker (auto.create.topics.enable=false) instead", name)
    elif name == "log_level":
        settings.log_level = int(value)
    elif name == "delivery.report.only.error":
        # confluent-kafka's Python layer (not librdkafka) reads this one, and takes a bool only
        if not isinstance(value, bool):
            raise TypeError(f"Expected delivery.report.only.error to be bool type, not {type(value).__name__}")
        settings.dr_only_error = value
    elif name == "enable.random.seed":
        _bool(name, value)  # no effect either way (see PROPERTIES)
    elif name == "socket.keepalive.enable":
        if _bool(name, value):
            raise ConfigError("'socket.keepalive.enable' true cannot be honoured: sparkafka's connections do not "
                              "set SO_KEEPALIVE and have no socket option setting; leave it false (a request "
                              "without an answer fails the connection after request.timeout.ms, an idle one "
                              "is closed after connections.max.idle.ms)", name)
    elif name == "broker.address.family":
        family = value.strip().lower() if isinstance(value, str) else None
        if family not in ("any", "v4", "v6"):
            raise ConfigError(f"'broker.address.family' must be any, v4 or v6, got {value!r}", name)
        if family != "any":
            raise ConfigError(f"'broker.address.family' {family} cannot be honoured: sparkafka connects to every "
                              "address a broker's name resolves to, IPv4 and IPv6 alike (client.dns.lookup "
                              "chooses no family); leave it any, or give bootstrap.servers and the brokers' "
                              "advertised listeners addresses of the family you want", name)
    elif name == "api.version.request":
        if str(value).strip().lower() not in ("true", "1"):
            raise ConfigError("'api.version.request' false (brokers older than 0.10) is not supported: "
                              "sparkafka needs ApiVersions (Kafka 0.10+)", name)


def _unsupported(name: str) -> ConfigError:
    reason = _NO_EQUIVALENT.get(name)
    if reason is None:
        for prefix, why in _NO_EQUIVALENT_FAMILIES:
            if name.startswith(prefix):
                reason = why
                break
    if reason is not None:
        return ConfigError(f"librdkafka property {name!r} has no equivalent in sparkafka: {reason}", name)
    close = difflib.get_close_matches(name, [*PROPERTIES, *KEYS_BY_NAME], n=1, cutoff=0.75)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return ConfigError(f"property {name!r} is not a librdkafka producer property sparkafka can honour (no "
                       f"equivalent){hint}", name)


_SHARED: Final[dict[str, str]] = {
    "request.timeout.ms": ": sparkafka has one timeout for a request, Java's request.timeout.ms, both how long "
                          "it waits for a response (librdkafka's socket.timeout.ms) and the ack timeout a "
                          "ProduceRequest gives the broker (librdkafka's request.timeout.ms); set one of them, "
                          "or both to the same value",
}
"""Why two librdkafka properties share one Java key, added to the error when they disagree."""


def _plain_number(value: Any) -> float | None:
    """A timeout's value as a number, or None (a bad value: ProducerConfig reports it)."""
    try:
        return _number("", value)
    except ConfigError:
        return None


def _fit_timeouts(java: dict[str, Any], names: Mapping[str, str]) -> None:
    """librdkafka's timeouts under Java's rule (see the module docstring); ``names``: Java key -> the
    librdkafka property that set it."""
    if "delivery.timeout.ms" not in java:
        return  # librdkafka's default (300000) vs Java's (120000): Java's rule raises it as needed
    delivery = _plain_number(java["delivery.timeout.ms"])
    linger = _plain_number(java.get("linger.ms", KEYS_BY_NAME["linger.ms"].default))
    request = _plain_number(java.get("request.timeout.ms", KEYS_BY_NAME["request.timeout.ms"].default))
    if delivery is None or linger is None or request is None:
        return
    if delivery <= linger:
        # librdkafka (rd_kafka_conf_finalize): an error if linger.ms was set, else linger.ms is lowered
        if "linger.ms" in java:
            name = names.get("delivery.timeout.ms", "message.timeout.ms")
            raise ConfigError(f"{name!r} must be greater than {names.get('linger.ms', 'linger.ms')!r} "
                              f"(librdkafka's rule), got {java['delivery.timeout.ms']!r} <= {java['linger.ms']!r}",
                              name)
        linger = max(0.0, math.ceil(delivery) - 1.0)
        java["linger.ms"] = int(linger)
    if delivery < linger + request:
        # Java's delivery.timeout.ms >= linger.ms + request.timeout.ms: a shorter request timeout, so the
        # record still fails at message.timeout.ms (librdkafka accepts any message.timeout.ms)
        lowered = max(1, int(delivery - linger))
        log.debug("request.timeout.ms %s lowered to %d: message.timeout.ms %s - linger.ms %s", request, lowered,
                  delivery, linger)
        java["request.timeout.ms"] = lowered


def _fit_transaction_timeout(java: dict[str, Any], names: Mapping[str, str]) -> None:
    """librdkafka's rule for a transactional producer (rd_kafka_conf_finalize): message.timeout.ms set above
    transaction.timeout.ms is an error, and left unset it is transaction.timeout.ms (a record must not
    outlive its transaction). Java has no such rule; its delivery.timeout.ms stays 120000."""
    if not java.get("transactional.id"):
        return
    txn = _plain_number(java.get("transaction.timeout.ms", KEYS_BY_NAME["transaction.timeout.ms"].default))
    if txn is None:
        return
    if "delivery.timeout.ms" not in java:
        java["delivery.timeout.ms"] = int(txn)
        return
    delivery = _plain_number(java["delivery.timeout.ms"])
    if delivery is not None and txn < delivery < INT32_MAX:  # INT32_MAX: message.timeout.ms 0, accepted there
        name = names.get("delivery.timeout.ms", "message.timeout.ms")
        raise ConfigError(f"{name!r} must be <= 'transaction.timeout.ms' with a transactional.id (librdkafka's "
                          f"rule), got {java['delivery.timeout.ms']!r} > {txn:g}", name)


def translate(conf: Mapping[str, Any]) -> CompatSettings:
    """Split a confluent-kafka config into the Java settings and what the compat Producer honours."""
    settings = CompatSettings()
    java = settings.java
    names = settings.sources
    for name, value in _flatten(conf).items():
        if not isinstance(name, str):
            raise ConfigError(f"property names must be strings, got {name!r}")
        prop = PROPERTIES.get(name)
        if prop is not None:
            if value is None and not prop.empty:
                raise ConfigError(f"{name!r} cannot be set to an empty value (None), as librdkafka refuses", name)
            if prop.limits is not None:
                value = _in_range(name, value, prop.limits)
            if prop.java is None:
                _compat_value(settings, name, value)
                continue
            if prop.convert is not None:
                value = prop.convert(name, value)
            if value is None:
                continue  # not set: a string property given None (librdkafka's default), compression "inherit"
            if prop.java in java and java[prop.java] != value:
                raise ConfigError(f"{name!r} sets {prop.java!r}, which another property already set to a "
                                  f"different value ({java[prop.java]!r}){_SHARED.get(prop.java, '')}", name)
            java[prop.java] = value
            names[prop.java] = name
        elif name in KEYS_BY_NAME:
            java[name] = value  # a Java key librdkafka has no property of that name for
        elif name in _CONSUMER_ONLY:
            log.warning("Configuration property %s is a consumer property and will be ignored by this producer "
                        "instance", name)
        else:
            raise _unsupported(name)
    if settings.compression_level is not None:
        codec = str(java.get("compression.type", "none")).strip().lower()
        if codec in ("gzip", "lz4", "zstd"):
            java[f"compression.{codec}.level"] = settings.compression_level
    if settings.oauth_cb is not None:
        java["sasl.oauthbearer.token.provider"] = functools.partial(settings.oauth_cb, settings.oauthbearer_config)
    _fit_transaction_timeout(java, names)
    _fit_timeouts(java, names)
    return settings
