"""What confluent-kafka reads back equals what we sent: keys, values, nulls, headers, timestamps, codecs.

Every record goes to partition 0 of a one-partition topic, so the read-back list must equal the sent
list in order. Runs against Tansu and the librdkafka mock cluster; each codec (and a few levels) once.
"""

from __future__ import annotations

import os
import time
from typing import Any

import pytest

from sparkafka._clock import SYSTEM_CLOCK
from support.consume import consume_all

from .conftest import Target

pytestmark = pytest.mark.broker

Headers = list[tuple[str, bytes | None]]
Sent = tuple[bytes | None, bytes | None, Headers, int | None]

EXPLICIT_TS = 1_600_000_000_123


def _records() -> list[Sent]:
    """(key, value, headers, timestamp or None) covering the corner cases."""
    out: list[Sent] = [
        (b"k1", b"v1", [], None),
        (None, b"value with a null key", [], None),
        (b"tombstone", None, [], None),
        (b"empty-value", b"", [], None),
        (b"", b"empty key", [], None),
        (None, None, [], None),
        (b"headers", b"h", [("a", b"1"), ("a", b"2"), ("null", None), ("empty", b""), ("", b"empty name"),
                            ("\u043a\u043b\u044e\u0447", b"\x00\xff")], None),
        (b"ts", b"explicit timestamp", [], EXPLICIT_TS),
        (b"ts0", b"timestamp zero", [("x", b"y")], 0),
        (b"\x00\x01\xfe\xff", bytes(range(256)), [], None),
        (b"big", os.urandom(50_000), [("big", b"1")], None),
    ]
    # enough compressible records to fill several batches
    for i in range(300):
        out.append((b"key-%d" % (i % 17), (b"compressible payload %05d " % i) * 8, [("i", b"%d" % i)], None))
    return out


def _send_and_read(target: Target, config: dict[str, Any]) -> tuple[list[Sent], list[Any], int, int]:
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 2, "batch.size": 16384, **config})
    sent = _records()
    before = time.time_ns() // 1_000_000
    futures = [producer.send(topic, value=v, key=k, headers=h or None, timestamp=ts, partition=0)
               for k, v, h, ts in sent]
    producer.flush(15)
    after = time.time_ns() // 1_000_000
    metadata = [f.result(0) for f in futures]
    assert [m.offset for m in metadata] == list(range(len(sent)))
    records = consume_all(target.bootstrap, topic, expected_count=len(sent), timeout=20)
    assert len(records) == len(sent)
    return sent, records, before, after


def _check(sent: list[Sent], records: list[Any], before: int, after: int) -> None:
    for i, ((key, value, headers, ts), got) in enumerate(zip(sent, records, strict=True)):
        assert got.partition == 0
        assert got.offset == i
        assert got.key == key, f"record {i}"
        assert got.value == value, f"record {i}"
        assert got.headers == headers, f"record {i}"
        if ts is not None:
            assert got.timestamp == ts, f"record {i}"
        else:
            assert before <= got.timestamp <= after, f"record {i}: {got.timestamp} not in [{before}, {after}]"
        assert got.timestamp_type == 1  # CreateTime


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_content_round_trip(target: Target, codec: str) -> None:
    sent, records, before, after = _send_and_read(target, {"compression.type": codec})
    _check(sent, records, before, after)
    metrics = target.producers[0].metrics()
    if codec == "none":
        assert metrics["compression-rate-avg"] == pytest.approx(1.0, abs=0.02)
    else:
        # the repetitive payloads must really have been compressed on the wire
        assert metrics["compression-rate-avg"] < 0.6, metrics["compression-rate-avg"]


@pytest.mark.parametrize("codec", ["snappy", "lz4"])
def test_compressed_batches_take_records_past_twice_their_limit(broker_target: Target, codec: str) -> None:
    """Compressible records: once the topic's ratio estimate has crept below 1/2 (Java's
    ``CompressionRatioEstimator`` steps), a batch holds more than twice batch.size of records; what passes
    that is compressed as it comes (``RecordBatchBuilder._spill``), and the batch fills by what its records
    really compress to. Apache Kafka decompresses every batch to validate it; confluent-kafka reads every
    record back in order."""
    topic = broker_target.topic(1)
    producer = broker_target.producer({"linger.ms": 20, "batch.size": 16384, "compression.type": codec})
    letters = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    payloads = [bytes(letters[(i * 7 + j * j) % 26] for j in range(60 + 10 * i)) for i in range(8)]
    sent = [(b"key-%d" % (i % 1000), payloads[i % 8]) for i in range(120_000)]
    metrics = producer.metrics_registry
    for part in (sent[:60_000], sent[60_000:]):
        batches, records = metrics.batches_sent, metrics.records_in_requests
        for key, value in part:
            producer.send(topic, value=value, key=key, partition=0)
        producer.flush(60)
    per_batch = (metrics.records_in_requests - records) / (metrics.batches_sent - batches)
    # a batch without spills held at most 2 x 16,384 bytes of these ~110-byte records: ~300
    assert per_batch > 600, per_batch
    got = consume_all(broker_target.bootstrap, topic, expected_count=len(sent), timeout=60)
    assert [(r.key, r.value) for r in got] == sent


@pytest.mark.parametrize(("codec", "level_key", "level"), [
    ("gzip", "compression.gzip.level", 1),
    ("gzip", "compression.gzip.level", 9),
    ("lz4", "compression.lz4.level", 1),
    ("zstd", "compression.zstd.level", 19),
    ("zstd", "compression.zstd.level", -5),
])
def test_compression_levels_round_trip(broker_target: Target, codec: str, level_key: str, level: int) -> None:
    sent, records, before, after = _send_and_read(broker_target, {"compression.type": codec, level_key: level})
    _check(sent, records, before, after)
    assert broker_target.producers[0].metrics()["compression-rate-avg"] < 0.6


def test_record_metadata_fields(broker_target: Target) -> None:
    """RecordMetadata carries topic, partition, offset, create timestamp and serialized sizes."""
    topic = broker_target.topic(2)
    producer = broker_target.producer()
    m1 = producer.send(topic, value=b"12345", key=b"abc", partition=1, timestamp=EXPLICIT_TS).result(10)
    m2 = producer.send(topic, value=None, key=None, partition=1, timestamp=EXPLICIT_TS + 1).result(10)
    assert (m1.topic, m1.partition, m1.offset, m1.timestamp) == (topic, 1, 0, EXPLICIT_TS)
    assert (m1.serialized_key_size, m1.serialized_value_size) == (3, 5)
    assert (m2.partition, m2.offset, m2.timestamp) == (1, 1, EXPLICIT_TS + 1)
    assert (m2.serialized_key_size, m2.serialized_value_size) == (-1, -1)


def test_batch_size_zero_sends_one_record_per_batch(mock_target: Target) -> None:
    topic = mock_target.topic(1)
    producer = mock_target.producer({"batch.size": 0, "linger.ms": 0})
    futures = [producer.send(topic, value=b"%d" % i) for i in range(30)]
    producer.flush(10)
    assert [f.result(0).offset for f in futures] == list(range(30))
    records = consume_all(mock_target.bootstrap, topic, expected_count=30, timeout=15)
    assert [r.value for r in records] == [b"%d" % i for i in range(30)]
    assert producer.metrics()["batch-size-avg"] < 100  # every batch holds one tiny record


class _OneHourAgo:
    """The system's monotonic time, and a wall clock an hour behind that moves 1 ms per reading."""

    def __init__(self) -> None:
        self.readings: list[int] = []
        self._start = SYSTEM_CLOCK.wall_ms() - 3_600_000

    def monotonic_ms(self) -> float:
        return SYSTEM_CLOCK.monotonic_ms()

    def wall_ms(self) -> int:
        self.readings.append(self._start + len(self.readings))
        return self.readings[-1]


def test_record_timestamps_come_from_the_injected_clock(mock_target: Target) -> None:
    """send() and send_arrow() stamp records without a timestamp from the producer's clock (with the C
    accelerator built too: records after the first of a batch would otherwise take the C send lane)."""
    import pyarrow as pa

    topic = mock_target.topic(1)
    clock = _OneHourAgo()
    producer = mock_target.producer({"linger.ms": 50}, clock=clock)
    futures = [producer.send(topic, value=b"%d" % i, key=b"k") for i in range(5)]
    futures.append(producer.send(topic, value=b"explicit", timestamp=EXPLICIT_TS))
    producer.send_arrow(topic, pa.record_batch({"value": pa.array([b"a1", b"a2"])})).wait(15)
    producer.flush(15)
    records = consume_all(mock_target.bootstrap, topic, expected_count=8, timeout=15)
    assert [r.value for r in records] == [b"0", b"1", b"2", b"3", b"4", b"explicit", b"a1", b"a2"]
    assert len(clock.readings) == 6  # one per send() without a timestamp, one per send_arrow call
    wanted = [*clock.readings[:5], EXPLICIT_TS, clock.readings[5], clock.readings[5]]
    assert [r.timestamp for r in records] == wanted
    assert [f.result(0).offset for f in futures] == list(range(6))
