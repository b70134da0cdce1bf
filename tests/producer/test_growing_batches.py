"""Batches that take pool memory as they fill (``producer/buffer_pool.py``, ``RecordAccumulator._grow``):
short buffers under memory pressure, growth without blocking, a refused growth closing the batch, the
memory coming back in full, and ``buffer.memory`` never exceeded with many partitions and little memory.
The same tests run with the C accelerator and without it (``SPARKAFKA_NO_ACCEL=1``, as ``make pytest``
runs tests/producer): the C append rule and the Python one must both refuse a record that would overflow
a short buffer."""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from typing import Any

import pytest

from producer.fakes import FakeCluster
from sparkafka._clock import ManualClock
from sparkafka.errors import BufferExhaustedError
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.buffer_pool import SHORT_BUFFER_DIVISOR
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.record import decode_batch
from sparkafka.record.builder import estimate_batch_size_upper_bound

T = "t"
TS = 1_700_000_000_000
VALUE = b"v" * 50
BATCH = 1024


def make(**kwargs: Any) -> RecordAccumulator:
    options: dict[str, Any] = dict(batch_size=BATCH, buffer_memory=4 * BATCH, linger_ms=10)
    options.update(kwargs)
    return RecordAccumulator(clock=ManualClock(), **options)


def send(acc: RecordAccumulator, cluster: FakeCluster, partition: int, value: bytes = VALUE,
         max_block_ms: float = 1000) -> Any:
    """What ``KafkaProducer.send`` does: the open-batch append first, the general one if it declines."""
    future = acc.append_open(T, partition, TS, None, value, None, cluster)
    if future is not None:
        return future
    return acc.append(T, partition, TS, None, value, None, None, max_block_ms, 0.0, cluster).future


def held_by_batches(acc: RecordAccumulator) -> int:
    return sum(b.capacity for b in acc.incomplete_batches() if b.pooled and b.buffer is not None)


def check_memory(acc: RecordAccumulator, elsewhere: int = 0) -> None:
    """The pool's books balance with what the batches hold (and ``elsewhere``, memory the test took),
    and no record lies outside pooled memory."""
    held = held_by_batches(acc)
    assert held + elsewhere + acc.pool.available_memory() == acc.pool.total_memory
    assert held <= acc.pool.total_memory
    for batch in acc.incomplete_batches():
        builder = batch.builder
        assert builder._buf is builder._buffer is batch.buffer
        assert batch.capacity == len(builder._buf)


def values(batch: ProducerBatch) -> list[bytes | None]:
    return [r.value for r in decode_batch(bytes(batch.close())).records]


def short_size(value: bytes = VALUE) -> int:
    return max(estimate_batch_size_upper_bound(None, value, None), BATCH // SHORT_BUFFER_DIVISOR)


def test_plenty_of_memory_gives_batch_size_buffers() -> None:
    acc = make(buffer_memory=64 * BATCH)
    cluster = FakeCluster.single_node()
    send(acc, cluster, 0)
    batch = acc.get_deque((T, 0))[0]  # type: ignore[index]
    assert batch.capacity == BATCH and not batch.builder.is_short()


def test_few_partitions_under_pressure_keep_batch_size_buffers() -> None:
    """The memory is nearly gone, but held by full batches of two partitions waiting for the Sender:
    one open batch per partition takes little of buffer.memory, so a new batch still gets batch.size
    (short buffers would only make every next batch smaller)."""
    acc = make(buffer_memory=8 * BATCH)  # 2 queues x batch.size x 2 = half of it: not more than half
    cluster = FakeCluster.single_node(partitions=2)
    for partition in (0, 1):
        while len(acc.get_deque((T, partition)) or ()) < 4:  # three full batches and one open
            send(acc, cluster, partition)
    assert acc.pool.available_memory() == 0
    for batch in [*acc.get_deque((T, 0)), *acc.get_deque((T, 1))]:  # type: ignore[misc]
        assert batch.capacity == BATCH and not batch.builder.is_short()
    check_memory(acc)


def test_short_buffer_under_pressure_grows_as_records_come() -> None:
    acc = make()  # 4 batches of memory: the first two take batch.size, then half is gone
    cluster = FakeCluster.single_node(partitions=3)
    send(acc, cluster, 0)
    send(acc, cluster, 1)
    assert acc.pool.available_memory() == 2 * BATCH
    sent = [b"%04d" % i + VALUE for i in range(40)]
    send(acc, cluster, 2, sent[0])
    dq = acc.get_deque((T, 2))
    assert dq is not None
    batch = dq[0]
    assert batch.capacity == short_size(sent[0]) and batch.builder.is_short()
    assert batch.builder._write_limit == BATCH  # it may still grow into a whole batch
    check_memory(acc)
    for value in sent[1:]:
        send(acc, cluster, 2, value)
        check_memory(acc)
        if len(dq) > 1:
            break
    assert acc.batches_grown >= 2 and acc.growths_refused == 0
    assert batch.capacity == BATCH and not batch.builder.is_short()  # grew up to batch.size, no further
    assert batch.is_full() and len(dq) == 2  # filled to batch.size like any batch
    assert batch.record_count > 12  # its short buffer alone held one
    assert values(batch) + values(dq[1]) == sent[:batch.record_count + dq[1].record_count]


def test_refused_growth_closes_the_batch_and_the_record_starts_the_next() -> None:
    acc = make()
    cluster = FakeCluster.single_node(partitions=3)
    send(acc, cluster, 0)
    send(acc, cluster, 1)
    send(acc, cluster, 2, b"first" + VALUE)
    dq = acc.get_deque((T, 2))
    assert dq is not None
    first = dq[0]
    short = first.capacity
    assert short < BATCH
    # someone else takes memory so that one more short buffer is left but no growth
    other = acc.pool.allocate(acc.pool.available_memory() - short, 0)
    sent = [b"first" + VALUE]
    while len(dq) == 1:
        value = b"%05d" % len(sent) + VALUE
        send(acc, cluster, 2, value)
        sent.append(value)
        check_memory(acc, len(other))
    assert acc.growths_refused == 1 and acc.batches_grown == 0
    assert first.is_full() and first.capacity == short  # closed for appends where it was
    second = dq[1]
    assert second.record_count == 1 and values(second) == [sent[-1]]  # the record went on, in order
    assert values(first) == sent[:-1]
    assert acc.pool.available_memory() == 0
    acc.pool.deallocate(other)


def test_growth_waits_its_turn_behind_callers_waiting_for_memory() -> None:
    acc = make()
    cluster = FakeCluster.single_node(partitions=3)
    send(acc, cluster, 0)
    send(acc, cluster, 1)
    send(acc, cluster, 2)
    dq = acc.get_deque((T, 2))
    assert dq is not None
    # a caller waits for more than is free (free memory is there, but it is queued first)
    outcome: list[BaseException | bytearray] = []

    def wait_for_memory() -> None:
        try:
            outcome.append(acc.pool.allocate(4 * BATCH, 10_000))
        except BaseException as exc:
            outcome.append(exc)

    waiter = threading.Thread(target=wait_for_memory)
    waiter.start()
    try:
        deadline = time.monotonic() + 5
        while acc.pool.queued() == 0 and time.monotonic() < deadline:
            time.sleep(0.001)
        assert acc.pool.queued() == 1 and acc.pool.available_memory() > 0
        while len(dq) == 1:
            acc.append(T, 2, TS, None, VALUE, None, None, 0, 0.0, cluster)
        assert acc.growths_refused == 1 and acc.batches_grown == 0
    finally:
        acc.close()  # wakes the waiter
        waiter.join(5)
    assert isinstance(outcome[0], BaseException)


@pytest.mark.parametrize("grown", [False, True], ids=["short", "grown"])
def test_deallocate_returns_what_the_batch_holds_now(grown: bool) -> None:
    acc = make()
    cluster = FakeCluster.single_node(partitions=3)
    for partition in range(3):
        send(acc, cluster, partition)
    dq = acc.get_deque((T, 2))
    assert dq is not None
    batch = dq[0]
    given = batch.capacity
    assert given < BATCH
    while grown and batch.capacity == given:
        send(acc, cluster, 2)
    assert (batch.capacity > given) == grown and batch.initial_capacity == given
    for batches in acc.drain(cluster, {1}, 1 << 20, 0.0).values():
        for drained in batches:
            drained.done(0, -1)
            acc.deallocate(drained)
    assert not acc.has_incomplete()
    assert acc.pool.available_memory() == 4 * BATCH


def test_many_partitions_in_little_memory_stay_bounded_and_batch_well() -> None:
    """1,000 partitions and 4 MiB (memory for 256 batch.size buffers; 6,000 partitions in 32 MiB is about
    as tight): with batch.size for every batch (Java's rule) the pool runs dry after 256 batches, about
    300 records, so every drain sends little more than one record per batch. Here a stand-in for the
    Sender sends everything whenever a record cannot get memory at once."""
    partitions = 1000
    memory = 256 * 16384
    acc = RecordAccumulator(clock=ManualClock(), batch_size=16384, buffer_memory=memory, linger_ms=5)
    cluster = FakeCluster.single_node(partitions=partitions)
    rng = random.Random(7)
    logged: dict[int, list[int]] = defaultdict(list)
    batches_sent = 0

    def send_everything() -> None:
        nonlocal batches_sent
        for batches in acc.drain(cluster, {1}, 1 << 40, 0.0).values():
            for batch in batches:
                logged[batch.tp[1]].extend(int((v or b"")[:8]) for v in values(batch))
                batch.done(0, -1)
                acc.deallocate(batch)
                batches_sent += 1

    records = 30_000
    sent: dict[int, list[int]] = defaultdict(list)
    for seq in range(records):
        partition = rng.randrange(partitions)
        value = b"%08d" % seq + b"x" * 92
        while True:
            try:
                send(acc, cluster, partition, value, max_block_ms=0)
                break
            except BufferExhaustedError:
                send_everything()
        sent[partition].append(seq)
        if seq % 500 == 0:
            check_memory(acc)
    check_memory(acc)
    while acc.has_incomplete():
        send_everything()
    assert acc.pool.available_memory() == memory
    assert logged == sent  # every record once, in send order per partition
    assert acc.batches_grown > 0
    assert records / batches_sent > 5, f"{records / batches_sent:.2f} records per batch"
