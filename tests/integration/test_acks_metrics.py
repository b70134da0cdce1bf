"""acks=0 / acks=1, partitions_for() and the Java-named metrics after a run."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from sparkafka import errors
from sparkafka.config import ProducerConfig
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all
from support.mock_cluster import ApiKey

from .conftest import Target

pytestmark = pytest.mark.broker

JAVA_METRICS = (
    "record-send-rate", "record-error-rate", "record-retry-rate", "batch-size-avg", "records-per-request-avg",
    "compression-rate-avg", "request-latency-avg", "request-latency-max", "bufferpool-wait-ratio",
    "buffer-available-bytes", "waiting-threads", "batch-size-max", "record-queue-time-avg", "record-queue-time-max",
    "produce-throttle-time-avg", "produce-throttle-time-max",
)


def test_acks_zero_rule() -> None:
    """acks=0 turns default idempotence off; asking for both is a ConfigError naming acks."""
    cfg = ProducerConfig.from_mapping({"bootstrap.servers": "x:1", "acks": "0"})
    assert cfg.acks == 0 and cfg.enable_idempotence is False
    with pytest.raises(errors.ConfigError, match="acks"):
        ProducerConfig.from_mapping({"bootstrap.servers": "x:1", "acks": 0, "enable.idempotence": True})


def test_acks_zero_delivers_with_unknown_offsets(target: Target) -> None:
    topic = target.topic(2)
    producer = target.producer({"acks": "0", "linger.ms": 1})
    futures = []
    for round_ in range(5):  # several requests, with metadata requests in between
        futures += [producer.send(topic, value=b"%d-%d" % (round_, i), key=b"%d" % i) for i in range(100)]
        producer.flush(10)
        assert producer.partitions_for(target.topic(1, prefix=f"other{round_}")) == [0]
    metadata = [f.result(0) for f in futures]
    assert {m.offset for m in metadata} == {-1}
    assert {m.partition for m in metadata} <= {0, 1}
    records = consume_all(target.bootstrap, topic, expected_count=500, timeout=20)
    assert sorted(r.value for r in records if r.value is not None) == sorted(
        b"%d-%d" % (r, i) for r in range(5) for i in range(100))


def test_acks_zero_keeps_its_connection_on_tansu(tansu_target: Target, caplog: pytest.LogCaptureFixture) -> None:
    """Tansu answers acks=0 Produce requests although Kafka never does: the client must drop those
    responses instead of treating them as a protocol error and reconnecting."""
    topic = tansu_target.topic(1)
    producer = tansu_target.producer({"acks": 0, "linger.ms": 0})
    with caplog.at_level(logging.WARNING, logger="sparkafka"):
        for i in range(5):
            producer.send(topic, value=b"%d" % i)
            producer.flush(5)  # returns once the bytes are written: then wait for Tansu's answer itself
            assert _acks_zero_answers_arrived(producer, 10.0), "Tansu did not answer the acks=0 Produce"
    broken = [r.getMessage() for r in caplog.records if "correlation id" in r.getMessage()]
    assert not broken, broken


def _acks_zero_answers_arrived(producer: KafkaProducer, timeout_s: float) -> bool:
    """Every acks=0 request was answered (and the answer dropped): no connection's protocol still holds
    the correlation id of a request sent without expecting a response. Also True once a connection was
    closed (an answer taken for a protocol error): the caller's log check then says why."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        protocols = [conn._protocol for conn in producer._client._conns.values()]
        if protocols and (None in protocols or not any(p._unanswered for p in protocols if p is not None)):
            return True
        time.sleep(0.005)  # polling the condition, with a deadline: not a fixed wait
    return False


def test_acks_one(target: Target) -> None:
    topic = target.topic(1)
    producer = target.producer({"acks": "1", "linger.ms": 1})
    assert producer.config.enable_idempotence is False
    futures = [producer.send(topic, value=b"%d" % i) for i in range(50)]
    producer.flush(10)
    assert [f.result(0).offset for f in futures] == list(range(50))


def test_partitions_for(target: Target) -> None:
    producer = target.producer()
    for count in (1, 5):
        topic = target.topic(count)
        assert producer.partitions_for(topic) == list(range(count))
    with pytest.raises(errors.InvalidTopicNameError):
        producer.partitions_for("bad topic")


def test_metrics_after_a_run(target: Target) -> None:
    topic = target.topic(3)
    producer = target.producer({"linger.ms": 5, "compression.type": "gzip"})
    before = producer.metrics()
    for name in JAVA_METRICS:
        assert name in before, name
    futures = [producer.send(topic, value=b"payload %d " % i * 20, key=b"%d" % i) for i in range(2000)]
    producer.flush(15)
    assert all(f.exception(0) is None for f in futures)
    m = producer.metrics()
    for name in JAVA_METRICS:
        assert isinstance(m[name], float), name
    assert m["record-send-total"] == 2000
    assert m["record-send-rate"] > 0
    assert m["record-error-rate"] == 0 and m["record-retry-rate"] == 0
    assert 100 < m["batch-size-avg"] <= m["batch-size-max"] <= 16384 + 1024
    assert 0 <= m["record-queue-time-avg"] <= m["record-queue-time-max"] < 15_000
    assert m["produce-throttle-time-max"] == 0  # no quota on the test brokers
    assert 1 <= m["records-per-request-avg"] <= 2000
    assert 0 < m["compression-rate-avg"] < 0.5
    assert 0 < m["request-latency-avg"] <= m["request-latency-max"] < 10_000
    assert m["bufferpool-wait-ratio"] == 0
    assert m["buffer-available-bytes"] == 33554432
    assert m["waiting-threads"] == 0


def test_retries_and_errors_show_in_metrics(mock_target: Target) -> None:
    """A retriable error is retried end to end (and counted); a fatal one is counted as an error."""
    mock = mock_target.mock
    assert mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 0, "retry.backoff.ms": 10})
    producer.send(topic, value=b"warm-up").result(10)
    mock.broker_set_rtt(-1, 50)
    mock.push_request_errors(ApiKey.PRODUCE, [19, 19])  # NOT_ENOUGH_REPLICAS twice
    assert producer.send(topic, value=b"retried").result(10).offset == 1
    m = producer.metrics()
    assert m["record-retry-total"] == 2 and m["record-retry-rate"] > 0
    assert m["record-error-total"] == 0
    assert m["record-send-total"] == 4  # as Java's: per Produce request, so the warm-up once, the retried 3 times
    assert m["request-latency-max"] >= 45  # the 50 ms round trip
    other = mock_target.producer({"linger.ms": 0, "enable.idempotence": False, "retries": 0})
    other.partitions_for(topic)
    mock.push_request_errors(ApiKey.PRODUCE, [errors.TOPIC_AUTHORIZATION_FAILED])
    assert other.send(topic, value=b"refused").exception(10) is not None
    m = other.metrics()
    assert m["record-error-total"] == 1 and m["record-error-rate"] > 0
    assert m["record-send-total"] == 1  # it was sent (Java counts records put in requests), then refused


def test_request_latency_samples_answers_only_and_the_compression_rate_averages_batches(
        mock_target: Target) -> None:
    """As Java's Sender: a request that timed out adds no latency sample (it added request.timeout.ms),
    compression-rate-avg is the average of the batches' ratios (it was total compressed over total
    uncompressed bytes, headers included: a large well-compressed batch hid a small one), and request-total
    counts every request sent (it counted Produce requests only)."""
    mock = mock_target.mock
    assert mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 0, "request.timeout.ms": 1000, "delivery.timeout.ms": 30_000,
                                     "retry.backoff.ms": 10, "compression.type": "gzip"})
    producer.send(topic, value=b"x" * 100_000).result(10)  # one batch, ratio ~0.001
    producer.send(topic, value=b"y").result(10)  # one batch of one small record: ratio above 1
    m = producer.metrics()
    assert m["compression-rate-avg"] > 0.5, m["compression-rate-avg"]
    # request-total counts every request, as Java's (Metadata and InitProducerId too), not only the 2 Produce
    assert m["request-total"] >= 4, m["request-total"]
    before = m["request-latency-max"]
    assert before < 1000
    mock.broker_set_rtt(-1, 1500)  # past request.timeout.ms: the first attempt times out
    future = producer.send(topic, value=b"late")
    time.sleep(1.2)
    mock.broker_set_rtt(-1, 0)
    future.result(20)
    m = producer.metrics()
    assert m["record-retry-total"] >= 1  # the timed-out attempt was retried
    assert m["request-latency-max"] < 1000, m["request-latency-max"]


def test_topic_in_use_stays_in_metadata(mock_target: Target) -> None:
    """Java's send() refreshes the topic's idle timer on every record; a topic in constant use must never
    drop out of the metadata (which makes the next send() wait for a metadata round trip)."""
    topic = mock_target.topic(2)
    producer = mock_target.producer({"linger.ms": 1, "metadata.max.idle.ms": 5000, "metadata.max.age.ms": 200})
    producer.partitions_for(topic)
    waits: list[str] = []
    original = producer._wait_on_metadata

    def counting(t: str, partition: int | None) -> Any:
        waits.append(t)
        return original(t, partition)

    producer._wait_on_metadata = counting  # type: ignore[method-assign, assignment]
    started = time.monotonic()
    while time.monotonic() - started < 5.8:
        producer.send(topic, value=b"x")
        time.sleep(0.01)
    producer.flush(5)
    assert waits == [], f"send() had to wait for metadata {len(waits)} time(s)"


def test_connection_count_and_metadata_age(target: Target) -> None:
    """Java's connection-count (connections ready now) and metadata-age (seconds since the metadata in use
    was fetched)."""
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    try:
        producer.send(topic, value=b"x").result(10)
        m = producer.metrics()
        assert m["connection-count"] >= 1
        assert 0 <= m["metadata-age"] < 5  # how it grows between refreshes: test_metadata.py (a manual clock)
        assert m["request-rate"] > 0
    finally:
        producer.close(10)
    assert producer.metrics()["connection-count"] == 0


def test_byte_metrics_count_what_went_over_the_wire(target: Target) -> None:
    """Java's Selector sensors: request-size-max is the largest request (a Produce request of one 100,000-byte
    record: its batch plus the request's headers), request-size-avg is the requests' bytes over request-total
    (all written once the record is acknowledged: outgoing-byte-total, counted as the socket takes them), and
    incoming-byte-total grows with the answers."""
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    try:
        producer.partitions_for(topic)
        before = producer.metrics()
        assert before["request-size-max"] < 1_000  # ApiVersions, Metadata, InitProducerId
        producer.send(topic, value=b"v" * 100_000).result(10)
        m = producer.metrics()
        assert 100_000 < m["request-size-max"] < 100_000 + 300, m["request-size-max"]
        assert m["outgoing-byte-total"] - before["outgoing-byte-total"] >= m["request-size-max"]
        # (a metadata refresh may be queued meanwhile: a few dozen bytes of ~100 KB)
        assert m["request-size-avg"] == pytest.approx(m["outgoing-byte-total"] / m["request-total"], rel=0.01)
        assert m["incoming-byte-total"] > before["incoming-byte-total"] > 0
        assert m["outgoing-byte-rate"] > 0 and m["incoming-byte-rate"] > 0
    finally:
        producer.close(10)
