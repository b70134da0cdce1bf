"""Per-partition order equals send order; callbacks run in send order, on their own, with (metadata, error).

Values carry a global sequence number, so the read-back (confluent-kafka) and the callbacks can be
checked against the send order per partition.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import pytest

from sparkafka import errors
from sparkafka.producer.future import RecordMetadata
from support.consume import consume_all
from support.mock_cluster import ApiKey

from .conftest import Target

pytestmark = pytest.mark.broker

N = 4000


@pytest.mark.parametrize("keyed", [False, True], ids=["sticky", "keyed"])
def test_partition_order_equals_send_order(target: Target, keyed: bool) -> None:
    topic = target.topic(4)
    producer = target.producer({"linger.ms": 1, "batch.size": 4096})
    calls: list[tuple[int, int, int]] = []  # (seq, partition, offset) in callback order

    def callback_for(seq: int) -> Any:
        def cb(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
            assert exc is None and metadata is not None
            calls.append((seq, metadata.partition, metadata.offset))
        return cb

    futures = []
    for seq in range(N):
        key = b"k%d" % (seq % 13) if keyed else None
        futures.append(producer.send(topic, value=b"%08d" % seq, key=key, callback=callback_for(seq)))
    producer.flush(20)

    # futures: offsets per partition increase in send order, without gaps
    by_partition: dict[int, list[int]] = defaultdict(list)
    for f in futures:
        m = f.result(0)
        by_partition[m.partition].append(m.offset)
    # seen once in CI (mock, sticky): all 4,000 records in one partition; say what the producer knew then
    info = producer._accumulator._topics._map.get(topic)
    assert len(by_partition) >= 2, (
        {p: len(o) for p, o in by_partition.items()}, producer._metadata.fetch().available_partitions(topic),
        producer._metadata.fetch().partition_count(topic), None if info is None else info.partitioner.load_stats)
    for partition, offsets in by_partition.items():
        assert offsets == list(range(len(offsets))), f"partition {partition}"

    # callbacks: every record once; per partition in send order
    assert sorted(seq for seq, _, _ in calls) == list(range(N))
    seqs_per_partition: dict[int, list[int]] = defaultdict(list)
    for seq, partition, _offset in calls:
        seqs_per_partition[partition].append(seq)
    for partition, seqs in seqs_per_partition.items():
        assert seqs == sorted(seqs), f"callbacks of partition {partition} out of send order"

    # the broker's log: per partition, values in send order
    records = consume_all(target.bootstrap, topic, expected_count=N, timeout=30)
    assert len(records) == N
    logged: dict[int, list[int]] = defaultdict(list)
    for r in records:
        assert r.value is not None
        logged[r.partition].append(int(r.value))
    assert sorted(s for seqs in logged.values() for s in seqs) == list(range(N))
    for partition, seqs in logged.items():
        assert seqs == seqs_per_partition[partition], f"partition {partition}"
    if keyed:  # the same key always went to the same partition
        partition_of_key: dict[int, set[int]] = defaultdict(set)
        for seq, partition, _ in calls:
            partition_of_key[seq % 13].add(partition)
        assert all(len(p) == 1 for p in partition_of_key.values())


def test_callbacks_run_without_polling(target: Target) -> None:
    """No flush(), no result(): the I/O thread completes the record and calls back by itself."""
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    done = threading.Event()
    got: list[tuple[object, object, str]] = []

    def cb(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        got.append((metadata, exc, threading.current_thread().name))
        done.set()

    producer.send(topic, value=b"v", key=b"k", callback=cb)
    assert done.wait(15), "the callback never ran"
    (metadata, exc, thread_name), = got
    assert exc is None
    assert isinstance(metadata, RecordMetadata)
    assert (metadata.topic, metadata.partition, metadata.offset) == (topic, 0, 0)
    assert thread_name != threading.current_thread().name


def test_failure_callback_signature(mock_target: Target) -> None:
    """A failed record calls back with (metadata: its partition, -1 elsewhere, as Java; typed error); one
    raising callback does not stop the others."""
    assert mock_target.mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 50, "retries": 0, "enable.idempotence": False})
    producer.partitions_for(topic)
    mock_target.mock.push_request_errors(ApiKey.PRODUCE, [errors.TOPIC_AUTHORIZATION_FAILED])
    got: list[tuple[object, object]] = []

    def bad(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        got.append((metadata, exc))
        raise RuntimeError("user callback bug")

    def good(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        got.append((metadata, exc))

    f1 = producer.send(topic, value=b"a", callback=bad)
    f2 = producer.send(topic, value=b"b", callback=good)
    producer.flush(10)
    assert len(got) == 2
    for metadata, exc in got:
        assert metadata == RecordMetadata(topic, 0, -1, -1, -1, -1)  # Java: partition known, the rest -1
        assert isinstance(exc, errors.BrokerError)
        assert exc.code == errors.TOPIC_AUTHORIZATION_FAILED
        assert topic in str(exc)
    for f in (f1, f2):
        with pytest.raises(errors.BrokerError):
            f.result(0)
    # the producer still works afterwards
    assert producer.send(topic, value=b"c").result(10).offset == 0
