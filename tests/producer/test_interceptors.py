"""``interceptor.classes`` (Java's ProducerInterceptor): ``on_send`` may change the record before it is
serialized (what confluent-kafka reads back shows the change), ``on_acknowledgement`` sees every result
(acknowledged, failed by the broker, failed in ``send()``, raised by ``send()``) before the record's
callback, a broken interceptor is skipped, classes are created and configured per producer and closed
with it, and the config accepts classes, objects, functions and ``module:attr`` names."""

from __future__ import annotations

import json
import pickle
import threading
from collections.abc import Callable
from typing import Any

import pytest

from sparkafka import errors
from sparkafka.config import ProducerConfig
from sparkafka.producer.future import FailedFuture, RecordMetadata
from sparkafka.producer.interceptors import ProducerRecord
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all
from support.mock_cluster import ApiKey, MockCluster

Event = tuple[str, Any, Any]


class Recording:
    """Adds a header and an ``intercepted`` field; records every acknowledgement (with headers)."""

    instances: list[Recording] = []

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.configs: dict[str, Any] | None = None
        self.closed = 0
        Recording.instances.append(self)

    def configure(self, configs: dict[str, Any]) -> None:
        self.configs = configs

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        value = dict(record.value, intercepted=True) if isinstance(record.value, dict) else record.value
        headers = [*(record.headers or []), ("seen-by", b"recording")]
        return record._replace(value=value, headers=headers)

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None,
                           headers: Any) -> None:
        self.events.append(("ack", metadata, exception))
        self.events.append(("headers", headers, None))

    def close(self) -> None:
        self.closed += 1


class Broken:
    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("broken on_send")

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        raise RuntimeError("broken on_acknowledgement")


def upper_key(record: ProducerRecord) -> ProducerRecord:
    """A function is an interceptor's on_send."""
    return record._replace(key=record.key.upper() if isinstance(record.key, str) else record.key)


@pytest.fixture(autouse=True)
def _fresh_instances() -> None:
    Recording.instances.clear()


def _producer(mock_cluster: MockCluster, **extra: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0,
                          "value.serializer": "json", "key.serializer": "str", **extra})


def test_on_send_changes_the_record_before_serialization(mock_cluster: MockCluster,
                                                         unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("icpt")
    mock_cluster.create_topic(topic, 3, 1)
    producer = _producer(mock_cluster, interceptor_classes=[Broken, "producer.test_interceptors:Recording",
                                                             upper_key])
    try:
        assert producer._send_lane is None  # every record takes the Python send, through on_send
        calls: list[tuple[str, Any, Any]] = []
        for i in range(5):
            producer.send(topic, {"n": i}, key=f"k{i}",
                          callback=lambda md, exc: calls.append(("callback", md.offset, exc))).get(30)
    finally:
        producer.close()
    records = consume_all(mock_cluster.bootstrap_servers, topic, expected_count=5)
    assert sorted(json.loads(r.value or b"")["n"] for r in records) == list(range(5))
    for r in records:
        assert json.loads(r.value or b"")["intercepted"] is True  # changed before the JSON serializer ran
        assert r.key == f"K{json.loads(r.value or b'')['n']}".encode()  # the function ran after Recording
        assert r.headers == [("seen-by", b"recording")]
    (recording,) = Recording.instances
    acks = [e for e in recording.events if e[0] == "ack"]
    assert len(acks) == 5 and all(exc is None and md.offset >= 0 for _, md, exc in acks)
    assert all(e[1] == [("seen-by", b"recording")] for e in recording.events if e[0] == "headers")
    assert [c[2] for c in calls] == [None] * 5
    assert recording.configs is not None and recording.configs["client.id"] == producer.config.client_id
    assert recording.configs["bootstrap.servers"] == mock_cluster.bootstrap_servers
    assert recording.closed == 1  # closed with the producer, once


def test_on_acknowledgement_sees_every_result_before_the_callback(mock_cluster: MockCluster,
                                                                  unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("icpt-acks")
    mock_cluster.create_topic(topic, 1, 1)
    recording = Recording()
    order: list[str] = []
    original = recording.on_acknowledgement

    def ack(metadata: RecordMetadata, exception: BaseException | None, headers: Any) -> None:
        order.append(f"interceptor:{type(exception).__name__}")
        original(metadata, exception, headers)

    recording.on_acknowledgement = ack  # type: ignore[method-assign]
    producer = _producer(mock_cluster, interceptor_classes=[recording], max_request_size=2000,
                         retries=0, enable_idempotence=False)
    try:
        def callback(metadata: RecordMetadata, exception: BaseException | None) -> None:
            order.append(f"callback:{type(exception).__name__}")

        assert producer.send(topic, {"ok": 1}, callback=callback).get(30).offset == 0
        mock_cluster.push_partition_request_errors(topic, 0, ApiKey.PRODUCE, [87])  # INVALID_RECORD
        rejected = producer.send(topic, {"rejected": 1}, callback=callback)
        assert isinstance(rejected.exception(30), errors.BrokerError)
        too_large = producer.send(topic, {"x": "y" * 5000}, partition=0, callback=callback)
        assert isinstance(too_large, FailedFuture)
        with pytest.raises(errors.SerializationError):
            producer.send(topic, {1, 2}, callback=callback)  # a set is not JSON: raised, not returned
    finally:
        producer.close()
    assert order == ["interceptor:NoneType", "callback:NoneType",
                     "interceptor:InvalidRecordError", "callback:InvalidRecordError",
                     # failed in send(): the callback first, then the interceptors (Java's doSend)
                     "callback:RecordTooLargeError", "interceptor:RecordTooLargeError",
                     "interceptor:SerializationError"]
    acks = [(md, exc) for kind, md, exc in recording.events if kind == "ack"]
    assert acks[2][0] == RecordMetadata(topic, 0, -1, -1, -1, -1)  # Java's metadata for a send() failure
    assert acks[3][0] == RecordMetadata(topic, -1, -1, -1, -1, -1)
    assert producer.metrics()["record-error-total"] == 3


def test_a_broken_interceptor_does_not_stop_the_record(mock_cluster: MockCluster,
                                                       unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("icpt-broken")
    mock_cluster.create_topic(topic, 1, 1)
    seen = threading.Event()
    with _producer(mock_cluster, interceptor_classes=(Broken,)) as producer:
        producer.send(topic, {"v": 1}, callback=lambda md, exc: seen.set()).get(30)
    assert seen.is_set()
    assert [json.loads(r.value or b"") for r in consume_all(mock_cluster.bootstrap_servers, topic,
                                                             expected_count=1)] == [{"v": 1}]


def test_send_arrow_refuses_interceptors(mock_cluster: MockCluster) -> None:
    pa = pytest.importorskip("pyarrow")
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers, interceptor_classes=[upper_key]) as p, \
            pytest.raises(errors.IllegalStateError, match=r"interceptor\.classes"):
        p.send_arrow("t", pa.record_batch({"value": pa.array([b"v"])}))


def test_the_config_forms() -> None:
    cfg = ProducerConfig.from_mapping({"bootstrap.servers": "h:1",
                                       "interceptor.classes": "producer.test_interceptors:Recording, "
                                                              "producer.test_interceptors:upper_key"})
    assert cfg.interceptor_classes == (Recording, upper_key)
    again = ProducerConfig.from_mapping(cfg.to_properties(mask_secrets=False))
    assert again.interceptor_classes == cfg.interceptor_classes
    assert pickle.loads(pickle.dumps(cfg)).interceptor_classes == (Recording, upper_key)
    assert "producer.test_interceptors:Recording" in repr(cfg)
    assert ProducerConfig.from_mapping(bootstrap_servers="h:1").interceptor_classes == ()
    for bad, words in [("org.apache.kafka.clients.interceptor.Foo", "Java class"),
                       (["no_such_module_x:Y"], "could not import"),
                       ([42], "entries must be"),
                       ([dict], "has no on_send")]:
        with pytest.raises(errors.ConfigError, match=words) as info:
            ProducerConfig.from_mapping(bootstrap_servers="h:1", interceptor_classes=bad)
        assert info.value.key == "interceptor.classes"
