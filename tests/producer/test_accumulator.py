"""RecordAccumulator with a manual clock and a fake cluster: append, every ready condition, drain,
expiry, retries, splits, flush, abort, and the buffer memory coming back in full."""

from __future__ import annotations

import math
import random
import threading
import time
from typing import Any

import pytest

from producer.fakes import FakeCluster, FakeTransactionManager
from sparkafka._clock import ManualClock
from sparkafka.errors import ProducerClosedError
from sparkafka.net.backoff import ExponentialBackoff
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.buffer_pool import BufferPool
from sparkafka.producer.future import RecordMetadata
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.record import decode_batch
from sparkafka.record.builder import estimate_batch_size_upper_bound

T = "t"
VALUE = b"v" * 50


def make(clock: ManualClock | None = None, **kwargs: Any) -> RecordAccumulator:
    options: dict[str, Any] = dict(batch_size=1024, buffer_memory=64 * 1024, linger_ms=10,
                                   retry_backoff_ms=100, retry_backoff_max_ms=1000,
                                   delivery_timeout_ms=5000)
    options.update(kwargs)
    return RecordAccumulator(clock=clock or ManualClock(), **options)


def append(acc: RecordAccumulator, cluster: FakeCluster, partition: int, value: bytes = VALUE,
           callback: Any = None, topic: str = T, key: bytes | None = None) -> Any:
    now = acc._clock.monotonic_ms()
    return acc.append(topic, partition, 1_700_000_000_000, key, value, None, callback, 1000, now, cluster)


def now_of(acc: RecordAccumulator) -> float:
    return acc._clock.monotonic_ms()


def complete_all(acc: RecordAccumulator, batches: list[ProducerBatch], base: int = 0) -> None:
    for batch in batches:
        batch.done(base, -1)
        acc.deallocate(batch)


# ------------------------------------------------------------------------------------ append

def test_append_fills_the_last_batch_then_starts_a_new_one() -> None:
    acc = make(batch_size=300)
    cluster = FakeCluster.single_node()
    first = append(acc, cluster, 0)
    assert first.new_batch_created and not first.batch_is_full and first.partition == 0
    second = append(acc, cluster, 0)
    assert not second.new_batch_created
    results = [append(acc, cluster, 0) for _ in range(5)]
    assert any(r.new_batch_created for r in results)
    assert results[-1].batch_is_full  # more than one batch in the deque
    dq = acc.get_deque((T, 0))
    assert dq is not None and len(dq) >= 2
    assert dq[0].is_full()  # closed for appends when it ran out of room
    assert acc.records_appended == 7 and acc.batches_created == len(dq)
    assert [f.future.relative_offset for f in [first, second]] == [0, 1]


def test_record_larger_than_batch_size_gets_its_own_batch() -> None:
    acc = make(batch_size=100)
    cluster = FakeCluster.single_node()
    result = append(acc, cluster, 0, value=b"x" * 500)
    assert result.new_batch_created
    batch = acc.get_deque((T, 0))[0]  # type: ignore[index]
    assert batch.initial_capacity >= 500 + 61  # sized for the record, not batch.size
    # As in Java the buffer is the record's upper-bound estimate (only a tiny record would fit in
    # the slack): another large record starts another batch.
    second = append(acc, cluster, 0, value=b"z" * 500)
    assert second.new_batch_created and second.batch_is_full
    assert acc.pool.available_memory() == 64 * 1024 - 2 * batch.initial_capacity


def test_append_after_close_raises() -> None:
    acc = make()
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0)
    acc.close()
    with pytest.raises(ProducerClosedError):
        append(acc, cluster, 0)
    with pytest.raises(ProducerClosedError):
        append(acc, cluster, 1)  # new partition: fails at the allocation


def test_abort_on_new_batch_returns_without_appending() -> None:
    acc = make()
    cluster = FakeCluster.single_node()
    result = acc.append(T, 0, 0, None, VALUE, None, None, 1000, 0.0, cluster, abort_on_new_batch=True)
    assert result.abort_for_new_batch and result.future is None
    assert not acc.has_incomplete() and acc.pool.available_memory() == 64 * 1024
    append(acc, cluster, 0)
    again = acc.append(T, 0, 0, None, VALUE, None, None, 1000, 0.0, cluster, abort_on_new_batch=True)
    assert not again.abort_for_new_batch and again.future is not None  # fits the existing batch


def test_double_checked_allocation_returns_the_unused_buffer() -> None:
    clock = ManualClock()
    cluster = FakeCluster.single_node()

    class RacingPool(BufferPool):
        """While the first appender is outside the lock allocating, another append creates the batch."""

        raced = False

        def allocate(self, size: int, max_block_ms: float, least: int = 0) -> bytearray:
            buffer = super().allocate(size, max_block_ms, least)
            if not RacingPool.raced:
                RacingPool.raced = True
                racer = threading.Thread(target=lambda: append(acc, cluster, 0))
                racer.start()
                racer.join()
            return buffer

    pool = RacingPool(64 * 1024, 1024, clock)
    acc = make(clock, buffer_pool=pool)
    result = append(acc, cluster, 0)
    assert not result.new_batch_created  # appended to the racer's batch
    dq = acc.get_deque((T, 0))
    assert dq is not None and len(dq) == 1 and dq[0].record_count == 2
    assert pool.available_memory() == 64 * 1024 - 1024  # our buffer went back
    complete_all(acc, list(dq))
    assert pool.available_memory() == 64 * 1024


def test_sticky_partitioner_stays_until_batch_size_then_switches() -> None:
    draws = iter([1, 2, 0, 1, 2])
    acc = make(batch_size=400, random_source=lambda: next(draws))
    cluster = FakeCluster.single_node(T, 3)
    partitions = [append(acc, cluster, -1, value=b"x" * 50).partition for _ in range(12)]
    first_switch = partitions.index(2)
    assert partitions[:first_switch] == [1] * first_switch
    queued = acc.get_deque((T, 1))
    assert queued is not None
    produced = sum(len(b.builder.records) for b in queued)
    assert produced == first_switch
    # The switch happened when the batch on partition 1 could take no more (>= batch.size produced).
    assert acc.get_deque((T, 1))[-1].is_full()  # type: ignore[index]
    assert set(partitions) <= {0, 1, 2}


# ------------------------------------------------------------------------------------ ready

def ready_nodes(acc: RecordAccumulator, cluster: FakeCluster) -> set[int]:
    return acc.ready(cluster, now_of(acc)).ready_nodes


def test_ready_after_linger() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=10)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0)
    result = acc.ready(cluster, now_of(acc))
    assert result.ready_nodes == set() and result.next_ready_check_delay_ms == 10
    clock.advance(4)
    assert acc.ready(cluster, now_of(acc)).next_ready_check_delay_ms == 6
    clock.advance(6)
    assert ready_nodes(acc, cluster) == {1}


def test_nothing_queued_means_no_delay_limit() -> None:
    acc = make()
    result = acc.ready(FakeCluster.single_node(), 0)
    assert result == (set(), math.inf, set())


def test_ready_when_full() -> None:
    acc = make(batch_size=200, linger_ms=10_000)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0, value=b"x" * 100)
    assert ready_nodes(acc, cluster) == set()
    append(acc, cluster, 0, value=b"x" * 100)  # does not fit: second batch, the first is full
    assert ready_nodes(acc, cluster) == {1}


def test_ready_when_memory_is_exhausted() -> None:
    clock = ManualClock()
    acc = make(clock, batch_size=1024, buffer_memory=2048, linger_ms=10_000)
    cluster = FakeCluster.single_node()
    # records that need a whole batch.size buffer each (smaller ones get short buffers under pressure)
    whole = next(b"v" * n for n in range(2000) if estimate_batch_size_upper_bound(None, b"v" * n, None) == 1024)
    append(acc, cluster, 0, value=whole)
    append(acc, cluster, 1, value=whole)
    assert ready_nodes(acc, cluster) == set()
    blocked: list[BaseException] = []

    def appender() -> None:
        try:
            acc.append(T, 2, 0, None, whole, None, None, 10_000, 0.0, cluster)
        except BaseException as exc:
            blocked.append(exc)

    t = threading.Thread(target=appender)
    t.start()
    deadline = time.monotonic() + 5
    while acc.pool.queued() == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert ready_nodes(acc, cluster) == {1}
    acc.close()  # wakes the blocked appender
    t.join()
    assert isinstance(blocked[0], ProducerClosedError)


def test_ready_when_closed() -> None:
    acc = make(linger_ms=10_000)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0)
    assert ready_nodes(acc, cluster) == set()
    acc.close()
    assert ready_nodes(acc, cluster) == {1}


def test_ready_during_flush_and_flush_waits_for_older_batches() -> None:
    acc = make(linger_ms=10_000)
    cluster = FakeCluster.single_node()
    future = append(acc, cluster, 0).future
    assert ready_nodes(acc, cluster) == set()
    acc.begin_flush()
    assert acc.flush_in_progress()
    assert ready_nodes(acc, cluster) == {1}
    drained = acc.drain(cluster, {1}, 1 << 20, now_of(acc))[1]
    timer = threading.Timer(0.02, lambda: complete_all(acc, drained, 5))
    timer.start()
    assert acc.await_flush_completion(timeout=10)
    assert future.done() and future.result().offset == 5
    assert not acc.flush_in_progress()
    assert ready_nodes(acc, cluster) == set()


def test_flush_timeout_returns_false() -> None:
    acc = make()
    append(acc, FakeCluster.single_node(), 0)
    acc.begin_flush()
    assert not acc.await_flush_completion(timeout=0.01)
    assert not acc.flush_in_progress()


def test_ready_when_transaction_completing() -> None:
    tm = FakeTransactionManager()
    acc = make(linger_ms=10_000, transaction_manager=tm)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0)
    assert ready_nodes(acc, cluster) == set()
    tm.completing = True
    assert ready_nodes(acc, cluster) == {1}


def test_muted_partitions_are_not_ready_nor_drained() -> None:
    acc = make(linger_ms=0)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0)
    acc.mute((T, 0))
    assert acc.is_muted((T, 0))
    assert ready_nodes(acc, cluster) == set()
    assert acc.drain(cluster, {1}, 1 << 20, now_of(acc)) == {1: []}
    acc.unmute((T, 0))
    assert ready_nodes(acc, cluster) == {1}


def test_unknown_leader_reported() -> None:
    acc = make(linger_ms=0)
    cluster = FakeCluster({(T, 0): None, (T, 1): 1})
    append(acc, cluster, 0)
    result = acc.ready(cluster, now_of(acc))
    assert result.ready_nodes == set() and result.unknown_leader_topics == {T}


def test_retry_backoff_with_jitter_bounds() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=1000)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0)
    batch = acc.drain(cluster, {1}, 1 << 20, now_of(acc))[1][0]
    acc.reenqueue(batch, now_of(acc))
    assert 80 <= batch.retry_backoff_ms <= 120
    clock.advance(79)
    result = acc.ready(cluster, now_of(acc))
    assert result.ready_nodes == set()
    assert 0 < result.next_ready_check_delay_ms <= 41
    assert acc.drain(cluster, {1}, 1 << 20, now_of(acc)) == {1: []}  # backing off: not drained
    clock.advance(42)
    assert ready_nodes(acc, cluster) == {1}
    assert acc.drain(cluster, {1}, 1 << 20, now_of(acc))[1] == [batch]
    acc.reenqueue(batch, now_of(acc))  # second retry: 200 +-20%
    assert 160 <= batch.retry_backoff_ms <= 240


def test_retry_backoff_values() -> None:
    """retry.backoff.ms=100, retry.backoff.max.ms=1000: 100 * 2**n, +-20%, capped."""
    backoff = ExponentialBackoff(100, 1000, multiplier=2, jitter=0.2, rng=random.Random(3))
    for attempts, (low, high) in enumerate([(80, 120), (160, 240), (320, 480), (640, 960)]):
        samples = [backoff.backoff(attempts) for _ in range(200)]
        assert low <= min(samples) and max(samples) <= high
        assert max(samples) - min(samples) > (high - low) / 4  # there is jitter
    assert all(backoff.backoff(n) <= 1000 for n in (4, 10, 50))
    assert ExponentialBackoff(100, 100, jitter=0.2).backoff(5) == 100  # max == initial: constant


def test_leader_epoch_change_skips_backoff() -> None:
    clock = ManualClock()
    acc = make(clock, linger_ms=0)
    cluster = FakeCluster({(T, 0): 1}, epochs={(T, 0): 5})
    append(acc, cluster, 0)
    batch = acc.drain(cluster, {1}, 1 << 20, now_of(acc))[1][0]
    acc.reenqueue(batch, now_of(acc))
    clock.advance(1)
    assert ready_nodes(acc, cluster) == set()
    moved = FakeCluster({(T, 0): 2}, epochs={(T, 0): 6})
    assert ready_nodes(acc, moved) == {2}
    assert acc.drain(moved, {2}, 1 << 20, now_of(acc))[2] == [batch]


def test_adaptive_load_stats_published_per_topic() -> None:
    acc = make(batch_size=100, linger_ms=10_000)
    cluster = FakeCluster.single_node(T, 3)
    for partition, count in ((0, 1), (1, 3), (2, 2)):
        for _ in range(count):
            append(acc, cluster, partition, value=b"x" * 80)  # one batch per record
    acc.ready(cluster, now_of(acc))
    assert acc.built_in_partitioner(T).load_stats == ([3, 4, 6], [0, 1, 2], 3)


def test_load_stats_list_partitions_by_id_whatever_order_their_queues_were_created() -> None:
    # Java iterates a topic's batches HashMap, whose small Integer keys come out in ascending order;
    # the weighted table must follow it for the same random value to pick the same partition.
    acc = make(batch_size=100, linger_ms=10_000)
    cluster = FakeCluster.single_node(T, 3)
    for partition, count in ((2, 2), (0, 1), (1, 3)):
        for _ in range(count):
            append(acc, cluster, partition, value=b"x" * 80)
    acc.ready(cluster, now_of(acc))
    assert acc.built_in_partitioner(T).load_stats == ([3, 4, 6], [0, 1, 2], 3)


def test_no_load_stats_until_every_partition_has_a_queue_or_when_disabled() -> None:
    acc = make(batch_size=100)
    cluster = FakeCluster.single_node(T, 3)
    append(acc, cluster, 0, value=b"x" * 80)
    append(acc, cluster, 1, value=b"x" * 80)
    append(acc, cluster, 1, value=b"x" * 80)
    acc.ready(cluster, now_of(acc))
    assert acc.built_in_partitioner(T).load_stats is None
    off = make(batch_size=100, adaptive_partitioning=False)
    for p, n in ((0, 1), (1, 2), (2, 3)):
        for _ in range(n):
            append(off, cluster, p, value=b"x" * 80)
    off.ready(cluster, now_of(off))
    assert off.built_in_partitioner(T).load_stats is None


def test_availability_timeout_excludes_slow_node_partitions() -> None:
    clock = ManualClock()
    acc = make(clock, batch_size=100, linger_ms=10_000, availability_timeout_ms=50)
    cluster = FakeCluster({(T, 0): 1, (T, 1): 2, (T, 2): 1})
    for p in range(3):
        append(acc, cluster, p, value=b"x" * 80)
    acc.update_node_latency_stats(2, now_of(acc), True)
    clock.advance(51)
    acc.update_node_latency_stats(2, now_of(acc), False)  # node 2 had data but could not be drained
    acc.ready(cluster, now_of(acc))
    stats = acc.built_in_partitioner(T).load_stats
    assert stats is not None and stats[2] == 2 and stats[1][:2] == [0, 2]
    latency = acc.node_latency_stats(2)
    assert latency is not None and latency.ready_time_ms - latency.drain_time_ms == 51


# ------------------------------------------------------------------------------------ drain

def test_drain_round_robin_and_index_rotation() -> None:
    acc = make(batch_size=1024, linger_ms=0)
    cluster = FakeCluster.single_node(T, 3)
    for p in range(3):
        for _ in range(2):
            append(acc, cluster, p, value=b"x" * 600)  # one batch per record: two batches each
    one_batch = acc.get_deque((T, 0))[0].estimated_size_in_bytes  # type: ignore[index]
    order = []
    for _ in range(6):
        drained = acc.drain(cluster, {1}, one_batch, now_of(acc))[1]
        assert len(drained) == 1
        order.append(drained[0].tp[1])
    # The next drain starts at the partition that stopped the previous one.
    assert order == [0, 1, 2, 0, 1, 2]
    # The last drain took p2 and then examined p0 and p1 (empty): the index rests on p1.
    assert acc._drain_index[1] == 1
    assert not acc.has_undrained()



def test_full_only_drain_takes_full_heads_and_says_when_none_may_be_left() -> None:
    """``drain(full_only=True)`` (the Sender's extra requests while full batches are queued) takes only heads
    with a batch behind them; ``may_have_full_batches`` tells whether the last drain left such a head, so the
    Sender does not scan every partition again for nothing. After a full-only drain the next one starts at
    the first open head after the last batch taken."""
    acc = make(batch_size=1024, linger_ms=1000)
    cluster = FakeCluster.single_node(T, 4)
    for p, batches in ((0, 2), (1, 1), (2, 3), (3, 1)):
        for _ in range(batches):
            append(acc, cluster, p, value=b"x" * 600)  # one batch per record
    drained = acc.drain(cluster, {1}, 1 << 20, now_of(acc), full_only=True)[1]
    assert [b.tp[1] for b in drained] == [0, 2]
    assert acc.may_have_full_batches(1)  # partition 2 still has a full head (2 batches left)
    assert [b.tp[1] for b in acc.drain(cluster, {1}, 1 << 20, now_of(acc), full_only=True)[1]] == [2]
    assert not acc.may_have_full_batches(1)  # every queue holds one open batch
    assert acc._drain_index[1] == 3
    assert acc.drain(cluster, {1}, 1 << 20, now_of(acc), full_only=True)[1] == []
    assert acc._drain_index[1] == 3  # nothing taken: the index stays
    # a whole drain (the node was found ready) takes every head, starting at partition 3
    assert [b.tp[1] for b in acc.drain(cluster, {1}, 1 << 20, now_of(acc))[1]] == [3, 0, 1, 2]

def test_drain_collects_up_to_max_size_and_first_batch_always_goes() -> None:
    acc = make(batch_size=1024, linger_ms=0)
    cluster = FakeCluster.single_node(T, 3)
    for p in range(3):
        append(acc, cluster, p, value=b"x" * 600)
    size = acc.get_deque((T, 0))[0].estimated_size_in_bytes  # type: ignore[index]
    drained = acc.drain(cluster, {1}, 2 * size, now_of(acc))[1]
    assert [b.tp[1] for b in drained] == [0, 1]
    assert acc.drain(cluster, {1}, 10, now_of(acc))[1][0].tp == (T, 2)  # bigger than max_size, still sent
    for batch in drained:
        assert batch.is_closed() and batch.drained_ms == now_of(acc)
        assert decode_batch(bytes(batch.records_bytes)).records[0].value == b"x" * 600


def test_drain_only_takes_the_nodes_partitions() -> None:
    acc = make(linger_ms=0)
    cluster = FakeCluster({(T, 0): 1, (T, 1): 2})
    append(acc, cluster, 0)
    append(acc, cluster, 1)
    drained = acc.drain(cluster, {2}, 1 << 20, now_of(acc))
    assert list(drained) == [2] and [b.tp for b in drained[2]] == [(T, 1)]
    assert acc.has_undrained()


def test_drain_asks_the_transaction_manager() -> None:
    tm = FakeTransactionManager()
    acc = make(linger_ms=0, transaction_manager=tm)
    cluster = FakeCluster.single_node(T, 1)
    for _ in range(2):
        append(acc, cluster, 0, value=b"x" * 600)  # two batches
    tm.has_pid = False
    assert acc.drain(cluster, {1}, 1 << 20, 0)[1] == []
    tm.has_pid, tm.allowed = True, False
    assert acc.drain(cluster, {1}, 1 << 20, 0)[1] == []
    tm.allowed, tm.stop = True, True
    assert acc.drain(cluster, {1}, 1 << 20, 0)[1] == []
    tm.stop = False
    first = acc.drain(cluster, {1}, 1 << 20, 0)[1]
    assert [b.base_sequence for b in first] == [0]
    assert decode_batch(bytes(first[0].records_bytes)).producer_id == 1000
    second = acc.drain(cluster, {1}, 1 << 20, 0)[1]
    assert [b.base_sequence for b in second] == [first[0].record_count]
    now = now_of(acc)
    acc.reenqueue(first[0], now)  # a retry keeps its sequence
    assert acc.drain(cluster, {1}, 1 << 20, now + 1)[1] == []  # backing off
    again = acc.drain(cluster, {1}, 1 << 20, now + 1000)[1]
    assert again == first and again[0].base_sequence == 0 and tm.in_flight == first + second


# ------------------------------------------------------------------------------------ expiry, retries, split

def test_expiry_at_delivery_timeout_from_creation() -> None:
    clock = ManualClock()
    acc = make(clock, batch_size=100, delivery_timeout_ms=1000)
    cluster = FakeCluster.single_node()
    append(acc, cluster, 0, value=b"x" * 80)
    clock.advance(500)
    append(acc, cluster, 0, value=b"x" * 80)  # a second, younger batch
    clock.advance(499)
    assert acc.expired_batches(now_of(acc)) == []
    assert acc.next_batch_expiry_time_ms == 1_000_000.0 + 1000
    clock.advance(1)
    expired = acc.expired_batches(now_of(acc))
    assert len(expired) == 1 and expired[0].created_ms == 1_000_000.0
    assert len(acc.get_deque((T, 0))) == 1  # type: ignore[arg-type]
    clock.advance(500)
    assert len(acc.expired_batches(now_of(acc))) == 1


def test_reenqueue_in_sequence_order() -> None:
    acc = make(batch_size=100, linger_ms=0)
    cluster = FakeCluster.single_node(T, 1)
    for _ in range(4):
        append(acc, cluster, 0, value=b"x" * 80)
    batches = [acc.drain(cluster, {1}, 1, 0)[1][0] for _ in range(3)]
    for seq, batch in zip((0, 5, 10), batches):
        batch.set_producer_state(1, 0, seq, False)
    for batch in (batches[2], batches[0], batches[1]):
        acc.reenqueue(batch, 0)
    dq = acc.get_deque((T, 0))
    assert dq is not None
    assert [b.base_sequence for b in dq] == [0, 5, 10, -1]  # the never-sent batch stays behind


def test_reenqueue_without_sequence_goes_to_the_head() -> None:
    acc = make(batch_size=100, linger_ms=0)
    cluster = FakeCluster.single_node(T, 1)
    append(acc, cluster, 0, value=b"x" * 80)
    append(acc, cluster, 0, value=b"x" * 80)
    first = acc.drain(cluster, {1}, 1, 0)[1][0]
    acc.reenqueue(first, 0)
    assert acc.get_deque((T, 0))[0] is first and first.attempts == 1  # type: ignore[index]


def test_split_and_reenqueue() -> None:
    acc = make(batch_size=4096, linger_ms=0)
    cluster = FakeCluster.single_node(T, 1)
    seen: list[int] = []
    futures = [append(acc, cluster, 0, value=b"x" * 300,
                      callback=lambda m, e, i=i: seen.append(i)).future for i in range(10)]
    big = acc.drain(cluster, {1}, 1 << 20, 0)[1][0]
    big.set_producer_state(1, 0, 20, False)
    acc._batch_size = 1000  # the broker's limit turned out smaller than batch.size
    count = acc.split_and_reenqueue(big)
    acc.deallocate(big)
    assert count > 1
    dq = acc.get_deque((T, 0))
    assert dq is not None and len(dq) == count
    assert dq[0].base_sequence == 20 and all(not b.pooled for b in dq)
    parts = []
    while acc.has_undrained():
        parts += acc.drain(cluster, {1}, 1 << 20, 0)[1]
    offset = 0
    for part in parts:
        part.done(offset, -1)
        offset += part.record_count
        acc.deallocate(part)
    assert [f.result().offset for f in futures] == list(range(10))
    assert seen == list(range(10))
    assert not acc.has_incomplete()
    assert acc.pool.available_memory() == 64 * 1024


# ------------------------------------------------------------------------------------ completion and abort

def test_callbacks_in_append_order_and_no_leak() -> None:
    acc = make(batch_size=300, linger_ms=0)
    cluster = FakeCluster.single_node(T, 2)
    seen: list[tuple[int, RecordMetadata | None]] = []
    for i in range(12):
        append(acc, cluster, i % 2, callback=lambda m, e, i=i: seen.append((i, m)))
    drained = acc.drain(cluster, {1}, 1 << 20, 0)[1]
    while acc.has_undrained():
        drained += acc.drain(cluster, {1}, 1 << 20, 0)[1]
    next_offset = {0: 0, 1: 100}
    for batch in drained:
        batch.done(next_offset[batch.tp[1]], -1)
        next_offset[batch.tp[1]] += batch.record_count
        acc.deallocate(batch)
    assert len(drained) > 2  # several batches per partition
    per_partition = {p: [i for i, m in seen if m is not None and m.partition == p] for p in (0, 1)}
    assert per_partition == {0: [0, 2, 4, 6, 8, 10], 1: [1, 3, 5, 7, 9, 11]}
    assert [m.offset for _, m in seen if m is not None and m.partition == 0] == [0, 1, 2, 3, 4, 5]
    assert acc.pool.available_memory() == 64 * 1024 and acc.pool.free_size() > 0
    assert not acc.has_incomplete()
    acc.deallocate(drained[0])  # deallocating twice must not return the buffer twice
    assert acc.pool.available_memory() == 64 * 1024


def test_abort_incomplete_batches_fails_everything_and_frees_memory() -> None:
    acc = make(linger_ms=0)
    cluster = FakeCluster.single_node(T, 2)
    queued = append(acc, cluster, 0).future
    append(acc, cluster, 1)
    in_flight = acc.drain(cluster, {1}, 1, 0)[1][0]
    acc.close()
    acc.abort_incomplete_batches()
    assert isinstance(queued.exception(), ProducerClosedError)
    assert in_flight.final_state is not None
    assert not acc.has_incomplete() and not acc.has_undrained()
    assert acc.pool.available_memory() == 64 * 1024


def test_abort_undrained_batches_keeps_sent_ones() -> None:
    acc = make(linger_ms=0)
    cluster = FakeCluster.single_node(T, 2)
    append(acc, cluster, 0)
    unsent = append(acc, cluster, 1).future
    sent = acc.drain(cluster, {1}, 1, 0)[1][0]
    error = RuntimeError("transaction aborted")
    acc.abort_undrained_batches(error)
    assert unsent.exception() is error
    assert sent.final_state is None and acc.incomplete_batches() == [sent]
    assert not acc.has_undrained()


def test_queue_sizes_for_metrics() -> None:
    acc = make(batch_size=100)
    cluster = FakeCluster.single_node(T, 2)
    append(acc, cluster, 0, value=b"x" * 80)
    append(acc, cluster, 0, value=b"x" * 80)
    append(acc, cluster, 1, value=b"x" * 80)
    assert acc.queue_sizes() == {(T, 0): 2, (T, 1): 1}


# ------------------------------------------------------------------------------------ threads

def test_concurrent_appends_keep_per_thread_order_and_lose_nothing() -> None:
    acc = make(batch_size=2048, buffer_memory=1 << 20, linger_ms=0)
    cluster = FakeCluster.single_node(T, 3)
    per_thread = 1500

    def worker(thread_id: int) -> None:
        for i in range(per_thread):
            partition = -1 if i % 3 == 0 else i % 3
            value = b"%d:%d" % (thread_id, i)
            acc.append(T, partition, 0, None, value, None, None, 10_000, 0.0, cluster)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    batches: list[ProducerBatch] = []
    while acc.has_undrained():
        batches += acc.drain(cluster, {1}, 1 << 20, 0)[1]
    values: dict[int, list[tuple[int, int]]] = {0: [], 1: [], 2: []}
    for batch in batches:
        for record in decode_batch(bytes(batch.records_bytes)).records:
            tid, i = record.value.split(b":")  # type: ignore[union-attr]
            values[batch.tp[1]].append((int(tid), int(i)))
    assert sum(len(v) for v in values.values()) == 4 * per_thread
    for records in values.values():
        for tid in range(4):
            mine = [i for t, i in records if t == tid]
            assert mine == sorted(mine)
    complete_all(acc, batches)
    assert acc.pool.available_memory() == 1 << 20


def test_bulk_append_waits_for_memory_until_one_deadline() -> None:
    """append_tails: max.block.ms bounds the whole bulk call, not each allocation (10 batches' worth of
    rows, every allocation taking 100 ms of the 250 ms budget)."""
    import pyarrow as pa

    from sparkafka.errors import BufferExhaustedError
    from sparkafka.producer.arrow.tails import encode_tails, tail_buffers

    clock = ManualClock()
    waits: list[float] = []

    class SlowPool(BufferPool):
        def allocate(self, size: int, max_block_ms: float, least: int = 0) -> bytearray:
            waits.append(max_block_ms)
            clock.advance(100)
            if max_block_ms < 100:
                raise BufferExhaustedError(f"no memory within {max_block_ms} ms")
            return super().allocate(size, max_block_ms, least)

    acc = make(clock, buffer_pool=SlowPool(1 << 20, 1024, clock), batch_size=1024)
    tails = encode_tails(None, pa.array([b"x" * 100] * 100))
    offsets, data, first = tail_buffers(tails)
    segments, error = acc.append_tails(T, 0, offsets, data, first, first + 100, 0, clock.monotonic_ms() + 250,
                                       lambda: None)
    assert waits == [250, 150, 50]
    assert isinstance(error, BufferExhaustedError)
    assert [count for _, _, count in segments] == [8, 8]  # two 1 KB batches of ~110-byte records, then none
