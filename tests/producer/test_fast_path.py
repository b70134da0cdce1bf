"""The producer's fast append path (``append_open`` / ``try_append_open``): when it takes a record,
when it declines, sticky accounting, and callbacks/futures of records appended through it
(completion, failure, split). Also murmur2: the C accelerator agrees with the pure-Python code."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producer.fakes import FakeCluster
from sparkafka import accel
from sparkafka._clock import ManualClock
from sparkafka.producer import future as future_module
from sparkafka.producer import murmur2 as m
from sparkafka.producer import producer_batch as producer_batch_module
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.future import FutureRecordMetadata, RecordMetadata
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.record import RecordBatchBuilder, decode_batch
from sparkafka.record.compression import CompressionType

T = "t"
TS = 1_700_000_000_000
VALUE = b"v" * 50


def make(**kwargs: Any) -> RecordAccumulator:
    options: dict[str, Any] = dict(batch_size=1024, buffer_memory=64 * 1024, linger_ms=10)
    options.update(kwargs)
    return RecordAccumulator(clock=ManualClock(), **options)


def slow(acc: RecordAccumulator, cluster: FakeCluster, partition: int, value: bytes = VALUE,
         callback: Any = None) -> Any:
    return acc.append(T, partition, TS, None, value, None, callback, 1000, acc._clock.monotonic_ms(), cluster)


def test_append_open_declines_without_an_open_batch_then_appends() -> None:
    acc = make()
    cluster = FakeCluster.single_node()
    assert acc.append_open(T, 0, TS, None, VALUE, None, cluster) is None  # unknown topic
    slow(acc, cluster, 0)
    assert acc.append_open(T, 1, TS, None, VALUE, None, cluster) is None  # no queue for partition 1
    future = acc.append_open(T, 0, TS + 1, b"key", VALUE, None, cluster)
    assert future is not None and future.relative_offset == 1
    assert (future.create_timestamp, future.serialized_key_size, future.serialized_value_size) == (TS + 1, 3, 50)
    assert acc.records_appended == 2
    acc.close()
    assert acc.append_open(T, 0, TS, None, VALUE, None, cluster) is None


def test_append_open_future_is_the_one_the_constructor_makes() -> None:
    """append_open builds its future without running __init__ (pure Python) or with the C constructor
    (``_c/_append.h``): every field must still be set alike."""
    acc = make()
    cluster = FakeCluster.single_node()
    slow(acc, cluster, 2)
    future = acc.append_open(T, 2, TS + 3, b"ab", None, None, cluster)
    assert future is not None and type(future) is FutureRecordMetadata
    dq = acc.get_deque((T, 2))
    assert dq is not None
    made = FutureRecordMetadata(dq[-1].result, 1, TS + 3, 2, -1)
    fields = future_module._FutureStatePy.__slots__  # the C FutureState's too (tests/record/test_append_state.py)
    assert set(fields) == {"_produce_result", "relative_offset", "create_timestamp",
                           "serialized_key_size", "serialized_value_size"}
    assert [getattr(future, s) for s in fields] == [getattr(made, s) for s in fields]
    sticky = acc.append_open(T, -1, TS, None, b"x", None, cluster)  # the sticky partition has no batch yet
    assert sticky is None


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP])
def test_append_open_builds_what_the_builder_builds(codec: CompressionType) -> None:
    """append_open appends what RecordBatchBuilder.try_append_open appends: same bytes, sizes and
    refusals, also when a low compression-ratio estimate lets the records outgrow the pooled buffer."""
    acc = make(batch_size=1024, buffer_memory=1 << 20, compression=codec)
    cluster = FakeCluster.single_node()
    slow(acc, cluster, 0)  # creates the topic (and a first batch, estimated at ratio 1.0)
    info = acc._topics.get(T)
    assert info is not None
    info.compression_ratio = 0.1  # as if earlier batches compressed ten times
    dq = acc.get_deque((T, 0))
    assert dq is not None
    dq[-1].close_for_appends()
    slow(acc, cluster, 0, value=b"a" * 100)  # a new batch, estimated at ratio 0.1
    batch = dq[-1]
    twin = RecordBatchBuilder(bytearray(len(batch.buffer or b"")), 1024, codec, None, 0.1)
    assert twin.try_append(TS, None, b"a" * 100, None) > 0
    appended = 0
    while True:
        ts = TS + appended % 70 - 20
        key = b"k%d" % appended if appended % 3 else None
        value = bytes([97 + appended % 5]) * 100
        before = batch.builder.estimated_size_in_bytes
        future = acc.append_open(T, 0, ts, key, value, None, cluster)
        grown = twin.try_append_open(ts, key, value)
        if future is None:
            assert grown == -1
            break
        assert grown == batch.builder.estimated_size_in_bytes - before
        appended += 1
    assert appended > (12 if codec is not CompressionType.NONE else 5)
    if codec is not CompressionType.NONE:
        assert batch.builder._buf is not batch.buffer  # outgrew the pooled buffer: now a private one
    mine, theirs = batch.builder, twin
    assert (mine.record_count, mine.uncompressed_bytes, mine.estimated_size_in_bytes, mine.max_timestamp) \
        == (theirs.record_count, theirs.uncompressed_bytes, theirs.estimated_size_in_bytes, theirs.max_timestamp)
    assert batch.record_count == mine.record_count
    assert bytes(batch.close()) == bytes(twin.close())


def test_append_open_never_fills_a_batch() -> None:
    acc = make(batch_size=300)
    cluster = FakeCluster.single_node()
    slow(acc, cluster, 0)
    taken = 0
    while acc.append_open(T, 0, TS, None, VALUE, None, cluster) is not None:
        taken += 1
    dq = acc.get_deque((T, 0))
    assert dq is not None and len(dq) == 1 and not dq[0].is_full()
    result = slow(acc, cluster, 0)  # the record that fills the batch goes the general way
    assert result.batch_is_full or result.new_batch_created
    assert taken >= 1


def test_sticky_fast_path_counts_bytes_and_switches_at_twice_batch_size() -> None:
    acc = make(batch_size=2000, random_source=iter(range(100)).__next__)
    cluster = FakeCluster.single_node(partitions=3)
    first = acc.append(T, -1, TS, None, VALUE, None, None, 1000, 0.0, cluster)
    partitioner = acc.built_in_partitioner(T)
    sticky = partitioner._info
    assert sticky is not None and sticky.partition == first.partition
    produced = sticky.produced_bytes
    assert acc.append_open(T, -1, TS, None, VALUE, None, cluster) is not None
    assert sticky.produced_bytes > produced
    # A drained (not full) batch lets bytes pile up on one partition: the 2 x batch.size rule switches.
    sticky.produced_bytes = partitioner.double_batch_size - 1
    assert acc.append_open(T, -1, TS, None, VALUE, None, cluster) is not None
    assert partitioner._info is not sticky


def make_batch(limit: int = 16384) -> ProducerBatch:
    return ProducerBatch(("t", 1), RecordBatchBuilder(bytearray(limit), limit), 1000.0, bytearray(0), False)


def fast(batch: ProducerBatch, ts: int, key: bytes | None, value: bytes | None, callback: Any) -> FutureRecordMetadata:
    """What ``RecordAccumulator.append_open`` does with a batch: append, then make the future."""
    ks = -1 if key is None else len(key)
    vs = -1 if value is None else len(value)
    index = batch.try_append_open(ts, key, value, callback, ks, vs)
    assert index >= 0
    return FutureRecordMetadata(batch.result, index, ts, ks, vs)


@settings(max_examples=60, deadline=None)
@given(records=st.lists(st.tuples(st.integers(-100, 10**6), st.none() | st.binary(max_size=40),
                                  st.none() | st.binary(max_size=300), st.booleans()), min_size=1, max_size=60))
def test_c_batch_append_matches_python(records: list[tuple[int, bytes | None, bytes | None, bool]]) -> None:
    """ProducerBatch.try_append_open in C (sparkafka._accel.BatchState) and in Python: same indexes,
    counts, appended_bytes, callback entries and bytes."""
    if accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    c_batch, py_batch = make_batch(2048), make_batch(2048)
    for batch in (c_batch, py_batch):
        assert batch.try_append(TS, None, b"first", None, None, 0.0) is not None
    callback = print
    for ts, key, value, with_callback in records:
        cb = callback if with_callback else None
        ks, vs = -1 if key is None else len(key), -1 if value is None else len(value)
        index = c_batch.try_append_open(TS + ts, key, value, cb, ks, vs)
        assert index == py_batch._try_append_open_py(TS + ts, key, value, cb, ks, vs)
        assert (c_batch.record_count, c_batch.appended_bytes, c_batch.builder.estimated_size_in_bytes) \
            == (py_batch.record_count, py_batch.appended_bytes, py_batch.builder.estimated_size_in_bytes)
    assert c_batch._callbacks == py_batch._callbacks
    assert bytes(c_batch.close()) == bytes(py_batch.close())


def _python_try_append(batch: ProducerBatch, ts: int, key: bytes | None, value: bytes | None, callback: Any,
                       now: float) -> FutureRecordMetadata | None:
    """``ProducerBatch.try_append`` with the Python rule (the C one switched off for the call)."""
    kept = producer_batch_module._c_try_append
    producer_batch_module._c_try_append = None
    try:
        return batch.try_append(ts, key, value, None, callback, now)
    finally:
        producer_batch_module._c_try_append = kept


@settings(max_examples=80, deadline=None)
@given(records=st.lists(st.tuples(st.integers(-100, 10**6), st.none() | st.binary(max_size=40),
                                  st.none() | st.binary(max_size=700), st.booleans()), min_size=1, max_size=40),
       codec=st.sampled_from([CompressionType.NONE, CompressionType.GZIP]),
       buffer=st.sampled_from([0, 300, 2048]), ratio=st.sampled_from([1.0, 0.4, 1.3]))
def test_c_try_append_matches_the_python_rule(records: list[tuple[int, bytes | None, bytes | None, bool]],
                                              codec: CompressionType, buffer: int, ratio: float) -> None:
    """``ProducerBatch.try_append`` of records without headers in C (``BatchState.try_append_general``) and in
    Python: the first record, the ones that fill the batch, the ones refused (no room, a short pooled buffer:
    ``wanted_capacity``), records moving to a private buffer: same futures, counts, sizes, callback entries,
    state and bytes."""
    if producer_batch_module._c_try_append is None:
        pytest.skip("the C accelerator is not built")

    def new_batch() -> ProducerBatch:
        pooled = bytearray(buffer) if buffer else None
        return ProducerBatch(("t", 1), RecordBatchBuilder(pooled, 2048, codec, None, ratio), 1000.0, pooled,
                             pooled is not None)

    c_batch, py_batch = new_batch(), new_batch()
    for i, (ts, key, value, with_callback) in enumerate(records):
        cb = print if with_callback else None
        got = c_batch.try_append(TS + ts, key, value, None, cb, float(i))
        want = _python_try_append(py_batch, TS + ts, key, value, cb, float(i))
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert (got.relative_offset, got.create_timestamp, got.serialized_key_size, got.serialized_value_size) \
                == (want.relative_offset, want.create_timestamp, want.serialized_key_size, want.serialized_value_size)
        cb_, pb = c_batch.builder, py_batch.builder
        assert (c_batch.record_count, c_batch.appended_bytes, c_batch.last_append_ms) \
            == (py_batch.record_count, py_batch.appended_bytes, py_batch.last_append_ms)
        assert (cb_.record_count, cb_.estimated_size_in_bytes, cb_.uncompressed_bytes, cb_.base_timestamp,
                cb_._max_timestamp, cb_._pos, cb_.wanted_capacity, cb_._buf is cb_._buffer,
                bytes(cb_._buf[:cb_._pos])) \
            == (pb.record_count, pb.estimated_size_in_bytes, pb.uncompressed_bytes, pb.base_timestamp,
                pb._max_timestamp, pb._pos, pb.wanted_capacity, pb._buf is pb._buffer, bytes(pb._buf[:pb._pos]))
        if i == len(records) // 2 and with_callback:
            c_batch.builder.seal()
            py_batch.builder.seal()
    assert c_batch._callbacks == py_batch._callbacks
    assert bytes(c_batch.close()) == bytes(py_batch.close())


@pytest.mark.parametrize("codec,ratio", [(CompressionType.NONE, 1.0), (CompressionType.GZIP, 0.5)])
def test_c_try_append_takes_and_refuses_at_the_same_sizes_as_python(codec: CompressionType, ratio: float) -> None:
    """Every second-record size from nothing to past the limit, C against Python: the record that exactly
    fills the batch is taken, the one a byte longer is not (the boundary a random test rarely hits)."""
    if producer_batch_module._c_try_append is None:
        pytest.skip("the C accelerator is not built")
    taken = []
    for size in range(0, 1100):
        pair = [ProducerBatch(("t", 1), RecordBatchBuilder(None, 1024, codec, None, ratio), 1000.0) for _ in "cp"]
        pair[0].try_append(TS, b"k", b"v" * 100, None, None, 0.0)
        _python_try_append(pair[1], TS, b"k", b"v" * 100, None, 0.0)
        got = pair[0].try_append(TS + 1, None, b"x" * size, None, None, 1.0)
        want = _python_try_append(pair[1], TS + 1, None, b"x" * size, None, 1.0)
        assert (got is None) == (want is None), size
        assert pair[0].builder.is_full() == pair[1].builder.is_full(), size
        taken.append(got is not None)
    assert taken[0] and not taken[-1] and taken == sorted(taken, reverse=True)  # one boundary, hit exactly


def test_fast_path_callbacks_get_metadata_in_append_order() -> None:
    batch = make_batch()
    seen: list[tuple[str, RecordMetadata | None, BaseException | None]] = []

    def cb(name: str) -> Any:
        return lambda md, err: seen.append((name, md, err))

    f0 = batch.try_append(TS, None, b"a", None, cb("slow"), 0.0)
    f1 = fast(batch, TS + 7, b"kk", b"bbb", cb("fast"))
    f2 = fast(batch, TS + 9, None, None, None)
    assert f0 is not None
    callbacks = batch.callbacks
    assert callbacks is not None and [c[1].relative_offset for c in callbacks] == [0, 1]
    kept = callbacks[0][1]  # equivalent to f0 (the batch keeps ints per record, not futures)
    assert kept._produce_result is f0._produce_result
    assert (kept.create_timestamp, kept.serialized_key_size, kept.serialized_value_size) == (TS, -1, 1)
    assert batch.done(100, -1)
    assert [(n, md.offset, md.timestamp, md.serialized_key_size, md.serialized_value_size)  # type: ignore[union-attr]
            for n, md, _ in seen] == [("slow", 100, TS, -1, 1), ("fast", 101, TS + 7, 2, 3)]
    assert f1.result().offset == 101 and f1.result().timestamp == TS + 7
    assert f2.result().offset == 102 and f2.result().serialized_value_size == -1
    assert [r.value for r in decode_batch(bytes(batch.close())).records] == [b"a", b"bbb", None]


def test_fast_path_callbacks_see_log_append_time_and_errors() -> None:
    batch = make_batch()
    got: list[Any] = []
    batch.try_append(TS, None, b"a", None, None, 0.0)
    fast(batch, TS + 1, None, b"b", lambda md, err: got.append((md, err)))
    batch.done(-1, 555)  # acks=0 style: offset unknown, broker time given
    assert got[0][0].offset == -1 and got[0][0].timestamp == 555 and got[0][1] is None

    failing = make_batch()
    errs: list[Any] = []
    failing.try_append(TS, None, b"a", None, None, 0.0)
    fast(failing, TS, None, b"b", lambda md, err: errs.append((md, err)))
    fast(failing, TS, None, b"c", lambda md, err: errs.append((md, err)))
    boom = RuntimeError("record 2 rejected")
    failing.done(-1, -1, RuntimeError("batch"), {2: boom})
    assert [e for _, e in errs] == [failing.result.error, boom]
    assert all(md == ("t", 1, -1, -1, -1, -1) for md, _ in errs)  # Java: the partition and -1 elsewhere


def test_split_keeps_fast_path_callbacks_and_futures() -> None:
    big = make_batch()
    seen: list[int] = []
    first = big.try_append(TS, b"k0", b"x" * 100, None, lambda md, err: seen.append(md.offset), 0.0)
    assert first is not None
    futures = [first]
    for i in range(1, 8):
        futures.append(fast(big, TS + i, b"k%d" % i, b"x" * 100, lambda md, err: seen.append(md.offset)))
    parts = big.split(300)
    assert len(parts) > 1 and sum(p.record_count for p in parts) == 8
    offset = 0
    for p in parts:
        p.done(offset, -1)
        offset += 1000
    offsets = [f.result().offset for f in futures]
    assert seen == offsets  # every callback once, in order, with its record's final offset
    assert [f.result().timestamp for f in futures] == [TS + i for i in range(8)]


@settings(max_examples=200, deadline=None)
@given(key=st.binary(max_size=64), n=st.integers(1, 10_000))
def test_c_murmur2_matches_python(key: bytes, n: int) -> None:
    assert m.partition_for_key_py(key, n) == m.partition_for_key(key, n)
    if accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    assert accel.ACCEL.murmur2(key) == m.murmur2_py(key)
    assert accel.ACCEL.murmur2(bytearray(key)) == m.murmur2_py(key)
    assert accel.ACCEL.partition_for_key(key, n) == m.partition_for_key_py(key, n)


def _success_loop_entries() -> list[object]:
    return [
        lambda md, err: None, 0, 5, 3, 10,
        lambda md, err: 1 / 0, 1, 6, -1, 0,  # raises: reported, the loop goes on
        lambda md, err: None, 2, -40, 8, -1,
    ]


@pytest.mark.parametrize("use_c", [False, True])
@pytest.mark.parametrize("base,log_append_time", [(1000, -1), (-1, -1), (1000, 555)])
def test_success_callbacks_get_metadata_and_a_raising_one_is_logged(
        use_c: bool, base: int, log_append_time: int, caplog: pytest.LogCaptureFixture) -> None:
    from sparkafka.producer import producer_batch as pb

    if use_c and pb._c_run_success_callbacks is None:
        pytest.skip("the C accelerator is not in use")
    seen: list[tuple[RecordMetadata, Any]] = []

    def spy(f: Callable[..., object]) -> Callable[[RecordMetadata, Any], object]:
        def callback(md: RecordMetadata, err: Any) -> object:
            seen.append((md, err))
            return f(md, err)
        return callback

    entries = _success_loop_entries()
    for i in range(0, len(entries), 5):
        inner = entries[i]
        assert callable(inner)
        entries[i] = spy(inner)
    batch = make_batch()
    batch.try_append(TS, None, b"a", None, None, 0.0)  # the batch's base timestamp is TS
    batch.result.base_offset, batch.result.log_append_time = base, log_append_time
    saved = pb._c_run_success_callbacks
    pb._c_run_success_callbacks = saved if use_c else None
    try:
        with caplog.at_level("ERROR", logger="sparkafka.producer"):
            batch._run_success_callbacks(entries)
    finally:
        pb._c_run_success_callbacks = saved
    offsets = [-1] * 3 if base == -1 else [base, base + 1, base + 2]
    times = [TS + 5, TS + 6, TS - 40] if log_append_time == -1 else [log_append_time] * 3
    assert seen == [(RecordMetadata(T, 1, offsets[0], times[0], 3, 10), None),
                    (RecordMetadata(T, 1, offsets[1], times[1], -1, 0), None),
                    (RecordMetadata(T, 1, offsets[2], times[2], 8, -1), None)]
    assert all(type(md) is RecordMetadata for md, _ in seen)
    assert [r.exc_info[0] for r in caplog.records if r.exc_info] == [ZeroDivisionError]
    assert "topic-partition t-1" in caplog.records[0].getMessage()


def _recording_loop(use_c: bool, kinds: str, fields: list[tuple[int, int, int]],
                    log_append_time: int = -1) -> tuple[list[tuple[object, ...]], list[RecordMetadata]]:
    """Run a batch's success callbacks (base offset 500) through the C loop or the Python one: record
    ``i`` gets callback ``kinds[i]`` (``r`` reads its metadata, ``k`` also keeps it, ``c`` runs a
    collection first and reads it) and the entries ``i, *fields[i]`` (timestamp delta, key and value
    size). Returns every metadata read, as tuples, and the metadata kept."""
    from sparkafka.producer import producer_batch as pb

    if use_c and pb._c_run_success_callbacks is None:
        pytest.skip("the C accelerator is not in use")
    read: list[tuple[object, ...]] = []
    kept: list[RecordMetadata] = []

    def reader(md: RecordMetadata, err: Any) -> None:
        read.append(tuple(md))

    def keeper(md: RecordMetadata, err: Any) -> None:
        read.append(tuple(md))
        kept.append(md)

    def collector(md: RecordMetadata, err: Any) -> None:
        gc.collect()
        read.append(tuple(md))

    callbacks = {"r": reader, "k": keeper, "c": collector}
    entries: list[object] = []
    for i, (kind, slots) in enumerate(zip(kinds, fields)):
        entries += [callbacks[kind], i, *slots]
    batch = make_batch()
    batch.try_append(TS, None, b"a", None, None, 0.0)
    batch.result.base_offset, batch.result.log_append_time = 500, log_append_time
    saved = pb._c_run_success_callbacks
    pb._c_run_success_callbacks = saved if use_c else None
    try:
        batch._run_success_callbacks(entries)
    finally:
        pb._c_run_success_callbacks = saved
    return read, kept


@pytest.mark.parametrize("use_c", [False, True])
def test_success_callbacks_that_keep_or_drop_their_metadata_each_see_their_own(use_c: bool) -> None:
    """The C loop fills one metadata tuple again while no callback keeps it (as zip() reuses its
    result): a callback that keeps its metadata must find it unchanged after later callbacks, one that
    only reads it must read its own record's values, and a collection in between (which may untrack
    a tuple of atoms) changes neither."""
    kinds = "rrkrcrkkr"
    read, kept = _recording_loop(use_c, kinds, [(i * 3, i if i % 2 else -1, 100 + i) for i in range(len(kinds))])
    expected = [(T, 1, 500 + i, TS + i * 3, i if i % 2 else -1, 100 + i) for i in range(len(kinds))]
    assert read == expected
    assert [tuple(md) for md in kept] == [expected[2], expected[6], expected[7]]
    assert len({id(md) for md in kept}) == 3 and all(type(md) is RecordMetadata for md in kept)


@pytest.mark.parametrize("use_c", [False, True])
@pytest.mark.parametrize("log_append_time", [-1, 777])
def test_success_callbacks_see_their_own_timestamp_when_records_share_or_change_it(
        use_c: bool, log_append_time: int) -> None:
    """Records of a batch mostly share their millisecond, and the C loop then gives the next record the
    reused metadata's timestamp object again: every callback must still read its own record's
    timestamp through runs of equal and changing ones, across callbacks that keep their metadata (the
    next record gets a new tuple) and with the broker's LogAppendTime (one value for all)."""
    deltas = [0, 0, 0, 4, 4, 0, 0, 9, 9, 9, 2, 2]
    read, kept = _recording_loop(use_c, "rrkrrrkkrrrk", [(d, 8, 100) for d in deltas], log_append_time)
    times = [TS + d if log_append_time == -1 else log_append_time for d in deltas]
    expected = [(T, 1, 500 + i, times[i], 8, 100) for i in range(len(deltas))]
    assert read == expected
    assert [tuple(md) for md in kept] == [expected[2], expected[6], expected[7], expected[11]]


def test_c_callback_entries_grow_past_many_records_and_mix_with_python_appends() -> None:
    """The C append writes a record's five callback slots into the list in place, making room itself;
    the list must read exactly as the Python path builds it across many growths, with Python appends
    (a record with headers) in between, and hold one reference per slot, no more."""
    if accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")

    def callback(md: object, err: object) -> None:
        pass

    before = sys.getrefcount(callback)
    c_batch, py_batch = make_batch(1 << 20), make_batch(1 << 20)
    for batch in (c_batch, py_batch):
        assert batch.try_append(TS, None, b"first", None, callback, 0.0) is not None
    for i in range(1, 700):
        key = b"k%d" % i
        if i % 97 == 0:  # the Python path appends to the same list
            for batch in (c_batch, py_batch):
                assert batch.try_append(TS + i, key, VALUE, [("h", b"1")], callback, 0.0) is not None
            continue
        cb = None if i % 5 == 0 else callback
        index = c_batch.try_append_open(TS + i, key, VALUE, cb, len(key), len(VALUE))
        assert index == i and py_batch._try_append_open_py(TS + i, key, VALUE, cb, len(key), len(VALUE)) == i
    del cb
    assert c_batch._callbacks == py_batch._callbacks
    entries = len(c_batch._callbacks) // 5
    assert entries == 1 + sum(1 for i in range(1, 700) if i % 5 or i % 97 == 0)
    assert sys.getrefcount(callback) == before + 2 * entries
    seen: list[int] = []
    c_batch.result.base_offset, c_batch.result.log_append_time = 0, -1
    c_batch._run_success_callbacks([x if x is not callback else (lambda md, err: seen.append(md.offset))
                                    for x in c_batch._callbacks])
    assert seen == [0] + [i for i in range(1, 700) if i % 5 or i % 97 == 0]
    del c_batch, py_batch, batch  # (the loop variable holds the last batch too)
    gc.collect()
    assert sys.getrefcount(callback) == before
