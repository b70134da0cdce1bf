"""Thousands of partitions in little ``buffer.memory``: batches take pool memory as they fill
(``producer/buffer_pool.py``), so memory goes to records instead of empty ``batch.size`` buffers.

With ``batch.size`` for every new batch (Java's ``RecordAccumulator``), 8 MiB holds 512 batches: keyed
records over 2,000 partitions exhaust it after a few hundred records, the Sender then sends everything,
and batches leave with about one record. Here every record comes back once, in order per partition
(confluent-kafka's consumer reads them), the batches hold many records, and the memory all comes back.
Runs with the accelerator and without it (``SPARKAFKA_NO_ACCEL=1``, listed in the Makefile)."""

from __future__ import annotations

from collections import defaultdict

import pytest

from support.consume import consume_all

from .conftest import Target

pytestmark = pytest.mark.broker

PARTITIONS = 2000
MEMORY = 8 * 1024 * 1024
RECORDS = 40_000


def test_keyed_records_over_thousands_of_partitions_batch_well_in_little_memory(mock_target: Target) -> None:
    topic = mock_target.topic(PARTITIONS)
    producer = mock_target.producer({"buffer.memory": MEMORY, "batch.size": 16384, "linger.ms": 1000,
                                     "enable.idempotence": True, "acks": "all"})
    futures = []
    for seq in range(RECORDS):
        key = b"key-%d" % (seq * 7919 % 100_003)
        futures.append(producer.send(topic, value=b"%08d" % seq + b"x" * 92, key=key))
    producer.flush(60)
    sent: dict[int, list[int]] = defaultdict(list)
    for seq, future in enumerate(futures):
        sent[future.result(0).partition].append(seq)
    assert len(sent) > PARTITIONS * 9 // 10

    metrics = producer.metrics_registry
    accumulator = producer._accumulator
    records_per_batch = metrics.records_in_requests / metrics.batches_sent
    assert metrics.records_in_requests == RECORDS  # no retries, no duplicates sent
    assert records_per_batch > 4, f"{records_per_batch:.2f} records per batch"
    assert accumulator.batches_grown > 0
    assert accumulator.pool.available_memory() == MEMORY  # every byte came back

    records = consume_all(mock_target.bootstrap, topic, expected_count=RECORDS, timeout=60)
    assert len(records) == RECORDS
    logged: dict[int, list[int]] = defaultdict(list)
    for record in records:
        assert record.value is not None
        logged[record.partition].append(int(record.value[:8]))
    assert logged == sent  # no loss, no duplicates, per-partition send order
