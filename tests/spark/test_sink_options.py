"""Option parsing of the sparkafka data source (driver side, no Spark needed)."""

from __future__ import annotations

import pickle

import pytest

from sparkafka.errors import ConfigError
from sparkafka.spark.options import SinkOptions

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}


def test_kafka_options_become_producer_config_and_sink_options_are_read() -> None:
    opts = SinkOptions.parse({**BOOT, "kafka.linger.ms": "20", "Kafka.Acks": "1", "topic": "orders",
                              "sparkafka.summary.path": "/tmp/x.jsonl",
                              "sparkafka.producer.idle.timeout.ms": "1500",
                              "checkpointLocation": "/tmp/cp"})
    assert opts.producer_config_dict == {"bootstrap.servers": "localhost:9092", "linger.ms": "20",
                                         "acks": "1"}
    assert (opts.topic, opts.summary_path, opts.idle_timeout_ms) == ("orders", "/tmp/x.jsonl", 1500)
    assert opts.fail_first_attempt_after is None
    assert pickle.loads(pickle.dumps(opts)) == opts


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match=r"'kafka\.bootstrap\.servers' is required"):
        SinkOptions.parse({"topic": "t"})


def test_unknown_kafka_key_surfaces_the_producer_suggestion() -> None:
    with pytest.raises(ConfigError, match=r"option 'kafka.lnger.ms'.*did you mean 'linger.ms'") as info:
        SinkOptions.parse({**BOOT, "kafka.lnger.ms": "5"})
    assert info.value.key == "kafka.lnger.ms"


def test_bad_kafka_value_names_the_option() -> None:
    with pytest.raises(ConfigError, match=r"option 'kafka.linger.ms'"):
        SinkOptions.parse({**BOOT, "kafka.linger.ms": "soon"})


def test_unknown_plain_option_is_rejected_with_a_hint() -> None:
    with pytest.raises(ConfigError, match=r"unknown option 'topc'.*did you mean 'topic'"):
        SinkOptions.parse({**BOOT, "topc": "t"})


@pytest.mark.parametrize("key", ["kafka.value.serializer", "kafka.key.serializer", "kafka.transactional.id"])
def test_refused_kafka_keys(key: str) -> None:
    with pytest.raises(ConfigError, match=rf"option '{key}' is not supported"):
        SinkOptions.parse({**BOOT, key: "x"})


@pytest.mark.parametrize(("name", "value"), [("sparkafka.producer.idle.timeout.ms", "-1"),
                                             ("sparkafka.fault.fail.first.attempt.after.records", "x"),
                                             ("sparkafka.fault.stall.first.attempt.of.partition", "-1"),
                                             ("sparkafka.fault.stall.first.attempt.ms", "1000")])
def test_bad_sink_option_values(name: str, value: str) -> None:
    with pytest.raises(ConfigError, match=name):
        SinkOptions.parse({**BOOT, name: value})


def test_stall_fault_options() -> None:
    opts = SinkOptions.parse({**BOOT, "sparkafka.fault.stall.first.attempt.of.partition": "2"})
    assert (opts.stall_first_attempt_of, opts.stall_first_attempt_ms) == (2, 300_000)
    opts = SinkOptions.parse({**BOOT, "sparkafka.fault.stall.first.attempt.of.partition": "0",
                              "sparkafka.fault.stall.first.attempt.ms": "50"})
    assert (opts.stall_first_attempt_of, opts.stall_first_attempt_ms) == (0, 50)
    assert SinkOptions.parse(BOOT).stall_first_attempt_of is None


def test_a_save_path_is_refused() -> None:
    with pytest.raises(ConfigError, match="takes no path"):
        SinkOptions.parse({**BOOT, "path": "/tmp/out"})


def test_exactly_once_options() -> None:
    opts = SinkOptions.parse({**BOOT, "sparkafka.guarantee": "Exactly-Once", "sparkafka.sink.id": "orders.v2_eu-1",
                              "sparkafka.sink.log.topic": "decisions", "checkpointLocation": "/tmp/cp"})
    assert (opts.exactly_once, opts.sink_id, opts.log_topic, opts.checkpoint_location) == (
        True, "orders.v2_eu-1", "decisions", "/tmp/cp")
    config = opts.transactional_config("sparkafka/orders.v2_eu-1/3/0")
    assert config["transactional.id"] == "sparkafka/orders.v2_eu-1/3/0"
    assert config["transaction.timeout.ms"] == "900000"  # the broker's default cap, not the producer's 60 s
    custom = SinkOptions.parse({**BOOT, "sparkafka.guarantee": "exactly_once", "kafka.transaction.timeout.ms": "5000"})
    assert custom.transactional_config("x")["transaction.timeout.ms"] == "5000" and custom.sink_id is None
    assert not SinkOptions.parse(BOOT).exactly_once
    assert pickle.loads(pickle.dumps(opts)) == opts


@pytest.mark.parametrize(("options", "message", "key"), [
    ({"sparkafka.guarantee": "twice"}, r"'sparkafka.guarantee' must be 'at_least_once' or 'exactly_once', got 'twice'",
     "sparkafka.guarantee"),
    ({"sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": "a/b"}, r"'sparkafka.sink.id' must be 1-200 letters",
     "sparkafka.sink.id"),
    ({"sparkafka.sink.id": "s"}, r"'sparkafka.sink.id' needs sparkafka.guarantee='exactly_once'", "sparkafka.sink.id"),
    ({"sparkafka.guarantee": "exactly_once", "kafka.acks": "1"},
     r"needs transactional producers.*idempotence is off because 'acks' is 1", "sparkafka.guarantee"),
    ({"sparkafka.guarantee": "exactly_once", "sparkafka.sink.log.topic": " "}, "'sparkafka.sink.log.topic' is empty",
     "sparkafka.sink.log.topic"),
])
def test_bad_exactly_once_options(options: dict[str, str], message: str, key: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        SinkOptions.parse({**BOOT, **options})
    assert info.value.key == key
