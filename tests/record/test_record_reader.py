"""decode_batches: fields, several batches, CRC/magic/truncation/record-structure errors."""

from __future__ import annotations

import struct

import pytest

from sparkafka.errors import CorruptRecordBatchError
from sparkafka.record import CompressionType, decode_batch, decode_batches, encode_batch
from sparkafka.record._varint import VARINT, read_varint, zigzag_varint
from sparkafka.record.crc import crc32c
from sparkafka.record.reader import whole_batches

TS = 1700000000000


def _fix_crc(batch: bytearray) -> bytearray:
    struct.pack_into(">I", batch, 17, crc32c(batch[21:]))
    return batch


def test_fields_of_decoded_batch() -> None:
    data = encode_batch(
        [(TS, b"k", b"v", [("h1", b"x"), ("h2", None)]), (TS - 7, None, None, None)],
        compression=CompressionType.ZSTD, producer_id=9, producer_epoch=2, base_sequence=40,
        is_transactional=True, base_offset=1000, partition_leader_epoch=5,
    )
    batch = decode_batch(data)
    assert batch.base_offset == 1000 and batch.partition_leader_epoch == 5 and batch.magic == 2
    assert batch.compression is CompressionType.ZSTD
    assert batch.attributes == 0x14 and batch.is_transactional and not batch.is_control
    assert batch.timestamp_type == 0
    assert batch.last_offset_delta == 1
    assert batch.base_timestamp == TS and batch.max_timestamp == TS
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 40)
    assert batch.size_in_bytes == len(data)
    assert batch.crc == crc32c(data[21:])
    first, second = batch.records
    assert first == (1000, TS, b"k", b"v", [("h1", b"x"), ("h2", None)])
    assert second == (1001, TS - 7, None, None, [])


def test_several_batches() -> None:
    a = encode_batch([(TS, None, b"a", None)])
    b = encode_batch([(TS, None, b"b", None), (TS, None, b"c", None)], compression=CompressionType.LZ4)
    batches = decode_batches(a + b + a)
    assert [[r.value for r in x.records] for x in batches] == [[b"a"], [b"b", b"c"], [b"a"]]
    assert decode_batches(b"") == []
    with pytest.raises(CorruptRecordBatchError):
        decode_batch(a + a)


def test_log_append_time_uses_max_timestamp() -> None:
    batch = bytearray(encode_batch([(TS, None, b"a", None), (TS + 9, None, b"b", None)]))
    struct.pack_into(">h", batch, 21, 0x08)
    struct.pack_into(">q", batch, 35, 42)
    decoded = decode_batch(_fix_crc(batch))
    assert decoded.timestamp_type == 1
    assert [r.timestamp for r in decoded.records] == [42, 42]


def test_corrupt_crc_detected() -> None:
    good = encode_batch([(TS, b"key", b"value", None)], compression=CompressionType.GZIP)
    for position in (21, 30, 60, len(good) - 1):  # attributes, header fields, payload
        bad = bytearray(good)
        bad[position] ^= 0x01
        with pytest.raises(CorruptRecordBatchError, match=r"CRC mismatch.*expected 0x.*computed 0x"):
            decode_batches(bad)
    # bytes before the CRC range are not covered (the broker rewrites the leader epoch)
    epoch_changed = bytearray(good)
    epoch_changed[15] = 7
    assert decode_batch(epoch_changed).partition_leader_epoch == -256 + 7


def test_wrong_magic_rejected() -> None:
    bad = bytearray(encode_batch([(TS, None, b"a", None)]))
    bad[16] = 1
    with pytest.raises(CorruptRecordBatchError, match="magic 1"):
        decode_batches(bad)


def test_truncated_data() -> None:
    good = encode_batch([(TS, b"key", b"value", None)])
    for cut in (1, 30, 60, 61, len(good) - 1):
        with pytest.raises(CorruptRecordBatchError, match="truncated"):
            decode_batches(good[:cut])
    with pytest.raises(CorruptRecordBatchError, match="truncated"):
        decode_batches(good + good[:40])


def test_record_structure_errors() -> None:
    base = bytearray(encode_batch([(TS, b"key", b"value", None)]))
    # the record count says 2 but there is only one record
    two = bytearray(base)
    struct.pack_into(">i", two, 57, 2)
    with pytest.raises(CorruptRecordBatchError):
        decode_batches(_fix_crc(two))
    # count says 0: the record's bytes are left over
    zero = bytearray(base)
    struct.pack_into(">i", zero, 57, 0)
    with pytest.raises(CorruptRecordBatchError, match="remain"):
        decode_batches(_fix_crc(zero))
    # record length byte (at 61) too small for its fields
    short = bytearray(base)
    short[61] = VARINT[13][0]
    with pytest.raises(CorruptRecordBatchError):
        decode_batches(_fix_crc(short))
    # key length beyond the end
    long_key = bytearray(base)
    long_key[65] = VARINT[50][0]
    with pytest.raises(CorruptRecordBatchError):
        decode_batches(_fix_crc(long_key))
    # unknown codec id 5
    codec = bytearray(base)
    struct.pack_into(">h", codec, 21, 5)
    with pytest.raises(CorruptRecordBatchError, match="codec"):
        decode_batches(_fix_crc(codec))
    # compressed flag on uncompressed records
    fake = bytearray(base)
    struct.pack_into(">h", fake, 21, int(CompressionType.ZSTD))
    with pytest.raises(CorruptRecordBatchError, match="zstd"):
        decode_batches(_fix_crc(fake))


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"), (-1, "01"), (1, "02"), (63, "7e"), (-64, "7f"), (64, "8001"), (-65, "8101"),
        (8191, "fe7f"), (8192, "808001"), (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f"),
        (17179869183, "feffffff7f"),
    ],
)
def test_varint_vectors(value: int, encoded: str) -> None:
    raw = bytes.fromhex(encoded)
    assert zigzag_varint(value) == raw
    if 0 <= value < len(VARINT):
        assert VARINT[value] == raw
    assert read_varint(raw, 0, 10) == (value, len(raw))


def test_varint_too_long_or_cut() -> None:
    with pytest.raises(CorruptRecordBatchError):
        read_varint(b"\xff\xff\xff\xff\xff\x01", 0, 5)
    assert read_varint(b"\xff\xff\xff\xff\xff\x01", 0, 10)[1] == 6
    with pytest.raises(CorruptRecordBatchError):
        read_varint(b"\x80\x80", 0)


def test_next_offset_after_reads_only_batch_headers() -> None:
    from sparkafka.record.reader import next_offset_after

    first = encode_batch([(TS, None, b"a", None)] * 3, base_offset=40)
    second = encode_batch([(TS, None, b"b" * 100, None)] * 7, base_offset=43)
    assert next_offset_after(b"") is None
    assert next_offset_after(first) == 43
    assert next_offset_after(first + second) == 50
    for cut in range(27, len(second)):  # a last batch cut short by the fetch size still counts from 27 bytes
        assert next_offset_after(first + second[:cut]) == 50
    assert next_offset_after(first + second[:26]) == 43
    bad = bytearray(first)
    bad[16] = 1
    with pytest.raises(CorruptRecordBatchError, match="magic 1"):
        next_offset_after(bytes(bad))


def test_whole_batches_leaves_out_a_batch_cut_at_the_end_of_a_fetch() -> None:
    one = encode_batch([(0, b"k", b"v" * 50, [])])
    two = encode_batch([(0, b"k2", b"w" * 80, [])], base_offset=1)
    assert whole_batches(one + two) == one + two
    for cut in (1, 11, 12, len(two) - 1):
        assert whole_batches(one + two[:cut]) == one
    assert whole_batches(b"") == b""


@pytest.mark.parametrize("length", [-12, -20, 0, 48])
def test_whole_batches_refuses_a_batch_length_below_a_header(length: int) -> None:
    """A batchLength of -12 made the old loop step by 0 bytes forever; other small ones stepped backwards."""
    bad = bytearray(encode_batch([(0, b"k", b"v", [])]))
    struct.pack_into(">i", bad, 8, length)
    with pytest.raises(CorruptRecordBatchError, match=f"batchLength {length}, below the minimum 49"):
        whole_batches(bytes(bad))
