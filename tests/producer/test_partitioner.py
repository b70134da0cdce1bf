"""Partitioners: KIP-794 sticky switching and the CFT, round-robin, and adapting user partitioners."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from producer.fakes import FakeCluster
from sparkafka.errors import ConfigError
from sparkafka.producer.partitioner import (
    BuiltInPartitioner,
    Partitioner,
    RoundRobinPartitioner,
    as_partitioner,
    resolve_partitioner,
)


def _java_load_stats(queue_sizes: list[int], length: int) -> list[int] | None:
    """Java's ``BuiltInPartitioner.updatePartitionLoadStats`` loop, written out: the reference."""
    if length < 1 or len(queue_sizes) < 2:
        return None
    max_plus_1, all_equal = queue_sizes[0], True
    for i in range(1, length):
        all_equal = all_equal and queue_sizes[i] == queue_sizes[0]
        max_plus_1 = max(max_plus_1, queue_sizes[i])
    max_plus_1 += 1
    if all_equal and length == len(queue_sizes):
        return None
    cft = list(queue_sizes)
    cft[0] = max_plus_1 - cft[0]
    for i in range(1, length):
        cft[i] = max_plus_1 - cft[i] + cft[i - 1]
    return cft


@given(st.lists(st.integers(0, 50), min_size=0, max_size=40), st.data())
def test_load_stats_table_matches_javas_loop(sizes: list[int], data: st.DataObject) -> None:
    length = data.draw(st.integers(0, len(sizes)))
    part = BuiltInPartitioner("t", 100)
    part.update_partition_load_stats(list(sizes), list(range(len(sizes))), length)
    expected = _java_load_stats(sizes, length)
    if expected is None:
        assert part.load_stats is None
    else:
        assert part.load_stats == (expected, list(range(len(sizes))), length)

def test_cft_example_from_kip_794() -> None:
    draws = list(range(8))
    source = iter(draws)
    part = BuiltInPartitioner("t", 100, random_source=lambda: next(source))
    queue_sizes = [0, 3, 1]
    part.update_partition_load_stats(queue_sizes, [0, 1, 2], 3)
    assert part.load_stats == ([4, 5, 8], [0, 1, 2], 3)
    assert part.load_stats_range_end() == 8
    cluster = FakeCluster.single_node("t", 3)
    picks = [part.next_partition(cluster) for _ in draws]
    assert picks == [0, 0, 0, 0, 1, 2, 2, 2]


def test_cft_maps_through_partition_ids_and_wraps_random() -> None:
    source = iter([12, 13])
    part = BuiltInPartitioner("t", 100, random_source=lambda: next(source))
    part.update_partition_load_stats([0, 3, 1], [5, 7, 9], 3)
    cluster = FakeCluster.single_node("t", 10)
    assert part.next_partition(cluster) == 7  # 12 % 8 = 4 -> index 1
    assert part.next_partition(cluster) == 9  # 13 % 8 = 5 -> index 2


@pytest.mark.parametrize(
    ("sizes", "ids", "length"),
    [
        (None, None, 0),  # adaptive off / not all partitions known yet
        ([2, 2, 2], [0, 1, 2], 3),  # all equal, nothing excluded
        ([5], [0], 1),  # fewer than two partitions
        ([1, 2], [0, 1], 0),  # everything excluded
    ],
)
def test_no_load_stats(sizes: list[int] | None, ids: list[int] | None, length: int) -> None:
    part = BuiltInPartitioner("t", 100)
    part.update_partition_load_stats([9, 1], [0, 1], 2)
    assert part.load_stats is not None
    part.update_partition_load_stats(sizes, ids, length)
    assert part.load_stats is None


def test_stats_kept_when_partitions_were_excluded_even_if_equal() -> None:
    part = BuiltInPartitioner("t", 100)
    part.update_partition_load_stats([2, 2, 2], [0, 1, 2], 2)
    assert part.load_stats == ([1, 2, 2], [0, 1, 2], 2)


def test_uniform_choice_among_available_partitions() -> None:
    source = iter([5, 6])
    part = BuiltInPartitioner("t", 100, random_source=lambda: next(source))
    cluster = FakeCluster({("t", 0): None, ("t", 1): 1, ("t", 2): None, ("t", 3): 2})
    assert part.next_partition(cluster) == 3  # available [1, 3], 5 % 2 = 1
    no_leaders = FakeCluster({("t", p): None for p in range(4)})
    assert part.next_partition(no_leaders) == 2  # 6 % 4 over all partitions


def test_switch_after_batch_size_only_when_enabled_and_always_at_twice() -> None:
    source = itertools.cycle([0, 1, 2])
    part = BuiltInPartitioner("t", 100, random_source=lambda: next(source))
    cluster = FakeCluster.single_node("t", 3)
    info = part.peek_current_partition_info(cluster)
    assert info.partition == 0 and part.peek_current_partition_info(cluster) is info

    part.update_partition_info(info, 60, cluster, True)
    assert not part.is_partition_changed(info)
    part.update_partition_info(info, 50, cluster, False)  # 110 >= 100 but the batch is open
    assert not part.is_partition_changed(info)
    part.update_partition_info(info, 80, cluster, False)  # 190 < 200
    assert not part.is_partition_changed(info)
    part.update_partition_info(info, 10, cluster, False)  # 200: switch regardless
    assert part.is_partition_changed(info)
    second = part.peek_current_partition_info(cluster)
    assert second.partition == 1 and second.produced_bytes == 0

    part.update_partition_info(second, 100, cluster, True)  # exactly batch.size with switch enabled
    assert part.current_partition == 2


def test_update_with_none_info_is_ignored() -> None:
    part = BuiltInPartitioner("t", 100)
    part.update_partition_info(None, 10_000, FakeCluster.single_node())
    assert part.current_partition is None


def test_sticky_batch_size_must_be_positive() -> None:
    with pytest.raises(ConfigError, match=r"batch\.size"):
        BuiltInPartitioner("t", 0)


def test_round_robin_cycles_available_partitions_per_topic() -> None:
    rr = RoundRobinPartitioner()
    cluster = FakeCluster({("a", 0): 1, ("a", 1): None, ("a", 2): 1, ("a", 3): 2, ("b", 0): 1, ("b", 1): 1})
    picks_a = [rr.partition("a", None, None, None, None, cluster) for _ in range(5)]
    assert picks_a == [0, 2, 3, 0, 2]
    picks_b = [rr.partition("b", None, b"k", None, None, cluster) for _ in range(3)]
    assert picks_b == [0, 1, 0]  # its own counter, keys ignored


def test_round_robin_without_available_partitions_uses_all() -> None:
    rr = RoundRobinPartitioner()
    cluster = FakeCluster({("a", p): None for p in range(3)})
    assert [rr.partition("a", None, None, None, None, cluster) for _ in range(4)] == [0, 1, 2, 0]


def test_round_robin_counter_wraps_like_a_java_int() -> None:
    rr = RoundRobinPartitioner()
    rr._counters["a"] = itertools.count(2**31 - 1)
    cluster = FakeCluster.single_node("a", 3)
    # Java: toPositive(Integer.MAX_VALUE) % 3 = 1, then MIN_VALUE -> toPositive 0 -> 0
    assert [rr.partition("a", None, None, None, None, cluster) for _ in range(2)] == [1, 0]


def test_function_partitioner_is_adapted() -> None:
    calls: list[tuple[str, bytes | None, int]] = []

    def fn(topic: str, key_bytes: bytes | None, num_partitions: int) -> int:
        calls.append((topic, key_bytes, num_partitions))
        return num_partitions - 1

    p = as_partitioner(fn)
    assert isinstance(p, Partitioner)
    assert p.partition("t", "k", b"k", "v", b"v", FakeCluster.single_node("t", 4)) == 3
    assert calls == [("t", b"k", 4)]
    p.on_new_batch("t", FakeCluster.single_node(), 0)
    p.close()


def test_object_with_only_partition_is_adapted() -> None:
    class OnlyPartition:
        def partition(self, topic: str, key: object, key_bytes: bytes | None, value: object,
                      value_bytes: bytes | None, cluster: object) -> int:
            return 1

    p = as_partitioner(OnlyPartition())
    assert p.partition("t", None, None, None, None, FakeCluster.single_node()) == 1
    p.on_new_batch("t", FakeCluster.single_node(), 1)
    p.close()
    rr = RoundRobinPartitioner()
    assert as_partitioner(rr) is rr


def test_resolve_partitioner_config_values() -> None:
    assert resolve_partitioner(None) is None
    assert isinstance(resolve_partitioner("round_robin"), RoundRobinPartitioner)
    assert isinstance(resolve_partitioner(RoundRobinPartitioner), RoundRobinPartitioner)  # a class
    adapted = resolve_partitioner(lambda topic, key, n: 0)
    assert adapted is not None
    assert adapted.partition("t", None, None, None, None, FakeCluster.single_node()) == 0
    with pytest.raises(ConfigError):
        resolve_partitioner("nope")

    class NeedsArgs:
        def __init__(self, x: int) -> None:
            self.x = x

    with pytest.raises(ConfigError, match="NeedsArgs"):
        resolve_partitioner(NeedsArgs)


def test_partitioner_class_configure_failure_names_the_config() -> None:
    class Broken:
        def configure(self, configs: dict[str, object]) -> None:
            raise ValueError(f"needs 'my.setting', got {sorted(configs)}")

        def partition(self, *args: object) -> int:
            return 0

    with pytest.raises(ConfigError, match=r"Broken.configure\(\) failed: needs 'my.setting', got \['a'\]") as info:
        resolve_partitioner(Broken, {"a": 1})
    assert info.value.key == "partitioner.class"
    instance = Broken()
    assert resolve_partitioner(instance, {"a": 1}) is not None  # an object is used as given, not configured


def test_invalid_partitioner_names_the_config() -> None:
    with pytest.raises(ConfigError) as info:
        as_partitioner(42)
    assert info.value.key == "partitioner.class"
