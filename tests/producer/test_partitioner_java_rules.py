"""The built-in (KIP-794) and round-robin partitioners checked against Java's exact rules.

Java references: ``BuiltInPartitioner``, ``RecordAccumulator.append``/``partitionChanged``/
``partitionReady`` (queue sizes for the cumulative frequency table, availability exclusion),
``KafkaProducer.partition``/``doSend`` and ``RoundRobinPartitioner``. The random source is injected so
that every choice is deterministic; each expected partition is worked out in the comments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import pytest

from producer.fakes import FakeCluster
from sparkafka._clock import ManualClock
from sparkafka._types import ClusterView
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.record.layout import RECORD_BATCH_OVERHEAD

VALUE = b"v" * 40
RECORD = 47
"""Encoded size of a keyless, headerless 40-byte-value record at offset/timestamp delta 0: length varint
(1) + attributes (1) + timestamp delta (1) + offset delta (1) + key -1 (1) + value length (1) + 40 +
header count (1)."""


def _random(values: list[int]) -> Callable[[], int]:
    it: Iterator[int] = iter(values)
    return lambda: next(it)


def _accumulator(batch_size: int, randoms: list[int], **kw: Any) -> RecordAccumulator:
    return RecordAccumulator(batch_size=batch_size, linger_ms=0, clock=ManualClock(),
                             random_source=_random(randoms), **kw)


def _send(acc: RecordAccumulator, cluster: ClusterView, partition: int = -1) -> int:
    result = acc.append("t", partition, 0, None, VALUE, None, None, 1000, 0, cluster)
    return result.partition


def test_sticky_switch_counts_batch_header_and_waits_for_a_full_batch() -> None:
    """batch.size 200: a batch takes 2 records (61 + 47 + 47 = 155; a third would make 202 > 200).

    Java counts ``appendedBytes`` = the new batch's whole estimate (header included) for a batch's
    first record and the growth after that: 108, 155 (batch closed by record 3, which starts batch 2 on
    the same partition: 155 < 200, no switch), 263 (>= 200 but batch 2 is open: switch disabled),
    310 (still open), then record 5 finds batch 2 full, ``partitionChanged`` completes the deferred
    switch and record 5 goes to the next partition (random 1 -> available[1 % 3])."""
    assert RECORD_BATCH_OVERHEAD == 61
    cluster = FakeCluster.single_node("t", 3)
    acc = _accumulator(200, [0, 1, 2])
    chosen = [_send(acc, cluster) for _ in range(5)]
    assert chosen == [0, 0, 0, 0, 1]
    part = acc.built_in_partitioner("t")
    info = part.peek_current_partition_info(cluster)
    assert (info.partition, info.produced_bytes) == (1, RECORD_BATCH_OVERHEAD + RECORD)
    sizes = acc.queue_sizes()
    assert [sizes[("t", 0)], sizes[("t", 1)]] == [2, 1]


def test_sticky_switch_at_twice_batch_size_even_if_the_batch_is_open() -> None:
    """A record larger than batch.size gets a batch of its own size that it does not fill; Java switches
    anyway once 2 x batch.size bytes were produced (100 -> 200): 61 + 158 = 219 >= 200."""
    cluster = FakeCluster.single_node("t", 3)
    acc = _accumulator(100, [2, 0])
    big = b"x" * 150
    first = acc.append("t", -1, 0, None, big, None, None, 1000, 0, cluster)
    assert first.partition == 2 and first.new_batch_created
    queue = acc.get_deque(("t", 2))
    assert queue is not None and not queue[-1].builder.is_full()
    assert acc.built_in_partitioner("t").current_partition == 0


def test_keyed_and_explicit_records_do_not_count_towards_the_sticky_switch() -> None:
    cluster = FakeCluster.single_node("t", 3)
    acc = _accumulator(200, [1, 2])
    assert _send(acc, cluster) == 1
    for _ in range(10):  # explicit partition 1: its bytes are not the sticky partitioner's
        _send(acc, cluster, partition=1)
    info = acc.built_in_partitioner("t").peek_current_partition_info(cluster)
    assert (info.partition, info.produced_bytes) == (1, RECORD_BATCH_OVERHEAD + RECORD)


def _fill_queues(acc: RecordAccumulator, cluster: ClusterView, sizes: dict[int, int]) -> None:
    """Give partition p ``sizes[p]`` batches (batch.size 1: every record opens a batch), in id order."""
    for p in sorted(sizes):
        for _ in range(sizes[p]):
            _send(acc, cluster, partition=p)


def test_weighted_choice_is_javas_cumulative_frequency_table() -> None:
    """Queue sizes 1, 4, 2 -> max + 1 = 5 -> weights 4, 1, 3 -> CFT 4, 5, 8; the partition is the first
    CFT entry strictly greater than ``random % 8`` (Java's binarySearch + 1 rule)."""
    cluster = FakeCluster.single_node("t", 3)
    acc = _accumulator(1, [3, 4, 5, 7, 8, 12, 2**31 - 1])
    _fill_queues(acc, cluster, {0: 1, 1: 4, 2: 2})
    acc.ready(cluster, 0)
    part = acc.built_in_partitioner("t")
    assert part.load_stats == ([4, 5, 8], [0, 1, 2], 3)
    assert part.load_stats_range_end() == 8
    # 3 -> 0, 4 -> 1 (equal to 4: next entry), 5 -> 2, 7 -> 2, 8 % 8 = 0 -> 0, 12 % 8 = 4 -> 1,
    # (2**31 - 1) % 8 = 7 -> 2
    assert [part.next_partition(cluster) for _ in range(7)] == [0, 1, 2, 2, 0, 1, 2]



def test_load_stats_follow_partition_ids_whatever_order_the_queues_were_made_in() -> None:
    """Queues made 2, 0, 1 (keyed records arrive in any order): the table is still built in partition-id
    order, as Java's HashMap of Integer keys iterates it, also after a new queue appears."""
    cluster = FakeCluster.single_node("t", 4)
    acc = _accumulator(1, [0])
    for p, n in ((2, 2), (0, 1), (1, 4)):
        for _ in range(n):
            _send(acc, cluster, partition=p)
    acc.ready(cluster, 0)
    assert acc.built_in_partitioner("t").load_stats is None  # partition 3 has no queue yet: no stats
    _send(acc, cluster, partition=3)
    acc.ready(cluster, 0)
    # sizes 1, 4, 2, 1 -> max + 1 = 5 -> weights 4, 1, 3, 4 -> CFT 4, 5, 8, 12
    assert acc.built_in_partitioner("t").load_stats == ([4, 5, 8, 12], [0, 1, 2, 3], 4)

def test_equal_queues_or_adaptive_disabled_mean_uniform_choice() -> None:
    cluster = FakeCluster.single_node("t", 3)
    acc = _accumulator(1, [4])
    _fill_queues(acc, cluster, {0: 2, 1: 2, 2: 2})
    acc.ready(cluster, 0)
    part = acc.built_in_partitioner("t")
    assert part.load_stats is None
    assert part.next_partition(cluster) == 1  # 4 % 3

    off = _accumulator(1, [4], adaptive_partitioning=False)
    _fill_queues(off, cluster, {0: 1, 1: 4, 2: 2})
    off.ready(cluster, 0)
    assert off.built_in_partitioner("t").load_stats is None
    assert off.built_in_partitioner("t").next_partition(cluster) == 1


def test_no_adaptive_stats_until_every_partition_has_a_queue() -> None:
    """Java builds queue sizes only once the batches map has an entry per partition; a topic whose
    partition count grew falls back to the uniform choice, which includes the new partitions."""
    cluster = FakeCluster.single_node("t", 2)
    acc = _accumulator(1, [3])
    _fill_queues(acc, cluster, {0: 1, 1: 3})
    acc.ready(cluster, 0)
    assert acc.built_in_partitioner("t").load_stats == ([3, 4], [0, 1], 2)
    grown = FakeCluster.single_node("t", 4)
    acc.ready(grown, 0)
    part = acc.built_in_partitioner("t")
    assert part.load_stats is None
    assert part.next_partition(grown) == 3  # 3 % 4 over the 4 available partitions


def test_availability_timeout_excludes_partitions_of_a_slow_leader() -> None:
    """Partition 1 is led by node 2, which had data ready but could not be drained for 500 ms > 100 ms:
    Java drops it from the table (``--queueSizesIndex``), keeping stats even though the remaining
    queues are equal; 0 disables the check."""
    leaders: dict[tuple[str, int], int | None] = {("t", 0): 1, ("t", 1): 2, ("t", 2): 1}
    cluster = FakeCluster(leaders)
    acc = _accumulator(1, [0, 1, 2, 3], availability_timeout_ms=100)
    _fill_queues(acc, cluster, {0: 1, 1: 1, 2: 1})
    acc.update_node_latency_stats(2, 0, True)
    acc.update_node_latency_stats(2, 500, False)
    acc.ready(cluster, 500)
    part = acc.built_in_partitioner("t")
    stats = part.load_stats
    assert stats is not None and stats[0][:stats[2]] == [1, 2] and stats[1][:stats[2]] == [0, 2]
    assert [part.next_partition(cluster) for _ in range(4)] == [0, 2, 0, 2]

    disabled = _accumulator(1, [0], availability_timeout_ms=0)
    _fill_queues(disabled, cluster, {0: 1, 1: 1, 2: 1})
    disabled.update_node_latency_stats(2, 0, True)
    disabled.update_node_latency_stats(2, 500, False)
    assert disabled.node_latency_stats(2) is None
    disabled.ready(cluster, 500)
    assert disabled.built_in_partitioner("t").load_stats is None  # equal queues, nothing excluded


def test_without_any_leader_the_choice_is_among_all_partitions() -> None:
    cluster = FakeCluster({("t", p): None for p in range(3)})
    acc = _accumulator(16384, [5])
    assert _send(acc, cluster) == 2  # 5 % 3 over all partitions (Java: partitionsForTopic)


# ------------------------------------------------------------------------- through KafkaProducer


class _Recording:
    """A user partitioner (a class: ``partitioner.class`` instantiates it) that records its calls."""

    calls: ClassVar[list[tuple[object, bytes | None, object, bytes | None]]] = []
    new_batches: ClassVar[list[int]] = []
    closed: ClassVar[int] = 0
    configured: ClassVar[list[dict[str, object]]] = []

    def configure(self, configs: dict[str, object]) -> None:
        type(self).configured.append(configs)

    def partition(self, topic: str, key: object, key_bytes: bytes | None, value: object,
                  value_bytes: bytes | None, cluster: ClusterView) -> int:
        type(self).calls.append((key, key_bytes, value, value_bytes))
        return 0

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        type(self).new_batches.append(prev_partition)

    def close(self) -> None:
        type(self).closed += 1


@pytest.fixture
def two_partitions(mock_cluster: Any, unique_topic: Callable[[str], str]) -> tuple[str, str]:
    name = unique_topic("part")
    mock_cluster.create_topic(name, partitions=2, replication=1)
    return mock_cluster.bootstrap_servers, name


def _producer(servers: str, **config: object) -> Any:
    from sparkafka.producer.producer import KafkaProducer

    return KafkaProducer({"bootstrap.servers": servers, "max.block.ms": 20_000, "linger.ms": 0, **config})


def test_round_robin_has_no_double_count_when_records_open_batches(two_partitions: tuple[str, str]) -> None:
    """Java calls ``partition()`` twice for a record that needs a new batch (``abortOnNewBatch`` with
    any custom partitioner), so its RoundRobinPartitioner skips a value per new batch and, with 2
    partitions and one record per batch, sends everything to partition 1 (KAFKA-9965). sparkafka asks
    the partitioner once per record: strict round-robin (documented in ``partitioner.py``)."""
    servers, topic = two_partitions
    producer = _producer(servers, **{"partitioner.class": "round_robin", "batch.size": 1})
    try:
        futures = [producer.send(topic, b"v") for _ in range(6)]
        producer.flush()
        assert [f.get(10).partition for f in futures] == [0, 1, 0, 1, 0, 1]
    finally:
        producer.close(5)


def test_ignore_keys_uses_the_sticky_partition_but_still_sends_keys(two_partitions: tuple[str, str]) -> None:
    servers, topic = two_partitions
    producer = _producer(servers, **{"partitioner.ignore.keys": True})
    try:
        futures = [producer.send(topic, b"v", key=f"k{i}".encode()) for i in range(20)]
        producer.flush()
        metas = [f.get(10) for f in futures]
        assert len({m.partition for m in metas}) == 1  # 20 small records: one sticky partition
        assert all(m.serialized_key_size == 2 for m in metas[:10])
    finally:
        producer.close(5)


def test_custom_partitioner_is_configured_gets_the_record_objects_and_is_closed(
    two_partitions: tuple[str, str],
) -> None:
    """Java: ``getConfiguredInstance`` calls ``configure(originals + client.id)`` on the partitioner it
    creates, ``partitioner.partition(topic, record.key(), serializedKey, record.value(), serializedValue,
    cluster)`` per record and ``Utils.closeQuietly(partitioner)`` in ``close()``."""
    servers, topic = two_partitions
    _Recording.calls.clear()
    _Recording.configured.clear()
    _Recording.closed = 0
    producer = _producer(servers, **{"partitioner.class": _Recording, "key.serializer": "str",
                                     "value.serializer": "str"})
    try:
        assert len(_Recording.configured) == 1
        configs = _Recording.configured[0]
        assert configs["bootstrap.servers"] == servers and configs["linger.ms"] == 0
        assert configs["partitioner.class"] is _Recording
        assert configs["client.id"] == producer.config.client_id
        assert "batch.size" not in configs  # only what the user gave, as Java's originals()
        producer.send(topic, "hello", key="k").get(10)
        assert _Recording.calls == [("k", b"k", "hello", b"hello")]
    finally:
        producer.close(5)
    assert _Recording.closed == 1


class _FailingInterceptor:
    def configure(self, configs: dict[str, object]) -> None:
        raise RuntimeError("this interceptor's configure() fails")

    def on_send(self, record: object) -> object:
        return record

    def on_acknowledgement(self, metadata: object, exception: object) -> None:
        pass

    def close(self) -> None:
        pass


@pytest.mark.parametrize("failing", [
    {"security.protocol": "SSL", "ssl.ca.location": "/no-such-dir/ca.pem"},  # NetworkClient's TLS context
    {"interceptor.classes": [_FailingInterceptor]},
])
def test_a_constructor_that_fails_closes_the_partitioner_it_configured(failing: dict[str, object]) -> None:
    """Java's constructor closes what it built when a later step throws (``close(Duration.ZERO, true)``); the
    partitioner was configured and never closed, and a failure past the network client left its selector
    and wake-up sockets open."""
    import threading

    from sparkafka.errors import ConfigError

    _Recording.configured.clear()
    _Recording.closed = 0
    threads = threading.active_count()
    with pytest.raises(ConfigError):
        _producer("127.0.0.1:1", **{"partitioner.class": _Recording, **failing})
    assert len(_Recording.configured) == 1 and _Recording.closed == 1
    assert threading.active_count() == threads
