"""User-facing rules: perf's broker choice and thread errors, Java keys sparkafka does not implement,
and the producer's close(timeout) / callback argument checks.

How it works: ``sparkafka perf`` runs in-process (``cli.main``) with the embedded broker replaced by a
stub that must not start, or ``run_perf`` with a real producer; config keys go through
``ProducerConfig``; the producer checks run on a producer that never reaches a broker.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

import sparkafka.broker
from sparkafka import KafkaProducer
from sparkafka.cli import main
from sparkafka.cli.perf import PerfOptions, run_perf
from sparkafka.config import ProducerConfig
from sparkafka.errors import ConfigError, InvalidRecordInputError, RecordTooLargeError


class _NoEmbeddedBroker:
    started: list[object] = []

    def __init__(self, *args: object, **kwargs: object) -> None:
        _NoEmbeddedBroker.started.append(self)
        raise RuntimeError("the embedded broker must not start when bootstrap.servers is given")


@pytest.mark.parametrize("prop", ["bootstrap.servers", "bootstrap_servers"])
def test_perf_uses_bootstrap_servers_from_producer_props(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str], prop: str) -> None:
    # nothing listens on port 1: the test must reach (and fail on) that address, not an embedded broker
    monkeypatch.setattr(sparkafka.broker, "EmbeddedBroker", _NoEmbeddedBroker)
    _NoEmbeddedBroker.started.clear()
    rc = main(["perf", "--num-records", "1", "--record-size", "1", "--throughput", "-1",
               "--producer-props", f"{prop}=127.0.0.1:1", "max.block.ms=300"])
    assert _NoEmbeddedBroker.started == []
    assert rc == 1
    assert "300 ms" in capsys.readouterr().err


class _RaisingProducer:
    def __init__(self) -> None:
        self.flushed = False

    def send(self, topic: str, value: bytes, key: bytes | None = None, callback: Any = None) -> None:
        raise RecordTooLargeError(f"the record to topic {topic!r} is too large")

    def flush(self) -> None:
        self.flushed = True


@pytest.mark.parametrize("threads", [1, 3])
def test_perf_send_error_in_any_thread_fails_the_run(threads: int) -> None:
    producer = _RaisingProducer()
    options = PerfOptions(topic="t", num_records=30, payloads=[b"x"], threads=threads, reporting_interval=0)
    with pytest.raises(RecordTooLargeError):
        run_perf(producer, options)
    assert not producer.flushed


@pytest.mark.parametrize("key", [
    "metrics.recording.level", "metrics.num.samples", "metrics.sample.window.ms", "security.providers",
    "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.provider", "ssl.secure.random.implementation",
    "sasl.login.refresh.window.factor", "sasl.oauthbearer.token.endpoint.url", "sasl.kerberos.kinit.cmd",
    "sasl_login_class",
])
def test_java_producer_keys_are_named_unsupported_not_unknown(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", key: "x"})
    message = str(info.value)
    assert "not supported by sparkafka" in message and "did you mean" not in message
    assert info.value.key == key.replace("_", ".")


def test_unknown_and_supported_keys_unchanged() -> None:
    with pytest.raises(ConfigError, match=r"unknown config 'linger\.mss'; did you mean 'linger\.ms'"):
        ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "linger.mss": 1})
    cfg = ProducerConfig.from_mapping({"bootstrap.servers": "h:9092", "sasl.oauthbearer.token.provider": str})
    assert cfg.sasl_oauthbearer_token_provider is str


# ------------------------------------------------------------------ producer.py (diff in the report)
def test_close_rejects_a_negative_timeout() -> None:
    producer = KafkaProducer(bootstrap_servers="127.0.0.1:1")
    try:
        with pytest.raises(ValueError, match="timeout"):
            producer.close(-1)
        assert not producer._closing  # nothing was failed or stopped
    finally:
        producer.close()


def test_send_rejects_a_callback_that_is_not_callable(tansu: Any, unique_topic: Any) -> None:
    topic = unique_topic("cb")
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers) as producer:
        producer.send(topic, b"first").result(30)  # metadata known: the next send may take the fast lane
        for key in (None, b"k"):
            with pytest.raises(InvalidRecordInputError, match="callback"):
                producer.send(topic, b"v", key, callback=5)
        done = threading.Event()
        producer.send(topic, b"v", callback=lambda md, exc: done.set())
        producer.flush(30)
        assert done.is_set()
