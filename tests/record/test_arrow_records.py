"""The bulk Arrow encoder: ``encode_tails`` + ``RecordBatchBuilder.append_tails`` == ``try_append``.

How it works: every test builds the same records twice, once row by row with ``try_append`` (the
reference, already checked against Kafka's golden bytes elsewhere) and once from Arrow columns through
``encode_tails`` and ``append_tails``, and compares the closed batches byte for byte, the number of
records that fit a write limit (fill until refused), the size estimates, and what the reader decodes.
Inputs cover null / empty / unicode / long (> 64 and > 8192 bytes) keys and values, every header shape
(none, null list, empty list, several, null and string values), string / large / view / dictionary
column types and sliced arrays and record batches. Each test runs on both implementations of
``append_tails``: the C accelerator (``impl == "c"``), the Python loop (``_c_append_tails`` patched
to None) and numpy (``impl == "numpy"``: the Python side with ``tails_vector.encode_tails`` taking every
uncompressed call, however few rows fit); the Python sides also encode tails with Arrow kernels instead of the
C ``encode_tails_kv`` / ``encode_tails_kvh`` (rows without / with headers), which ``test_c_tails_*`` compare
with the kernels directly.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import sparkafka.record.builder as builder_module
from sparkafka.producer.arrow import tails as tails_module
from sparkafka.producer.arrow.tails import encode_tails, tail_buffers
from sparkafka.record import CompressionType, RecordBatchBuilder, decode_batch
from sparkafka.record.tails_vector import numpy_module

TS = 1_700_000_000_000

Text = str | bytes
Header = tuple[str, Text | None]
Row = tuple[Text | None, Text | None, list[Header] | None]


def _b(x: Text | None) -> bytes | None:
    return x.encode() if isinstance(x, str) else x


def _ref_headers(headers: list[Header] | None) -> list[tuple[str, bytes | None]] | None:
    return None if headers is None else [(k, _b(v)) for k, v in headers]


# ---------------------------------------------------------------------------------------- fixtures


@pytest.fixture(params=["c", "py", "numpy"])
def impl(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on the C ``append_tails``, on ``RecordBatchBuilder._append_tails_py``'s loop and on
    its numpy path (``tails_vector``, used for every uncompressed call)."""
    if request.param == "c":
        if builder_module._c_append_tails is None:
            pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    else:
        monkeypatch.setattr(builder_module, "_c_append_tails", None)
        monkeypatch.setattr(tails_module, "_c_tails", None)
        monkeypatch.setattr(tails_module, "_c_tails_headers", None)
        if request.param == "numpy" and numpy_module() is None:
            pytest.skip("numpy is not installed (it is in the dev group)")
        monkeypatch.setattr(builder_module, "VECTOR_MIN_ROWS", 0 if request.param == "numpy" else 1 << 62)
    return str(request.param)


# ---------------------------------------------------------------------------------------- arrow input

TEXT_TYPES = ["string", "large_string", "string_view", "dict_string"]
BYTES_TYPES = ["binary", "large_binary", "binary_view", "dict_binary"]


def _column(items: Sequence[Text | None], kind: str) -> pa.Array:
    """``items`` as an Arrow array of ``kind`` (text kinds take str, bytes kinds take bytes)."""
    if kind.startswith("dict_"):
        return pa.array(items, getattr(pa, kind[5:])()).dictionary_encode()
    return pa.array(items, getattr(pa, kind)())


def _header_column(rows: Sequence[list[Header] | None], value_kind: str, large: bool,
                   key_kind: str = "string") -> pa.Array:
    """``list<struct<key: key_kind, value: value_kind>>`` (``large_list`` if ``large``)."""
    flat_keys: list[str] = []
    flat_values: list[Text | None] = []
    offsets = [0]
    for row in rows:
        for k, v in row or ():
            flat_keys.append(k)
            flat_values.append(v)
        offsets.append(len(flat_keys))
    items = pa.StructArray.from_arrays([_column(flat_keys, key_kind), _column(flat_values, value_kind)],
                                       names=["key", "value"])
    mask = pa.array([row is None for row in rows], pa.bool_())
    if large:
        return pa.LargeListArray.from_arrays(pa.array(offsets, pa.int64()), items, mask=mask)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), items, mask=mask)


def _as_kind(x: Text | None, text: bool) -> Text | None:
    """str for text columns, bytes for binary columns (same bytes)."""
    if x is None:
        return None
    if text:
        return x if isinstance(x, str) else x.decode("latin-1")
    return x.encode() if isinstance(x, str) else x


def _normalise(rows: Sequence[Row], key_text: bool, value_text: bool, header_text: bool) -> list[Row]:
    """The rows as the columns will hold them (text columns hold str, binary columns bytes)."""
    return [(_as_kind(k, key_text), _as_kind(v, value_text),
             None if h is None else [(hk, _as_kind(hv, header_text)) for hk, hv in h])
            for k, v, h in rows]


def _batch(rows: Sequence[Row], key_kind: str | None, value_kind: str, header_kind: str | None,
           large_list: bool = False) -> pa.RecordBatch:
    arrays: list[pa.Array] = []
    names: list[str] = []
    if key_kind is not None:
        arrays.append(_column([r[0] for r in rows], key_kind))
        names.append("key")
    arrays.append(_column([r[1] for r in rows], value_kind))
    names.append("value")
    if header_kind is not None:
        arrays.append(_header_column([r[2] for r in rows], header_kind, large_list))
        names.append("headers")
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _tails(batch: pa.RecordBatch) -> pa.Array:
    names = batch.schema.names
    return encode_tails(batch.column("key") if "key" in names else None, batch.column("value"),
                        batch.column("headers") if "headers" in names else None)


# ---------------------------------------------------------------------------------------- builders


def _reference(rows: Sequence[Row], limit: int = 1 << 30, *, ts: int = TS, buffer: bytearray | None = None,
               compression: CompressionType = CompressionType.NONE, ratio: float = 1.0,
               prefix: Sequence[tuple[int, bytes | None, bytes | None, Any]] = ()) -> tuple[RecordBatchBuilder, int]:
    """try_append every prefix record, then ``rows`` until one is refused: (builder, rows appended)."""
    b = RecordBatchBuilder(buffer, limit if buffer is None else len(buffer), compression,
                           compression_ratio_estimate=ratio)
    for p in prefix:  # records sent by send() before (the same on both sides; may be refused)
        b.try_append(*p)
    count = 0
    for key, value, headers in rows:
        if b.try_append(ts, _b(key), _b(value), _ref_headers(headers)) < 0:
            break
        count += 1
    return b, count


def _bulk(tails: pa.Array, limit: int = 1 << 30, *, ts: int = TS, buffer: bytearray | None = None,
          compression: CompressionType = CompressionType.NONE, ratio: float = 1.0,
          prefix: Sequence[tuple[int, bytes | None, bytes | None, Any]] = (),
          chunks: Sequence[int] = ()) -> tuple[RecordBatchBuilder, int]:
    """append_tails the rows (in ``chunks`` calls of those sizes, then the rest) until one is refused."""
    b = RecordBatchBuilder(buffer, limit if buffer is None else len(buffer), compression,
                           compression_ratio_estimate=ratio)
    for p in prefix:  # records sent by send() before (the same on both sides; may be refused)
        b.try_append(*p)
    offsets, data, first = tail_buffers(tails)
    n = len(tails)
    bounds = [0]
    for size in chunks:
        if bounds[-1] + size < n:
            bounds.append(bounds[-1] + size)
    bounds.append(n)
    count = 0
    for lo, hi in itertools.pairwise(bounds):
        got = b.append_tails(offsets, data, first + lo, first + hi, ts)
        count += got
        if got < hi - lo:
            break
    return b, count


def _decoded(b: RecordBatchBuilder) -> list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    batch = decode_batch(bytes(b.close()))
    return [(r.timestamp, r.key, r.value, r.headers) for r in batch.records]


def _state(b: RecordBatchBuilder) -> tuple[object, ...]:
    """What must match between the two ways of building (closes ``b``)."""
    before = (b.record_count, b.uncompressed_bytes, b.estimated_size_in_bytes, b.is_full(), b.max_timestamp)
    return (*before, bytes(b.close(5, 1, 7, False)))


def _assert_same(bulk: RecordBatchBuilder, ref: RecordBatchBuilder | tuple[object, ...]) -> None:
    expected = ref if isinstance(ref, tuple) else _state(ref)
    got = _state(bulk)
    assert got[:-1] == expected[:-1], "(count, uncompressed, estimate, full, max timestamp)"
    assert got[-1] == expected[-1], "batch bytes"


# ---------------------------------------------------------------------------------------- strategies

_LENGTHS = st.sampled_from([0, 1, 2, 5, 62, 63, 64, 65, 127, 128, 4094, 4095, 4096, 8191, 8192, 8193, 16_382,
                           16_383, 16_384, 20_000])


@st.composite
def _payload(draw: st.DrawFn) -> Text | None:
    kind = draw(st.sampled_from(["none", "small", "unicode", "sized"]))
    if kind == "none":
        return None
    if kind == "small":
        return draw(st.binary(max_size=20))
    if kind == "unicode":
        return draw(st.text(max_size=12))
    n = draw(_LENGTHS)
    return bytes((i * 7 + n) & 0xFF for i in range(n))


_header = st.tuples(st.text(max_size=6), st.one_of(st.none(), st.binary(max_size=10), st.text(max_size=5)))
_headers: st.SearchStrategy[list[Header] | None] = st.one_of(
    st.none(), st.just([]), st.lists(_header, min_size=1, max_size=4))
_row = st.tuples(_payload(), _payload(), _headers)


# ---------------------------------------------------------------------------------------- tests


EXAMPLES: list[Row] = [
    (b"key", b"value", None),
    (None, b"null key", []),
    (b"tombstone", None, [("h", b"1")]),
    (None, None, None),
    (b"", b"", []),
    ("\u043a\u043b\u044e\u0447 \U0001F600", "\u4e2d\u6587 value", [("\u00e9", "\u00fc"), ("n", None)]),
    (b"k" * 64, b"v" * 63, [("a", b"1"), ("a", b"2"), ("", b""), ("null", None)]),
    (b"k" * 8192, b"v" * 8193, [("big", b"x" * 9000)]),
    (b"\x00\xff", bytes(range(256)) * 90, None),
]


@pytest.mark.parametrize("large_list", [False, True])
@pytest.mark.parametrize(("key_kind", "value_kind", "header_kind"), [
    ("binary", "binary", "binary"),
    ("string", "large_string", "string"),
    ("large_binary", "string_view", "large_binary"),
    ("string_view", "binary_view", "large_string"),
    ("dict_string", "dict_binary", "dict_binary"),
    ("binary_view", "dict_string", "binary_view"),
])
def test_examples_identical_to_try_append(impl: str, key_kind: str, value_kind: str, header_kind: str,
                                          large_list: bool) -> None:
    rows = _normalise(EXAMPLES, "string" in key_kind, "string" in value_kind, "string" in header_kind)
    batch = _batch(rows, key_kind, value_kind, header_kind, large_list)
    bulk, count = _bulk(_tails(batch))
    ref, ref_count = _reference(rows)
    assert count == ref_count == len(rows)
    _assert_same(bulk, ref)
    decoded = _decoded(bulk)
    assert [(k, v, h) for _, k, v, h in decoded] == [
        (_b(k), _b(v), _ref_headers(h) or []) for k, v, h in rows]
    assert {ts for ts, *_ in decoded} == {TS}


@pytest.mark.parametrize("key_kind", ["large_string", "string_view", "dict_string"])
def test_header_key_types_and_field_order(impl: str, key_kind: str) -> None:
    """Header keys of any text type; the struct's fields found by name (value first here)."""
    rows = _normalise(EXAMPLES, False, False, False)
    headers = _header_column([r[2] for r in rows], "binary", False, key_kind)
    items = headers.values
    swapped = pa.StructArray.from_arrays([items.field("value"), items.field("key")], names=["value", "key"])
    headers = pa.ListArray.from_arrays(headers.offsets, swapped, mask=headers.is_null())
    batch = _batch(rows, "binary", "binary", None)
    bulk, _ = _bulk(encode_tails(batch.column("key"), batch.column("value"), headers))
    ref, _ = _reference(rows)
    _assert_same(bulk, ref)


def test_null_header_list_with_a_non_empty_segment(impl: str) -> None:
    """Arrow allows a null list slot to span child values: they are not headers of that row."""
    items = pa.StructArray.from_arrays([pa.array(["a", "b", "c"]), pa.array([b"1", b"2", b"3"])],
                                       names=["key", "value"])
    headers = pa.ListArray.from_arrays(pa.array([0, 2, 3], pa.int32()), items,
                                       mask=pa.array([True, False]))
    assert headers.to_pylist() == [None, [{"key": "c", "value": b"3"}]]
    for sl in (slice(0, 2), slice(1, 2)):
        tails = encode_tails(None, pa.array([b"x", b"y"])[sl], headers[sl])
        bulk, _ = _bulk(tails)
        expected: list[Row] = [(None, b"x", None), (None, b"y", [("c", b"3")])]
        ref, _ = _reference(expected[sl])
        _assert_same(bulk, ref)


def test_no_key_and_no_header_columns(impl: str) -> None:
    rows: list[Row] = [(None, b"v%d" % i, None) for i in range(100)] + [(None, None, None)]
    bulk, count = _bulk(_tails(_batch(rows, None, "binary", None)))
    ref, _ = _reference(rows)
    assert count == len(rows)
    _assert_same(bulk, ref)


@pytest.mark.parametrize("where", ["arrays", "record_batch", "headers_only"])
def test_sliced_inputs(impl: str, where: str) -> None:
    """Slices of arrays and of record batches (non-zero offsets in every buffer) encode only their rows."""
    rows = _normalise(EXAMPLES * 3, False, False, False)
    batch = _batch(rows, "binary", "large_binary", "binary")
    for start, length in [(1, 5), (4, 10), (len(rows) - 3, 3), (7, 1), (0, len(rows) - 2)]:
        if where == "record_batch":
            part = batch.slice(start, length)
            tails = _tails(part)
        elif where == "arrays":
            tails = encode_tails(batch.column("key").slice(start, length),
                                 batch.column("value").slice(start, length),
                                 batch.column("headers").slice(start, length))
        else:  # an unsliced key/value of the same rows, built separately: only the headers are sliced
            sub = _batch(rows[start:start + length], "binary", "binary", None)
            tails = encode_tails(sub.column("key"), sub.column("value"),
                                 batch.column("headers").slice(start, length))
        expected = rows[start:start + length]
        bulk, count = _bulk(tails)
        ref, _ = _reference(expected)
        assert count == length
        _assert_same(bulk, ref)


def test_a_sliced_headers_column_encodes_only_its_own_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ListArray.values`` is every header of the unsliced column: encoding them all for each slice made
    sending a big batch in many slices quadratic. Only the slice's headers reach the encoder, with the
    same bytes as an unsliced copy of the rows. (The Arrow kernels' path; the accelerator's reads only the
    slice's items too, and ``test_c_tails_with_headers_equal_the_kernel_tails`` checks it on slices.)"""
    monkeypatch.setattr(tails_module, "_c_tails_headers", None)
    rows: list[Row] = [(b"k%d" % i, b"v%d" % i, [("h", b"x%d" % i), ("g", None)]) for i in range(1000)]
    batch = _batch(rows, "binary", "binary", "binary")
    encoded: list[int] = []
    real = tails_module._length_and_bytes

    def counting(arr: pa.Array) -> Any:
        encoded.append(len(arr))
        return real(arr)

    monkeypatch.setattr(tails_module, "_length_and_bytes", counting)
    part = batch.slice(600, 10)
    tails = encode_tails(part.column("key"), part.column("value"), part.column("headers"))
    assert encoded[-2:] == [20, 20]  # header keys, then header values: 2 headers x 10 rows, not 2,000
    copy = _batch(rows[600:610], "binary", "binary", "binary")
    assert tails.equals(encode_tails(copy.column("key"), copy.column("value"), copy.column("headers")))


def test_sliced_tails_array(impl: str) -> None:
    """``tail_buffers`` of a sliced tails array: ``first`` points at the slice's first row."""
    rows = _normalise(EXAMPLES, False, False, False)
    tails = _tails(_batch(rows, "binary", "binary", "binary"))
    part = tails.slice(3, 4)
    bulk, count = _bulk(part)
    ref, _ = _reference(rows[3:7])
    assert count == 4
    _assert_same(bulk, ref)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_row, min_size=1, max_size=25),
       kinds=st.tuples(st.sampled_from(TEXT_TYPES + BYTES_TYPES), st.sampled_from(TEXT_TYPES + BYTES_TYPES),
                       st.sampled_from(TEXT_TYPES + BYTES_TYPES), st.booleans(), st.booleans()),
       cut=st.tuples(st.integers(0, 3), st.integers(0, 3)))
def test_equivalence_property(rows: list[Row], kinds: tuple[str, str, str, bool, bool],
                              cut: tuple[int, int]) -> None:
    """Any rows, column types and slice: byte-identical batches and the same decoded records, on both
    implementations (the fixture-less loop: Hypothesis and function-scoped fixtures do not mix)."""
    key_kind, value_kind, header_kind, large_list, no_keys = kinds
    rows = _normalise(rows, "string" in key_kind, "string" in value_kind, "string" in header_kind)
    if no_keys:
        rows = [(None, v, h) for _, v, h in rows]
    # padding rows before and after, sliced away
    before: list[Row] = [(b"pad", b"pad", [("p", b"p")])] * cut[0]
    after: list[Row] = [(None, b"x", None)] * cut[1]
    pad = before + rows + after
    pad = _normalise(pad, "string" in key_kind, "string" in value_kind, "string" in header_kind)
    batch = _batch(pad, None if no_keys else key_kind, value_kind, header_kind, large_list)
    tails = _tails(batch.slice(cut[0], len(rows)))
    ref, _ = _reference(rows)
    expected = bytes(ref.close())
    for c_path in (True, False):
        if c_path and builder_module._c_append_tails is None:
            continue
        saved = builder_module._c_append_tails
        if not c_path:
            builder_module._c_append_tails = None
        try:
            bulk, count = _bulk(tails)
        finally:
            builder_module._c_append_tails = saved
        assert count == len(rows)
        assert bytes(bulk.close()) == expected
        assert [(k, v, h) for _, k, v, h in _decoded(bulk)] == [
            (_b(k), _b(v), _ref_headers(h) or []) for k, v, h in rows]


def _with_impls(c_path: bool) -> Any:
    """A context for the Python (False) or C (True) ``append_tails`` inside a Hypothesis test."""
    class _Ctx:
        def __enter__(self) -> None:
            self.saved = builder_module._c_append_tails
            if not c_path:
                builder_module._c_append_tails = None

        def __exit__(self, *exc: object) -> None:
            builder_module._c_append_tails = self.saved
    return _Ctx()


def _impls() -> list[bool]:
    return [False] if builder_module._c_append_tails is None else [True, False]


_CODECS = [CompressionType.NONE, CompressionType.LZ4, CompressionType.ZSTD, CompressionType.GZIP]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_row, min_size=1, max_size=30),
       limit=st.integers(0, 30_000),
       codec=st.sampled_from(_CODECS),
       ratio=st.sampled_from([1.0, 0.5, 0.1, 0.9, 1.3]),
       pooled=st.booleans(),
       chunks=st.lists(st.integers(1, 8), max_size=5),
       prefix=st.lists(st.tuples(st.integers(TS - 200, TS + 200), st.none() | st.binary(max_size=30),
                                 st.none() | st.binary(max_size=300),
                                 st.none() | st.lists(st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)),
                                                      max_size=2)), max_size=3),
       ts=st.sampled_from([TS, TS + 1, TS - 1, TS + 100, TS - 100, TS + 10**9]))
def test_write_limit_property(rows: list[Row], limit: int, codec: CompressionType, ratio: float, pooled: bool,
                              chunks: list[int], prefix: list[Any], ts: int) -> None:
    """Fill until refused: the same records fit (also split over several calls, after records appended by
    ``try_append`` with other timestamps, with compression's ratio estimate, in a pooled buffer)."""
    rows = _normalise(rows, False, False, False)
    tails = _tails(_batch(rows, "binary", "binary", "binary"))
    pool_size = max(limit, 1)
    ref, ref_count = _reference(rows, limit, ts=ts, buffer=bytearray(pool_size) if pooled else None,
                                compression=codec, ratio=ratio, prefix=prefix)
    expected = _state(ref)
    for c_path in _impls():
        buffer = bytearray(pool_size) if pooled else None
        with _with_impls(c_path):
            bulk, count = _bulk(tails, limit, ts=ts, buffer=buffer, compression=codec, ratio=ratio,
                                prefix=prefix, chunks=chunks)
        assert count == ref_count, f"c={c_path}"
        if buffer is not None:
            assert len(buffer) == pool_size  # a pooled buffer is never resized
        _assert_same(bulk, expected)
        if not prefix:
            assert count >= 1  # the first record of an empty batch always fits


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4], ids=lambda c: c.name)
@pytest.mark.parametrize("ratio", [1.0, 0.25])
def test_fill_until_refused_many_small_records(impl: str, codec: CompressionType, ratio: float) -> None:
    """Offset deltas past 64 and 8192 (2- and 3-byte varints) and the exact refusal point."""
    rows: list[Row] = [(b"k%d" % (i % 100), b"v" * (i % 13), None) for i in range(12_000)]
    tails = _tails(_batch(rows, "binary", "binary", None))
    for limit in (16_384, 100_000, 200_000, 1 << 22):
        ref, ref_count = _reference(rows, limit, compression=codec, ratio=ratio)
        bulk, count = _bulk(tails, limit, compression=codec, ratio=ratio)
        assert count == ref_count
        assert count > 0
        _assert_same(bulk, ref)
        # nothing more fits, one at a time either
        offsets, data, first = tail_buffers(tails)
        if count < len(rows):
            assert bulk.append_tails(offsets, data, first + count, first + count + 1, TS) == 0 or bulk.is_closed


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4], ids=lambda c: c.name)
@pytest.mark.parametrize("ratio", [1.0, 0.37])
def test_exact_write_limit_boundaries(impl: str, codec: CompressionType, ratio: float) -> None:
    """At every record boundary: a limit that the next record reaches exactly still takes it, one byte
    less refuses it (the same as try_append)."""
    rows = _normalise(EXAMPLES[:7] * 12, False, False, False)
    tails = _tails(_batch(rows, "binary", "binary", "binary"))
    probe = RecordBatchBuilder(None, 1 << 30, codec, compression_ratio_estimate=ratio)
    boundaries = []
    for key, value, headers in rows:
        before, uncompressed = probe.estimated_size_in_bytes, probe.uncompressed_bytes
        probe.try_append(TS, _b(key), _b(value), _ref_headers(headers))
        boundaries.append(before + probe.uncompressed_bytes - uncompressed)  # old estimate + record size
    for k in range(1, len(rows)):
        for limit in (boundaries[k] - 1, boundaries[k], boundaries[k] + 1):
            ref, ref_count = _reference(rows, limit, compression=codec, ratio=ratio)
            if codec == CompressionType.NONE:  # (compressed, the 2 x limit cap may refuse first)
                assert ref_count == (k if limit < boundaries[k] else k + 1) or ref_count > k + 1
            expected = _state(ref)
            for chunks in ([], [1] * len(rows), [3] * len(rows)):  # one call, or calls on a batch with records
                bulk, count = _bulk(tails, limit, compression=codec, ratio=ratio, chunks=chunks)
                assert count == ref_count, (k, limit, chunks[:1])
                _assert_same(bulk, expected)


def test_multi_megabyte_values_and_headers(impl: str) -> None:
    """Lengths whose varints take 3 and 4 bytes (>= 2^13 and >= 2^20 bytes), in keys, values and headers."""
    rows: list[Row] = [(b"k" * 20_000, b"v" * 1_100_000, [("h", b"h" * 1_050_000)]),
                       (None, b"w" * 1_048_576, None), (b"small", b"small", [])]
    bulk, count = _bulk(_tails(_batch(rows, "binary", "large_binary", "binary")))
    ref, _ = _reference(rows)
    assert count == 3
    _assert_same(bulk, ref)


def test_first_record_of_an_empty_batch_always_fits(impl: str) -> None:
    rows: list[Row] = [(b"k", b"x" * 50_000, [("h", b"y" * 100)]), (None, b"small", None)]
    tails = _tails(_batch(rows, "binary", "binary", "binary"))
    for limit in (0, 10, 61, 1000):
        bulk, count = _bulk(tails, limit)
        ref, ref_count = _reference(rows, limit)
        assert count == ref_count == 1
        _assert_same(bulk, ref)


def test_pooled_buffer_switches_to_a_private_one(impl: str) -> None:
    """Records that outgrow the pooled buffer (compression lets a batch hold up to twice its limit in
    uncompressed bytes) move to a private buffer; the pooled one keeps its size."""
    rows: list[Row] = [(b"key-%d" % i, b"abcdefgh" * 40, None) for i in range(40)]
    tails = _tails(_batch(rows, "binary", "binary", None))
    pooled = bytearray(4096)
    bulk, count = _bulk(tails, buffer=pooled, compression=CompressionType.LZ4, ratio=0.3)
    ref, ref_count = _reference(rows, buffer=bytearray(4096), compression=CompressionType.LZ4, ratio=0.3)
    assert count == ref_count
    assert bulk.uncompressed_bytes > len(pooled) - 61  # they could not have fitted in place
    assert len(pooled) == 4096
    _assert_same(bulk, ref)
    # and one that fits stays in place
    pooled2 = bytearray(1 << 16)
    small, n = _bulk(tails, buffer=pooled2)
    assert n == len(rows)
    assert small.close().obj is pooled2


def test_pooled_buffer_first_record_larger_than_the_buffer(impl: str) -> None:
    rows: list[Row] = [(None, b"z" * 10_000, None)]
    pooled = bytearray(1024)
    bulk, count = _bulk(_tails(_batch(rows, "binary", "binary", None)), buffer=pooled)
    assert count == 1
    assert len(pooled) == 1024
    assert [v for _, _, v, _ in _decoded(bulk)] == [b"z" * 10_000]


def test_appends_after_try_append_use_the_batch_base_timestamp(impl: str) -> None:
    """A batch opened by send() and continued by the bulk path: deltas against its first timestamp."""
    rows: list[Row] = [(b"a", b"1", None), (None, b"2", [("h", None)])]
    tails = _tails(_batch(rows, "binary", "binary", "binary"))
    for ts in (TS - 5, TS + 3, TS + 70, TS - 70, TS + 2**40):
        prefix = [(TS, b"first", b"x", [("p", b"q")])]
        bulk, count = _bulk(tails, ts=ts, prefix=prefix)
        ref, _ = _reference(rows, ts=ts, prefix=prefix)
        assert count == 2
        _assert_same(bulk, ref)
        assert [t for t, *_ in _decoded(bulk)] == [TS, ts, ts]
        assert bulk.base_timestamp == TS


def test_closed_or_empty_range_appends_nothing(impl: str) -> None:
    tails = _tails(_batch([(b"k", b"v", None)], "binary", "binary", None))
    offsets, data, first = tail_buffers(tails)
    b = RecordBatchBuilder(None, 1 << 20)
    assert b.append_tails(offsets, data, first, first, TS) == 0
    assert b.record_count == 0
    b.close_for_appends()
    assert b.append_tails(offsets, data, first, first + 1, TS) == 0
    assert b.record_count == 0


def test_bulk_rows_then_fast_path_appends(impl: str) -> None:
    """send()'s fast append continues a batch the bulk path filled part way (shared position/state)."""
    rows: list[Row] = [(b"k%d" % i, b"v%d" % i, None) for i in range(70)]
    bulk, _ = _bulk(_tails(_batch(rows, "binary", "binary", None)))
    ref, _ = _reference(rows)
    for i in range(70, 80):
        assert bulk.try_append_open(TS + 1, b"k%d" % i, b"v%d" % i) > 0
        assert ref.try_append_open(TS + 1, b"k%d" % i, b"v%d" % i) > 0
    _assert_same(bulk, ref)


def test_records_property_decodes_bulk_rows(impl: str) -> None:
    """``builder.records`` (used to split a batch the broker rejected) sees the bulk rows."""
    rows = _normalise(EXAMPLES, False, False, False)
    bulk, _ = _bulk(_tails(_batch(rows, "binary", "binary", "binary")))
    assert bulk.records == [(TS, _b(k), _b(v), _ref_headers(h) or None) for k, v, h in rows]


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD, CompressionType.GZIP],
                         ids=lambda c: c.name)
def test_records_property_after_a_compressed_close(impl: str, codec: CompressionType) -> None:
    """A compressed batch the broker rejected as too large is split from ``records`` after ``close``:
    they must still decode (close compresses in place)."""
    rows = _normalise(EXAMPLES, False, False, False)
    bulk, _ = _bulk(_tails(_batch(rows, "binary", "binary", "binary")), buffer=bytearray(1 << 16),
                    compression=codec)
    expected = [(TS, _b(k), _b(v), _ref_headers(h) or None) for k, v, h in rows]
    assert bulk.records == expected
    bulk.close(5, 1, 7, False)
    assert bulk.records == expected


# ---------------------------------------------------------------------------------------- C tails

_NO_HEADER_KINDS = ["binary", "large_binary", "string", "large_string", "binary_view", "dict_binary"]


def _kernel_tails(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None = None) -> pa.Array:
    saved = tails_module._c_tails, tails_module._c_tails_headers
    tails_module._c_tails = tails_module._c_tails_headers = None
    try:
        return encode_tails(keys, values, headers)
    finally:
        tails_module._c_tails, tails_module._c_tails_headers = saved


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(_payload(), _payload()), min_size=0, max_size=40),
       kinds=st.tuples(st.sampled_from(_NO_HEADER_KINDS), st.sampled_from(_NO_HEADER_KINDS), st.booleans()),
       cut=st.tuples(st.integers(0, 9), st.integers(0, 9)))
def test_c_tails_equal_the_kernel_tails(rows: list[tuple[Text | None, Text | None]],
                                        kinds: tuple[str, str, bool], cut: tuple[int, int]) -> None:
    """The accelerator's tails (no headers) are byte for byte the Arrow kernels' ones, for every column
    layout, nulls (with validity bitmaps sliced at any bit) and slices, and decode to the rows."""
    if tails_module._c_tails is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    key_kind, value_kind, no_keys = kinds
    full: list[Row] = [(b"k" * i, None if i % 2 else b"v" * i, None) for i in range(cut[0])]
    full += [(k, v, None) for k, v in rows]
    full += [(None, b"after", None)] * cut[1]
    full = _normalise(full, "string" in key_kind, "string" in value_kind, False)
    batch = _batch(full, None if no_keys else key_kind, value_kind, None).slice(cut[0], len(rows))
    keys = None if no_keys else batch.column("key")
    got = encode_tails(keys, batch.column("value"))
    assert got.type == pa.large_binary()
    assert got.to_pylist() == _kernel_tails(keys, batch.column("value")).to_pylist()
    if rows:
        bulk, count = _bulk(got)
        assert count == len(rows)
        want = _normalise([(k, v, None) for k, v in rows], "string" in key_kind, "string" in value_kind, False)
        assert [(k, v) for _, k, v, _ in _decoded(bulk)] == [
            (None if no_keys else _b(k), _b(v)) for k, v, _ in want]


def test_c_tails_is_used_for_rows_without_headers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path really runs (the equivalence test above would pass if it never did)."""
    real = tails_module._c_tails
    if real is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    calls: list[int] = []

    def spy(*args: Any) -> Any:
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(tails_module, "_c_tails", spy)
    encode_tails(pa.array([b"k", None]), pa.array(["v", "w"]))
    encode_tails(None, pa.array([b"v"], pa.large_binary()))
    encode_tails(pa.array(["k"]).dictionary_encode(), pa.array([b"v"]))  # dictionary: the kernels
    encode_tails(None, pa.array([b"v"]), _header_column([[("h", b"x")]], "binary", False))  # encode_tails_kvh
    assert calls == [2, 1]


_HEADER_VALUE_KINDS = ["binary", "large_binary", "string", "large_string", "binary_view", "dict_binary"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(_row, min_size=0, max_size=30),
       kinds=st.tuples(st.sampled_from(_NO_HEADER_KINDS), st.sampled_from(_NO_HEADER_KINDS),
                       st.sampled_from(_HEADER_VALUE_KINDS), st.booleans(), st.booleans()),
       cut=st.tuples(st.integers(0, 9), st.integers(0, 9)))
def test_c_tails_with_headers_equal_the_kernel_tails(rows: list[Row], kinds: tuple[str, str, str, bool, bool],
                                                     cut: tuple[int, int]) -> None:
    """With a headers column, the accelerator's tails (``encode_tails_kvh``) are byte for byte the Arrow kernels'
    ones: null, empty and several headers per row, null header values, list and large_list columns, every key,
    value and header value layout (dictionary and view children go to the kernels), sliced columns; and they
    decode to the rows."""
    if tails_module._c_tails_headers is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    key_kind, value_kind, header_kind, no_keys, large_list = kinds
    full: list[Row] = [(b"k" * i, b"v", [("pre", b"x" * i)] if i % 2 else None) for i in range(cut[0])]
    full += rows
    full += [(None, b"after", [("post", None)])] * cut[1]
    full = _normalise(full, "string" in key_kind, "string" in value_kind, "string" in header_kind)
    batch = _batch(full, None if no_keys else key_kind, value_kind, header_kind, large_list).slice(cut[0], len(rows))
    keys = None if no_keys else batch.column("key")
    got = encode_tails(keys, batch.column("value"), batch.column("headers"))
    assert got.type == pa.large_binary()
    assert got.to_pylist() == _kernel_tails(keys, batch.column("value"), batch.column("headers")).to_pylist()
    if rows:
        bulk, count = _bulk(got)
        assert count == len(rows)
        want = _normalise(rows, "string" in key_kind, "string" in value_kind, "string" in header_kind)
        assert [(k, v, h) for _, k, v, h in _decoded(bulk)] == [
            (None if no_keys else _b(k), _b(v), _ref_headers(h) or []) for k, v, h in want]


def test_c_tails_with_headers_is_used_and_reads_offset_items(monkeypatch: pytest.MonkeyPatch) -> None:
    """``encode_tails_kvh`` really runs for Spark's header layout (list<struct<string, binary>>), also when the
    list's items are themselves a slice of a larger struct array; dictionary header values and null header
    structs go to the kernels."""
    real = tails_module._c_tails_headers
    if real is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    calls: list[int] = []

    def spy(*args: Any) -> Any:
        calls.append(args[-1])
        return real(*args)

    monkeypatch.setattr(tails_module, "_c_tails_headers", spy)
    big = pa.StructArray.from_arrays([pa.array(["skip", "a", "b", "c"]), pa.array([b"s", b"1", None, b"3"])],
                                     names=["key", "value"])
    headers = pa.ListArray.from_arrays(pa.array([0, 2, 2, 3], pa.int32()), big.slice(1))
    got = encode_tails(pa.array(["k1", "k2", "k3"]), pa.array([b"v1", b"v2", b"v3"]), headers)
    assert calls == [3]
    assert got.to_pylist() == _kernel_tails(pa.array(["k1", "k2", "k3"]), pa.array([b"v1", b"v2", b"v3"]),
                                            headers).to_pylist()
    assert got[0].as_py() == b"\x04k1\x04v1\x04\x02a\x021\x02b\x01"  # header b has a null value (length -1)
    dict_values = _header_column([[("h", b"x")]], "dict_binary", False)
    null_struct = pa.ListArray.from_arrays(pa.array([0, 1], pa.int32()), pa.StructArray.from_arrays(
        [pa.array(["h"]), pa.array([b"x"])], names=["key", "value"], mask=pa.array([True])))
    for column in (dict_values, null_struct):
        assert encode_tails(None, pa.array([b"v"]), column).to_pylist() == _kernel_tails(
            None, pa.array([b"v"]), column).to_pylist()
    assert calls == [3]


def test_c_tails_with_headers_rejects_inconsistent_buffers() -> None:
    """List offsets that decrease or point past the header items, or a short list validity bitmap, raise
    instead of reading out of bounds."""
    c = tails_module._c_tails_headers
    if c is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    import struct as _struct
    value = (_struct.pack("<2i", 0, 1), b"v", None, 0, False)
    no_key = (None, None, None, 0, True)
    item = (_struct.pack("<2i", 0, 1), b"h", None, 0, False)
    with pytest.raises(ValueError, match="not increasing or point past"):
        c(*no_key, *value, _struct.pack("<2i", 0, 2), None, 0, False, *item, *item, 1, 1)  # 2 > 1 item
    with pytest.raises(ValueError, match="not increasing"):
        c(*no_key, *value, _struct.pack("<2i", 1, 0), None, 0, False, *item, *item, 1, 1)
    with pytest.raises(ValueError, match="outside the offsets"):
        c(*no_key, *value, _struct.pack("<1i", 0), None, 0, False, *item, *item, 1, 1)
    with pytest.raises(ValueError, match="validity bitmap"):
        c(*no_key, *value, _struct.pack("<2i", 0, 1), b"", 0, False, *item, *item, 1, 1)
    with pytest.raises(ValueError, match="outside the offsets"):
        c(*no_key, *value, _struct.pack("<2i", 0, 2), None, 0, False, *item, *item, 2, 1)  # 2 items, 1 item row


def test_c_tails_rejects_inconsistent_buffers() -> None:
    """Offsets that decrease or point past the data, or a short validity bitmap, raise instead of reading
    out of bounds."""
    c = tails_module._c_tails
    if c is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    import struct as _struct
    offsets = _struct.pack("<3i", 0, 2, 1)  # decreasing
    with pytest.raises(ValueError, match="not increasing"):
        c(None, None, None, 0, True, offsets, b"ab", None, 0, False, 2)
    with pytest.raises(ValueError, match="not increasing or point past"):
        c(None, None, None, 0, True, _struct.pack("<3i", 0, 2, 9), b"ab", None, 0, False, 2)
    with pytest.raises(ValueError, match="outside the offsets"):
        c(None, None, None, 0, True, _struct.pack("<2q", 0, 2), b"ab", None, 0, True, 2)
    with pytest.raises(ValueError, match="validity bitmap"):
        c(None, None, None, 0, True, _struct.pack("<10i", *range(10)), b"x" * 9, b"\xff", 0, False, 9)


_CHANGING_INPUT = """
import sys, threading
import pyarrow as pa
from sparkafka.accel import ACCEL
from sparkafka.producer.arrow.tails import encode_tails

assert ACCEL is not None
n, size = 200_000, 8 << 20
offsets, data = bytearray(8 * (n + 1)), bytearray(b"x" * size)  # every row empty
last = memoryview(offsets).cast("q")
ro = lambda b: pa.py_buffer(memoryview(b).toreadonly())
values = pa.Array.from_buffers(pa.large_binary(), n, [None, ro(offsets), ro(data)])
headers = pa.array([[("h", b"v")]] * n, pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
stop = False

def flip():
    while not stop:
        last[n] = size  # the last row spans the whole data ...
        last[n] = 0  # ... or is empty: both pass the checks made before the GIL is released

threading.Thread(target=flip, daemon=True).start()
refused = 0
for i in range(150):
    try:
        tails = encode_tails(None, values, headers if i % 2 else None)
    except Exception as exc:
        assert "the input buffers changed while they were read" in str(exc), exc
        refused += 1
        continue
stop = True
print("refused", refused)
"""


def test_c_tails_of_input_changed_by_another_thread_are_refused_not_a_heap_overflow() -> None:
    """The C encoders read read-only input buffers without the GIL and used to trust their first pass's
    sizes in the second: a read-only view of a bytearray another thread writes (a race in the caller) made
    them copy 8 MiB into an output sized for empty rows (a heap overflow: "double free or corruption",
    a segfault). Every copy is now checked against the data and the output; a change is a ValueError. In a
    subprocess, so that a crash fails this test instead of ending the run."""
    import subprocess
    import sys

    if tails_module._c_tails is None:
        pytest.skip("the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
    proc = subprocess.run([sys.executable, "-c", _CHANGING_INPUT], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("refused")
