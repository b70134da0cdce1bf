"""Decodes v2 record batches (magic 2): for tests, tools and checking what was sent (Java
``DefaultRecordBatch``, ``DefaultRecord``).

How it works: ``decode_batches`` walks concatenated batches; for each it checks the length,
the magic and the CRC-32C over bytes [21, end), decompresses the records and decodes them one by
one, checking each record's declared length and that no bytes are left over. Every problem
raises ``CorruptRecordBatchError``. ``next_offset_after`` reads only the batch headers of a Fetch's
record set (whose last batch the broker may cut short) and returns the offset after its last record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from sparkafka.errors import CorruptRecordBatchError
from sparkafka.record._varint import read_varint
from sparkafka.record.compression import CompressionType, decompress
from sparkafka.record.crc import crc32c
from sparkafka.record.layout import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CONTROL_FLAG,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    RECORD_BATCH_OVERHEAD,
    TIMESTAMP_TYPE_FLAG,
    TRANSACTIONAL_FLAG,
)

_BASE_LENGTH = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")
_LAST_OFFSET_DELTA_OFFSET = 23
_HEADER_PREFIX = _LAST_OFFSET_DELTA_OFFSET + 4


def next_offset_after(data: bytes | bytearray | memoryview) -> int | None:
    """The offset after the last record of the last batch whose header starts in ``data``: baseOffset +
    lastOffsetDelta + 1 (Java ``DefaultRecordBatch.nextOffset``); None when no batch header is there.

    Only the first 27 bytes of each batch are read, so a last batch cut short by the broker's fetch size
    limit still counts; neither the CRC nor the records are checked."""
    view = memoryview(data)
    total = len(view)
    pos = 0
    result: int | None = None
    while total - pos >= _HEADER_PREFIX:
        base_offset, length = _BASE_LENGTH.unpack_from(view, pos)
        if view[pos + 16] != MAGIC or length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD:
            raise CorruptRecordBatchError(
                f"batch at byte {pos} has magic {view[pos + 16]} and batchLength {length}: not a v2 batch")
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(view, pos + _LAST_OFFSET_DELTA_OFFSET)
        result = base_offset + delta + 1
        pos += LOG_OVERHEAD + length
    return result


_MIN_BATCH_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
"""The smallest batchLength: the header after the length field."""


def whole_batches(data: bytes) -> bytes:
    """``data`` without a partial batch at its end (a Fetch answer may cut the last one short). A
    batchLength below a batch header's raises ``CorruptRecordBatchError`` (a zero-size step would never end)."""
    pos = 0
    total = len(data)
    while total - pos >= LOG_OVERHEAD:
        length = int.from_bytes(data[pos + 8:pos + LOG_OVERHEAD], "big", signed=True)
        if length < _MIN_BATCH_LENGTH:
            raise CorruptRecordBatchError(
                f"batch at byte {pos} has batchLength {length}, below the minimum {_MIN_BATCH_LENGTH}")
        if pos + LOG_OVERHEAD + length > total:
            break
        pos += LOG_OVERHEAD + length
    return data[:pos]


class Record(NamedTuple):
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    base_offset: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    compression: CompressionType
    is_transactional: bool
    is_control: bool
    timestamp_type: int
    """0 = CreateTime, 1 = LogAppendTime."""
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    size_in_bytes: int
    records: list[Record]


def _read_bytes(buf: bytes, pos: int, what: str) -> tuple[bytes | None, int]:
    length, pos = read_varint(buf, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordBatchError(f"{what} length {length} is negative (only -1 = null is valid)")
        return None, pos
    end = pos + length
    if end > len(buf):
        raise CorruptRecordBatchError(f"{what} length {length} runs past the end of the records")
    return buf[pos:end], end


def decode_records(buf: bytes, count: int, base_offset: int, base_timestamp: int,
                   log_append_time: int | None) -> list[Record]:
    """The ``count`` records of an uncompressed records section (the bytes after a batch header)."""
    records: list[Record] = []
    pos = 0
    for index in range(count):
        length, pos = read_varint(buf, pos)
        start = pos
        if length < 0 or start + length > len(buf):
            raise CorruptRecordBatchError(
                f"record {index}: length {length} does not fit the {len(buf) - start} bytes left")
        pos += 1  # attributes (unused)
        ts_delta, pos = read_varint(buf, pos, 10)
        offset_delta, pos = read_varint(buf, pos)
        key, pos = _read_bytes(buf, pos, "key")
        value, pos = _read_bytes(buf, pos, "value")
        header_count, pos = read_varint(buf, pos)
        if header_count < 0:
            raise CorruptRecordBatchError(f"record {index}: header count {header_count} is negative")
        headers: list[tuple[str, bytes | None]] = []
        for _ in range(header_count):
            raw_key, pos = _read_bytes(buf, pos, "header key")
            if raw_key is None:
                raise CorruptRecordBatchError(f"record {index}: null header key")
            try:
                header_key = raw_key.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise CorruptRecordBatchError(f"record {index}: header key is not UTF-8") from exc
            header_value, pos = _read_bytes(buf, pos, "header value")
            headers.append((header_key, header_value))
        if pos - start != length:
            raise CorruptRecordBatchError(
                f"record {index}: declared length {length} but its fields take {pos - start} bytes")
        timestamp = log_append_time if log_append_time is not None else base_timestamp + ts_delta
        records.append(Record(base_offset + offset_delta, timestamp, key, value, headers))
    if pos != len(buf):
        raise CorruptRecordBatchError(f"{len(buf) - pos} bytes remain after the {count} declared records")
    return records


def decode_batch(data: bytes | bytearray | memoryview) -> DecodedBatch:
    """Decode exactly one batch (``data`` must hold nothing else)."""
    batches = decode_batches(data)
    if len(batches) != 1:
        raise CorruptRecordBatchError(f"expected one record batch, found {len(batches)}")
    return batches[0]


def decode_batches(data: bytes | bytearray | memoryview) -> list[DecodedBatch]:
    """Decode all concatenated v2 batches in ``data``; truncation, a bad magic or CRC raise
    ``CorruptRecordBatchError``."""
    buf = bytes(data)
    total = len(buf)
    pos = 0
    batches: list[DecodedBatch] = []
    while pos < total:
        if total - pos < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordBatchError(
                f"truncated batch at byte {pos}: {total - pos} bytes, a header needs {RECORD_BATCH_OVERHEAD}")
        (base_offset, length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
         max_timestamp, producer_id, producer_epoch, base_sequence, count) = HEADER.unpack_from(buf, pos)
        if magic != MAGIC:
            raise CorruptRecordBatchError(
                f"batch at byte {pos} has magic {magic}; only magic {MAGIC} is supported")
        size = LOG_OVERHEAD + length
        if size < RECORD_BATCH_OVERHEAD:
            raise CorruptRecordBatchError(
                f"batchLength {length} is below the minimum {RECORD_BATCH_OVERHEAD - LOG_OVERHEAD}")
        if pos + size > total:
            raise CorruptRecordBatchError(
                f"truncated batch at byte {pos}: batchLength says {size} bytes, {total - pos} present")
        end = pos + size
        actual = crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:end])
        if actual != crc:
            raise CorruptRecordBatchError(
                f"CRC mismatch in batch at byte {pos}: expected {crc:#010x}, computed {actual:#010x}")
        if count < 0:
            raise CorruptRecordBatchError(f"recordsCount {count} is negative")
        codec_id = attributes & COMPRESSION_MASK
        if codec_id > CompressionType.ZSTD:
            raise CorruptRecordBatchError(f"unknown compression codec id {codec_id} (valid 0..4)")
        codec = CompressionType(codec_id)
        payload = buf[pos + RECORD_BATCH_OVERHEAD:end]
        if codec != CompressionType.NONE:
            payload = decompress(codec, payload)
        timestamp_type = 1 if attributes & TIMESTAMP_TYPE_FLAG else 0
        records = decode_records(payload, count, base_offset, base_timestamp,
                                  max_timestamp if timestamp_type else None)
        batches.append(DecodedBatch(
            base_offset=base_offset,
            partition_leader_epoch=leader_epoch,
            magic=magic,
            crc=crc,
            attributes=attributes,
            compression=codec,
            is_transactional=bool(attributes & TRANSACTIONAL_FLAG),
            is_control=bool(attributes & CONTROL_FLAG),
            timestamp_type=timestamp_type,
            last_offset_delta=last_offset_delta,
            base_timestamp=base_timestamp,
            max_timestamp=max_timestamp,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            size_in_bytes=size,
            records=records,
        ))
        pos = end
    return batches
