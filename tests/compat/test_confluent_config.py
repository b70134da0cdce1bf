"""The compat Producer's config: librdkafka property names to Java keys, in one table.

How it works: ``translate`` is called on confluent-kafka config dicts and its Java-named result is
checked, and validated by ``ProducerConfig`` as the compat Producer does; the error objects are compared
with confluent-kafka's own ``KafkaError`` (every constant, and the text of one).
"""

from __future__ import annotations

import logging
from typing import Any

import confluent_kafka
import pytest

from sparkafka.compat.confluent import Producer
from sparkafka.compat.confluent_config import PROPERTIES, translate, with_default_port
from sparkafka.compat.librdkafka_errors import KafkaError, KafkaException, from_exception
from sparkafka.config import INT32_MAX, KEYS_BY_NAME, ProducerConfig
from sparkafka.errors import ConfigError, DeliveryTimeoutError, ProducerFencedError, error_for_code


def java(conf: dict[str, Any]) -> ProducerConfig:
    settings = translate(conf)
    settings.java.setdefault("bootstrap.servers", "h:9092")
    return ProducerConfig.from_mapping(settings.java)


def test_every_mapped_property_names_a_java_key() -> None:
    for name, prop in PROPERTIES.items():
        assert prop.java is None or prop.java in KEYS_BY_NAME, name


@pytest.mark.parametrize(("conf", "attr", "expected"), [
    ({"metadata.broker.list": "a:1,b:2"}, "bootstrap_servers", ("a:1", "b:2")),
    ({"bootstrap.servers": "localhost,[::1],PLAINTEXT://k:19092"}, "bootstrap_servers",
     ("localhost:9092", "[::1]:9092", "k:19092")),
    ({"queue.buffering.max.ms": 20}, "linger_ms", 20),
    ({"linger.ms": 0.5}, "linger_ms", 1),
    ({"linger.ms": "12"}, "linger_ms", 12),
    ({"request.required.acks": "1"}, "acks", 1),
    ({"acks": "0", "enable.idempotence": False}, "acks", 0),  # not "all": Java's default proves nothing
    ({"message.max.bytes": 2000000}, "max_request_size", 2000000),
    ({"message.timeout.ms": 0}, "delivery_timeout_ms", INT32_MAX),
    ({"message.timeout.ms": 45000}, "delivery_timeout_ms", 45000),
    ({"message.send.max.retries": 3}, "retries", 3),
    ({"compression.codec": "lz4"}, "compression_type", "lz4"),
    ({"compression.type": "gzip", "compression.level": 4}, "compression_gzip_level", 4),
    ({"compression.type": "snappy", "compression.level": 4}, "compression_type", "snappy"),
    ({"socket.send.buffer.bytes": 0}, "send_buffer_bytes", -1),
    ({"socket.receive.buffer.bytes": 65536}, "receive_buffer_bytes", 65536),
    ({"connections.max.idle.ms": 0}, "connections_max_idle_ms", -1),
    ({"topic.metadata.refresh.interval.ms": 60000}, "metadata_max_age_ms", 60000),
    ({"security.protocol": "sasl_plaintext", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": "u",
      "sasl.password": "p"}, "sasl_mechanism", "SCRAM-SHA-512"),
    ({"ssl.endpoint.identification.algorithm": "none"}, "ssl_endpoint_identification_algorithm", ""),
    ({"enable.idempotence": "false"}, "enable_idempotence", False),  # with acks=1 it would be off anyway
    ({"transactional.id": "tx", "transaction.timeout.ms": 30000}, "transaction_timeout_ms", 30000),
    ({"default.topic.config": {"acks": 1}}, "acks", 1),
    ({"max.block.ms": 1500}, "max_block_ms", 1500),   # a Java key librdkafka has no property of that name for
    ({"client.id": "app"}, "client_id", "app"),
])
def test_librdkafka_properties_become_java_settings(conf: dict[str, Any], attr: str, expected: Any) -> None:
    assert getattr(java(conf), attr) == expected


def test_the_compat_settings_and_their_librdkafka_defaults() -> None:
    defaults = translate({})
    assert (defaults.partitioner, defaults.max_messages, defaults.max_kbytes) == ("consistent_random", 100000,
                                                                                  1048576)
    settings = translate({"partitioner": "murmur2_random", "sticky.partitioning.linger.ms": 0,
                          "queue.buffering.max.messages": 7, "queue.buffering.max.kbytes": 3,
                          "on_delivery": print, "error_cb": print})
    assert (settings.partitioner, settings.sticky_linger_ms, settings.max_messages, settings.max_kbytes) == (
        "murmur2_random", 0, 7, 3)
    assert settings.on_delivery is print and settings.error_cb is print
    assert "partitioner" not in settings.java and "queue.buffering.max.messages" not in settings.java


def test_oauth_cb_gets_the_oauthbearer_config() -> None:
    def oauth_cb(config: str) -> tuple[str, float]:
        return f"token-for-{config}", 0.0

    cfg = java({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "OAUTHBEARER", "oauth_cb": oauth_cb,
                "sasl.oauthbearer.config": "scope=x"})
    provider = cfg.sasl_oauthbearer_token_provider
    assert provider is not None and provider() == ("token-for-scope=x", 0.0)


@pytest.mark.parametrize(("conf", "name", "reason"), [
    ({"batch.num.messages": 1000}, "batch.num.messages", "use batch.size"),
    ({"statistics.interval.ms": 1000}, "statistics.interval.ms", r"producer\.metrics\(\)"),
    ({"stats_cb": print}, "stats_cb", r"producer\.metrics\(\)"),
    ({"debug": "msg"}, "debug", "logging"),
    ({"enable.ssl.certificate.verification": False}, "enable.ssl.certificate.verification", "ssl.context"),
    ({"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name", "GSSAPI"),
    ({"ssl.ca.pem": "---"}, "ssl.ca.pem", "ssl.ca.location"),
])
def test_librdkafka_only_properties_are_errors_naming_them(conf: dict[str, Any], name: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=rf"librdkafka property '{name}' has no equivalent in sparkafka: .*"
                                          rf"{reason}") as info:
        translate(conf)
    assert info.value.key == name


def test_unknown_properties_and_bad_values() -> None:
    with pytest.raises(ConfigError, match=r"'queue\.buffering\.max\.mesages' .* did you mean "
                                          r"'queue\.buffering\.max\.messages'") as info:
        translate({"queue.buffering.max.mesages": 1})
    assert info.value.key == "queue.buffering.max.mesages"
    with pytest.raises(ConfigError, match=r"'partitioner' must be one of random, consistent, consistent_random"):
        translate({"partitioner": "crc32"})
    with pytest.raises(ConfigError, match=r"'queue\.buffering\.max\.messages' must be an integer from 0"):
        translate({"queue.buffering.max.messages": -1})
    with pytest.raises(ConfigError, match=r"'api\.version\.request' false"):
        translate({"api.version.request": False})
    translate({"api.version.request": "true"})
    with pytest.raises(ConfigError, match=r"'queue\.buffering\.max\.ms' sets 'linger\.ms', which another "
                                          r"property already set to a different value"):
        translate({"linger.ms": 5, "queue.buffering.max.ms": 10})
    with pytest.raises(ConfigError, match=r"'on_delivery' must be a callable"):
        translate({"on_delivery": 5})


def test_consumer_properties_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="sparkafka.compat"):
        settings = translate({"group.id": "g", "auto.offset.reset": "earliest"})
    assert settings.java == {}
    assert "group.id is a consumer property and will be ignored" in caplog.text


def test_with_default_port() -> None:
    assert with_default_port("a,b:1") == ["a:9092", "b:1"]
    assert with_default_port(["[fe80::1]", "[fe80::1]:7"]) == ["[fe80::1]:9092", "[fe80::1]:7"]


# ---------------------------------------------------------------------------------------------- errors


def test_error_constants_are_confluents() -> None:
    theirs = {name: getattr(confluent_kafka.KafkaError, name) for name in dir(confluent_kafka.KafkaError)
              if name.lstrip("_")[:1].isupper() and type(getattr(confluent_kafka.KafkaError, name)) is int}
    ours = {name: getattr(KafkaError, name) for name in theirs if hasattr(KafkaError, name)}
    assert ours == theirs
    for code, name in KafkaError.NAMES.items():
        assert confluent_kafka.KafkaError(code).name() == name


def test_error_objects_behave_like_confluents() -> None:
    ours = KafkaError(KafkaError._MSG_TIMED_OUT)
    theirs = confluent_kafka.KafkaError(confluent_kafka.KafkaError._MSG_TIMED_OUT)
    assert (repr(ours), str(ours), ours.name(), ours.str(), ours.code()) == (
        repr(theirs), str(theirs), theirs.name(), theirs.str(), theirs.code())
    assert ours == KafkaError._MSG_TIMED_OUT and ours != KafkaError._PURGE_QUEUE
    assert str(KafkaException(ours)) == str(confluent_kafka.KafkaException(theirs))
    assert KafkaException(ours).args[0] is ours


def test_sparkafka_errors_map_to_librdkafka_codes() -> None:
    timed_out = from_exception(DeliveryTimeoutError("expired"))
    assert (timed_out.code(), timed_out.str(), timed_out.retriable(), timed_out.fatal()) == (
        KafkaError._MSG_TIMED_OUT, "expired", False, False)
    retriable = from_exception(error_for_code(19, "few replicas"))
    assert retriable.code() == KafkaError.NOT_ENOUGH_REPLICAS and retriable.retriable()
    fenced = from_exception(ProducerFencedError("newer producer"))
    assert fenced.code() == KafkaError.PRODUCER_FENCED and fenced.fatal()
    other = from_exception(RuntimeError("bug"))
    assert other.code() == KafkaError._FAIL and "RuntimeError: bug" in other.str()


# ---------------------------------------------------------------------------------------------- timeouts

_NOWHERE = {"bootstrap.servers": "127.0.0.1:1"}


@pytest.mark.parametrize(("conf", "delivery", "linger", "request_timeout"), [
    ({"message.timeout.ms": 5000}, 5000, 5, 4995),
    ({"message.timeout.ms": 30000}, 30000, 5, 29995),
    ({"delivery.timeout.ms": 10000}, 10000, 5, 9995),
    ({"message.timeout.ms": 10000, "linger.ms": 100}, 10000, 100, 9900),
    ({"message.timeout.ms": 5000, "request.timeout.ms": 60000}, 5000, 5, 4995),
    ({"message.timeout.ms": 45000, "request.timeout.ms": 20000}, 45000, 5, 20000),
    ({"message.timeout.ms": "8000", "linger.ms": "1000"}, 8000, 1000, 7000),
    ({"message.timeout.ms": 1}, 1, 0, 1),  # librdkafka lowers a default linger.ms below the timeout
    ({"message.timeout.ms": 0}, INT32_MAX, 5, 30000),  # "0 = infinite"
    ({"message.timeout.ms": 0, "linger.ms": 1000, "request.timeout.ms": 60000}, INT32_MAX, 1000, 60000),
    ({"message.timeout.ms": 0, "transactional.id": "tx"}, INT32_MAX, 5, 30000),
])
def test_message_timeouts_librdkafka_accepts_are_accepted(conf: dict[str, Any], delivery: int, linger: int,
                                                          request_timeout: int) -> None:
    """Java's delivery.timeout.ms >= linger.ms + request.timeout.ms does not refuse them: the request
    timeout passed on is lowered so the record still fails at message.timeout.ms."""
    confluent_kafka.Producer({**_NOWHERE, **conf})  # the reference: accepted
    cfg = java(conf)
    assert (cfg.delivery_timeout_ms, cfg.linger_ms, cfg.request_timeout_ms) == (delivery, linger, request_timeout)
    p = Producer({**_NOWHERE, **conf})  # and the whole producer is built
    p.close(0)


def test_message_timeout_not_above_a_set_linger_is_refused_as_librdkafka_does() -> None:
    conf = {"message.timeout.ms": 10, "linger.ms": 10}
    with pytest.raises(confluent_kafka.KafkaException, match=r"`message\.timeout\.ms` must be greater than "
                                                             r"`linger\.ms`"):
        confluent_kafka.Producer({**_NOWHERE, **conf})
    with pytest.raises(ConfigError, match=r"'message\.timeout\.ms' must be greater than 'linger\.ms'") as info:
        translate(conf)
    assert info.value.key == "message.timeout.ms"


# ---------------------------------------------------------------------------------------------- producer-only


def test_allow_auto_create_topics_false_is_refused_not_ignored(caplog: pytest.LogCaptureFixture) -> None:
    """librdkafka's producer honours it (it is not a consumer-only property); sparkafka cannot."""
    with pytest.raises(ConfigError, match=r"'allow\.auto\.create\.topics' false cannot be honoured: .*"
                                          r"auto\.create\.topics\.enable=false") as info:
        translate({"allow.auto.create.topics": False})
    assert info.value.key == "allow.auto.create.topics"
    with pytest.raises(ConfigError, match=r"allow\.auto\.create\.topics"):
        translate({"allow.auto.create.topics": "false"})
    with caplog.at_level(logging.WARNING, logger="sparkafka.compat"):
        for value in (True, "true", "1"):
            assert translate({"allow.auto.create.topics": value}).java == {}
    assert caplog.text == ""
    with pytest.raises(ConfigError, match="must be a boolean"):
        translate({"allow.auto.create.topics": "maybe"})



# ---------------------------------------------------------------------------------------------- common properties


@pytest.mark.parametrize(("conf", "request_timeout"), [
    ({"socket.timeout.ms": 10000}, 10000),
    ({"socket.timeout.ms": "45000"}, 45000),
    ({"socket.timeout.ms": 10}, 10),  # librdkafka's range: 10 .. 300000
    ({"socket.timeout.ms": 300000, "message.timeout.ms": 0}, 300000),
    ({"socket.timeout.ms": 20000, "request.timeout.ms": 20000}, 20000),
    ({"socket.timeout.ms": 60000, "message.timeout.ms": 5000}, 4995),  # bounded by the message timeout
])
def test_socket_timeout_ms_is_javas_request_timeout(conf: dict[str, Any], request_timeout: int) -> None:
    """librdkafka's socket.timeout.ms, "Default timeout for network requests", is how long the client waits
    for a response: Java's request.timeout.ms."""
    confluent_kafka.Producer({**_NOWHERE, **conf})  # the reference: accepted
    assert java(conf).request_timeout_ms == request_timeout


def test_socket_and_request_timeouts_that_disagree_are_refused_saying_why() -> None:
    with pytest.raises(ConfigError, match=r"'request\.timeout\.ms' sets 'request\.timeout\.ms', which another "
                                          r"property already set to a different value \(10000\): sparkafka has "
                                          r"one timeout for a request.*socket\.timeout\.ms.*set one of them") as info:
        translate({"socket.timeout.ms": 10000, "request.timeout.ms": 5000})
    assert info.value.key == "request.timeout.ms"
    with pytest.raises(ConfigError, match=r"'socket\.timeout\.ms' must be an integer from 10 to 300000"):
        translate({"socket.timeout.ms": 300001})


@pytest.mark.parametrize(("name", "value"), [
    ("enable.random.seed", True), ("enable.random.seed", "false"), ("enable.random.seed", 1),
    ("socket.keepalive.enable", False), ("socket.keepalive.enable", "f"), ("socket.keepalive.enable", 0),
    ("broker.address.family", "any"), ("broker.address.family", "ANY"),
    ("log_level", 0), ("log_level", "3"), ("log_level", 7),
    ("delivery.report.only.error", False), ("delivery.report.only.error", True),
])
def test_common_properties_are_accepted_where_they_change_nothing_or_are_honoured(name: str, value: Any) -> None:
    """confluent-kafka accepts each; so does the compat Producer, passing nothing on to Java's settings."""
    confluent_kafka.Producer({**_NOWHERE, name: value})
    assert translate({name: value}).java == {}
    Producer({**_NOWHERE, name: value}).close(0)


def test_log_level_and_delivery_report_only_error_reach_the_compat_settings() -> None:
    defaults = translate({})
    assert (defaults.log_level, defaults.dr_only_error) == (6, False)  # librdkafka's and confluent-kafka's
    settings = translate({"log_level": "3", "delivery.report.only.error": True})
    assert (settings.log_level, settings.dr_only_error) == (3, True)


def test_delivery_report_only_error_takes_a_bool_only_as_confluent_kafka() -> None:
    """confluent-kafka's Python layer reads it (not librdkafka) and raises TypeError for anything else."""
    for value in ("true", 1):
        with pytest.raises(TypeError) as theirs:
            confluent_kafka.Producer({**_NOWHERE, "delivery.report.only.error": value})
        with pytest.raises(TypeError) as ours:
            Producer({**_NOWHERE, "delivery.report.only.error": value})
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(("name", "value", "why"), [
    ("socket.keepalive.enable", True, r"'socket\.keepalive\.enable' true cannot be honoured: .*SO_KEEPALIVE"),
    ("socket.keepalive.enable", "true", r"'socket\.keepalive\.enable' true cannot be honoured"),
    ("broker.address.family", "v4", r"'broker\.address\.family' v4 cannot be honoured: .*IPv4 and IPv6 alike"),
    ("broker.address.family", "V6", r"'broker\.address\.family' v6 cannot be honoured"),
])
def test_keepalive_and_address_family_values_sparkafka_cannot_honour_are_refused(name: str, value: Any,
                                                                                 why: str) -> None:
    """confluent-kafka honours them; sparkafka's sockets have no keepalive and no family choice: refused,
    naming the property and why, not ignored."""
    confluent_kafka.Producer({**_NOWHERE, name: value})
    with pytest.raises(ConfigError, match=why) as info:
        translate({name: value})
    assert info.value.key == name


# ---------------------------------------------------------------------------------------------- librdkafka's ranges


@pytest.mark.parametrize(("conf", "low", "high"), [
    ({"linger.ms": -1}, 0, 900000),
    ({"queue.buffering.max.ms": -1}, 0, 900000),
    ({"linger.ms": 950000}, 0, 900000),
    ({"linger.ms": None}, 0, 900000),  # librdkafka: "cannot be set to empty value"
    ({"message.timeout.ms": -1}, 0, INT32_MAX),
    ({"message.max.bytes": 0}, 1000, 1000000000),
    ({"message.max.bytes": 1}, 1000, 1000000000),
    ({"message.max.bytes": 999}, 1000, 1000000000),
    ({"message.max.bytes": 2000000000}, 1000, 1000000000),
    ({"retry.backoff.ms": 0}, 1, 300000),
    ({"retry.backoff.ms": 10000000}, 1, 300000),
    ({"batch.size": 0}, 1, INT32_MAX),
    ({"batch.size": -0.5}, 1, INT32_MAX),  # librdkafka cuts the fraction off: 0
    ({"compression.level": 13}, -1, 12),
    ({"request.timeout.ms": 0}, 1, 900000),
    ({"max.in.flight": 0}, 1, 1000000),
])
def test_values_outside_librdkafkas_range_are_refused_naming_the_property_set(conf: dict[str, Any], low: int,
                                                                              high: int) -> None:
    """confluent-kafka refuses them (librdkafka's range); so does the compat Producer, naming the property the
    user set (not the Java key it becomes, nor a value derived from it) and librdkafka's range."""
    name = next(iter(conf))
    with pytest.raises(confluent_kafka.KafkaException) as theirs:
        confluent_kafka.Producer({**_NOWHERE, **conf})
    assert f"{low}..{high}" in theirs.value.args[0].str() or "empty value" in theirs.value.args[0].str()
    with pytest.raises(KafkaException) as ours:
        Producer({**_NOWHERE, **conf})
    assert ours.value.args[0].code() == theirs.value.args[0].code() == KafkaError._INVALID_ARG
    assert isinstance(ours.value, ConfigError) and ours.value.key == name
    assert f"'{name}' must be " in str(ours.value) and f" from {low} to {high} (librdkafka's range)" in str(ours.value)


@pytest.mark.parametrize(("conf", "attr", "expected"), [
    ({"linger.ms": 900000}, "linger_ms", 900000),
    ({"message.max.bytes": 1000}, "max_request_size", 1000),
    ({"message.max.bytes": 1000000000}, "max_request_size", 1000000000),
    ({"retry.backoff.ms": 1}, "retry_backoff_ms", 1),
    ({"retry.backoff.ms": 300000, "retry.backoff.max.ms": 300000}, "retry_backoff_ms", 300000),
    ({"batch.size": 1}, "batch_size", 1),
    ({"batch.size": "1500.7"}, "batch_size", 1500),  # librdkafka's strtol parse: 1500
    ({"message.max.bytes": 2000.9}, "max_request_size", 2000),
])
def test_values_at_librdkafkas_limits_are_accepted(conf: dict[str, Any], attr: str, expected: Any) -> None:
    confluent_kafka.Producer({**_NOWHERE, **conf})  # the reference: accepted
    assert getattr(java(conf), attr) == expected
    Producer({**_NOWHERE, **conf}).close(0)


@pytest.mark.parametrize(("conf", "name"), [
    ({"max.in.flight": 10, "enable.idempotence": True}, "max.in.flight"),
    ({"message.send.max.retries": 0, "enable.idempotence": True}, "message.send.max.retries"),
    ({"request.required.acks": 1, "enable.idempotence": True}, "request.required.acks"),
])
def test_a_java_rule_broken_by_a_librdkafka_property_names_that_property(conf: dict[str, Any], name: str) -> None:
    """Rules across properties are checked by the Java-named config; its error names the property set."""
    with pytest.raises(confluent_kafka.KafkaException):
        confluent_kafka.Producer({**_NOWHERE, **conf})
    with pytest.raises(KafkaException) as ours:
        Producer({**_NOWHERE, **conf})
    assert isinstance(ours.value, ConfigError) and ours.value.key == name
    assert f"is what '{name}' sets" in str(ours.value)


@pytest.mark.parametrize(("conf", "refused"), [
    ({"message.timeout.ms": 120000, "transaction.timeout.ms": 60000}, True),
    ({"message.timeout.ms": 120000}, True),  # above the default transaction.timeout.ms, 60000
    ({"message.timeout.ms": 60000}, False),
    ({"message.timeout.ms": 0}, False),  # no limit: accepted there
    ({"transaction.timeout.ms": 10000}, False),
])
def test_a_transactional_producers_message_timeout_follows_librdkafka(conf: dict[str, Any], refused: bool) -> None:
    """librdkafka refuses message.timeout.ms above transaction.timeout.ms with a transactional.id, and lowers
    an unset one to it (a record must not outlive its transaction); Java has no such rule."""
    full = {"bootstrap.servers": "127.0.0.1:1", "transactional.id": "t", **conf}
    try:
        confluent_kafka.Producer(full)
        real_refused = False
    except confluent_kafka.KafkaException as exc:
        real_refused = "transaction.timeout.ms" in str(exc)
    assert real_refused == refused
    if refused:
        with pytest.raises(ConfigError, match=r"'message.timeout.ms' must be <= 'transaction.timeout.ms'") as info:
            java(full)
        assert info.value.key == "message.timeout.ms"
    else:
        settings = java(full)
        assert settings.transaction_timeout_ms == conf.get("transaction.timeout.ms", 60000)
        if "message.timeout.ms" not in conf:
            assert settings.delivery_timeout_ms == settings.transaction_timeout_ms


@pytest.mark.parametrize("name", sorted(PROPERTIES))
def test_none_is_taken_or_refused_as_confluent_kafka_does(name: str) -> None:
    """librdkafka takes None (an empty value) for a string property, leaving its default, and refuses it for a
    bool or enum property ("cannot be set to empty value"); confluent-kafka takes ``logger=None`` (no logger).
    A bool or enum property set to None was skipped, so the producer ran with the default."""
    try:
        confluent_kafka.Producer({**_NOWHERE, name: None})
        theirs = True
    except (confluent_kafka.KafkaException, TypeError, ValueError):  # a callback property: TypeError there
        theirs = False
    try:
        translate({name: None})
        ours = True
    except (ConfigError, TypeError) as exc:
        assert not isinstance(exc, ConfigError) or exc.key == name
        ours = False
    assert ours == theirs
