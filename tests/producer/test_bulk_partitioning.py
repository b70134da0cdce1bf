"""Column-wise partitioning of the bulk path (``producer/arrow/bulk.py``): ``key_partitions`` and ``choose_partitions``.

How it works: ``key_partitions`` is checked against the line-by-line Java murmur2 of
``tests/producer/test_murmur2.py`` (and Java's own test vectors) for random keys, null keys (-1),
sliced, string, view and dictionary columns, on the C path and on the pure-Python path (Arrow kernels,
``producer/arrow/key_hash.py``; ``impl`` patches ``bulk._c_partitions`` and the scalar accelerator
away). ``choose_partitions`` is driven with a ``FakeCluster`` and a ``BuiltInPartitioner`` whose random
source is a counter, so the sticky partitions of keyless rows are predictable: explicit partitions win,
nulls fall through to the key or the sticky partitioner, a custom partitioner is asked per row,
``partitioner.ignore.keys`` sends keyed rows to the sticky partitioner, keyless rows switch partition
every ``batch.size`` bytes, and out-of-range partitions raise ``InvalidRecordInputError``.
"""

from __future__ import annotations

import collections
import itertools
import random
import threading
from collections.abc import Callable, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sparkafka.producer.arrow.bulk as bulk
import sparkafka.producer.murmur2 as murmur2_module
from producer.fakes import FakeCluster
from producer.test_murmur2 import EXTRA, JAVA_VECTORS, reference_murmur2
from sparkafka._types import ClusterView
from sparkafka.errors import InvalidRecordInputError
from sparkafka.producer.arrow.bulk import choose_partitions, key_partitions
from sparkafka.producer.arrow.tails import encode_tails
from sparkafka.producer.murmur2 import partition_for_key
from sparkafka.producer.partitioner import BuiltInPartitioner

TOPIC = "t"


def java_partition(key: bytes | None, n: int) -> int:
    return -1 if key is None else (reference_murmur2(key) & 0x7FFFFFFF) % n


@pytest.fixture(params=["c", "py"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The C ``partitions_for_offsets`` or the pure-Python bulk murmur2 (no accelerator at all)."""
    if request.param == "c":
        if bulk._c_partitions is None:
            pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    else:
        monkeypatch.setattr(bulk, "_c_partitions", None)
        monkeypatch.setattr(murmur2_module, "ACCEL", None)
    return str(request.param)


def _set_impl(c_path: bool) -> Callable[[], None]:
    """For Hypothesis tests (no function-scoped fixtures): switch and return the undo."""
    module: Any = murmur2_module  # ACCEL is not re-exported (typed access)
    saved = bulk._c_partitions, module.ACCEL
    if not c_path:
        bulk._c_partitions = None
        module.ACCEL = None

    def undo() -> None:
        bulk._c_partitions, module.ACCEL = saved
    return undo


def _impls() -> list[bool]:
    return [False] if bulk._c_partitions is None else [True, False]


# ------------------------------------------------------------------------------------------ key_partitions


def test_java_vectors(impl: str) -> None:
    keys = sorted(set(JAVA_VECTORS) | set(EXTRA))
    for n in (1, 3, 6, 10, 12, 1000, 2**31 - 1):
        got = key_partitions(pa.array(keys, pa.binary()), n).to_pylist()
        assert got == [(JAVA_VECTORS.get(k, EXTRA.get(k, (0,))[0]) & 0x7FFFFFFF) % n for k in keys]
    for key, row in EXTRA.items():
        assert key_partitions(pa.array([key]), 3).to_pylist() == [row[2]]
        assert key_partitions(pa.array([key]), 12).to_pylist() == [row[5]]


@settings(max_examples=150, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=80),
       n=st.integers(1, 5000),
       kind=st.sampled_from(["binary", "large_binary", "binary_view", "dict"]),
       cut=st.tuples(st.integers(0, 5), st.integers(0, 5)))
def test_random_keys_match_java(keys: list[bytes | None], n: int, kind: str, cut: tuple[int, int]) -> None:
    padded = [b"pad%d" % i for i in range(cut[0])] + keys + [None, b"x"][: cut[1]]
    if kind == "dict":
        arr = pa.array(padded, pa.binary()).dictionary_encode()
    else:
        arr = pa.array(padded, getattr(pa, kind)())
    arr = arr.slice(cut[0], len(keys))
    expected = [java_partition(k, n) for k in keys]
    for c_path in _impls():
        undo = _set_impl(c_path)
        try:
            got = key_partitions(arr, n)
        finally:
            undo()
        assert got.type == pa.int32()
        assert got.null_count == 0
        assert got.to_pylist() == expected, f"c={c_path}"


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.text(max_size=12)), max_size=50), n=st.integers(1, 100),
       kind=st.sampled_from(["string", "large_string", "string_view"]), start=st.integers(0, 3))
def test_string_keys_hash_their_utf8_bytes(keys: list[str | None], n: int, kind: str, start: int) -> None:
    arr = pa.array(["p"] * start + keys, getattr(pa, kind)()).slice(start)
    expected = [java_partition(None if k is None else k.encode(), n) for k in keys]
    for c_path in _impls():
        undo = _set_impl(c_path)
        try:
            assert key_partitions(arr, n).to_pylist() == expected
        finally:
            undo()


def test_many_keys_all_lengths(impl: str) -> None:
    """Enough keys of each length for the pure-Python lane hashing (groups, chunks) and the C loop."""
    rng = random.Random(5)
    keys: list[bytes | None] = []
    for i in range(20_000):
        keys.append(None if i % 13 == 0 else rng.randbytes(rng.choice([0, 1, 2, 3, 4, 5, 7, 8, 16, 33, 100])))
    arr = pa.array(keys, pa.large_binary())
    for n in (1, 7, 64):
        assert key_partitions(arr, n).to_pylist() == [-1 if k is None else partition_for_key(k, n) for k in keys]
    sliced = arr.slice(777, 5000)
    assert key_partitions(sliced, 9).to_pylist() == [java_partition(k, 9) for k in keys[777:5777]]


def test_one_length_at_any_byte_alignment(impl: str) -> None:
    """Keys of one length whose bytes start 0-3 bytes into a word (a sliced column): the pure-Python path
    reads words through a uint32 view when they are aligned and byte by byte when not; both match Java."""
    rng = random.Random(7)
    for length in (4, 8, 12, 9, 2):
        keys = [rng.randbytes(length) for _ in range(300)]
        for skew in range(4):
            arr = pa.array([b"x" * skew, *keys], pa.large_binary()).slice(1)
            assert key_partitions(arr, 37).to_pylist() == [java_partition(k, 37) for k in keys]


def test_all_null_and_empty_columns(impl: str) -> None:
    assert key_partitions(pa.nulls(4, pa.binary()), 3).to_pylist() == [-1] * 4
    assert key_partitions(pa.array([], pa.binary()), 3).to_pylist() == []
    assert key_partitions(pa.array([b"", b""]), 12).to_pylist() == [EXTRA[b""][5]] * 2
    assert key_partitions(pa.array(["a", "b"]).slice(2), 3).to_pylist() == []


def test_bad_partition_count(impl: str) -> None:
    with pytest.raises(InvalidRecordInputError, match="num_partitions"):
        key_partitions(pa.array([b"k"]), 0)


# ------------------------------------------------------------------------------------------ choose_partitions


class Recording:
    """A custom partitioner that records its calls and answers from a function of the value."""

    def __init__(self, answer: Callable[[bytes | None, bytes | None], int]) -> None:
        self.calls: list[tuple[str, object, bytes | None, object, bytes | None]] = []
        self.answer = answer

    def partition(self, topic: str, key: object, key_bytes: bytes | None, value: object,
                  value_bytes: bytes | None, cluster: ClusterView) -> int:
        self.calls.append((topic, key, key_bytes, value, value_bytes))
        return self.answer(key_bytes, value_bytes)

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        return None

    def close(self) -> None:
        return None


def _sticky(batch_size: int = 1000) -> BuiltInPartitioner:
    """Draws 0, 1, 2, ... so the n-th sticky partition is ``available[n % len(available)]``."""
    return BuiltInPartitioner(TOPIC, batch_size, random_source=itertools.count().__next__)


def _choose(keys: Sequence[bytes | str | None] | None, values: Sequence[bytes | None],
            partitions: Sequence[int | None] | None = None, *, n: int = 4, custom: Recording | None = None,
            ignore_keys: bool = False, sticky: BuiltInPartitioner | None = None,
            cluster: FakeCluster | None = None, headers: pa.Array | None = None,
            partition_type: pa.DataType | None = None,
            locks: collections.defaultdict[int, threading.Lock] | None = None) -> list[int]:
    key_arr = None if keys is None else pa.array(keys)
    value_arr = pa.array(values, pa.binary())
    part_arr = None if partitions is None else pa.array(partitions, partition_type or pa.int32())
    tails = encode_tails(key_arr, value_arr, headers)
    if locks is None:
        locks = collections.defaultdict(threading.Lock)
    out = choose_partitions(TOPIC, n, tails, key_arr, value_arr, part_arr, custom=custom, ignore_keys=ignore_keys,
                            sticky=sticky or _sticky(), cluster=cluster or FakeCluster.single_node(TOPIC, n),
                            queue_lock=locks.__getitem__)
    assert out.type == pa.int32() and out.null_count == 0
    result: list[int] = out.to_pylist()
    return result


def test_explicit_partitions_win_and_nulls_fall_through(impl: str) -> None:
    keys = [b"a", b"b", None, b"c", None, b"d"]
    parts = [3, None, 1, None, None, 0]
    got = _choose(keys, [b"v"] * 6, parts, n=4)
    sticky_first = 0  # the counter's first draw
    assert got == [3, java_partition(b"b", 4), 1, java_partition(b"c", 4), sticky_first, 0]
    # every row explicit: returned as is, for any integer type
    for t in (pa.int8(), pa.int64(), pa.uint16(), pa.int32()):
        assert _choose(keys, [b"v"] * 6, [2, 0, 1, 3, 3, 2], n=4, partition_type=t) == [2, 0, 1, 3, 3, 2]
    # an all-null partition column is as if absent
    assert _choose(keys[:2], [b"v"] * 2, [None, None], n=4) == [java_partition(b"a", 4), java_partition(b"b", 4)]


def test_keys_are_hashed_with_java_murmur2(impl: str) -> None:
    rng = random.Random(1)
    keys: list[bytes | None] = [rng.randbytes(rng.randrange(0, 30)) for _ in range(500)]
    for n in (1, 2, 5, 32):
        assert _choose(keys, [b"v"] * len(keys), n=n) == [java_partition(k, n) for k in keys]
    text = ["\u00e9t\u00e9", "key", "", "\U0001F600"]
    assert _choose(text, [b"v"] * 4, n=7) == [java_partition(k.encode(), 7) for k in text]


@pytest.mark.parametrize("bad", [[4, None], [0, 9], [-1, None]])
def test_out_of_range_explicit_partition_raises(impl: str, bad: list[int | None]) -> None:
    with pytest.raises(InvalidRecordInputError, match=r"0\.\.3") as info:
        _choose([b"k", b"k"], [b"v", b"v"], bad, n=4)
    assert TOPIC in str(info.value)


def test_partition_beyond_int32_raises_invalid_input(impl: str) -> None:
    """A partition that does not even fit an int32 is bad input too (not an Arrow cast error)."""
    with pytest.raises(InvalidRecordInputError, match=r"0\.\.3"):
        _choose([b"k", b"k"], [b"v", b"v"], [2**40, None], n=4, partition_type=pa.int64())


def test_custom_partitioner_called_per_row_with_key_and_value_bytes(impl: str) -> None:
    custom = Recording(lambda key, value: int(value or b"0") % 4)
    keys = [b"k1", None, "s", b""]
    values = [b"5", b"2", None, b"3"]
    got = _choose(keys, values, n=4, custom=custom)
    assert got == [1, 2, 0, 3]
    assert custom.calls == [(TOPIC, b"k1", b"k1", b"5", b"5"), (TOPIC, None, None, b"2", b"2"),
                            (TOPIC, b"s", b"s", None, None), (TOPIC, b"", b"", b"3", b"3")]
    # it wins over the key hash and over partitioner.ignore.keys
    custom2 = Recording(lambda key, value: 2)
    assert _choose(keys, values, n=4, custom=custom2, ignore_keys=True) == [2, 2, 2, 2]


def test_custom_partitioner_not_asked_for_rows_with_an_explicit_partition(impl: str) -> None:
    """As in send(): an explicit partition is used without calling the partitioner (a round-robin
    partitioner must not be advanced by rows it does not place)."""
    custom = Recording(lambda key, value: 1)
    got = _choose([b"a", b"b", b"c"], [b"0", b"1", b"2"], [3, None, 0], n=4, custom=custom)
    assert got == [3, 1, 0]
    assert [c[4] for c in custom.calls] == [b"1"]


@pytest.mark.parametrize("answer", [4, -1, "1"])
def test_custom_partitioner_out_of_range_raises(impl: str, answer: object) -> None:
    custom = Recording(lambda key, value: answer)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidRecordInputError, match="4 partitions"):
        _choose([b"k"], [b"v"], n=4, custom=custom)


def test_ignore_keys_sends_keyed_rows_to_the_sticky_partitioner(impl: str) -> None:
    keys = [b"k%d" % i for i in range(50)]
    got = _choose(keys, [b"v"] * 50, n=4, ignore_keys=True)
    assert got == [0] * 50  # small rows: one sticky chunk, the first draw
    # explicit partitions still win
    got = _choose(keys[:3], [b"v"] * 3, [None, 2, None], n=4, ignore_keys=True)
    assert got == [0, 2, 0]


def _runs(parts: Sequence[int]) -> list[tuple[int, int, int]]:
    """(partition, first row, row count) of each maximal run."""
    out: list[tuple[int, int, int]] = []
    for p, group in itertools.groupby(enumerate(parts), key=lambda x: x[1]):
        rows = [i for i, _ in group]
        out.append((p, rows[0], len(rows)))
    return out


def test_keyless_rows_switch_every_batch_size_bytes(impl: str) -> None:
    """Equal rows: runs of about batch.size bytes, on the partitions the partitioner draws in turn."""
    value = b"x" * 46  # tail 49 bytes (null key, value, no headers): about 53 bytes a record
    tail = 1 + 1 + len(value) + 1
    sticky = _sticky(1000)
    got = _choose(None, [value] * 1000, n=4, sticky=sticky)
    runs = _runs(got)
    assert [p for p, _, _ in runs] == [i % 4 for i in range(len(runs))]
    total = 1000 * (tail + 4)
    assert len(runs) == -(-total // 1000)  # one partition per batch.size bytes
    for _, _, count in runs[:-1]:
        assert 1000 - 2 * (tail + 6) <= count * (tail + 4) <= 1000 + 2 * (tail + 6)
    # the sticky partition stays where the last rows went, for the next call and for send()
    last = runs[-1][0]
    assert sticky.current_partition == last
    more = _choose(None, [value], n=4, sticky=sticky)
    assert more == [last]


class _LockChecking(BuiltInPartitioner):
    """Records, for every byte count / switch, its partition and whether that partition's lock was held."""

    def __init__(self, locks: collections.defaultdict[int, threading.Lock]) -> None:
        super().__init__(TOPIC, 1000, random_source=itertools.count().__next__)
        self.locks = locks
        self.held: list[tuple[int, bool]] = []

    def update_partition_info(self, info: Any, appended_bytes: int, cluster: ClusterView,
                              enable_switch: bool = True) -> None:
        self.held.append((info.partition, self.locks[info.partition].locked()))
        super().update_partition_info(info, appended_bytes, cluster, enable_switch)


def test_sticky_partitioner_moves_under_the_current_partitions_queue_lock(impl: str) -> None:
    """As in send(), the byte count and each switch happen while the queue lock of the partition being
    left is held, so they cannot interleave with a send() appending there; a switch another thread
    made meanwhile is not made a second time."""
    locks: collections.defaultdict[int, threading.Lock] = collections.defaultdict(threading.Lock)
    sticky = _LockChecking(locks)
    cluster = FakeCluster.single_node(TOPIC, 4)
    got = _choose(None, [b"x" * 300] * 10, n=4, sticky=sticky, cluster=cluster, locks=locks)
    assert got == [0] * 4 + [1] * 3 + [2] * 3  # ~307-byte records; a chunk is each 1000 bytes of row starts
    assert sticky.held == [(0, True), (1, True), (2, True)]  # two switches, then the tail's bytes
    # Another thread switched after we read the current partition: ours is not counted or switched.
    info = sticky.peek_current_partition_info(cluster)
    BuiltInPartitioner.update_partition_info(sticky, info, 2000, cluster, True)  # "the other thread"
    moved_on = sticky.peek_current_partition_info(cluster)
    assert moved_on is not info
    sticky.held.clear()
    assert bulk._advance_sticky(sticky, info, 5000, cluster, True, locks.__getitem__) is moved_on
    assert sticky.held == [] and moved_on.produced_bytes == 0


def test_small_calls_accumulate_towards_a_switch(impl: str) -> None:
    """Many one-row calls (the Spark sink's small batches): still one switch per ~batch.size bytes."""
    sticky = _sticky(1000)
    cluster = FakeCluster.single_node(TOPIC, 4)
    got: list[int] = []
    for _ in range(400):
        got += _choose(None, [b"y" * 96], n=4, sticky=sticky, cluster=cluster)  # ~103 bytes a record
    runs = _runs(got)
    assert [p for p, _, _ in runs] == [i % 4 for i in range(len(runs))]
    assert all(9 <= count <= 11 for _, _, count in runs[:-1]), runs


def test_sticky_skips_partitions_without_a_leader(impl: str) -> None:
    cluster = FakeCluster({(TOPIC, 0): 1, (TOPIC, 1): None, (TOPIC, 2): 1, (TOPIC, 3): None})
    got = _choose(None, [b"z" * 200] * 200, n=4, cluster=cluster, sticky=_sticky(1000))
    assert set(got) == {0, 2}
    assert len(_runs(got)) > 10


def test_only_sticky_rows_count_towards_the_switch(impl: str) -> None:
    """Keyed and explicit rows (however large) do not advance the sticky byte count."""
    sticky = _sticky(1000)
    big = b"b" * 5000
    keys = [b"k", None, None, b"k2", None]
    got = _choose(keys, [big, b"s", b"s", big, b"s"], [None, None, None, 3, None], n=4, sticky=sticky)
    assert got == [java_partition(b"k", 4), 0, 0, 3, 0]
    assert sticky.current_partition == 0


def test_sticky_row_larger_than_twice_batch_size(impl: str) -> None:
    """A keyless row bigger than 2 x batch.size: it goes to the current partition and the next row to
    another one (the partitioner's unconditional switch)."""
    sticky = _sticky(100)
    got = _choose(None, [b"h" * 500, b"s"], n=4, sticky=sticky)
    assert got[0] != got[1]
    got2 = _choose(None, [b"h" * 500], n=4, sticky=sticky)
    assert got2[0] == got[1]
    assert sticky.current_partition != got2[0]


def test_headers_count_in_the_sticky_byte_total(impl: str) -> None:
    """The switch counts whole records (headers included), not only values."""
    ht = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    headers = pa.array([[{"key": "h", "value": b"v" * 200}]] * 20, ht)
    got = _choose(None, [b"s"] * 20, n=4, sticky=_sticky(1000), headers=headers)
    assert len(_runs(got)) >= 4


def test_result_is_consistent_with_pc_for_large_inputs(impl: str) -> None:
    """100k rows: keyed, keyless, explicit and null-partition rows mixed (no per-row Python here)."""
    n = 100_000
    rng = random.Random(3)
    keys: list[bytes | None] = [None if i % 5 == 0 else b"key-%d" % rng.randrange(10**6) for i in range(n)]
    parts: list[int | None] = [i % 6 if i % 7 == 0 else None for i in range(n)]
    got = pa.array(_choose(keys, [b"v"] * n, parts, n=6, sticky=_sticky(16384)))
    for i in range(0, n, 97):
        if parts[i] is not None:
            assert got[i].as_py() == parts[i]
        elif keys[i] is not None:
            assert got[i].as_py() == java_partition(keys[i], 6)
    keyless = pc.filter(got, pa.array([k is None and p is None for k, p in zip(keys, parts)]))
    assert len(pc.unique(keyless)) == 6


def _grouped_rows(offsets: memoryview, data: memoryview, first: int,
                  groups: list[tuple[int, int, int]]) -> list[tuple[int, bytes]]:
    return [(partition, bytes(data[offsets[first + i]:offsets[first + i + 1]]))
            for partition, start, stop in groups for i in range(start, stop)]


@settings(max_examples=80, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(0, 5), st.binary(max_size=12)), min_size=1, max_size=60),
       cut=st.integers(0, 5))
def test_c_grouping_copies_what_the_arrow_grouping_takes(rows: list[tuple[int, bytes]], cut: int) -> None:
    """``_accel.group_tails`` (one counting sort) and the Arrow path (``_groups`` + ``take``) put the same
    bytes in the same order with the same (partition, start, stop) runs, for sliced arrays too; one
    partition is not copied; a partition out of range gives None."""
    from sparkafka.producer.arrow.tails import tail_buffers

    if bulk._c_group_tails is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    cut = min(cut, len(rows) - 1)
    tails = pa.array([b"x" * 3] * cut + [r[1] for r in rows], pa.large_binary()).slice(cut)
    parts = pa.array([9] * cut + [r[0] for r in rows], pa.int32()).slice(cut)
    offsets, data, first = tail_buffers(tails)
    got = bulk._c_group_tails(offsets, data, first, len(rows), bulk._int32_buffer(parts), 6)
    assert got is not None
    c_offsets, c_data, c_groups = got
    order, groups = bulk._groups(parts)
    assert c_groups == groups
    expected = _grouped_rows(*tail_buffers(tails if order is None else pc.take(tails, order)), groups)
    assert expected == sorted(rows, key=lambda r: r[0])  # stable: row order within a partition
    if c_offsets is None or c_data is None:
        assert order is None and len(groups) == 1
    else:
        assert _grouped_rows(memoryview(c_offsets).cast("q"), memoryview(c_data), 0, c_groups) == expected
    top = max(r[0] for r in rows)
    if top > 0:  # num_partitions = the largest partition: that one is out of range
        assert bulk._c_group_tails(offsets, data, first, len(rows), bulk._int32_buffer(parts), top) is None


def test_c_grouping_rejects_bad_buffers() -> None:
    import struct

    if bulk._c_group_tails is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    parts = struct.pack("<3i", 0, 1, 0)
    with pytest.raises(ValueError, match="not increasing"):
        bulk._c_group_tails(struct.pack("<4q", 0, 2, 1, 3), b"abc", 0, 3, parts, 2)
    with pytest.raises(ValueError, match="point past the data"):
        bulk._c_group_tails(struct.pack("<4q", 0, 1, 2, 4), b"abc", 0, 3, parts, 2)
    with pytest.raises(ValueError, match="outside the offsets or partitions"):
        bulk._c_group_tails(struct.pack("<3q", 0, 1, 2), b"abc", 0, 3, parts, 2)
    with pytest.raises(ValueError, match="outside the offsets or partitions"):
        bulk._c_group_tails(struct.pack("<4q", 0, 1, 2, 3), b"abc", 0, 3, parts[:8], 2)
