"""ProducerConfig: table, coercion, ranges, Java's cross-field rules, secrets, pickling."""

from __future__ import annotations

import dataclasses
import logging
import pickle
import re
import ssl
from typing import Any

import pytest

from sparkafka.config import (
    CONFIG_KEYS,
    HIDDEN,
    INT32_MAX,
    KEYS_BY_NAME,
    ProducerConfig,
    canonical_key,
    keys_markdown,
    parse_host_port,
)
from sparkafka.errors import ConfigError
from sparkafka.serializers import serialize_bytes, serialize_json, serialize_str

BOOT = {"bootstrap.servers": "localhost:9092"}


def make(**kwargs: Any) -> ProducerConfig:
    return ProducerConfig.from_mapping(BOOT, **kwargs)


def error(conf: dict[str, Any], **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_mapping({**BOOT, **conf}, **kwargs)
    return info.value


def my_partitioner(key: Any, partitions: int) -> int:
    return 0


def my_value_serializer(topic: str, value: Any) -> bytes:
    return b"v"


def token() -> str:
    return "tok"


# ----------------------------------------------------------------------------------------------------- table


def test_table_matches_dataclass_and_flags_secrets() -> None:
    names = [k.name for k in CONFIG_KEYS]
    assert len(names) == len(set(names))
    attrs = {f.name for f in dataclasses.fields(ProducerConfig)} - {"_user_set"}
    assert attrs == {k.attr for k in CONFIG_KEYS}
    for key in CONFIG_KEYS:
        assert key.secret == bool(re.search("password|secret|token", key.name)), key.name
        assert key.doc


def test_kafka_4_defaults() -> None:
    cfg = make()
    expected = {
        "acks": -1, "enable.idempotence": True, "linger.ms": 5, "batch.size": 16384,
        "buffer.memory": 33554432, "max.block.ms": 60000, "max.request.size": 1048576,
        "request.timeout.ms": 30000, "delivery.timeout.ms": 120000, "retries": INT32_MAX,
        "retry.backoff.ms": 100, "retry.backoff.max.ms": 1000, "reconnect.backoff.ms": 50,
        "reconnect.backoff.max.ms": 1000, "socket.connection.setup.timeout.ms": 10000,
        "socket.connection.setup.timeout.max.ms": 30000, "connections.max.idle.ms": 540000,
        "max.in.flight.requests.per.connection": 5, "compression.type": "none",
        "compression.gzip.level": -1, "compression.lz4.level": 9, "compression.zstd.level": 3,
        "partitioner.class": None, "partitioner.ignore.keys": False,
        "partitioner.adaptive.partitioning.enable": True, "partitioner.availability.timeout.ms": 0,
        "metadata.max.age.ms": 300000, "metadata.max.idle.ms": 300000,
        "metadata.recovery.strategy": "rebootstrap", "metadata.recovery.rebootstrap.trigger.ms": 300000,
        "transactional.id": None, "transaction.timeout.ms": 60000, "send.buffer.bytes": 131072,
        "receive.buffer.bytes": 32768, "security.protocol": "PLAINTEXT",
        "ssl.endpoint.identification.algorithm": "https", "sasl.mechanism": "GSSAPI",
        "client.dns.lookup": "use_all_dns_ips",
    }
    for name, value in expected.items():
        assert cfg.get(name) == value, name
    assert cfg.key_serializer is serialize_bytes and cfg.value_serializer is serialize_bytes
    assert not any(cfg.user_set(k.name) for k in CONFIG_KEYS if k.name != "bootstrap.servers")


def test_keys_markdown_lists_every_key() -> None:
    text = keys_markdown()
    for key in CONFIG_KEYS:
        assert f"`{key.name}`" in text
    assert "| `linger.ms` | `5` |" in text and "| `acks` | `all` |" in text


# ----------------------------------------------------------------------------------------- keys and coercion


def test_kwargs_equal_dotted_keys() -> None:
    dotted = ProducerConfig.from_mapping(
        {"bootstrap.servers": "a:1", "linger.ms": 20, "batch.size": 1000, "compression.type": "lz4",
         "client.id": "c", "enable.idempotence": False, "acks": 1})
    kwargs = ProducerConfig.from_mapping(
        bootstrap_servers="a:1", linger_ms=20, batch_size=1000, compression_type="lz4", client_id="c",
        enable_idempotence=False, acks=1)
    mixed = ProducerConfig.from_mapping({"bootstrap_servers": "a:1", "linger.ms": 20}, batch_size=1000,
                                        compression_type="lz4", client_id="c", enable_idempotence=False,
                                        acks="1")
    assert dotted == kwargs == mixed
    assert kwargs.user_set("linger.ms") and kwargs.user_set("linger_ms") and dotted.user_set("batch_size")


def test_string_values_are_coerced() -> None:
    cfg = ProducerConfig.from_mapping({
        "bootstrap.servers": "a:1,b:2", "linger.ms": "10", "batch.size": " 32768 ",
        "enable.idempotence": "FALSE", "partitioner.ignore.keys": "true", "acks": "all",
        "compression.type": "ZSTD", "security.protocol": "sasl_ssl", "sasl.mechanism": "scram-sha-256",
        "sasl.username": "u", "sasl.password": "p", "value.serializer": "json",
    })
    assert cfg.linger_ms == 10 and cfg.batch_size == 32768
    assert cfg.enable_idempotence is False and cfg.partitioner_ignore_keys is True
    assert cfg.acks == -1 and cfg.compression_type == "zstd"
    assert cfg.security_protocol == "SASL_SSL" and cfg.sasl_mechanism == "SCRAM-SHA-256"
    assert cfg.bootstrap_servers == ("a:1", "b:2")
    assert cfg.value_serializer is serialize_json


def test_integral_floats_accepted_other_types_rejected() -> None:
    assert make(linger_ms=7.0).linger_ms == 7
    assert error({"linger.ms": 7.5}).key == "linger.ms"
    e = error({"batch.size": True})
    assert str(e) == "'batch.size' must be an integer, got True"
    e = error({"enable.idempotence": 1})
    assert e.key == "enable.idempotence" and "must be a boolean (true or false), got 1" in str(e)
    e = error({"enable.idempotence": "yes"})
    assert "got 'yes'" in str(e)
    e = error({"client.id": 5})
    assert e.key == "client.id" and "must be a string" in str(e)


def test_none_means_default_and_not_user_set() -> None:
    cfg = make(linger_ms=None, transactional_id=None, partitioner_class=None)
    assert cfg.linger_ms == 5 and not cfg.user_set("linger.ms")


def test_duplicate_keys_with_different_values() -> None:
    e = error({"linger.ms": 1}, linger_ms=2)
    assert e.key == "linger.ms" and "given twice" in str(e)
    assert make(linger_ms=1, **{"linger.ms": 1}).linger_ms == 1


def test_unknown_key_suggests_the_closest() -> None:
    e = error({"linger.msx": 1})
    assert str(e) == "unknown config 'linger.msx'; did you mean 'linger.ms'?"
    assert e.key == "linger.msx"
    e = error({}, batch_sizee=1)
    assert "did you mean 'batch.size'?" in str(e)
    e = error({"zzzz": 1})
    assert str(e) == "unknown config 'zzzz'"


def test_java_only_keys_get_a_hint() -> None:
    e = error({"sasl.jaas.config": "x"})
    assert e.key == "sasl.jaas.config" and "not supported" in str(e) and "sasl.username" in str(e)
    assert "ssl.ca.location" in str(error({"ssl.truststore.location": "/x"}))


def test_user_set_rejects_unknown_key() -> None:
    with pytest.raises(ConfigError, match="did you mean 'acks'"):
        make().user_set("ack")
    assert canonical_key("max_in_flight_requests_per_connection") == "max.in.flight.requests.per.connection"


# ------------------------------------------------------------------------------------------ ranges and enums


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("batch.size", -1, "'batch.size' must be >= 0, got -1"),
        ("batch.size", 2**31, "'batch.size' must be <= 2147483647, got 2147483648"),
        ("max.request.size", 0, "'max.request.size' must be >= 1, got 0"),
        ("buffer.memory", 0, "'buffer.memory' must be >= 1, got 0"),
        ("retries", -1, "'retries' must be >= 0, got -1"),
        ("linger.ms", -5, "'linger.ms' must be >= 0, got -5"),
        ("metadata.max.idle.ms", 4999, "'metadata.max.idle.ms' must be >= 5000, got 4999"),
        ("max.in.flight.requests.per.connection", 0,
         "'max.in.flight.requests.per.connection' must be >= 1, got 0"),
        ("compression.lz4.level", 18, "'compression.lz4.level' must be between 1 and 17, got 18"),
        ("compression.zstd.level", 23, "'compression.zstd.level' must be between -131072 and 22, got 23"),
        ("compression.gzip.level", 0, "'compression.gzip.level' must be between 1 and 9 or -1, got 0"),
        ("send.buffer.bytes", -2, "'send.buffer.bytes' must be >= -1, got -2"),
        ("batch.size", "abc", "'batch.size' must be an integer, got 'abc'"),
        # Java's parseLong: ASCII digits only (Python's int() takes underscores and other scripts' digits)
        ("batch.size", "16_384", "'batch.size' must be an integer, got '16_384'"),
        ("linger.ms", "\u0665", "'linger.ms' must be an integer, got '\u0665'"),
        ("linger.ms", "5.0", "'linger.ms' must be an integer, got '5.0'"),
    ],
)
def test_range_errors_name_key_and_limit(key: str, value: Any, message: str) -> None:
    e = error({key: value})
    assert str(e) == message
    assert e.key == key


def test_range_edges_accepted() -> None:
    cfg = make(metadata_max_idle_ms=5000, compression_gzip_level=-1, compression_zstd_level=-131072,
               compression_lz4_level=17, send_buffer_bytes=-1, max_request_size=1, buffer_memory=1, batch_size=1)
    assert cfg.metadata_max_idle_ms == 5000 and cfg.compression_gzip_level == -1
    assert make(compression_gzip_level="9").compression_gzip_level == 9
    assert make(linger_ms=" +5 ").linger_ms == 5  # parseLong(trim()) takes a sign


def test_compression_level_follows_the_codec() -> None:
    assert make().compression_level() is None
    assert make(compression_type="snappy", compression_gzip_level=5).compression_level() is None
    assert make(compression_type="gzip", compression_gzip_level=5).compression_level() == 5
    assert make(compression_type="gzip").compression_level() == -1
    assert make(compression_type="lz4", compression_lz4_level=3).compression_level() == 3
    assert make(compression_type="zstd", compression_zstd_level=-5).compression_level() == -5


def test_enum_errors_list_the_choices() -> None:
    e = error({"compression.type": "brotli"})
    assert str(e) == "'compression.type' must be one of 'none', 'gzip', 'snappy', 'lz4', 'zstd'; got 'brotli'"
    e = error({"security.protocol": "TLS"})
    assert e.key == "security.protocol" and "'SASL_SSL'" in str(e)
    assert error({"metadata.recovery.strategy": "retry"}).key == "metadata.recovery.strategy"


@pytest.mark.parametrize(("value", "expected"), [("all", -1), ("ALL", -1), ("-1", -1), (-1, -1), ("0", 0),
                                                 (0, 0), ("1", 1), (1, 1)])
def test_acks_values(value: Any, expected: int) -> None:
    assert make(acks=value, enable_idempotence=expected == -1).acks == expected


@pytest.mark.parametrize("value", ["2", 2, "none", True])
def test_acks_invalid(value: Any) -> None:
    e = error({"acks": value})
    assert e.key == "acks" and "must be one of 'all', '-1', '0', '1'" in str(e)


def test_batch_size_zero_becomes_one() -> None:
    assert make(batch_size=0).batch_size == 1
    assert make(batch_size="0").batch_size == 1


# ------------------------------------------------------------------------------------------------- bootstrap


def test_batch_size_above_buffer_memory_is_refused() -> None:
    """No batch could be allocated from the pool, so every send() would fail (Java accepts the pair)."""
    err = error({"batch.size": 65536, "buffer.memory": 65535})
    assert err.key == "batch.size" and "batch.size (65536) is larger than buffer.memory (65535)" in str(err)
    assert make(batch_size=65536, buffer_memory=65536).batch_size == 65536


def test_bootstrap_forms() -> None:
    cfg = ProducerConfig.from_mapping(bootstrap_servers=["h1:9092", " h2:9093 ", "[::1]:9094"])
    assert cfg.bootstrap_servers == ("h1:9092", "h2:9093", "[::1]:9094")
    assert cfg.bootstrap_addresses == (("h1", 9092), ("h2", 9093), ("::1", 9094))
    cfg = ProducerConfig.from_mapping(bootstrap_servers="PLAINTEXT://b1:1, ,SASL_SSL://10.0.0.1:2,")
    assert cfg.bootstrap_addresses == (("b1", 1), ("10.0.0.1", 2))
    assert parse_host_port("[fe80::1%eth0]:9092") == ("fe80::1%eth0", 9092)


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("localhost", "entries must be host:port, got 'localhost'"),
        ("host:abc", "entries must be host:port"),
        ("::1:9092", "write IPv6 addresses as [addr]:port"),
        ("host:0", "port must be between 1 and 65535, got 0"),
        ("host:70000", "port must be between 1 and 65535, got 70000"),
        (5, "must be a list or a comma-separated string"),
        (["a:1", 2], "entries must be strings"),
    ],
)
def test_bootstrap_errors(value: Any, fragment: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)) as info:
        ProducerConfig.from_mapping(bootstrap_servers=value)
    assert info.value.key == "bootstrap.servers"


def test_empty_bootstrap_needs_opt_in() -> None:
    confs: list[dict[str, Any]] = [{}, {"bootstrap.servers": ""}, {"bootstrap.servers": []}]
    for conf in confs:
        with pytest.raises(ConfigError, match=r"'bootstrap\.servers' must list at least one host:port"):
            ProducerConfig.from_mapping(conf)
    assert ProducerConfig.from_mapping(allow_empty_bootstrap=True).bootstrap_servers == ()


# ------------------------------------------------------------------------------------------ delivery timeout


def test_explicit_delivery_timeout_below_linger_plus_request_is_an_error() -> None:
    e = error({"delivery.timeout.ms": 30004})
    assert e.key == "delivery.timeout.ms"
    assert str(e) == ("'delivery.timeout.ms' must be >= 'linger.ms' + 'request.timeout.ms' "
                      "(5 + 30000 = 30005), got 30004")
    assert make(delivery_timeout_ms=30005).delivery_timeout_ms == 30005


def test_default_delivery_timeout_is_raised_silently() -> None:
    cfg = make(linger_ms=100000, request_timeout_ms=40000)
    assert cfg.delivery_timeout_ms == 140000
    assert not cfg.user_set("delivery.timeout.ms")
    assert make(linger_ms=2**40).delivery_timeout_ms == INT32_MAX


# ----------------------------------------------------------------------------------------------- idempotence


@pytest.mark.parametrize(
    ("conf", "key"),
    [({"acks": "1"}, "acks"), ({"acks": 0}, "acks"), ({"retries": 0}, "retries"),
     ({"max.in.flight.requests.per.connection": 6}, "max.in.flight.requests.per.connection")],
)
def test_default_idempotence_is_turned_off_by_conflicts(
    conf: dict[str, Any], key: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="sparkafka.config"):
        cfg = ProducerConfig.from_mapping({**BOOT, **conf})
    assert cfg.enable_idempotence is False
    assert any(r.name == "sparkafka.config" and r.levelno == logging.INFO and key in r.getMessage()
               for r in caplog.records)


@pytest.mark.parametrize(
    ("conf", "key"),
    [({"acks": "1"}, "acks"), ({"retries": "0"}, "retries"),
     ({"max.in.flight.requests.per.connection": 6}, "max.in.flight.requests.per.connection")],
)
def test_explicit_idempotence_conflicts_are_errors(conf: dict[str, Any], key: str) -> None:
    e = error({**conf, "enable.idempotence": "true"})
    assert e.key == key
    assert key in str(e) and "'enable.idempotence' is true" in str(e)


def test_idempotence_ok_cases() -> None:
    assert make(max_in_flight_requests_per_connection=5).enable_idempotence is True
    cfg = make(enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=10, retries=0)
    assert cfg.enable_idempotence is False and cfg.retries == 0


def test_transactional_id_requires_idempotence() -> None:
    e = error({"transactional.id": "tx", "enable.idempotence": False})
    assert e.key == "transactional.id" and "'enable.idempotence' is false" in str(e)
    e = error({"transactional.id": "tx", "acks": 1})
    assert e.key == "transactional.id" and "'acks' is 1" in str(e)
    assert error({"transactional.id": ""}).key == "transactional.id"
    cfg = make(transactional_id="tx")
    assert cfg.enable_idempotence and cfg.transactional


# ---------------------------------------------------------------------------------------- client.id, backoff


def test_client_id_derivation() -> None:
    first = make().client_id
    second = make().client_id
    assert re.fullmatch(r"producer-\d+", first) and re.fullmatch(r"producer-\d+", second)
    assert int(second.split("-")[1]) > int(first.split("-")[1])
    assert make(transactional_id="orders-tx").client_id == "producer-orders-tx"
    explicit_empty = make(client_id="")
    assert explicit_empty.client_id == "" and explicit_empty.user_set("client.id")
    assert make(client_id="app").client_id == "app"


def test_reconnect_backoff_max_follows_base_when_only_base_set() -> None:
    cfg = make(reconnect_backoff_ms=200)
    assert cfg.reconnect_backoff_max_ms == 200
    assert make(reconnect_backoff_ms=200, reconnect_backoff_max_ms=5000).reconnect_backoff_max_ms == 5000
    assert make().reconnect_backoff_max_ms == 1000


# -------------------------------------------------------------------------------------------------- plug-ins


def test_partitioner_specs() -> None:
    assert make().partitioner_class is None
    assert make(partitioner_class="round_robin").partitioner_class == "round_robin"
    assert make(partitioner_class="org.apache.kafka.clients.producer.RoundRobinPartitioner"
                ).partitioner_class == "round_robin"
    assert make(partitioner_class="RoundRobinPartitioner").partitioner_class == "round_robin"
    assert make(partitioner_class="default").partitioner_class is None
    assert make(partitioner_class=my_partitioner).partitioner_class is my_partitioner
    assert make(partitioner_class=f"{__name__}:my_partitioner").partitioner_class is my_partitioner


@pytest.mark.parametrize(
    ("value", "fragment"),
    [("org.apache.kafka.clients.producer.internals.DefaultPartitioner", "Java class"),
     ("hash", "unknown 'partitioner.class'"), (3, "must be 'round_robin', a callable"),
     ("missing_mod_q:f", "could not import")],
)
def test_partitioner_errors(value: Any, fragment: str) -> None:
    e = error({"partitioner.class": value})
    assert e.key == "partitioner.class" and fragment in str(e)


def test_serializer_specs_in_config() -> None:
    cfg = make(key_serializer="org.apache.kafka.common.serialization.StringSerializer",
               value_serializer=my_value_serializer)
    assert cfg.key_serializer is serialize_str and cfg.value_serializer is my_value_serializer
    e = error({"value.serializer": "avro"})
    assert e.key == "value.serializer"


# -------------------------------------------------------------------------------------------------- security


def test_sasl_rules() -> None:
    e = error({"security.protocol": "SASL_SSL"})
    assert e.key == "sasl.mechanism" and "'GSSAPI' is not supported" in str(e)
    e = error({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u"})
    assert e.key == "sasl.password"
    e = error({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"})
    assert e.key == "sasl.oauthbearer.token.provider"
    cfg = make(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER",
               sasl_oauthbearer_token_provider=f"{__name__}:token")
    assert cfg.sasl_oauthbearer_token_provider is token
    assert error({"sasl.mechanism": "KERBEROS"}).key == "sasl.mechanism"
    # GSSAPI default is fine without SASL
    assert make(security_protocol="SSL").sasl_mechanism == "GSSAPI"


def test_ssl_rules() -> None:
    ctx = ssl.create_default_context()
    assert make(security_protocol="SSL", ssl_context=ctx).ssl_context is ctx
    e = error({"ssl.context": ctx, "ssl.ca.location": "/ca.pem"})
    assert e.key == "ssl.ca.location" and "ssl.context" in str(e)
    assert error({"ssl.context": "ctx"}).key == "ssl.context"
    assert error({"ssl.key.location": "/k.pem"}).key == "ssl.key.location"
    assert make(ssl_endpoint_identification_algorithm="").ssl_endpoint_identification_algorithm == ""
    assert error({"ssl.endpoint.identification.algorithm": "none"}).key == (
        "ssl.endpoint.identification.algorithm")


# ------------------------------------------------------------------------------------------- secrets, pickle


def test_secrets_are_masked() -> None:
    cfg = make(security_protocol="SASL_SSL", sasl_mechanism="SCRAM-SHA-512", sasl_username="alice",
               sasl_password="hunter2-pw", ssl_certificate_location="/c.pem", ssl_key_location="/k.pem",
               ssl_key_password="keypass-xyz")
    for text in (repr(cfg), str(cfg)):
        assert "hunter2-pw" not in text and "keypass-xyz" not in text
        assert "sasl.password='[hidden]'" in text and "sasl.username='alice'" in text
    props = cfg.to_properties()
    assert props["sasl.password"] == HIDDEN and props["ssl.key.password"] == HIDDEN
    assert props["sasl.oauthbearer.token.provider"] is None
    raw = cfg.to_properties(mask_secrets=False)
    assert raw["sasl.password"] == "hunter2-pw" and raw["ssl.key.password"] == "keypass-xyz"
    assert set(props) == set(KEYS_BY_NAME)


def test_repr_shows_only_changed_keys() -> None:
    text = repr(make(linger_ms=50, value_serializer="json"))
    assert "linger.ms=50" in text and "value.serializer='json'" in text
    assert "batch.size" not in text and "key.serializer" not in text


def test_to_properties_round_trip() -> None:
    cfg = make(linger_ms=3, acks="1", compression_type="gzip", value_serializer=my_value_serializer,
               key_serializer="str", partitioner_class="round_robin")
    props = cfg.to_properties(mask_secrets=False)
    assert props["bootstrap.servers"] == "localhost:9092" and props["key.serializer"] == "str"
    assert ProducerConfig.from_mapping(props) == cfg


def test_pickle_round_trip() -> None:
    cfg = make(transactional_id="tx", value_serializer=my_value_serializer, partitioner_class=my_partitioner,
               sasl_password="pw", linger_ms="9")
    again = pickle.loads(pickle.dumps(cfg))
    assert again == cfg
    assert again.value_serializer is my_value_serializer and again.partitioner_class is my_partitioner
    assert again.user_set("linger.ms") and not again.user_set("batch.size")
    assert again.client_id == "producer-tx"


def test_frozen() -> None:
    cfg = make()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.linger_ms = 1  # type: ignore[misc]


def test_metrics_push_off_and_no_reporters_are_accepted_as_what_sparkafka_does() -> None:
    """A Java job's properties often say enable.metrics.push=false (Java 4.x pushes by default, KIP-714) and
    list no metric.reporters: both describe sparkafka already and are accepted; turning either on stays a
    ConfigError naming the key (both were refused whatever their value)."""
    for off in (False, "false", " FALSE "):
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "enable.metrics.push": off})
    nothing: tuple[object, ...] = ("", [], ())
    for none in nothing:
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "metric.reporters": none})
    ProducerConfig.from_mapping({"bootstrap.servers": "h:9092"}, enable_metrics_push=False)
    with pytest.raises(ConfigError, match=r"enable\.metrics\.push.*KIP-714.*false is accepted") as info:
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "enable.metrics.push": True})
    assert info.value.key == "enable.metrics.push"
    with pytest.raises(ConfigError, match=r"metric\.reporters.*an empty list is accepted"):
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "metric.reporters": "com.example.Reporter"})


def test_two_phase_commit_key_is_java_only_and_false_is_accepted() -> None:
    """Kafka 4.x's transaction.two.phase.commit.enable (KIP-939): false (Java's default) describes sparkafka and
    is accepted; true says what is missing and what the Spark sink does instead (it was "unknown config")."""
    for off in (False, "false"):
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "transactional.id": "t",
                                     "transaction.two.phase.commit.enable": off})
    with pytest.raises(ConfigError, match=r"not supported by sparkafka.*KIP-939.*false is accepted") as info:
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "transactional.id": "t",
                                     "transaction.two.phase.commit.enable": True})
    assert info.value.key == "transaction.two.phase.commit.enable"


@pytest.mark.parametrize("conf", ["127.0.0.1:9092", 5, [("bootstrap.servers", "h:9092")]])
def test_a_config_that_is_not_a_mapping_is_a_config_error(conf: Any) -> None:
    """It leaked AttributeError ('str' object has no attribute 'items')."""
    with pytest.raises(ConfigError, match="the config must be a mapping"):
        ProducerConfig.from_mapping(conf)


@pytest.mark.parametrize("key", ["client.id", "transactional.id"])
def test_strings_sent_as_kafka_strings_are_held_to_their_int16_length(key: str) -> None:
    """client.id and transactional.id go on the wire as Kafka STRINGs (int16 length): 40,000 UTF-8 bytes were
    accepted and then every request failed to encode in the I/O thread (logged over and over, sends timed out
    with MetadataTimeoutError); a lone surrogate cannot be encoded at all."""
    ok = {"bootstrap.servers": "h:9092", key: "\u00e9" * 16383}  # 32,766 bytes
    assert getattr(ProducerConfig.from_mapping(ok), key.replace(".", "_")) == "\u00e9" * 16383
    with pytest.raises(ConfigError, match=f"'{key}' must be at most 32767 UTF-8 bytes, got 40000") as info:
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", key: "\u00e9" * 20000})
    assert info.value.key == key
    with pytest.raises(ConfigError, match=f"'{key}' must be encodable as UTF-8"):
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", key: "a\ud800"})


@pytest.mark.parametrize("key", ["request.timeout.ms", "socket.connection.setup.timeout.ms",
                                 "socket.connection.setup.timeout.max.ms"])
def test_timeouts_the_network_client_refuses_are_refused_by_the_config(key: str) -> None:
    """0 passed the config table (Java's atLeast(0)) and failed in KafkaProducer's constructor: a config
    validated on a Spark driver could then fail on the executors."""
    with pytest.raises(ConfigError, match=f"'{key}' must be >= 1, got 0"):
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", key: 0})
