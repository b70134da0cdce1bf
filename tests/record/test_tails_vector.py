"""``tails_vector.encode_tails``: the numpy path of ``RecordBatchBuilder._append_tails_py`` equals its loop.

How it works: each test fills two builders the same way, one through the per-row loop (numpy disabled)
and one through numpy (used for every uncompressed call), and compares how many rows each call took, the
builders' sizes and the closed batches byte for byte. The inputs reach what ``test_arrow_records.py``'s
Arrow rows do not: offset deltas past 63 and 8,191 (two- and three-byte varints), record lengths past 8,191,
non-zero timestamp deltas, batches already holding records, a first row much longer than the rest (the
window of rows looked at grows), and limits a few rows wide. Also: which path the builder picks by
default, and the loop alone when numpy cannot be imported. Runs with and without the C accelerator (the
Python path is called directly).
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkafka.record.builder as builder_module
import sparkafka.record.tails_vector as vector_module
from sparkafka.producer.arrow.tails import encode_tails, tail_buffers
from sparkafka.record import CompressionType, RecordBatchBuilder, decode_batch
from sparkafka.record.layout import RECORD_BATCH_OVERHEAD

TS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def python_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(builder_module, "_c_append_tails", None)
    yield


def _tails(lengths: list[int]) -> tuple[memoryview, memoryview, int]:
    """The tails of keyless records whose values have ``lengths`` (each tail 3 to 5 bytes longer)."""
    values = [bytes([(7 * i + j) & 0xFF for j in range(n)]) for i, n in enumerate(lengths)]
    return tail_buffers(encode_tails(None, pa.array(values, pa.binary()), None))


def _fill(monkeypatch: pytest.MonkeyPatch, numpy: bool, lengths: list[int], calls: list[tuple[int, int]],
          limit: int) -> tuple[list[int], RecordBatchBuilder]:
    """Append rows of ``lengths`` with each ``(rows, timestamp delta)`` call in turn; the counts taken."""
    monkeypatch.setattr(builder_module, "VECTOR_MIN_ROWS", 0 if numpy else 1 << 62)
    offsets, data, first = _tails(lengths)
    builder = RecordBatchBuilder(bytearray(limit), limit)
    taken = []
    at = first
    end = first + len(lengths)
    for rows, delta in calls:
        count = builder.append_tails(offsets, data, at, min(end, at + rows), TS + delta)
        taken.append(count)
        at += count
    return taken, builder


def _same(monkeypatch: pytest.MonkeyPatch, lengths: list[int], calls: list[tuple[int, int]], limit: int) -> int:
    if vector_module.numpy_module() is None:
        pytest.skip("numpy is not installed (it is in the dev group)")
    taken_loop, loop = _fill(monkeypatch, False, lengths, calls, limit)
    taken_numpy, vector = _fill(monkeypatch, True, lengths, calls, limit)
    assert taken_numpy == taken_loop
    assert (vector.record_count, vector.uncompressed_bytes, vector.estimated_size_in_bytes) == (
        loop.record_count, loop.uncompressed_bytes, loop.estimated_size_in_bytes)
    batch = bytes(vector.close())
    assert batch == bytes(loop.close())
    assert len(decode_batch(batch).records) == loop.record_count
    return loop.record_count


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.one_of(st.integers(0, 200), st.integers(8180, 8200)), min_size=1, max_size=120),
       calls=st.lists(st.tuples(st.integers(1, 120), st.sampled_from([0, 0, 1, -70, 9000])), min_size=1,
                      max_size=4),
       limit=st.integers(100, 300_000))
def test_numpy_takes_the_same_rows_and_writes_the_same_bytes(monkeypatch: pytest.MonkeyPatch, lengths: list[int],
                                                             calls: list[tuple[int, int]], limit: int) -> None:
    _same(monkeypatch, lengths, calls, limit)


def test_offset_deltas_past_8191_and_lengths_past_8191(monkeypatch: pytest.MonkeyPatch) -> None:
    """8,300 small rows (offset deltas of three bytes from 8,192 on), then rows whose records need a
    three-byte length, appended in calls that start before and end after each boundary."""
    lengths = [3] * 8300 + [9000, 3, 20000, 5]
    calls = [(60, 0), (10, 0), (8100, 0), (50, 0), (100, 0), (4, 0)]
    assert _same(monkeypatch, lengths, calls, 1 << 20) == len(lengths)


def test_timestamp_deltas_of_one_to_three_bytes_in_eight_byte_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small rows whose headers fit one int64 (the lookup-table path), with a timestamp delta of each width
    after the first call: the attributes and timestampDelta bytes sit between two varints of one or two
    bytes (rows of 40 and 100 bytes: lengths of one and two bytes; offset deltas past 63)."""
    lengths = [40, 100] * 150
    calls = [(30, 0), (50, 1), (60, -70), (80, 9000), (80, -9000)]
    assert _same(monkeypatch, lengths, calls, 1 << 16) == 300


def test_a_record_past_one_mebibyte(monkeypatch: pytest.MonkeyPatch) -> None:
    """A four-byte length varint: the first record of an empty batch fits whatever its size."""
    assert _same(monkeypatch, [1_100_000, 3], [(2, 0)], 1 << 20) == 1


def test_first_row_much_longer_than_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows looked at are sized by the first one; every one of them fits, so the window grows."""
    assert _same(monkeypatch, [5000] + [3] * 5000, [(6000, 0)], 65536) == 5001


def test_builder_uses_numpy_only_for_many_rows_with_room_for_them(monkeypatch: pytest.MonkeyPatch) -> None:
    if vector_module.numpy_module() is None:
        pytest.skip("numpy is not installed")
    used: list[int] = []
    real = vector_module.encode_tails

    def spy(*args: object) -> object:
        result = real(*args)  # type: ignore[arg-type]
        used.append(result[0])
        return result

    monkeypatch.setattr(builder_module, "encode_tails", spy)
    offsets, data, first = _tails([108] * 5000)
    small = RecordBatchBuilder(bytearray(16384), 16384)
    assert 130 < small.append_tails(offsets, data, first, first + 5000, TS) < 150
    assert used == []  # room for ~140 rows (batch.size's default): the loop
    few = RecordBatchBuilder(bytearray(262144), 262144)
    assert few.append_tails(offsets, data, first, first + 200, TS) == 200
    assert used == []  # room for ~2,200 rows, but a call of 200 (a partition's share of an Arrow batch): the loop
    medium = RecordBatchBuilder(bytearray(40960), 40960)
    count = medium.append_tails(offsets, data, first, first + 5000, TS)
    assert 330 < count < 360 and used == [count]  # ~350 rows: numpy
    used.clear()
    large = RecordBatchBuilder(bytearray(262144), 262144)
    count = large.append_tails(offsets, data, first, first + 5000, TS)
    assert count > 2000 and used == [count]  # ~2,200 rows: numpy
    compressed = RecordBatchBuilder(bytearray(262144), 262144, compression=CompressionType.LZ4)
    compressed.append_tails(offsets, data, first, first + 5000, TS)
    assert used == [count]  # compression: always the loop


def test_without_numpy_the_loop_does_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    lengths = [108] * 3000
    offsets, data, first = _tails(lengths)
    with_numpy = RecordBatchBuilder(bytearray(262144), 262144)
    taken = with_numpy.append_tails(offsets, data, first, first + 3000, TS)
    monkeypatch.setattr(vector_module, "_numpy", None)
    monkeypatch.setattr(vector_module, "_looked", True)
    assert vector_module.numpy_module() is None
    without = RecordBatchBuilder(bytearray(262144), 262144)
    assert without.append_tails(offsets, data, first, first + 3000, TS) == taken
    assert bytes(without.close()) == bytes(with_numpy.close())


# ----------------------------------------------------------------------------------- encode_run


def _batches_one_by_one(monkeypatch: pytest.MonkeyPatch, lengths: list[int], limit: int) -> list[tuple[int, bytes]]:
    """The rows into new batches of write limit ``limit`` one after the other, by the per-row loop."""
    monkeypatch.setattr(builder_module, "VECTOR_MIN_ROWS", 1 << 62)
    offsets, data, first = _tails(lengths)
    at, end = first, first + len(lengths)
    out = []
    while at < end:
        builder = RecordBatchBuilder(bytearray(limit), limit)
        count = builder.append_tails(offsets, data, at, end, TS)
        out.append((count, bytes(builder.close())))
        at += count
    return out


def _batches_of_the_run(lengths: list[int], limit: int) -> list[tuple[int, bytes]] | None:
    np = vector_module.numpy_module()
    if np is None:
        pytest.skip("numpy is not installed (it is in the dev group)")
    offsets, data, first = _tails(lengths)
    plan = vector_module.encode_run(np, offsets, data, first, first + len(lengths), limit)
    if plan is None:
        return None
    out = []
    for count, records in plan:
        builder = RecordBatchBuilder(bytearray(limit), limit)
        assert builder.append_encoded(records, count, TS, limit)
        out.append((count, bytes(builder.close())))
    return out


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lengths=st.lists(st.one_of(st.integers(0, 300), st.integers(1000, 3000)), min_size=1, max_size=700),
       limit=st.one_of(st.integers(150, 4000), st.integers(4000, 70_000)))
def test_a_run_laid_out_at_once_equals_its_batches_one_by_one(monkeypatch: pytest.MonkeyPatch, lengths: list[int],
                                                              limit: int) -> None:
    expected = _batches_one_by_one(monkeypatch, lengths, limit)
    got = _batches_of_the_run(lengths, limit)
    if got is None:  # a row (tail 3 to 5 bytes longer than its value) that needs a larger buffer, or so many
        # rows fitting a batch that offset deltas could pass two varint bytes (8,192): no plan
        assert max(lengths) + 5 + 82 > limit or (limit - 61) // (min(lengths) + 5) >= 8192
    else:
        assert got == expected


def test_a_run_of_batches_ending_before_and_after_their_64th_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Batch ends in the one-byte offset deltas (large rows) and past them (small rows), in one run."""
    lengths = [400] * 100 + [20] * 400 + [400] * 100
    assert _batches_of_the_run(lengths, 8000) == _batches_one_by_one(monkeypatch, lengths, 8000)


def test_every_limit_around_a_batch_end_past_the_64th_row(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each byte of write limit over ~two rows: the run's batch ends equal the loop's at every one (a size
    off by one byte for a row would move an end)."""
    lengths = [100] * 150
    for limit in range(7350, 7600):
        assert _batches_of_the_run(lengths, limit) == _batches_one_by_one(monkeypatch, lengths, limit), limit


def test_no_plan_when_a_batch_would_take_more_than_8192_rows_or_a_record_length_needs_three_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # empty values: 7-byte records up to offset delta 63, 8 bytes up to 8,191, 9 from 8,192 on
    exact = RECORD_BATCH_OVERHEAD + 64 * 7 + 8128 * 8
    assert _batches_one_by_one(monkeypatch, [0] * 8200, exact)[0][0] == 8192
    assert _batches_of_the_run([0] * 8200, exact) == _batches_one_by_one(monkeypatch, [0] * 8200, exact)
    assert _batches_one_by_one(monkeypatch, [0] * 8200, exact + 9)[0][0] == 8193
    assert _batches_of_the_run([0] * 8200, exact + 9) is None  # an offset delta of three varint bytes
    assert _batches_of_the_run([10] * 20 + [8190], 20_000) is None  # a record length of three varint bytes
    assert _batches_of_the_run([10] * 20 + [8100], 20_000) is not None


def test_append_encoded_takes_only_what_it_was_laid_out_for() -> None:
    np = vector_module.numpy_module()
    if np is None:
        pytest.skip("numpy is not installed (it is in the dev group)")
    offsets, data, first = _tails([10, 10])
    plan = vector_module.encode_run(np, offsets, data, first, first + 2, 1000)
    assert plan is not None
    (count, laid_out), = plan
    assert not RecordBatchBuilder(bytearray(2000), 2000).append_encoded(laid_out, count, TS, 1000)  # another limit
    compressed = RecordBatchBuilder(bytearray(1000), 1000, compression=CompressionType.GZIP)
    assert not compressed.append_encoded(laid_out, count, TS, 1000)
    used = RecordBatchBuilder(bytearray(1000), 1000)
    used.append_tails(offsets, data, first, first + 1, TS)
    assert not used.append_encoded(laid_out, count, TS, 1000)  # not empty
    fresh = RecordBatchBuilder(bytearray(1000), 1000)
    assert fresh.append_encoded(laid_out, count, TS, 1000)
    assert [r.value for r in decode_batch(bytes(fresh.close())).records] == [bytes(range(10)), bytes(
        (7 + j) & 0xFF for j in range(10))]
