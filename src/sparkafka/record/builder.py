"""Builds one v2 record batch (magic 2) for the producer (facts §1, §2).

How it works: ``RecordBatchBuilder.try_append`` only checks the size and stores a tuple
``(timestamp, key, value, headers, body_size)``; its size accounting follows Java's
``MemoryRecordsBuilder`` (exact uncompressed record sizes, ``61 + uncompressed * ratio * 1.05``
when compressing, the first record always fits). ``close`` encodes every record at once: varints
come from a precomputed tuple, all pieces are joined with one ``b"".join``, the records are
compressed if asked, the 61-byte header is packed with ``struct.pack_into`` straight into the
caller's buffer and one CRC-32C is taken over bytes [21, end).

``set_producer_state`` rewrites producer id, epoch, base sequence and the transactional bit of a
closed batch (and its CRC) for renumbering after an epoch bump.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from sparkafka._types import Headers
from sparkafka.errors import CorruptRecordBatchError, InvalidRecordInputError
from sparkafka.record._varint import NULL_LENGTH, SMALL, VARINT, varint_size, zigzag_varint
from sparkafka.record.compression import CompressionType, compress, validate_level
from sparkafka.record.crc import crc32c

RECORD_BATCH_OVERHEAD = 61
"""Size of the v2 batch header."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: bytes not counted by batchLength."""
MAX_RECORD_OVERHEAD = 21
"""Upper bound of a record's bytes besides key, value and headers (Java ``DefaultRecord``)."""
COMPRESSION_RATE_ESTIMATION_FACTOR = 1.05
MAGIC = 2
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PRODUCER_ID_OFFSET = 43
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
COMPRESSION_MASK = 0x07
INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_PRODUCER_STATE = struct.Struct(">qhi")  # at offset 43
_ATTRIBUTES = struct.Struct(">h")
_BATCH_LENGTH = struct.Struct(">i")

RecordTuple = tuple[int, "bytes | None", "bytes | None", "Headers | None"]
"""``(timestamp, key, value, headers)``."""


def increment_sequence(seq: int, n: int) -> int:
    """``seq + n`` wrapping past Int32.MAX to 0, as Java's ``DefaultRecordBatch.incrementSequence``."""
    if seq > INT32_MAX - n:
        return n - (INT32_MAX - seq) - 1
    return seq + n


def _headers_size(headers: Headers) -> int:
    """Encoded size of a header array (count varint included)."""
    size = varint_size(len(headers))
    for header_key, header_value in headers:
        if header_key is None:
            raise InvalidRecordInputError("header key must not be None")
        try:
            klen = len(header_key.encode("utf-8"))
        except (AttributeError, UnicodeEncodeError) as exc:
            raise InvalidRecordInputError(
                f"header key must be a str encodable as UTF-8; got {header_key!r}") from exc
        size += varint_size(klen) + klen
        if header_value is None:
            size += 1
        else:
            if not isinstance(header_value, (bytes, bytearray, memoryview)):
                raise InvalidRecordInputError(
                    f"header {header_key!r} value must be bytes or None; got {type(header_value).__name__}")
            vlen = len(header_value)
            size += varint_size(vlen) + vlen
    return size


def _encode_headers(headers: Headers) -> bytes:
    parts = [zigzag_varint(len(headers))]
    for header_key, header_value in headers:
        kb = header_key.encode("utf-8")
        parts.append(zigzag_varint(len(kb)))
        parts.append(kb)
        if header_value is None:
            parts.append(NULL_LENGTH)
        else:
            parts.append(zigzag_varint(len(header_value)))
            parts.append(bytes(header_value))
    return b"".join(parts)


def estimate_record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """Upper bound of one record's encoded size (``DefaultRecord.recordSizeUpperBound``)."""
    size = MAX_RECORD_OVERHEAD
    size += 1 if key is None else varint_size(len(key)) + len(key)
    size += 1 if value is None else varint_size(len(value)) + len(value)
    size += _headers_size(headers) if headers else 1
    return size


def estimate_batch_size_upper_bound(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """Upper bound of a batch holding only this record (``estimateBatchSizeUpperBound``)."""
    return RECORD_BATCH_OVERHEAD + estimate_record_size(key, value, headers)


def _encode_records(records: Sequence[tuple[int, bytes | None, bytes | None, Headers | None, int]],
                    base_timestamp: int) -> bytes:
    """The concatenated encoded records (uncompressed); each tuple ends with its body size."""
    V = VARINT
    N = SMALL
    parts: list[bytes] = []
    ext = parts.extend
    for i, (ts, key, value, headers, size) in enumerate(records):
        d = ts - base_timestamp
        tsb = V[d] if 0 <= d < N else zigzag_varint(d)
        head = V[size] if size < N else zigzag_varint(size)
        od = V[i] if i < N else zigzag_varint(i)
        hb = _encode_headers(headers) if headers else b"\x00"
        if key is None:
            if value is None:
                ext((head, b"\x00", tsb, od, b"\x01\x01", hb))
            else:
                vl = len(value)
                ext((head, b"\x00", tsb, od, b"\x01", V[vl] if vl < N else zigzag_varint(vl), value, hb))
        else:
            kl = len(key)
            kh = V[kl] if kl < N else zigzag_varint(kl)
            if value is None:
                ext((head, b"\x00", tsb, od, kh, key, b"\x01", hb))
            else:
                vl = len(value)
                ext((head, b"\x00", tsb, od, kh, key, V[vl] if vl < N else zigzag_varint(vl), value, hb))
    return b"".join(parts)


def _write_batch(
    buffer: bytearray | None,
    payload: bytes,
    *,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    record_count: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> memoryview:
    size = RECORD_BATCH_OVERHEAD + len(payload)
    out = buffer if buffer is not None and len(buffer) >= size else bytearray(size)
    try:
        HEADER.pack_into(
            out, 0, base_offset, size - LOG_OVERHEAD, partition_leader_epoch, MAGIC, 0, attributes,
            last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
            record_count,
        )
    except struct.error as exc:
        raise InvalidRecordInputError(f"batch header field out of range: {exc}") from exc
    out[RECORD_BATCH_OVERHEAD:size] = payload
    view = memoryview(out)[:size]
    _CRC.pack_into(out, CRC_OFFSET, crc32c(view[ATTRIBUTES_OFFSET:]))
    return view


class RecordBatchBuilder:
    """Collects records for one partition and encodes them as one v2 batch on ``close``."""

    __slots__ = (
        "_appends_closed", "_base_timestamp", "_buffer", "_built", "_built_state", "_compression",
        "_compression_level", "_max_timestamp", "_ratio_factor", "_records", "_write_limit",
        "actual_compression_ratio", "estimated_size_in_bytes", "record_count", "uncompressed_bytes",
    )

    def __init__(
        self,
        buffer: bytearray | None,
        write_limit: int,
        compression: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        compression_ratio_estimate: float = 1.0,
    ) -> None:
        self._buffer = buffer
        self._write_limit = write_limit
        self._compression = CompressionType(compression)
        self._compression_level = (
            validate_level(self._compression, compression_level) if compression_level is not None else None
        )
        # 0.0 means "no compression": the estimate is then exact
        self._ratio_factor = (
            0.0 if self._compression == CompressionType.NONE
            else compression_ratio_estimate * COMPRESSION_RATE_ESTIMATION_FACTOR
        )
        self._records: list[tuple[int, bytes | None, bytes | None, Headers | None, int]] = []
        self._base_timestamp = 0
        self._max_timestamp = -1
        self._appends_closed = False
        self._built: memoryview | None = None
        self._built_state: tuple[int, int, int, bool] | None = None
        self.record_count = 0
        self.estimated_size_in_bytes = RECORD_BATCH_OVERHEAD
        """Java ``estimatedSizeInBytes``: 61 + records (scaled when compressing); exact after close."""
        self.uncompressed_bytes = 0
        """Total encoded size of the records before compression (header excluded)."""
        self.actual_compression_ratio = 1.0
        """compressed records bytes / uncompressed records bytes, set by close()."""

    def try_append(
        self, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers | None
    ) -> int:
        """Append a record if it fits; returns the growth of ``estimated_size_in_bytes`` (the whole
        estimate, header included, for the first record) or -1 (nothing appended) if it does not fit
        or appends are closed. The first record always fits."""
        if self._appends_closed:
            return -1
        n = self.record_count
        if n:
            d = timestamp - self._base_timestamp
            size = 2 if -64 <= d < 64 else 1 + varint_size(d)  # attributes + timestampDelta
            size += 1 if n < 64 else 2 if n < 8192 else varint_size(n)
        else:
            self._base_timestamp = timestamp
            size = 3  # attributes, timestampDelta 0, offsetDelta 0
        if key is None:
            size += 1
        else:
            kl = len(key)
            size += kl + (1 if kl < 64 else 2 if kl < 8192 else varint_size(kl))
        if value is None:
            size += 1
        else:
            vl = len(value)
            size += vl + (1 if vl < 64 else 2 if vl < 8192 else varint_size(vl))
        if headers:
            size += _headers_size(headers)
        else:
            size += 1
        total = size + (1 if size < 64 else 2 if size < 8192 else varint_size(size))
        old = self.estimated_size_in_bytes
        if n and old + total > self._write_limit:
            return -1
        uncompressed = self.uncompressed_bytes + total
        self.uncompressed_bytes = uncompressed
        factor = self._ratio_factor
        new = RECORD_BATCH_OVERHEAD + (int(uncompressed * factor) if factor else uncompressed)
        self.estimated_size_in_bytes = new
        self._records.append((timestamp, key, value, headers, size))
        self.record_count = n + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return new - old if n else new

    def is_full(self) -> bool:
        """Java ``isFull``: appends are closed, or at least one record and the estimate reached the limit."""
        return self._appends_closed or (
            self.record_count > 0 and self._write_limit <= self.estimated_size_in_bytes)

    def close_for_appends(self) -> None:
        """Refuse further appends (Java ``closeForRecordAppends``)."""
        self._appends_closed = True

    @property
    def is_closed(self) -> bool:
        """True once ``close`` has built the batch bytes."""
        return self._built is not None

    @property
    def compression(self) -> CompressionType:
        return self._compression

    @property
    def base_timestamp(self) -> int:
        """Timestamp of the first record (undefined before one is appended)."""
        return self._base_timestamp

    @property
    def max_timestamp(self) -> int:
        """Largest record timestamp so far (-1 if empty)."""
        return self._max_timestamp

    @property
    def records(self) -> list[RecordTuple]:
        """The appended records as ``(timestamp, key, value, headers)``, in order (for splitting)."""
        return [(ts, k, v, h) for ts, k, v, h, _ in self._records]

    def close(
        self,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
    ) -> memoryview:
        """Encode the batch and return a view of exactly its bytes (in ``buffer`` when it fits).

        A batch with no records encodes to an empty view, like Java's ``MemoryRecords.EMPTY``.
        Later calls return the same bytes, rewriting the producer state if it differs.
        """
        state = (producer_id, producer_epoch, base_sequence, is_transactional)
        built = self._built
        if built is not None:
            if state != self._built_state and len(built):
                set_producer_state(built, *state)
                self._built_state = state
            return built
        self._appends_closed = True
        if not self._records:
            built = memoryview(bytearray())
        else:
            raw = _encode_records(self._records, self._base_timestamp)
            codec = self._compression
            payload = raw if codec == CompressionType.NONE else compress(codec, raw, self._compression_level)
            built = _write_batch(
                self._buffer,
                payload,
                attributes=int(codec) | (TRANSACTIONAL_FLAG if is_transactional else 0),
                last_offset_delta=len(self._records) - 1,
                base_timestamp=self._base_timestamp,
                max_timestamp=self._max_timestamp,
                producer_id=producer_id,
                producer_epoch=producer_epoch,
                base_sequence=base_sequence,
                record_count=len(self._records),
            )
            self.actual_compression_ratio = len(payload) / len(raw)
        self._built = built
        self._built_state = state
        self.estimated_size_in_bytes = len(built)
        return built


def set_producer_state(
    batch: bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
) -> None:
    """Rewrite producer id, epoch, base sequence and the transactional bit of a closed batch in place,
    then recompute its CRC."""
    if len(batch) < RECORD_BATCH_OVERHEAD or batch[16] != MAGIC:
        raise CorruptRecordBatchError(
            f"not a v2 record batch (need >= {RECORD_BATCH_OVERHEAD} bytes and magic {MAGIC})")
    (length,) = _BATCH_LENGTH.unpack_from(batch, 8)
    end = LOG_OVERHEAD + length
    if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or end > len(batch):
        raise CorruptRecordBatchError(f"batchLength {length} does not match the {len(batch)} bytes given")
    (attributes,) = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_OFFSET)
    attributes = (attributes | TRANSACTIONAL_FLAG) if is_transactional else (attributes & ~TRANSACTIONAL_FLAG)
    _ATTRIBUTES.pack_into(batch, ATTRIBUTES_OFFSET, attributes)
    _PRODUCER_STATE.pack_into(batch, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:end]))


def encode_batch(
    records: Sequence[RecordTuple],
    *,
    compression: CompressionType = CompressionType.NONE,
    compression_level: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    is_transactional: bool = False,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """Encode records ``(timestamp, key, value, headers)`` as one batch (tools and tests)."""
    if not records:
        return b""
    builder = RecordBatchBuilder(None, 2**31 - 1, compression, compression_level)
    for ts, key, value, headers in records:
        builder.try_append(ts, key, value, headers)
    view = builder.close(producer_id, producer_epoch, base_sequence, is_transactional)
    if base_offset != 0 or partition_leader_epoch != NO_PARTITION_LEADER_EPOCH:
        struct.pack_into(">q", view, 0, base_offset)  # both fields lie outside the CRC
        struct.pack_into(">i", view, 12, partition_leader_epoch)
    return bytes(view)
