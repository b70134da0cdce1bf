"""Producer configuration: Java's key names, Kafka 4.x defaults, one declarative table.

How it works: ``CONFIG_KEYS`` lists every supported key once (Java name, kind, default, range or choices,
whether it is secret, a one-line doc). ``ProducerConfig.from_mapping`` accepts dotted keys
(``"linger.ms"``) or underscored ones (``linger_ms=5``) from a mapping and/or keyword arguments, coerces
strings (Spark options and CLI ``k=v`` pairs are all strings) to each key's kind, range-checks them, then
applies Java's cross-field rules in Java's order:

1. ``reconnect.backoff.ms`` set without ``reconnect.backoff.max.ms``: the max follows it (no growth).
2. Idempotence (default on) needs ``acks=all``, ``retries > 0`` and ``max.in.flight... <= 5``. A violation
   turns it off (INFO log on ``sparkafka.config``) if it was left at its default, and is a ``ConfigError``
   naming the conflicting key if the user set it to true. ``transactional.id`` requires idempotence.
3. ``client.id`` left unset becomes ``producer-<transactional.id>`` or ``producer-<n>`` (a process-wide
   counter).
4. ``delivery.timeout.ms >= linger.ms + request.timeout.ms``: an explicit smaller value is an error, the
   default is raised silently.
5. ``batch.size`` is stored as ``max(1, value)`` and may not exceed ``buffer.memory`` (Java accepts it, and
   then every ``send()`` fails: no batch fits the pool); security keys are checked against
   ``security.protocol``.

``None`` for any key means "use the default". The result is a frozen, picklable dataclass with one typed
attribute per key (``cfg.linger_ms``); callables given for serializers, the partitioner or the OAUTHBEARER
token provider must themselves be picklable to ship the config to Spark executors (module-level functions
and classes are), and ``ssl.context`` (an ``ssl.SSLContext``) is never picklable: use the ``ssl.*.location``
keys instead when the config crosses processes. ``repr``/``str``/``to_properties()`` hide secrets.
"""

from __future__ import annotations

import difflib
import itertools
import logging
import re
import ssl
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final, Literal

from sparkafka._types import MAX_STRING_BYTES
from sparkafka.errors import ConfigError
from sparkafka.serializers import (
    Serializer,
    callable_name,
    import_object,
    original_spec,
    resolve_serializer,
    serializer_name,
)

log = logging.getLogger("sparkafka.config")

INT32_MAX: Final = 2**31 - 1
INT64_MAX: Final = 2**63 - 1
MAX_IN_FLIGHT_FOR_IDEMPOTENCE: Final = 5
HIDDEN: Final = "[hidden]"

Kind = Literal[
    "int", "long", "bool", "str", "enum", "servers", "acks", "serializer", "partitioner", "interceptors",
    "callable", "ssl_context",
]

PartitionerSpec = str | Callable[..., Any] | object | None
"""``None`` (built-in sticky/murmur2 partitioning), ``"round_robin"``, a Python callable / class, or an
object with a ``partition`` method (used as given)."""


@dataclass(frozen=True)
class ConfigKey:
    """One row of the config table."""

    name: str
    kind: Kind
    default: Any
    doc: str
    min: int | None = None
    max: int | None = None
    """For numbers the largest value; for strings the most UTF-8 bytes."""
    also: tuple[int, ...] = ()
    """Values allowed outside ``[min, max]`` (gzip's -1)."""
    choices: tuple[str, ...] = ()
    nullable: bool = False
    secret: bool = False

    @property
    def attr(self) -> str:
        return self.name.replace(".", "_")


def _k(name: str, kind: Kind, default: Any, doc: str, **extra: Any) -> ConfigKey:
    if kind == "int" and "max" not in extra:
        extra["max"] = INT32_MAX
    if kind == "long" and "max" not in extra:
        extra["max"] = INT64_MAX
    return ConfigKey(name, kind, default, doc, **extra)


_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
_SECURITY = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

CONFIG_KEYS: tuple[ConfigKey, ...] = (
    # connection
    _k("bootstrap.servers", "servers", (), "host:port pairs used for the first metadata request "
       "(list or comma-separated string; IPv6 as [addr]:port).", nullable=True),
    _k("client.id", "str", "", "Name sent with every request for broker-side logging; "
       "empty means producer-<transactional.id> or producer-<n>.", max=MAX_STRING_BYTES),
    _k("client.dns.lookup", "enum", "use_all_dns_ips", "Try every resolved address of a host in turn, "
       "or resolve bootstrap names to their canonical names first.",
       choices=("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    # delivery semantics
    _k("acks", "acks", -1, "Replicas that must have the write before a send succeeds: all (-1), 1 or 0."),
    _k("enable.idempotence", "bool", True, "Sequence-numbered batches so retries never duplicate or "
       "reorder; needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5."),
    _k("retries", "int", INT32_MAX, "How many times a failed batch may be resent "
       "(delivery.timeout.ms usually bounds retrying first).", min=0),
    _k("max.in.flight.requests.per.connection", "int", 5, "Unanswered requests allowed per broker "
       "connection; at most 5 with idempotence.", min=1),
    _k("transactional.id", "str", None, "Stable id enabling transactions (implies idempotence).",
       nullable=True, max=MAX_STRING_BYTES),
    _k("transaction.timeout.ms", "int", 60000, "Time the coordinator lets a transaction stay open "
       "before aborting it.", min=1),
    # batching and memory
    _k("linger.ms", "long", 5, "How long a partition's batch may wait for more records before it is "
       "sent (Kafka 4.x default 5).", min=0),
    _k("batch.size", "int", 16384, "Target bytes per partition batch; 0 behaves as 1 (no batching).",
       min=0),
    _k("buffer.memory", "long", 33554432, "Total bytes of record buffers; send() blocks up to "
       "max.block.ms when they are used up.", min=1),
    _k("max.block.ms", "long", 60000, "Longest send()/flush-side wait for metadata or buffer space.",
       min=0),
    _k("max.request.size", "int", 1048576, "Largest produce request, and so the largest single record.",
       min=1),
    _k("compression.type", "enum", "none", "Batch compression codec.", choices=_COMPRESSION),
    _k("compression.gzip.level", "int", -1, "gzip level 1..9, or -1 for the codec default.",
       min=1, max=9, also=(-1,)),
    _k("compression.lz4.level", "int", 9, "lz4 level 1..17.", min=1, max=17),
    _k("compression.zstd.level", "int", 3, "zstd level -131072..22.", min=-131072, max=22),
    # timeouts and backoff
    _k("request.timeout.ms", "int", 30000, "How long to wait for a response before the request "
       "(and its connection) is failed (Java also takes 0, which fails every request at once).", min=1),
    _k("delivery.timeout.ms", "int", 120000, "Upper bound from send() to success or failure, "
       "retries included; must be >= linger.ms + request.timeout.ms.", min=0),
    _k("retry.backoff.ms", "long", 100, "First wait before retrying a failed request; doubles "
       "(with 20% jitter) up to retry.backoff.max.ms.", min=0),
    _k("retry.backoff.max.ms", "long", 1000, "Ceiling of the retry backoff.", min=0),
    _k("reconnect.backoff.ms", "long", 50, "First wait before reconnecting to a broker; doubles up to "
       "reconnect.backoff.max.ms.", min=0),
    _k("reconnect.backoff.max.ms", "long", 1000, "Ceiling of the reconnect backoff.", min=0),
    _k("socket.connection.setup.timeout.ms", "long", 10000, "Time allowed for a TCP (and TLS) "
       "connection to be established; grows per failure (Java also takes 0).", min=1),
    _k("socket.connection.setup.timeout.max.ms", "long", 30000, "Ceiling of the connection setup "
       "timeout.", min=1),
    _k("connections.max.idle.ms", "long", 540000, "Close connections idle for this long.", min=-1),
    _k("send.buffer.bytes", "int", 131072, "SO_SNDBUF; -1 keeps the OS default.", min=-1),
    _k("receive.buffer.bytes", "int", 32768, "SO_RCVBUF; -1 keeps the OS default.", min=-1),
    # partitioning
    _k("partitioner.class", "partitioner", None, "Unset: murmur2 of the key, or the adaptive sticky "
       "partition for keyless records. 'round_robin' (Java's RoundRobinPartitioner), or a Python "
       "callable/class, an object with partition() or 'module:attr'.", nullable=True),
    _k("interceptor.classes", "interceptors", (), "Interceptors (Java's ProducerInterceptor), in order: "
       "Python classes (created and configured per producer), objects with on_send(record), functions "
       "record -> record, or 'module:attr' names (a list or a comma-separated string)."),
    _k("partitioner.ignore.keys", "bool", False, "Use the sticky partition even for keyed records."),
    _k("partitioner.adaptive.partitioning.enable", "bool", True, "Favour partitions on brokers with "
       "shorter queues when choosing the sticky partition."),
    _k("partitioner.availability.timeout.ms", "long", 0, "Skip partitions whose broker has not "
       "accepted a batch for this long (0 disables).", min=0),
    # serialization
    _k("key.serializer", "serializer", "bytes", "bytes, str, int, long, short, float, double, uuid, "
       "json, a Java serialization class name, a callable (topic, key) -> bytes, or 'module:attr'."),
    _k("value.serializer", "serializer", "bytes", "As key.serializer, for record values."),
    # metadata
    _k("metadata.max.age.ms", "long", 300000, "Refresh metadata at least this often.", min=0),
    _k("metadata.max.idle.ms", "long", 300000, "Forget a topic's metadata after this long without "
       "sends.", min=5000),
    _k("metadata.recovery.strategy", "enum", "rebootstrap", "When every known broker is unreachable: "
       "rebootstrap from bootstrap.servers, or none (keep failing).", choices=("none", "rebootstrap")),
    _k("metadata.recovery.rebootstrap.trigger.ms", "long", 300000, "Rebootstrap when no metadata "
       "could be obtained for this long.", min=0),
    # security
    _k("security.protocol", "enum", "PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL.",
       choices=_SECURITY),
    _k("ssl.ca.location", "str", None, "PEM file (or directory) of CA certificates to trust.",
       nullable=True),
    _k("ssl.certificate.location", "str", None, "PEM client certificate (chain) for mutual TLS.",
       nullable=True),
    _k("ssl.key.location", "str", None, "PEM private key of the client certificate.", nullable=True),
    _k("ssl.key.password", "str", None, "Password of ssl.key.location.", nullable=True, secret=True),
    _k("ssl.endpoint.identification.algorithm", "enum", "https", "https checks the broker's host "
       "name against its certificate; empty disables the check.", choices=("https", "")),
    _k("ssl.context", "ssl_context", None, "A ready ssl.SSLContext (Python only; replaces the other "
       "ssl.* keys; not picklable).", nullable=True),
    _k("sasl.mechanism", "enum", "GSSAPI", "SASL mechanism; sparkafka supports PLAIN, SCRAM-SHA-256, "
       "SCRAM-SHA-512 and OAUTHBEARER (GSSAPI is only Java's default).",
       choices=("GSSAPI", *SUPPORTED_SASL_MECHANISMS)),
    _k("sasl.username", "str", None, "User for PLAIN and SCRAM.", nullable=True),
    _k("sasl.password", "str", None, "Password for PLAIN and SCRAM.", nullable=True, secret=True),
    _k("sasl.oauthbearer.token.provider", "callable", None, "Callable returning an OAUTHBEARER token "
       "(Python only).", nullable=True, secret=True),
)
"""Every supported key, in documentation order."""

KEYS_BY_NAME: dict[str, ConfigKey] = {k.name: k for k in CONFIG_KEYS}

_JAVA_ONLY: dict[str, str] = {
    "sasl.jaas.config": "use sasl.username and sasl.password (PLAIN, SCRAM) or "
    "sasl.oauthbearer.token.provider",
    "ssl.truststore.location": "use ssl.ca.location (PEM) or ssl.context",
    "ssl.truststore.password": "use ssl.ca.location (PEM) or ssl.context",
    "ssl.truststore.type": "use ssl.ca.location (PEM) or ssl.context",
    "ssl.truststore.certificates": "use ssl.ca.location (PEM) or ssl.context",
    "ssl.keystore.location": "use ssl.certificate.location and ssl.key.location (PEM) or ssl.context",
    "ssl.keystore.password": "use ssl.key.password",
    "ssl.keystore.type": "use ssl.certificate.location and ssl.key.location (PEM) or ssl.context",
    "ssl.keystore.key": "use ssl.key.location (PEM) or ssl.context",
    "ssl.keystore.certificate.chain": "use ssl.certificate.location (PEM) or ssl.context",
    "ssl.protocol": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.enabled.protocols": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.cipher.suites": "build an ssl.SSLContext and pass it as ssl.context",
    "ssl.engine.factory.class": "build an ssl.SSLContext and pass it as ssl.context",
    "sasl.kerberos.service.name": "GSSAPI (Kerberos) is not supported",
    "sasl.login.callback.handler.class": "use sasl.oauthbearer.token.provider",
    "sasl.client.callback.handler.class": "use sasl.oauthbearer.token.provider",
    "metric.reporters": "client metrics reporters are not implemented (an empty list is accepted)",
    "enable.metrics.push": "client metrics push (KIP-714) is not implemented (false is accepted)",
    "transaction.two.phase.commit.enable": "transactions prepared for an external coordinator (KIP-939) are not "
    "implemented (false is accepted); the Spark sink's exactly-once mode commits its tasks' transactions from the "
    "driver with its own two-phase protocol",
}
"""Java producer keys sparkafka deliberately rejects, with what to use instead."""

def _is_false(value: Any) -> bool:
    return value is False or (isinstance(value, str) and value.strip().lower() == "false")


_AS_SPARKAFKA_DOES: dict[str, Callable[[Any], bool]] = {
    "enable.metrics.push": _is_false,
    "metric.reporters": lambda v: (isinstance(v, str) and not v.strip()) or (isinstance(v, (list, tuple)) and not v),
    "transaction.two.phase.commit.enable": _is_false,
}
"""Keys of ``_JAVA_ONLY`` accepted (and ignored) at the value that says what sparkafka does anyway: no client
metrics push (a Java job's properties often turn it off), no reporters, no KIP-939 two-phase commit (Java's
default)."""

_JAVA_ONLY_FAMILIES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("metrics.", "metric."), "Java's metrics settings are not implemented; producer.metrics() has no settings"),
    (("sasl.kerberos.",), "GSSAPI (Kerberos) is not supported"),
    (("sasl.login.",), "Java login modules are not supported; use sasl.username and sasl.password (PLAIN, "
                       "SCRAM) or sasl.oauthbearer.token.provider"),
    (("sasl.oauthbearer.",), "use sasl.oauthbearer.token.provider (a callable returning the token)"),
    (("ssl.keymanager.", "ssl.trustmanager.", "ssl.provider", "ssl.secure.random.", "security.providers"),
     "build an ssl.SSLContext and pass it as ssl.context"),
)
"""Families of Java client keys (by prefix) sparkafka rejects, with what to use instead."""

_CLIENT_ID_SEQUENCE = itertools.count(1)
_ROUND_ROBIN_NAMES = frozenset({
    "round_robin", "roundrobin", "round-robin", "roundrobinpartitioner",
    "org.apache.kafka.clients.producer.roundrobinpartitioner",
})
_DEFAULT_PARTITIONER_NAMES = frozenset({"", "default", "builtin", "sticky"})
_HOST_PORT = re.compile(r"^(?:[A-Za-z][A-Za-z0-9_+.-]*://)?(?:\[([0-9A-Fa-f:.%A-Za-z]+)\]|([^\s:/\[\]]+)):(\d+)$")


# ---------------------------------------------------------------------------------------------- coercion


def _show(value: Any) -> str:
    """A value for an error message: strings quoted, numbers bare, anything else with its type."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, (bool, int, float)):
        return str(value)
    return f"{value!r} ({type(value).__name__})"


_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _to_int(key: ConfigKey, value: Any) -> int:
    result: int
    if isinstance(value, bool):
        raise ConfigError(f"{key.name!r} must be an integer, got {value!r}", key.name)
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        # Java's parseLong after trim(): ASCII digits with an optional sign; Python's int() would also take
        # "1_000" and other scripts' digits
        text = value.strip()
        if not _DECIMAL.fullmatch(text):
            raise ConfigError(f"{key.name!r} must be an integer, got {value!r}", key.name)
        result = int(text)
    else:
        raise ConfigError(f"{key.name!r} must be an integer, got {_show(value)}", key.name)
    if result in key.also:
        return result
    extra = "".join(f" or {v}" for v in key.also)
    if key.min is not None and key.max is not None and key.max not in (INT32_MAX, INT64_MAX) \
            and not key.min <= result <= key.max:
        raise ConfigError(
            f"{key.name!r} must be between {key.min} and {key.max}{extra}, got {result}", key.name)
    if key.min is not None and result < key.min:
        raise ConfigError(f"{key.name!r} must be >= {key.min}{extra}, got {result}", key.name)
    if key.max is not None and result > key.max:
        raise ConfigError(f"{key.name!r} must be <= {key.max}{extra}, got {result}", key.name)
    return result


def _to_bool(key: ConfigKey, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
    raise ConfigError(f"{key.name!r} must be a boolean (true or false), got {_show(value)}", key.name)


def _to_str(key: ConfigKey, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key.name!r} must be a string, got {_show(value)}", key.name)
    if key.nullable and not value.strip():
        raise ConfigError(f"{key.name!r} must be a non-empty string (leave it unset instead)", key.name)
    if key.max is not None:  # sent as a Kafka STRING
        try:
            size = len(value.encode())
        except UnicodeEncodeError:
            raise ConfigError(f"{key.name!r} must be encodable as UTF-8, got {value!r:.60}", key.name) from None
        if size > key.max:
            raise ConfigError(f"{key.name!r} must be at most {key.max} UTF-8 bytes, got {size}", key.name)
    return value


def _to_enum(key: ConfigKey, value: Any) -> str:
    if isinstance(value, str):
        text = value.strip()
        for choice in key.choices:
            if text.lower() == choice.lower():
                return choice
    choices = ", ".join(repr(c) for c in key.choices)
    raise ConfigError(f"{key.name!r} must be one of {choices}; got {_show(value)}", key.name)


def _to_acks(key: ConfigKey, value: Any) -> int:
    if not isinstance(value, bool):
        if isinstance(value, int) and value in (-1, 0, 1):
            return value
        if isinstance(value, str):
            text = value.strip().lower()
            if text == "all":
                return -1
            if text in ("-1", "0", "1"):
                return int(text)
    raise ConfigError(f"'acks' must be one of 'all', '-1', '0', '1'; got {_show(value)}", key.name)


def parse_host_port(entry: str, key: str = "bootstrap.servers") -> tuple[str, int]:
    """``"host:port"``, ``"[v6addr]:port"`` or ``"SCHEME://host:port"`` as ``(host, port)``."""
    match = _HOST_PORT.match(entry.strip())
    if match is None:
        hint = " (write IPv6 addresses as [addr]:port)" if entry.count(":") > 1 and "[" not in entry else ""
        raise ConfigError(f"{key!r} entries must be host:port, got {entry!r}{hint}", key)
    host = match.group(1) or match.group(2)
    port = int(match.group(3))
    if not 1 <= port <= 65535:
        raise ConfigError(f"{key!r} port must be between 1 and 65535, got {port} in {entry!r}", key)
    return host, port


def _to_servers(key: ConfigKey, value: Any) -> tuple[str, ...]:
    items: Iterable[Any]
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        raise ConfigError(
            f"{key.name!r} must be a list or a comma-separated string of host:port, got {_show(value)}",
            key.name)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"{key.name!r} entries must be strings, got {_show(item)}", key.name)
        if not item.strip():
            continue
        host, port = parse_host_port(item, key.name)
        out.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return tuple(out)


def _to_partitioner(key: ConfigKey, value: Any) -> PartitionerSpec:
    if isinstance(value, str):
        text = value.strip()
        lowered = text.lower()
        if lowered in _ROUND_ROBIN_NAMES:
            return "round_robin"
        if lowered in _DEFAULT_PARTITIONER_NAMES:
            return None
        if lowered.startswith("org.apache.kafka."):
            raise ConfigError(
                f"{key.name!r}: Java class {text!r} is not available; use 'round_robin', leave it unset "
                "for the built-in partitioner, or give a Python callable/class or 'module:attr'", key.name)
        if ":" not in text and "." not in text:
            raise ConfigError(
                f"unknown {key.name!r} {text!r}: use 'round_robin', a Python callable/class or 'module:attr'",
                key.name)
        value = import_object(text, key.name)
    if not callable(value) and not callable(getattr(value, "partition", None)):
        raise ConfigError(f"{key.name!r} must be 'round_robin', a callable, a class or an object with a "
                          f"partition method, got {_show(value)}", key.name)
    result: PartitionerSpec = value
    return result


def _to_interceptors(key: ConfigKey, value: Any) -> tuple[object, ...]:
    """``interceptor.classes``: a sequence (or a comma-separated string, or one item) of classes, objects
    with ``on_send``, functions or ``module:attr`` names, each checked here and created per producer
    (``producer/interceptors.py``)."""
    items: list[Any]
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",") if part.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    out: list[object] = []
    for item in items:
        if isinstance(item, str):
            text = item.strip()
            if text.startswith(("org.apache.", "io.confluent.")):
                raise ConfigError(f"{key.name!r}: Java class {text!r} is not available; give Python classes, "
                                  "objects with on_send(record), functions or 'module:attr' names", key.name)
            item = import_object(text, key.name)
        target = item if isinstance(item, type) else None
        if target is not None and not callable(getattr(target, "on_send", None)):
            raise ConfigError(f"{key.name!r}: class {target.__qualname__} has no on_send(record) method", key.name)
        if target is None and not callable(getattr(item, "on_send", None)) and not callable(item):
            raise ConfigError(f"{key.name!r} entries must be classes, objects with on_send(record), functions "
                              f"or 'module:attr' names, got {_show(item)}", key.name)
        out.append(item)
    return tuple(out)


def _to_callable(key: ConfigKey, value: Any) -> Callable[..., Any]:
    if isinstance(value, str):
        value = import_object(value, key.name)
    if not callable(value):
        raise ConfigError(f"{key.name!r} must be a callable or 'module:attr', got {_show(value)}", key.name)
    result: Callable[..., Any] = value
    return result


def _to_ssl_context(key: ConfigKey, value: Any) -> ssl.SSLContext:
    if not isinstance(value, ssl.SSLContext):
        raise ConfigError(f"{key.name!r} must be an ssl.SSLContext, got {_show(value)}", key.name)
    return value


def _coerce(key: ConfigKey, value: Any) -> Any:
    kind = key.kind
    if kind in ("int", "long"):
        return _to_int(key, value)
    if kind == "bool":
        return _to_bool(key, value)
    if kind == "str":
        return _to_str(key, value)
    if kind == "enum":
        return _to_enum(key, value)
    if kind == "acks":
        return _to_acks(key, value)
    if kind == "servers":
        return _to_servers(key, value)
    if kind == "serializer":
        return resolve_serializer(value, "key" if key.name.startswith("key.") else "value")
    if kind == "partitioner":
        return _to_partitioner(key, value)
    if kind == "interceptors":
        return _to_interceptors(key, value)
    if kind == "callable":
        return _to_callable(key, value)
    return _to_ssl_context(key, value)


def canonical_key(name: str) -> str:
    """The Java name for a dotted or underscored key; ConfigError (with a suggestion) if unknown."""
    if not isinstance(name, str):
        raise ConfigError(f"config keys must be strings, got {_show(name)}")
    dotted = name.strip().replace("_", ".")
    if dotted in KEYS_BY_NAME:
        return dotted
    if dotted in _JAVA_ONLY:
        raise ConfigError(f"config {dotted!r} is not supported by sparkafka: {_JAVA_ONLY[dotted]}", dotted)
    for prefixes, instead in _JAVA_ONLY_FAMILIES:
        if dotted.startswith(prefixes):
            raise ConfigError(f"config {dotted!r} is not supported by sparkafka: {instead}", dotted)
    close = difflib.get_close_matches(dotted, list(KEYS_BY_NAME), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise ConfigError(f"unknown config {name!r}{hint}", name)


# ---------------------------------------------------------------------------------------------- the config


@dataclass(frozen=True, slots=True, repr=False)
class ProducerConfig:
    """Validated producer configuration; build it with ``ProducerConfig.from_mapping``."""

    bootstrap_servers: tuple[str, ...]
    client_id: str
    client_dns_lookup: str
    acks: int
    enable_idempotence: bool
    retries: int
    max_in_flight_requests_per_connection: int
    transactional_id: str | None
    transaction_timeout_ms: int
    linger_ms: int
    batch_size: int
    buffer_memory: int
    max_block_ms: int
    max_request_size: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    partitioner_class: PartitionerSpec
    interceptor_classes: tuple[object, ...]
    partitioner_ignore_keys: bool
    partitioner_adaptive_partitioning_enable: bool
    partitioner_availability_timeout_ms: int
    key_serializer: Serializer
    value_serializer: Serializer
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    metadata_recovery_strategy: str
    metadata_recovery_rebootstrap_trigger_ms: int
    security_protocol: str
    ssl_ca_location: str | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_key_password: str | None
    ssl_endpoint_identification_algorithm: str
    ssl_context: ssl.SSLContext | None
    sasl_mechanism: str
    sasl_username: str | None
    sasl_password: str | None
    sasl_oauthbearer_token_provider: Callable[..., Any] | None
    _user_set: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def from_mapping(
        cls,
        conf: Mapping[str, Any] | None = None,
        *,
        allow_empty_bootstrap: bool = False,
        **kwargs: Any,
    ) -> ProducerConfig:
        """Validate ``conf`` plus ``kwargs`` (dotted or underscored keys; strings are coerced).

        ``allow_empty_bootstrap=True`` accepts a missing ``bootstrap.servers`` (the caller will start
        an embedded broker). Raises ``ConfigError`` (with ``.key``) on any bad or conflicting value.
        """
        if conf is not None and not isinstance(conf, Mapping):
            raise ConfigError(f"the config must be a mapping of keys to values (e.g. {{'bootstrap.servers': "
                              f"'host:9092'}}), got {_show(conf)}")
        raw: dict[str, Any] = {}
        for source in (conf or {}, kwargs):
            for name, value in source.items():
                said = _AS_SPARKAFKA_DOES.get(name.strip().replace("_", ".")) if isinstance(name, str) else None
                if said is not None and said(value):
                    continue
                key = canonical_key(name)
                if value is None:
                    continue
                if key in raw and raw[key] != value:
                    raise ConfigError(f"{key!r} is given twice with different values", key)
                raw[key] = value
        values: dict[str, Any] = {}
        for spec in CONFIG_KEYS:
            if spec.name in raw:
                values[spec.attr] = _coerce(spec, raw[spec.name])
            elif spec.kind == "serializer":
                values[spec.attr] = _coerce(spec, spec.default)
            else:
                values[spec.attr] = spec.default
        user_set = frozenset(raw)
        _post_process(values, user_set, allow_empty_bootstrap)
        return cls(**values, _user_set=user_set)

    # ------------------------------------------------------------------------------------------ queries

    def user_set(self, key: str) -> bool:
        """Whether the user gave this key explicitly (dotted or underscored name)."""
        return canonical_key(key) in self._user_set

    def get(self, key: str) -> Any:
        """The value of a key by its Java (or underscored) name."""
        return getattr(self, KEYS_BY_NAME[canonical_key(key)].attr)

    @property
    def bootstrap_addresses(self) -> tuple[tuple[str, int], ...]:
        """``bootstrap.servers`` as ``(host, port)`` pairs (IPv6 hosts without brackets)."""
        return tuple(parse_host_port(entry) for entry in self.bootstrap_servers)

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    def compression_level(self) -> int | None:
        """The level for ``compression.type`` (gzip/lz4/zstd), None for none and snappy."""
        if self.compression_type == "gzip":
            return self.compression_gzip_level
        if self.compression_type == "lz4":
            return self.compression_lz4_level
        if self.compression_type == "zstd":
            return self.compression_zstd_level
        return None

    def to_properties(self, mask_secrets: bool = True) -> dict[str, Any]:
        """Java-named properties; ``from_mapping(cfg.to_properties(False))`` rebuilds an equal config."""
        out: dict[str, Any] = {}
        for spec in CONFIG_KEYS:
            value = getattr(self, spec.attr)
            if spec.kind == "servers":
                value = ",".join(value)
            elif spec.kind == "serializer":
                value = original_spec(value)
            if mask_secrets and spec.secret and value is not None:
                value = HIDDEN
            out[spec.name] = value
        return out

    def __repr__(self) -> str:
        parts = []
        for spec in CONFIG_KEYS:
            value = getattr(self, spec.attr)
            if spec.kind == "serializer":
                if spec.name not in self._user_set:
                    continue
                shown = serializer_name(value)
            elif value == spec.default and spec.name not in self._user_set:
                continue
            elif spec.secret and value is not None:
                shown = HIDDEN
            elif spec.kind == "servers":
                shown = ",".join(value)
            elif spec.kind == "interceptors":
                shown = ",".join(callable_name(v) for v in value)
            elif callable(value) and not isinstance(value, str):
                shown = callable_name(value)
            else:
                shown = value
            parts.append(f"{spec.name}={shown!r}")
        return f"ProducerConfig({', '.join(parts)})"

    __str__ = __repr__


# ---------------------------------------------------------------------------------------------- Java's rules


def _post_process(values: dict[str, Any], user_set: frozenset[str], allow_empty_bootstrap: bool) -> None:
    _check_bootstrap(values, allow_empty_bootstrap)
    _backoffs(values, user_set)
    _idempotence(values, user_set)
    if "client.id" not in user_set:
        txn = values["transactional_id"]
        values["client_id"] = f"producer-{txn if txn is not None else next(_CLIENT_ID_SEQUENCE)}"
    _delivery_timeout(values, user_set)
    values["batch_size"] = max(1, values["batch_size"])
    if values["batch_size"] > values["buffer_memory"]:
        raise ConfigError(
            f"batch.size ({values['batch_size']}) is larger than buffer.memory ({values['buffer_memory']}): no "
            "batch could ever be allocated, so every send() would fail; lower batch.size or raise buffer.memory",
            "batch.size")
    _security(values)


def _check_bootstrap(values: dict[str, Any], allow_empty: bool) -> None:
    if not values["bootstrap_servers"] and not allow_empty:
        raise ConfigError("'bootstrap.servers' must list at least one host:port", "bootstrap.servers")


def _backoffs(values: dict[str, Any], user_set: frozenset[str]) -> None:
    if "reconnect.backoff.ms" in user_set and "reconnect.backoff.max.ms" not in user_set:
        log.info("reconnect.backoff.max.ms follows reconnect.backoff.ms (%d): no exponential reconnect "
                 "backoff because only the base was set", values["reconnect_backoff_ms"])
        values["reconnect_backoff_max_ms"] = values["reconnect_backoff_ms"]
    for base, top in (("retry_backoff_ms", "retry_backoff_max_ms"),
                      ("socket_connection_setup_timeout_ms", "socket_connection_setup_timeout_max_ms")):
        if values[base] > values[top]:
            log.info("%s (%d) is above %s (%d): a constant %d ms is used", base.replace("_", "."),
                     values[base], top.replace("_", "."), values[top], values[top])


def _idempotence(values: dict[str, Any], user_set: frozenset[str]) -> None:
    explicit = "enable.idempotence" in user_set
    reason = "'enable.idempotence' is false"
    if values["enable_idempotence"]:
        conflicts: list[tuple[str, str]] = []
        if values["retries"] == 0:
            conflicts.append(("retries", "'retries' is 0 (needs > 0)"))
        if values["acks"] != -1:
            conflicts.append(("acks", f"'acks' is {values['acks']} (needs 'all')"))
        in_flight = values["max_in_flight_requests_per_connection"]
        if in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
            conflicts.append(("max.in.flight.requests.per.connection",
                              f"'max.in.flight.requests.per.connection' is {in_flight} "
                              f"(needs <= {MAX_IN_FLIGHT_FOR_IDEMPOTENCE})"))
        if conflicts:
            if explicit:
                key, why = conflicts[0]
                raise ConfigError(f"'enable.idempotence' is true but {why}", key)
            reason = "idempotence is off because " + " and ".join(why for _, why in conflicts)
            log.info("%s", reason)
            values["enable_idempotence"] = False
    if values["transactional_id"] is not None and not values["enable_idempotence"]:
        raise ConfigError(f"'transactional.id' requires idempotence, but {reason}", "transactional.id")


def _delivery_timeout(values: dict[str, Any], user_set: frozenset[str]) -> None:
    floor = min(values["linger_ms"] + values["request_timeout_ms"], INT32_MAX)
    if values["delivery_timeout_ms"] >= floor:
        return
    if "delivery.timeout.ms" in user_set:
        raise ConfigError(
            f"'delivery.timeout.ms' must be >= 'linger.ms' + 'request.timeout.ms' "
            f"({values['linger_ms']} + {values['request_timeout_ms']} = {floor}), "
            f"got {values['delivery_timeout_ms']}",
            "delivery.timeout.ms",
        )
    log.info("delivery.timeout.ms raised to linger.ms + request.timeout.ms = %d", floor)
    values["delivery_timeout_ms"] = floor


def _security(values: dict[str, Any]) -> None:
    if values["ssl_context"] is not None:
        for name in ("ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password"):
            if values[name.replace(".", "_")] is not None:
                raise ConfigError(f"set either 'ssl.context' or {name!r}, not both", name)
    if values["ssl_key_location"] is not None and values["ssl_certificate_location"] is None:
        raise ConfigError("'ssl.key.location' needs 'ssl.certificate.location'", "ssl.key.location")
    if not values["security_protocol"].startswith("SASL_"):
        return
    mechanism = values["sasl_mechanism"]
    if mechanism not in SUPPORTED_SASL_MECHANISMS:
        raise ConfigError(
            f"'sasl.mechanism' {mechanism!r} is not supported with security.protocol "
            f"{values['security_protocol']}; use one of {', '.join(SUPPORTED_SASL_MECHANISMS)}",
            "sasl.mechanism",
        )
    if mechanism == "OAUTHBEARER":
        if values["sasl_oauthbearer_token_provider"] is None:
            raise ConfigError("'sasl.mechanism' OAUTHBEARER needs 'sasl.oauthbearer.token.provider'",
                              "sasl.oauthbearer.token.provider")
        return
    for name in ("sasl.username", "sasl.password"):
        if values[name.replace(".", "_")] is None:
            raise ConfigError(f"'sasl.mechanism' {mechanism} needs {name!r}", name)


def keys_markdown() -> str:
    """The key table as Markdown (name, default, doc) for the README / docs."""
    lines = ["| key | default | description |", "|---|---|---|"]
    for spec in CONFIG_KEYS:
        default = spec.default
        if spec.name == "acks":
            default = "all"
        elif isinstance(default, bool):
            default = str(default).lower()
        default = "" if default in (None, "", ()) else str(default)
        lines.append(f"| `{spec.name}` | {f'`{default}`' if default else '—'} | {spec.doc} |")
    return "\n".join(lines)


if {f.name for f in fields(ProducerConfig)} - {"_user_set"} != {k.attr for k in CONFIG_KEYS}:
    raise RuntimeError("ProducerConfig fields and CONFIG_KEYS are out of sync")
