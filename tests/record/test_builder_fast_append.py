"""RecordBatchBuilder's encode-on-append: the fast path, the pooled buffer, and C vs Python encoders."""

from __future__ import annotations

import functools
import os
import random
import subprocess
import sys
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka import accel
from sparkafka.record import CompressionType, RecordBatchBuilder, decode_batch, encode_batch
from sparkafka.record.builder import _encode_record_py

TS = 1700000000000


def test_fast_append_matches_general_append_bytes_and_growth() -> None:
    records = [(TS + i % 3, b"k%d" % i if i % 2 else None, b"v" * (i % 70) if i % 5 else None) for i in range(200)]
    general = RecordBatchBuilder(None, 1 << 20)
    fast = RecordBatchBuilder(None, 1 << 20)
    for i, (ts, key, value) in enumerate(records):
        grown = general.try_append(ts, key, value, None)
        if i == 0:
            assert fast.try_append(ts, key, value, None) == grown
        else:
            assert fast.try_append_open(ts, key, value) == grown
    assert fast.estimated_size_in_bytes == general.estimated_size_in_bytes
    assert bytes(fast.close(7, 1, 3, False)) == bytes(general.close(7, 1, 3, False))
    assert [(r.timestamp, r.key, r.value) for r in decode_batch(fast.close(7, 1, 3, False)).records] == records


def _rule(builder: RecordBatchBuilder, impl: str) -> Callable[[int, bytes | None, bytes | None], int]:
    """The open-batch append rule in Python or in C (``sparkafka._accel.BuilderState``), bound to ``builder``."""
    if impl == "python":
        return builder._try_append_open_py
    assert accel.ACCEL is not None
    return functools.partial(accel.ACCEL.BuilderState.try_append_open, builder)


@pytest.mark.parametrize("impl", ["python", "c"])
def test_compressed_batch_takes_records_while_java_has_room_for_them(impl: str) -> None:
    """Java's hasRoomFor counts the next record uncompressed: estimate so far + record <= limit. With a
    0.5 ratio estimate (x 1.05) and 6,000-byte values a 16 KB batch takes 4 records (the 5th: 12,679 +
    6,009 > 16,384); the fast path used the estimate *after* the record (about 15,834 < 16,384): 5."""
    if impl == "c" and accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    builder = RecordBatchBuilder(None, 16384, CompressionType.LZ4, None, 0.5)
    append_open = _rule(builder, impl)
    value = b"v" * 6000
    assert builder.try_append(TS, None, value, None) > 0
    taken = 1
    while append_open(TS, None, value) >= 0 or builder.try_append(TS, None, value, None) >= 0:
        taken += 1
    assert taken == 4
    assert builder.estimated_size_in_bytes == 61 + int(builder.uncompressed_bytes * 0.5 * 1.05)


def test_fast_append_refuses_empty_closed_and_filling() -> None:
    builder = RecordBatchBuilder(None, 61 + 3 * 10)  # three 10-byte records (b"abc" value, no key)
    assert builder.try_append_open(TS, None, b"abc") == -1  # empty: the first record goes the general way
    assert builder.try_append(TS, None, b"abc", None) == 61 + 10
    assert builder.try_append_open(TS, None, b"abc") == 10
    # the third record would make the batch full: refused, and accepted by the general path
    assert builder.try_append_open(TS, None, b"abc") == -1
    assert builder.record_count == 2 and not builder.is_full()
    assert builder.try_append(TS, None, b"abc", None) == 10
    assert builder.is_full()
    other = RecordBatchBuilder(None, 1000)
    other.try_append(TS, None, b"x", None)
    other.close_for_appends()
    assert other.try_append_open(TS, None, b"x") == -1


def test_pooled_buffer_is_written_in_place_and_never_resized() -> None:
    pooled = bytearray(256)
    builder = RecordBatchBuilder(pooled, 256)
    builder.try_append(TS, b"key", b"v" * 50, None)
    builder.try_append_open(TS, b"key", b"w" * 50)
    assert pooled[61:64] != b"\x00\x00\x00"  # records went into the pooled buffer
    wire = builder.close()
    assert wire.obj is pooled and len(pooled) == 256
    assert [r.value for r in decode_batch(bytes(wire)).records] == [b"v" * 50, b"w" * 50]


def test_overflowing_the_pooled_buffer_moves_to_a_private_one() -> None:
    pooled = bytearray(1024)
    # compressing, a batch holds up to twice its write limit of uncompressed records: past its buffer
    builder = RecordBatchBuilder(pooled, 1024, CompressionType.LZ4, None, 0.3)
    for i in range(30):
        assert builder.try_append(TS, None, bytes([i]) * 40, None) > 0
    assert builder._buf is not pooled and len(pooled) == 1024  # the pool's buffer keeps its size
    data = bytes(builder.close())
    assert [r.value for r in decode_batch(data).records] == [bytes([i]) * 40 for i in range(30)]


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.GZIP], ids=lambda c: c.name)
def test_compressed_close_from_the_pooled_buffer(codec: CompressionType) -> None:
    pooled = bytearray(4096)
    builder = RecordBatchBuilder(pooled, 4096, codec)
    builder.try_append(TS, b"k", b"a" * 100, [("h", b"1")])
    for _ in range(20):
        assert builder.try_append_open(TS, b"k", b"a" * 100) > 0
    data = bytes(builder.close())
    decoded = decode_batch(data)
    assert decoded.compression is codec and len(decoded.records) == 21
    assert decoded.records[0].headers == [("h", b"1")]
    assert builder.actual_compression_ratio < 0.5


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.ZSTD], ids=lambda c: c.name)
def test_sealed_compressed_batch_moves_back_into_the_pooled_buffer(codec: CompressionType) -> None:
    """A batch a new one replaced is compressed at once (Java compresses as it appends): its records,
    which outgrew the 1 KB pooled buffer uncompressed, go back into it compressed and the private
    copy is dropped; the producer state written at drain is rewritten into the same bytes."""
    pooled = bytearray(1024)
    builder = RecordBatchBuilder(pooled, 1024, codec, None, 0.1)  # a low ratio estimate: room for ~2 KB
    values = [bytes([65 + i % 3]) * 100 for i in range(18)]
    builder.try_append(TS, None, values[0], None)
    for value in values[1:]:
        assert builder.try_append(TS, None, value, None) > 0
    assert builder._buf is not pooled  # 18 x ~106 bytes: past the pooled buffer
    builder.seal()
    assert builder._buf is pooled and builder.is_full()
    assert builder.try_append(TS, None, b"x", None) == -1  # sealed: no more appends
    sealed_size = builder.estimated_size_in_bytes
    assert sealed_size < 1024
    wire = builder.close(producer_id=7, producer_epoch=2, base_sequence=40, is_transactional=True)
    assert wire.obj is pooled and wire.nbytes == sealed_size
    decoded = decode_batch(bytes(wire))  # the CRC is checked: the rewrite recomputed it
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence, decoded.is_transactional) \
        == (7, 2, 40, True)
    assert decoded.compression is codec and [r.value for r in decoded.records] == values


def test_sealing_an_uncompressed_batch_only_closes_it_for_appends() -> None:
    builder = RecordBatchBuilder(bytearray(1024), 1024)
    builder.try_append(TS, None, b"v", None)
    builder.seal()
    assert builder.is_full() and builder._built is None


def test_records_property_decodes_what_was_appended() -> None:
    builder = RecordBatchBuilder(bytearray(1024), 1024)
    builder.try_append(TS + 5, b"a", b"1", [("x", None)])
    builder.try_append_open(TS, None, None)
    builder.try_append(TS + 9, b"", b"", None)
    assert builder.records == [(TS + 5, b"a", b"1", [("x", None)]), (TS, None, None, None), (TS + 9, b"", b"", None)]


@settings(max_examples=60, deadline=None)
@given(
    size_pad=st.integers(0, 3),
    ts_delta=st.integers(-(2**40), 2**40),
    offset_delta=st.integers(0, 70000),
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=20000),
)
def test_c_and_python_record_encoders_write_the_same_bytes(
    size_pad: int, ts_delta: int, offset_delta: int, key: bytes | None, value: bytes | None
) -> None:
    if accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    from sparkafka.record._varint import varint_size

    size = (1 + varint_size(ts_delta) + varint_size(offset_delta)
            + (1 if key is None else varint_size(len(key)) + len(key))
            + (1 if value is None else varint_size(len(value)) + len(value)) + 1)
    prefix = bytes(range(size_pad))
    py_buf = bytearray(prefix)
    c_buf = bytearray(prefix)
    py_end = _encode_record_py(py_buf, size_pad, size, ts_delta, offset_delta, key, value)
    c_end = accel.ACCEL.write_record(c_buf, size_pad, size, ts_delta, offset_delta, key, value)
    assert (c_end, bytes(c_buf)) == (py_end, bytes(py_buf))
    with pytest.raises(ValueError, match="accounted"):
        accel.ACCEL.write_record(bytearray(), 0, size + 1, ts_delta, offset_delta, key, value)


def test_no_accel_env_var_forces_the_python_encoder() -> None:
    code = (
        "from sparkafka import accel; from sparkafka.record import encode_batch; "
        "import sys; sys.stdout.write(repr(accel.ACCEL) + ' ' + "
        "encode_batch([(1, b'k', b'v', None), (2, None, b'w' * 300, None)]).hex())"
    )
    env = dict(os.environ, SPARKAFKA_NO_ACCEL="1")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    module, data = out.split(" ")
    assert module == "None"
    assert bytes.fromhex(data) == encode_batch([(1, b"k", b"v", None), (2, None, b"w" * 300, None)])


@settings(max_examples=80, deadline=None)
@given(
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4]),
    ratio=st.floats(0.1, 1.5),
    buffer_size=st.integers(61, 3000),
    limit=st.integers(100, 5000),
    records=st.lists(st.tuples(st.integers(-100, 10**6), st.none() | st.binary(max_size=80),
                               st.none() | st.binary(max_size=400)), min_size=1, max_size=40),
)
def test_c_fast_append_matches_python(
    codec: CompressionType, ratio: float, buffer_size: int, limit: int,
    records: list[tuple[int, bytes | None, bytes | None]],
) -> None:
    if accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    py = RecordBatchBuilder(bytearray(buffer_size), limit, codec, None, ratio)
    c = RecordBatchBuilder(bytearray(buffer_size), limit, codec, None, ratio)
    ts0, key0, value0 = records[0]
    assert py.try_append(TS + ts0, key0, value0, None) == c.try_append(TS + ts0, key0, value0, None)
    for ts, key, value in records[1:]:
        assert py._try_append_open_py(TS + ts, key, value) == _rule(c, "c")(TS + ts, key, value)
        assert (py.estimated_size_in_bytes, py.record_count, py.uncompressed_bytes) == (
            c.estimated_size_in_bytes, c.record_count, c.uncompressed_bytes)
    assert bytes(py.close()) == bytes(c.close())


@pytest.mark.parametrize("codec", [CompressionType.SNAPPY, CompressionType.LZ4])
@pytest.mark.parametrize("impl", ["python", "c"])
def test_compressing_batch_spills_what_passes_twice_its_limit(impl: str, codec: CompressionType) -> None:
    """A compressing batch holds at most MAX_UNCOMPRESSED_RATIO x its limit of records uncompressed: the record
    that would pass it makes try_append compress them into the batch first. So a batch of compressible records
    takes far more than twice its limit of records, fills by its real compressed size, stays about as long as
    the limit, and decodes (before and after close) to every record in order."""
    from sparkafka.record.builder import MAX_UNCOMPRESSED_RATIO

    if impl == "c" and accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    limit = 16384
    rng = random.Random(7)
    values = [bytes(rng.choice(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(rng.randrange(1, 120))) for _ in range(8)]
    # the estimate of a topic whose earlier batches compressed 0.3:1 (RecordAccumulator's per-topic estimate)
    builder = RecordBatchBuilder(bytearray(limit), limit, codec, None, 0.3)
    append_open = _rule(builder, impl)
    sent: list[tuple[int, bytes, bytes]] = []
    held_most = 0
    while len(sent) < 200_000:
        key = b"key-%d" % rng.randrange(1000)
        value = rng.choice(values)
        ts = TS + len(sent) // 100
        if append_open(ts, key, value) < 0 and builder.try_append(ts, key, value, None) < 0:
            break
        sent.append((ts, key, value))
        held_most = max(held_most, builder._pos - 61)
    assert held_most <= MAX_UNCOMPRESSED_RATIO * limit
    assert builder.uncompressed_bytes > 2 * MAX_UNCOMPRESSED_RATIO * limit, "the batch stopped at the cap"
    assert len(sent) < 200_000, "the batch never refused a record"
    assert [(t, k, v) for t, k, v, _ in builder.records] == sent  # spilled and held parts, before close
    built = bytes(builder.close())
    assert limit // 2 < len(built) <= limit * 1.1
    assert [(r.timestamp, r.key, r.value) for r in decode_batch(built).records] == sent
    assert builder.actual_compression_ratio == pytest.approx((len(built) - 61) / builder.uncompressed_bytes)


@pytest.mark.parametrize("codec", [CompressionType.LZ4, CompressionType.SNAPPY])
@pytest.mark.parametrize("impl", ["python", "c"])
def test_spill_of_records_that_do_not_compress_fills_the_batch(impl: str, codec: CompressionType) -> None:
    """The estimate said 0.3:1 but the records do not compress: the first spill sets the batch's ratio
    estimate to what the spilled records really compressed to, so the batch is full at once (Java's estimate
    would keep taking records up to ~52 KB)."""
    from sparkafka.record.builder import MAX_UNCOMPRESSED_RATIO

    if impl == "c" and accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    limit = 16384
    builder = RecordBatchBuilder(bytearray(limit), limit, codec, None, 0.3)
    append_open = _rule(builder, impl)
    sent = []
    for _ in range(10_000):
        value = os.urandom(100)
        if append_open(TS, b"k", value) < 0 and builder.try_append(TS, b"k", value, None) < 0:
            break
        sent.append(value)
    assert len(sent) < 10_000, "the batch never refused a record"
    assert MAX_UNCOMPRESSED_RATIO * limit - 120 < builder.uncompressed_bytes <= MAX_UNCOMPRESSED_RATIO * limit + 120
    built = bytes(builder.close())
    assert [r.value for r in decode_batch(built).records] == sent


@pytest.mark.parametrize("codec", [CompressionType.GZIP, CompressionType.ZSTD])
@pytest.mark.parametrize("impl", ["python", "c"])
def test_gzip_and_zstd_batches_are_full_at_twice_their_limit_uncompressed(impl: str, codec: CompressionType) -> None:
    """gzip and zstd do not spill (a stream of theirs would keep a compressor context per open batch): with an
    estimate that says the records compress 100:1, the batch stops at MAX_UNCOMPRESSED_RATIO x its limit."""
    from sparkafka.record.builder import MAX_UNCOMPRESSED_RATIO

    if impl == "c" and accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    builder = RecordBatchBuilder(bytearray(16384), 16384, codec, None, 0.01)
    append_open = _rule(builder, impl)
    builder.try_append(TS, b"k", b"a" * 100, None)
    while append_open(TS, b"k", b"a" * 100) > 0:
        pass
    assert builder.try_append(TS, b"k", b"a" * 100, None) == -1
    assert 16384 < builder.uncompressed_bytes <= MAX_UNCOMPRESSED_RATIO * 16384
    assert builder._stream is None
    assert len(decode_batch(bytes(builder.close())).records) == builder.record_count


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.LZ4])
@pytest.mark.parametrize("impl", ["python", "c"])
def test_short_pooled_buffer_refuses_what_overflows_it_then_moves_to_a_longer_one(
        impl: str, codec: CompressionType) -> None:
    """A pooled buffer shorter than the write limit (given under memory pressure) never overflows into a
    private bytearray: both rules and try_append refuse the record, try_append says how long a buffer
    would take it (``wanted_capacity``), and after ``replace_buffer`` the batch goes on in the longer
    buffer with the same bytes as a batch that had room all along."""
    if impl == "c" and accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    short = bytearray(200)
    builder = RecordBatchBuilder(short, 1024, codec)
    twin = RecordBatchBuilder(None, 1024, codec)
    append_open = _rule(builder, impl)
    value = b"v" * 50
    assert builder.try_append(TS, b"k", value, None) == twin.try_append(TS, b"k", value, None)
    appended = 1
    while append_open(TS, b"k", value) >= 0:
        assert twin.try_append_open(TS, b"k", value) >= 0
        appended += 1
    assert appended == 2 and builder.is_short() and not builder.is_full()  # 61 + 2 x 58 = 177 of 200 bytes
    assert builder.try_append(TS, b"k", value, None) == -1
    assert builder.wanted_capacity == 61 + 3 * 58 and builder._buf is short  # nothing moved
    longer = bytearray(1024)  # the write limit: no longer short
    assert builder.replace_buffer(longer) is short
    assert builder._buf is longer and builder._buffer is longer and not builder.is_short()
    assert builder.try_append(TS, b"k", value, None) == twin.try_append(TS, b"k", value, None)
    assert bytes(builder.close()) == bytes(twin.close())
    assert builder._buf is longer


def test_refusal_for_room_in_the_batch_clears_wanted_capacity() -> None:
    builder = RecordBatchBuilder(bytearray(200), 1024)
    builder.try_append(TS, None, b"v" * 100, None)
    assert builder.try_append(TS, None, b"v" * 100, None) == -1
    assert builder.wanted_capacity > 200
    builder.close_for_appends()
    assert builder.try_append(TS, None, b"v" * 10, None) == -1
    assert builder.wanted_capacity == 0  # closed: no buffer would take it
