"""RecordBatchBuilder: exact bytes, size accounting, write limit, producer state rewrite, sequences."""

from __future__ import annotations

import struct

import pytest

from sparkafka.errors import CorruptRecordBatchError, InvalidRecordInputError
from sparkafka.record import (
    CompressionType,
    RecordBatchBuilder,
    decode_batch,
    encode_batch,
    estimate_batch_size_upper_bound,
    estimate_record_size,
    increment_sequence,
    set_producer_state,
)
from sparkafka.record.crc import crc32c
from sparkafka.record.layout import INT32_MAX

TS = 1700000000000

EXAMPLE_ONE = bytes.fromhex(
    "0000000000000000 00000040 ffffffff 02 db5e9cdd 0000 00000000 0000018bcfe56800 0000018bcfe56800"
    " ffffffffffffffff ffff ffffffff 00000001 1c 00 00 00 06 6b6579 0a 76616c7565 00"
)
EXAMPLE_TWO = bytes.fromhex(
    "000000000000000000000049ffffffff02e2600f730000000000010000018bcfe568000000018bcfe5680500000000000003e8"
    "0000000000000000000216000000010a68656c6c6f0016000a02026b010202680276"
)


def test_worked_example_one_record() -> None:
    assert len(EXAMPLE_ONE) == 76
    assert encode_batch([(TS, b"key", b"value", None)]) == EXAMPLE_ONE
    builder = RecordBatchBuilder(bytearray(16384), 16384)
    assert builder.try_append(TS, b"key", b"value", []) == 76
    assert bytes(builder.close()) == EXAMPLE_ONE


def test_worked_example_two_records_idempotent() -> None:
    assert len(EXAMPLE_TWO) == 85
    records = [(TS, None, b"hello", None), (TS + 5, b"k", None, [("h", b"v")])]
    assert encode_batch(records, producer_id=1000, producer_epoch=0, base_sequence=0) == EXAMPLE_TWO
    builder = RecordBatchBuilder(None, 16384)
    for ts, key, value, headers in records:
        assert builder.try_append(ts, key, value, headers) > 0
    assert bytes(builder.close(1000, 0, 0, False)) == EXAMPLE_TWO


def test_crc_covers_attributes_to_end() -> None:
    (crc,) = struct.unpack_from(">I", EXAMPLE_ONE, 17)
    assert crc == crc32c(EXAMPLE_ONE[21:])


# -- sizes and estimates

def test_estimates_follow_java_formula() -> None:
    # 21 + (varint(3)+3) + (varint(5)+5) + varint(0 headers)
    assert estimate_record_size(b"key", b"value", None) == 21 + 4 + 6 + 1
    assert estimate_batch_size_upper_bound(b"key", b"value", None) == 61 + 32
    assert estimate_record_size(None, None, []) == 21 + 1 + 1 + 1
    # header "é" (2 UTF-8 bytes) with a null value: count 1 + keylen 1 + 2 + null 1
    assert estimate_record_size(None, None, [("é", None)]) == 21 + 1 + 1 + 5
    big = b"x" * 8192  # varint(8192) takes 3 bytes
    assert estimate_record_size(big, None, None) == 21 + 3 + 8192 + 1 + 1


def test_growth_and_exact_uncompressed_size() -> None:
    builder = RecordBatchBuilder(None, 1 << 20)
    first = builder.try_append(TS, b"key", b"value", None)
    assert first == 61 + 15  # record of example one is 15 bytes with its length varint
    second = builder.try_append(TS + 1, None, b"v" * 100, [("a", None)])
    assert builder.estimated_size_in_bytes == first + second
    assert builder.uncompressed_bytes == first + second - 61
    batch = builder.close()
    assert len(batch) == first + second == builder.estimated_size_in_bytes
    assert builder.actual_compression_ratio == 1.0


def test_compressed_estimate_uses_ratio_and_factor() -> None:
    builder = RecordBatchBuilder(None, 1 << 20, CompressionType.GZIP, compression_ratio_estimate=0.5)
    total = 0
    for i in range(10):
        total += builder.try_append(TS + i, None, b"a" * 200, None)
    u = builder.uncompressed_bytes
    assert builder.estimated_size_in_bytes == total == 61 + int(u * 0.5 * 1.05)
    batch = builder.close()
    payload = len(batch) - 61
    assert builder.actual_compression_ratio == pytest.approx(payload / u)
    assert builder.actual_compression_ratio < 0.2
    assert builder.estimated_size_in_bytes == len(batch)


def test_first_oversized_record_fits_second_refused() -> None:
    builder = RecordBatchBuilder(bytearray(100), 100)
    grown = builder.try_append(TS, None, b"x" * 1000, None)
    # header + length varint (2) + attrs, tsDelta, offsetDelta, null key (4)
    # + value varint (2) + value + 0 headers (1)
    assert grown == 61 + 2 + 4 + 2 + 1000 + 1
    assert builder.record_count == 1
    assert builder.is_full()
    assert builder.try_append(TS, None, b"", None) == -1
    assert builder.record_count == 1
    batch = builder.close()
    assert len(batch) == grown
    assert len(decode_batch(batch).records) == 1


def test_write_limit_boundary() -> None:
    # length varint (1) + attrs, tsDelta, offsetDelta, null key (4)
    # + value varint (1) + b"abc" (3) + 0 headers (1)
    record_size = 1 + 4 + 1 + 3 + 1
    builder = RecordBatchBuilder(None, 61 + 3 * record_size)
    for i in range(3):
        assert builder.try_append(TS, None, b"abc", None) == (61 + record_size if i == 0 else record_size)
        assert builder.is_full() == (i == 2)
    assert builder.estimated_size_in_bytes == 61 + 3 * record_size
    assert builder.try_append(TS, None, b"", None) == -1
    not_full = RecordBatchBuilder(None, 61 + 3 * record_size + 1)
    for _ in range(3):
        not_full.try_append(TS, None, b"abc", None)
    assert not not_full.is_full()
    assert not_full.try_append(TS, None, b"abc", None) == -1  # needs 10 bytes, 1 left
    assert not_full.try_append(TS, None, None, None) == -1  # a null key and value still take 7 bytes


def test_close_writes_into_given_buffer_or_a_new_one() -> None:
    pool_buffer = bytearray(b"\xee" * 4096)
    builder = RecordBatchBuilder(pool_buffer, 4096)
    builder.try_append(TS, b"key", b"value", None)
    view = builder.close()
    assert view.obj is pool_buffer
    assert bytes(view) == EXAMPLE_ONE
    assert pool_buffer[76] == 0xEE  # nothing written past the batch
    del view

    small = bytearray(10)
    builder = RecordBatchBuilder(small, 10)
    builder.try_append(TS, b"key", b"value", None)
    view = builder.close()
    assert view.obj is not small and small == bytearray(10)
    assert bytes(view) == EXAMPLE_ONE


def test_close_twice_and_closed_for_appends() -> None:
    builder = RecordBatchBuilder(None, 4096)
    builder.try_append(TS, b"key", b"value", None)
    first = builder.close()
    assert builder.is_closed
    assert builder.try_append(TS, b"k", b"v", None) == -1
    assert builder.close() is first
    again = builder.close(7, 1, 10, True)
    assert again is first
    expected = encode_batch([(TS, b"key", b"value", None)], producer_id=7, producer_epoch=1,
                            base_sequence=10, is_transactional=True)
    assert bytes(again) == expected

    other = RecordBatchBuilder(None, 4096)
    other.try_append(TS, None, b"v", None)
    other.close_for_appends()
    assert other.is_full()
    assert other.try_append(TS, None, b"v", None) == -1
    assert other.record_count == 1


def test_empty_batch_closes_to_nothing() -> None:
    builder = RecordBatchBuilder(None, 100)
    assert not builder.is_full()
    assert len(builder.close()) == 0
    assert encode_batch([]) == b""


def test_records_property_and_timestamps() -> None:
    builder = RecordBatchBuilder(None, 4096)
    recs = [(TS + 10, b"a", b"1", None), (TS, None, None, [("h", None)]), (TS + 3, b"", b"", None)]
    for rec in recs:
        builder.try_append(*rec)
    assert builder.records == recs
    assert builder.base_timestamp == TS + 10
    assert builder.max_timestamp == TS + 10
    decoded = decode_batch(builder.close())
    assert decoded.base_timestamp == TS + 10 and decoded.max_timestamp == TS + 10
    assert [r.timestamp for r in decoded.records] == [TS + 10, TS, TS + 3]


def test_null_header_key_rejected() -> None:
    builder = RecordBatchBuilder(None, 4096)
    with pytest.raises(InvalidRecordInputError):
        builder.try_append(TS, None, b"v", [(None, b"x")])  # type: ignore[list-item]
    assert builder.record_count == 0
    with pytest.raises(InvalidRecordInputError):
        estimate_record_size(None, None, [(None, None)])  # type: ignore[list-item]
    with pytest.raises(InvalidRecordInputError, match="'h' value must be bytes"):
        builder.try_append(TS, None, b"v", [("h", "text")])  # type: ignore[list-item]
    with pytest.raises(InvalidRecordInputError, match="header key"):
        builder.try_append(TS, None, b"v", [(b"raw", b"x")])  # type: ignore[list-item]
    assert builder.record_count == 0


def test_out_of_range_producer_state_is_typed_error() -> None:
    builder = RecordBatchBuilder(None, 4096)
    builder.try_append(TS, None, b"v", None)
    with pytest.raises(InvalidRecordInputError):
        builder.close(producer_epoch=1 << 20)


# -- producer state rewrite

@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name)
def test_set_producer_state_matches_fresh_build(codec: CompressionType) -> None:
    records = [
        (TS + i, b"k%d" % i if i % 2 else None, b"value-%d" % i, [("n", b"%d" % i)] if i % 3 else None)
        for i in range(20)
    ]
    for transactional in (False, True):
        expected = encode_batch(records, compression=codec, producer_id=4242, producer_epoch=3,
                                base_sequence=INT32_MAX - 5, is_transactional=transactional)
        builder = RecordBatchBuilder(bytearray(16384), 16384, codec)
        for rec in records:
            builder.try_append(*rec)
        view = builder.close(1, 0, 0, not transactional)
        set_producer_state(view, 4242, 3, INT32_MAX - 5, transactional)
        assert bytes(view) == expected
        decoded = decode_batch(view)
        assert decoded.is_transactional is transactional
        assert decoded.compression is codec
        state = (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence)
        assert state == (4242, 3, INT32_MAX - 5)


def test_set_producer_state_rejects_non_batches() -> None:
    with pytest.raises(CorruptRecordBatchError):
        set_producer_state(bytearray(20), 1, 1, 1, False)
    bad_magic = bytearray(EXAMPLE_ONE)
    bad_magic[16] = 1
    with pytest.raises(CorruptRecordBatchError):
        set_producer_state(bad_magic, 1, 1, 1, False)
    with pytest.raises(CorruptRecordBatchError):
        set_producer_state(bytearray(EXAMPLE_ONE[:70]), 1, 1, 1, False)


# -- sequences

@pytest.mark.parametrize(
    ("seq", "n", "expected"),
    [
        (0, 1, 1),
        (100, 5, 105),
        (INT32_MAX - 5, 5, INT32_MAX),
        (INT32_MAX, 1, 0),
        (INT32_MAX - 1, 2, 0),
        (INT32_MAX - 2, 5, 2),
        (INT32_MAX, 0, INT32_MAX),
        (5, 0, 5),
    ],
)
def test_increment_sequence_wraps(seq: int, n: int, expected: int) -> None:
    assert increment_sequence(seq, n) == expected
