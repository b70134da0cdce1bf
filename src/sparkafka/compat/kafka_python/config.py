"""kafka-python's ``KafkaProducer`` arguments mapped to sparkafka's (Java's) keys, in one table.

How it works: ``ARGUMENTS`` lists every constructor argument of kafka-python's ``KafkaProducer`` (its
``DEFAULT_CONFIG``, plus ``buffer_memory`` of kafka-python 2.x) with kafka-python's default and the Java key
it becomes, converting where kafka-python's values differ (``retries=float('inf')``, ``compression_type=
None``, ``ssl_check_hostname``, ``None`` for OS socket buffers, a token provider object). An argument
left out takes kafka-python's default (``linger_ms=0``, ``reconnect_backoff_max_ms=30000``, client ids
``kafka-python-producer-N``); only the ones given count as set by the user (for the idempotence rules,
as in kafka-python). An argument sparkafka cannot honour (a SOCKS proxy, Kerberos, a CRL file,
metrics reporters, ...) is accepted only at kafka-python's default value; any other value is a
``ConfigError`` naming it and what to do instead. ``api_version`` is accepted and ignored (the versions
are negotiated with each broker), with a debug log. An unknown argument is a ``ConfigError`` (a
``ValueError``, as kafka-python's "Unrecognized configs").
"""

from __future__ import annotations

import difflib
import itertools
import logging
import selectors
import socket
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from sparkafka.compat.confluent_config import with_default_port
from sparkafka.config import INT32_MAX, KEYS_BY_NAME
from sparkafka.errors import ConfigError

__all__ = ["ARGUMENTS", "KafkaPythonSettings", "default_arguments", "translate"]

log = logging.getLogger("sparkafka.compat")

_CLIENT_IDS = itertools.count(1)


def _retries(name: str, value: Any) -> Any:
    if isinstance(value, float) and value == float("inf"):
        return INT32_MAX
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value > INT32_MAX:
        return INT32_MAX
    return value


def _codec(name: str, value: Any) -> Any:
    return "none" if value is None else value


def _os_default(name: str, value: Any) -> Any:
    return -1 if value is None else value


def _check_hostname(name: str, value: Any) -> Any:
    if not isinstance(value, bool):
        raise ConfigError(f"{name!r} must be True or False, got {value!r}", name)
    return "https" if value else ""


def _token_provider(name: str, value: Any) -> Any:
    """kafka-python's ``AbstractTokenProvider`` has ``token()``; sparkafka calls a function."""
    if value is None:
        return None
    token = getattr(value, "token", None)
    if callable(token):
        return token
    if callable(value):
        return value
    raise ConfigError(f"{name!r} must have a token() method (kafka-python's AbstractTokenProvider), got "
                      f"{type(value).__name__}", name)


Convert = Callable[[str, Any], Any]


@dataclass(frozen=True)
class _Arg:
    java: str | None
    """The Java key; None: handled by the compat producer, or not supported (``unsupported``)."""
    default: Any
    convert: Convert | None = None
    unsupported: str | None = None
    """Why another value than the default cannot be honoured, and what to do instead."""


_ANY: Final = object()
"""A default no user value equals (arguments that cannot be given at all)."""

ARGUMENTS: Final[dict[str, _Arg]] = {
    "bootstrap_servers": _Arg("bootstrap.servers", "localhost", lambda n, v: with_default_port(v)),
    "client_id": _Arg("client.id", None),
    "key_serializer": _Arg(None, None),
    "value_serializer": _Arg(None, None),
    "enable_idempotence": _Arg("enable.idempotence", True),
    "transactional_id": _Arg("transactional.id", None),
    "transaction_timeout_ms": _Arg("transaction.timeout.ms", 60000),
    "delivery_timeout_ms": _Arg("delivery.timeout.ms", 120000),
    "acks": _Arg("acks", -1),
    "compression_type": _Arg("compression.type", None, _codec),
    "retries": _Arg("retries", float("inf"), _retries),
    "batch_size": _Arg("batch.size", 16384),
    "linger_ms": _Arg("linger.ms", 0),
    "partitioner": _Arg(None, None),
    "connections_max_idle_ms": _Arg("connections.max.idle.ms", 540000),
    "max_block_ms": _Arg("max.block.ms", 60000),
    "max_request_size": _Arg("max.request.size", 1048576),
    "buffer_memory": _Arg("buffer.memory", 33554432),
    "allow_auto_create_topics": _Arg(None, True, unsupported="sparkafka's metadata requests let the broker "
                                     "create topics (as Java's producer); turn auto-creation off on the broker"),
    "metadata_max_age_ms": _Arg("metadata.max.age.ms", 300000),
    "client_dns_lookup": _Arg("client.dns.lookup", "use_all_dns_ips"),
    "retry_backoff_ms": _Arg("retry.backoff.ms", 100),
    "request_timeout_ms": _Arg("request.timeout.ms", 30000),
    "receive_message_max_bytes": _Arg(None, 100_000_000, unsupported="the response frame limit is fixed"),
    "receive_buffer_bytes": _Arg("receive.buffer.bytes", None, _os_default),
    "send_buffer_bytes": _Arg("send.buffer.bytes", None, _os_default),
    "socket_options": _Arg(None, [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)],
                           unsupported="socket options are fixed (TCP_NODELAY on); the buffer sizes are "
                                       "send_buffer_bytes and receive_buffer_bytes"),
    "reconnect_backoff_ms": _Arg("reconnect.backoff.ms", 50),
    "reconnect_backoff_max_ms": _Arg("reconnect.backoff.max.ms", 30000),
    "max_in_flight_requests_per_connection": _Arg("max.in.flight.requests.per.connection", 5),
    "security_protocol": _Arg("security.protocol", "PLAINTEXT"),
    "ssl_context": _Arg("ssl.context", None),
    "ssl_check_hostname": _Arg("ssl.endpoint.identification.algorithm", True, _check_hostname),
    "ssl_cafile": _Arg("ssl.ca.location", None),
    "ssl_certfile": _Arg("ssl.certificate.location", None),
    "ssl_keyfile": _Arg("ssl.key.location", None),
    "ssl_password": _Arg("ssl.key.password", None),
    "ssl_crlfile": _Arg(None, None, unsupported="build an ssl.SSLContext that checks the CRL and pass it as "
                                                "ssl_context"),
    "ssl_ciphers": _Arg(None, None, unsupported="build an ssl.SSLContext with those ciphers and pass it as "
                                                "ssl_context"),
    "api_version": _Arg(None, None),
    "bootstrap_timeout_ms": _Arg(None, 30000, unsupported="sparkafka does not connect in the constructor: the "
                                 "first send() waits up to max_block_ms for the topic's metadata"),
    "metric_reporters": _Arg(None, [], unsupported="metrics reporters are not supported: read metrics()"),
    "metrics_enabled": _Arg(None, True),
    "metrics_num_samples": _Arg(None, 2, unsupported="the metrics' windows are fixed"),
    "metrics_sample_window_ms": _Arg(None, 30000, unsupported="the metrics' windows are fixed"),
    "selector": _Arg(None, selectors.DefaultSelector, unsupported="the I/O loop uses selectors.DefaultSelector"),
    "sasl_mechanism": _Arg("sasl.mechanism", None),
    "sasl_plain_username": _Arg("sasl.username", None),
    "sasl_plain_password": _Arg("sasl.password", None),
    "sasl_kerberos_name": _Arg(None, None, unsupported="GSSAPI (Kerberos) is not supported"),
    "sasl_kerberos_service_name": _Arg(None, "kafka", unsupported="GSSAPI (Kerberos) is not supported"),
    "sasl_kerberos_domain_name": _Arg(None, None, unsupported="GSSAPI (Kerberos) is not supported"),
    "sasl_oauth_token_provider": _Arg("sasl.oauthbearer.token.provider", None, _token_provider),
    "proxy_url": _Arg(None, None, unsupported="SOCKS proxies are not supported"),
    "socks5_proxy": _Arg(None, None, unsupported="SOCKS proxies are not supported"),
    "kafka_client": _Arg(None, _ANY, unsupported="the network client is sparkafka's own"),
}
"""kafka-python argument -> what it becomes (see the module docstring)."""


@dataclass
class KafkaPythonSettings:
    """What the compat producer honours itself, and the Java-named settings for the inner producer."""

    java: dict[str, Any]
    key_serializer: Any = None
    value_serializer: Any = None
    partitioner: Any = None
    metrics_enabled: bool = True


def default_arguments() -> dict[str, Any]:
    """kafka-python's default for every argument that has one a user could pass."""
    return {name: arg.default for name, arg in ARGUMENTS.items() if arg.default is not _ANY}


def translate(configs: Mapping[str, Any]) -> KafkaPythonSettings:
    """kafka-python's keyword arguments -> ``KafkaPythonSettings`` (defaults as kafka-python's)."""
    unknown = [name for name in configs if name not in ARGUMENTS]
    if unknown:
        name = unknown[0]
        close = difflib.get_close_matches(name, list(ARGUMENTS), n=1, cutoff=0.7)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"Unrecognized configs: {name!r} is not an argument of kafka-python's KafkaProducer"
                          f"{hint}", name)
    settings = KafkaPythonSettings(java={})
    for name, arg in ARGUMENTS.items():
        given = name in configs
        value = configs[name] if given else arg.default
        if arg.unsupported is not None:
            if given and (arg.default is _ANY or value != arg.default):
                # the value is not shown: a proxy URL may carry a password
                raise ConfigError(f"kafka-python argument {name} (other than its default) cannot be honoured by "
                                  f"sparkafka: {arg.unsupported}", name)
            continue
        if arg.java is None:
            _own(settings, name, value, given)
            continue
        if arg.convert is not None:
            value = arg.convert(name, value)
        if value is None or (not given and value == KEYS_BY_NAME[arg.java].default):
            continue  # left to sparkafka's default (the same), so it does not count as set by the user
        settings.java[arg.java] = value
    if "client.id" not in settings.java:
        settings.java["client.id"] = f"kafka-python-producer-{next(_CLIENT_IDS)}"
    return settings


def _own(settings: KafkaPythonSettings, name: str, value: Any, given: bool) -> None:
    if name == "key_serializer":
        settings.key_serializer = value
    elif name == "value_serializer":
        settings.value_serializer = value
    elif name == "partitioner":
        settings.partitioner = value
    elif name == "metrics_enabled":
        settings.metrics_enabled = bool(value)
    elif name == "api_version" and given:
        log.debug("api_version=%r ignored: sparkafka negotiates API versions with each broker", value)
