"""Builds one v2 record batch (magic 2) for the producer (Java ``MemoryRecordsBuilder``).

How it works: ``RecordBatchBuilder.try_append`` encodes each record as it is appended, straight
into the batch's buffer (the pooled ``bytearray`` given by the accumulator, from byte 61 on; a
private, growing ``bytearray`` when there is none). A pooled buffer is never grown in place. One at
least as long as the write limit that a record would overflow (only when compressing: up to
``MAX_UNCOMPRESSED_RATIO`` times the limit of records held uncompressed) moves the records to a private
bytearray with room up to that cap; a *short* one (shorter than the write limit: the accumulator gives new batches
short buffers under memory pressure, ``producer/buffer_pool.py``) refuses the record instead, with
``wanted_capacity`` set, and the caller either moves the batch into a larger pooled buffer
(``replace_buffer``) and appends again, or starts a new batch; so the records of a batch with a short
buffer always lie in memory that ``buffer.memory`` counts. Keeping bytes
instead of the caller's key and value objects means a batch holds no Python object per record
(nothing for the cyclic garbage collector to scan, and memory stays within ``buffer.memory``), and
``close`` has little left to do: compress the records if asked, pack the 61-byte header in front of
them and take one CRC-32C over bytes [21, end), without copying the records when they are not
compressed (``_finish_batch``: ``_finish_batch_py`` with ``struct.pack_into``, or its C twin
``finish_batch`` of ``_c/_batch.c``). A record is encoded with precomputed varint tables (one
``b"".join``), or by the optional C accelerator (``sparkafka.accel``) when it is built.
``try_append_open`` is the producer's fast path, the open-batch append rule: no headers, and it refuses
a record that would fill the batch (or overflow a short buffer), so the caller knows the batch is still
open without asking. Its
state (buffer, position, counts, sizes, limit, timestamps, closed flag) is a base class:
``sparkafka._accel.BuilderState`` with the accelerator, whose ``try_append_open`` is the rule in C
(``_c/_append.h``, the interface the C code shares with the producer), else ``_BuilderStatePy`` here
with the same attributes, and ``try_append_open`` is ``_try_append_open_py``, the rule in Python. Size
accounting follows Java's ``MemoryRecordsBuilder`` (exact uncompressed record sizes, ``61 + uncompressed
* ratio * 1.05`` when compressing, the first record always fits). When compressing, a record that would
take the bytes held uncompressed past ``MAX_UNCOMPRESSED_RATIO`` times the limit first makes an lz4 or
snappy batch compress them into its ``CompressionStream`` (``_spill``; Java's appends compress as they
go) and take its ratio estimate from them; a gzip or zstd batch is full there. ``records`` decodes the
stored records (for splitting a batch the broker rejected as too large).

``set_producer_state`` rewrites producer id, epoch, base sequence and the transactional bit of a
closed batch (and its CRC): at drain for a compressed batch sealed earlier, and for renumbering after an
epoch bump (``_set_producer_state_py``, or its C twin ``patch_producer_state``).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from sparkafka._types import Headers
from sparkafka.accel import ACCEL
from sparkafka.errors import CorruptRecordBatchError, InvalidRecordInputError
from sparkafka.record._varint import NULL_LENGTH, SMALL, VARINT, VARINT_ATTR0, varint_size, zigzag_varint
from sparkafka.record.compression import (
    NO_COMPRESSION,
    SPILLING_CODECS,
    CompressionStream,
    CompressionType,
    compress,
    decompress_spilled,
    validate_level,
)
from sparkafka.record.crc import crc32c
from sparkafka.record.layout import (
    ATTRIBUTES_OFFSET,
    CRC_OFFSET,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    MAX_RECORD_OVERHEAD,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    PRODUCER_ID_OFFSET,
    RECORD_BATCH_OVERHEAD,
    TRANSACTIONAL_FLAG,
)
from sparkafka.record.reader import decode_batch, decode_records
from sparkafka.record.tails_vector import MIN_ROWS as VECTOR_MIN_ROWS
from sparkafka.record.tails_vector import encode_tails, numpy_module

COMPRESSION_RATE_ESTIMATION_FACTOR = 1.05
MAX_UNCOMPRESSED_RATIO = 2
"""When compressing, a batch holds at most this many times its write limit of uncompressed records at
a time (the C accelerator has the same constant). With lz4 and snappy (``SPILLING_CODECS``) a record that
would pass it makes ``try_append`` compress the records held so far into the batch's
``CompressionStream`` first (a *spill*), as Java's appends compress as they go, and the estimate (Java's:
uncompressed bytes x ratio estimate x 1.05) decides when the batch is full: a batch of very compressible
records holds many times its limit of records while its memory stays within about three times the limit.
The bulk path (``append_tails``) spills the same way. With gzip and zstd the batch is full at the cap (a
stream of theirs would keep a compressor context per open batch: ~270 KB for zlib, ~1.6 MB for zstd at
level 3)."""

_CRC = struct.Struct(">I")
_PRODUCER_STATE = struct.Struct(">qhi")  # at offset 43
_ATTRIBUTES = struct.Struct(">h")
_BATCH_LENGTH = struct.Struct(">i")

RecordTuple = tuple[int, "bytes | None", "bytes | None", "Headers | None"]
"""``(timestamp, key, value, headers)``."""


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


def _encode_record_py(buf: bytearray, pos: int, size: int, ts_delta: int, offset_delta: int,
                      key: bytes | None, value: bytes | None) -> int:
    """Write one record without headers at ``pos`` (growing ``buf`` if it ends there); returns the end."""
    V = VARINT
    N = SMALL
    head = VARINT_ATTR0[size] if size < 4096 else zigzag_varint(size) + b"\x00"
    tsb = V[ts_delta] if 0 <= ts_delta < N else zigzag_varint(ts_delta)
    od = V[offset_delta] if offset_delta < N else zigzag_varint(offset_delta)
    if key is None:
        if value is None:
            piece = b"".join((head, tsb, od, b"\x01\x01\x00"))
        else:
            vl = len(value)
            piece = b"".join((head, tsb, od, b"\x01", V[vl] if vl < N else zigzag_varint(vl), value, b"\x00"))
    else:
        kl = len(key)
        kh = V[kl] if kl < N else zigzag_varint(kl)
        if value is None:
            piece = b"".join((head, tsb, od, kh, key, b"\x01\x00"))
        else:
            vl = len(value)
            piece = b"".join((head, tsb, od, kh, key, V[vl] if vl < N else zigzag_varint(vl), value, b"\x00"))
    end = pos + len(piece)
    buf[pos:end] = piece
    return end


def _encode_record_with_headers(buf: bytearray, pos: int, size: int, ts_delta: int, offset_delta: int,
                                key: bytes | None, value: bytes | None, headers: Headers) -> int:
    parts = [zigzag_varint(size), b"\x00", zigzag_varint(ts_delta), zigzag_varint(offset_delta)]
    if key is None:
        parts.append(NULL_LENGTH)
    else:
        parts += (zigzag_varint(len(key)), bytes(key))
    if value is None:
        parts.append(NULL_LENGTH)
    else:
        parts += (zigzag_varint(len(value)), bytes(value))
    parts.append(_encode_headers(headers))
    piece = b"".join(parts)
    end = pos + len(piece)
    buf[pos:end] = piece
    return end


_encode_record: Callable[[bytearray, int, int, int, int, bytes | None, bytes | None], int] = (
    _encode_record_py if ACCEL is None else ACCEL.write_record)
"""Writes one record without headers (the C version when the accelerator is built)."""
_c_append_tails: Callable[..., tuple[int, int]] | None = getattr(ACCEL, "append_tails", None)
"""``sparkafka._accel.append_tails`` when the accelerator is built."""


def append_tails_in_c() -> bool:
    """Whether ``RecordBatchBuilder.append_tails`` runs in the C accelerator (else in Python, with numpy for
    large calls: then the bulk path may lay out a run of new batches at once, ``tails_vector.encode_run``)."""
    return _c_append_tails is not None


def _finish_batch_py(out: bytearray, size: int, attributes: int, last_offset_delta: int, base_timestamp: int,
                     max_timestamp: int, producer_id: int, producer_epoch: int, base_sequence: int,
                     record_count: int, crc: Callable[[memoryview], int]) -> memoryview:
    """Pack the header into ``out[0:61]`` (the records are at ``[61:size]``; base offset 0, no partition
    leader epoch) and the CRC-32C (``crc``) of bytes [21, size); a view of the batch. A field that does not
    fit its width raises ``struct.error``. The reference of ``sparkafka._accel.finish_batch`` (``_c/_batch.c``,
    which raises OverflowError naming the field instead), which ``_finish_batch`` is when the accelerator
    is built."""
    HEADER.pack_into(
        out, 0, 0, size - LOG_OVERHEAD, NO_PARTITION_LEADER_EPOCH, MAGIC, 0, attributes,
        last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence,
        record_count,
    )
    view = memoryview(out)[:size]
    _CRC.pack_into(out, CRC_OFFSET, crc(view[ATTRIBUTES_OFFSET:]))
    return view


_finish_batch: Callable[..., memoryview] = _finish_batch_py if ACCEL is None else ACCEL.finish_batch
_c_patch_producer_state: Callable[..., str | None] | None = getattr(ACCEL, "patch_producer_state", None)


class _BuilderStatePy:
    """The state the open-batch append reads and changes, for builds without the accelerator: the
    attributes of ``sparkafka._accel.BuilderState`` (``_c/_append.h`` documents each)."""

    __slots__ = ("_appends_closed", "_base_timestamp", "_buf", "_buffer", "_max_timestamp", "_pos", "_ratio_factor",
                 "_write_limit", "estimated_size_in_bytes", "record_count", "uncompressed_bytes")

    _appends_closed: bool
    _base_timestamp: int
    _buf: bytearray
    _buffer: bytearray | None
    _max_timestamp: int
    _pos: int
    _ratio_factor: float
    _write_limit: int
    estimated_size_in_bytes: int
    record_count: int
    uncompressed_bytes: int


if TYPE_CHECKING:
    _BuilderState = _BuilderStatePy
else:
    _BuilderState = _BuilderStatePy if ACCEL is None else ACCEL.BuilderState


class RecordBatchBuilder(_BuilderState):
    """Encodes records for one partition into one v2 batch (see the module docstring)."""

    __slots__ = ("_built", "_built_state", "_compression", "_compression_level", "_spilled", "_stream",
                 "actual_compression_ratio", "wanted_capacity")

    def __init__(
        self,
        buffer: bytearray | None,
        write_limit: int,
        compression: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        compression_ratio_estimate: float = 1.0,
    ) -> None:
        self._buffer = buffer
        """The caller's (pooled) buffer: written in place, never resized."""
        self._buf = buffer if buffer is not None and len(buffer) >= RECORD_BATCH_OVERHEAD \
            else bytearray(RECORD_BATCH_OVERHEAD)
        """Where the records are written (``_buffer``, or a private growing bytearray)."""
        self._pos = RECORD_BATCH_OVERHEAD
        """End of the records written so far."""
        self._write_limit = write_limit
        self._compression = compression if type(compression) is CompressionType else CompressionType(compression)
        self._compression_level = (
            validate_level(self._compression, compression_level) if compression_level is not None else None
        )
        # 0.0 means "no compression": the estimate is then exact
        self._ratio_factor = (
            0.0 if self._compression == NO_COMPRESSION
            else compression_ratio_estimate * COMPRESSION_RATE_ESTIMATION_FACTOR
        )
        self._base_timestamp = 0
        self._max_timestamp = -1
        self._appends_closed = False
        self._built: memoryview | None = None
        self._built_state: tuple[int, int, int, bool] | None = None
        self._stream: CompressionStream | None = None
        """The compressor of a batch that has spilled (``MAX_UNCOMPRESSED_RATIO``), else None."""
        self._spilled = b""
        """The compressed bytes of the records spilled so far; ``_buf[61:_pos]`` holds the later ones."""
        self.record_count = 0
        self.estimated_size_in_bytes = RECORD_BATCH_OVERHEAD
        """Java ``estimatedSizeInBytes``: 61 + records (scaled when compressing); exact after close."""
        self.uncompressed_bytes = 0
        """Total encoded size of the records before compression (header excluded)."""
        self.actual_compression_ratio = 1.0
        """compressed records bytes / uncompressed records bytes, set by close()."""
        self.wanted_capacity = 0
        """Set by a refused ``try_append``: the buffer length that would take the record when only a
        short pooled buffer refused it (the batch has room), else 0."""

    def _target(self, end: int) -> bytearray:
        """The buffer to write up to ``end`` in: the pooled one is never grown, so a record that
        would overflow it moves the records written so far to a private bytearray (callers first refuse
        a record that would overflow a short buffer: ``is_short``)."""
        buf = self._buf
        if end > len(buf) and buf is self._buffer:
            buf = self._buf = self._moved(end)
        return buf

    def _moved(self, end: int) -> bytearray:
        """The records so far in a private bytearray with room up to ``end``; when compressing, with room
        up to the cap of bytes held (``MAX_UNCOMPRESSED_RATIO``; at most twice ``end``) at once, so that it
        does not grow record by record (callgrind, keyed lz4 records: growing it cost ~360 instructions
        per record). Bytes past ``_pos`` are not part of the batch."""
        pos = self._pos
        size = end
        if self._ratio_factor:
            size = max(end, min(RECORD_BATCH_OVERHEAD + MAX_UNCOMPRESSED_RATIO * self._write_limit, 2 * end))
        moved = bytearray(size)
        moved[:pos] = memoryview(self._buf)[:pos]
        return moved

    def is_short(self) -> bool:
        """The records are written into a pooled buffer shorter than the write limit: a record that
        would overflow it is refused (``wanted_capacity``) instead of moving to a private buffer."""
        buf = self._buf
        return buf is self._buffer and len(buf) < self._write_limit

    def replace_buffer(self, buffer: bytearray) -> bytearray:
        """Move the records from the short pooled buffer into ``buffer`` (a longer pooled one) and
        return the old one (the caller gives it back to the pool)."""
        old = self._buf
        pos = self._pos
        if self._built is not None or old is not self._buffer or len(buffer) < pos:
            raise ValueError("replace_buffer: the batch is built, not in its pooled buffer, or the new one is "
                             f"shorter than its {pos} bytes")
        with memoryview(old) as view:
            buffer[RECORD_BATCH_OVERHEAD:pos] = view[RECORD_BATCH_OVERHEAD:pos]
        self._buffer = self._buf = buffer
        return old

    def try_append(
        self, timestamp: int, key: bytes | None, value: bytes | None, headers: Headers | None
    ) -> int:
        """Append a record if it fits; returns the growth of ``estimated_size_in_bytes`` (the whole
        estimate, header included, for the first record) or -1 (nothing appended) if it does not fit,
        appends are closed, or it fits the batch but not its short pooled buffer (``wanted_capacity``
        then says how long a buffer would take it; else it is 0). The first record always fits."""
        if self._appends_closed:
            self.wanted_capacity = 0
            return -1
        n = self.record_count
        if n:
            d = timestamp - self._base_timestamp
            size = 2 if -64 <= d < 64 else 1 + varint_size(d)  # attributes + timestampDelta
            size += 1 if n < 64 else 2 if n < 8192 else varint_size(n)
        else:
            d = 0
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
        limit = self._write_limit
        held = self._pos - RECORD_BATCH_OVERHEAD
        if n and self._ratio_factor and held + total > MAX_UNCOMPRESSED_RATIO * limit:
            if self._compression not in SPILLING_CODECS:  # gzip, zstd: full at the cap
                self.wanted_capacity = 0
                return -1
            if held:
                self._spill()
        old = self.estimated_size_in_bytes
        if n and old + total > limit:
            self.wanted_capacity = 0
            return -1
        pos = self._pos
        end = pos + total
        buf = self._buf
        if end > len(buf) and buf is self._buffer:
            if n and len(buf) < limit:  # a short pooled buffer: the caller grows it or starts a new batch
                self.wanted_capacity = end
                return -1
            buf = self._buf = self._moved(end)  # _target: the records go to a private bytearray
        if headers:
            self._pos = _encode_record_with_headers(buf, pos, size, d, n, key, value, headers)
        else:
            self._pos = _encode_record(buf, pos, size, d, n, key, value)
        if not n:
            self._base_timestamp = timestamp
        uncompressed = self.uncompressed_bytes + total
        self.uncompressed_bytes = uncompressed
        factor = self._ratio_factor
        new = RECORD_BATCH_OVERHEAD + (int(uncompressed * factor) if factor else uncompressed)
        self.estimated_size_in_bytes = new
        self.record_count = n + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return new - old if n else new

    def _try_append_open_py(self, timestamp: int, key: bytes | None, value: bytes | None) -> int:
        """The open-batch append rule in Python (the C one: ``_c/_append.h``): ``try_append`` of a record
        without headers to a batch that has records, refusing (-1) also when the record would make the
        batch full, so on success ``is_full()`` is still False, or that would overflow a short pooled
        buffer (``is_short``). The producer's fast path; the record that fills a batch or needs a longer
        buffer goes through ``try_append``. Returns the growth of the size estimate."""
        n = self.record_count
        if self._appends_closed or not n:
            return -1
        d = timestamp - self._base_timestamp
        size = (2 if -64 <= d < 64 else 1 + varint_size(d)) + (1 if n < 64 else 2 if n < 8192 else varint_size(n))
        if key is None:
            size += 2  # null key, no headers
        else:
            kl = len(key)
            size += kl + (2 if kl < 64 else 3 if kl < 8192 else 1 + varint_size(kl))
        if value is None:
            size += 1
        else:
            vl = len(value)
            size += vl + (1 if vl < 64 else 2 if vl < 8192 else varint_size(vl))
        total = size + (1 if size < 64 else 2 if size < 8192 else varint_size(size))
        uncompressed = self.uncompressed_bytes + total
        factor = self._ratio_factor
        new = RECORD_BATCH_OVERHEAD + (int(uncompressed * factor) if factor else uncompressed)
        limit = self._write_limit
        if new >= limit or (factor and (self.estimated_size_in_bytes + total > limit  # Java's hasRoomFor
                                        or self._pos - RECORD_BATCH_OVERHEAD + total > MAX_UNCOMPRESSED_RATIO * limit)):
            return -1
        pos = self._pos
        end = pos + total
        buf = self._buf
        if end > len(buf) and buf is self._buffer:
            if len(buf) < limit:  # a short pooled buffer: the general path grows it (try_append)
                return -1
            buf = self._target(end)
        self._pos = _encode_record(buf, pos, size, d, n, key, value)
        self.uncompressed_bytes = uncompressed
        old = self.estimated_size_in_bytes
        self.estimated_size_in_bytes = new
        self.record_count = n + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return new - old

    def _spill(self) -> None:
        """Compress the records held uncompressed into the stream (``MAX_UNCOMPRESSED_RATIO``) and start
        holding again at byte 61 of the same buffer (a private one unless the pooled buffer is longer than
        the cap). The batch's ratio estimate becomes the ratio of the bytes compressed so far (x 1.05), and
        the estimate follows, so the batch fills by what its records really compress to."""
        stream = self._stream
        if stream is None:
            stream = self._stream = CompressionStream(self._compression, self._compression_level)
        pos = self._pos
        with memoryview(self._buf) as whole:
            self._spilled += stream.spill(whole[RECORD_BATCH_OVERHEAD:pos])
        self._pos = RECORD_BATCH_OVERHEAD
        uncompressed = self.uncompressed_bytes
        factor = len(self._spilled) / uncompressed * COMPRESSION_RATE_ESTIMATION_FACTOR
        self._ratio_factor = factor
        self.estimated_size_in_bytes = RECORD_BATCH_OVERHEAD + int(uncompressed * factor)

    if ACCEL is None:
        try_append_open = _try_append_open_py
    # else the C rule, BuilderState.try_append_open (same results: tests/record/test_builder_fast_append.py)

    def is_full(self) -> bool:
        """Java ``isFull``: appends are closed, or at least one record and the estimate reached the limit."""
        return self._appends_closed or (
            self.record_count > 0 and self._write_limit <= self.estimated_size_in_bytes)

    def close_for_appends(self) -> None:
        """Refuse further appends (Java ``closeForRecordAppends``)."""
        self._appends_closed = True

    def seal(self) -> None:
        """Refuse further appends because a new batch takes over; a compressed batch is also compressed
        now, as Java's appends compress as they go: a queued batch then holds its compressed bytes (in
        the pooled buffer when they fit) instead of up to twice ``write_limit`` of records in a buffer
        of their own that ``buffer.memory`` does not count. ``close()`` later only rewrites the
        producer state and the CRC."""
        self._appends_closed = True
        if self._compression != NO_COMPRESSION and self.record_count and self._built is None:
            self.close()

    @property
    def is_closed(self) -> bool:
        """True once ``close`` has built the batch bytes."""
        return self._built is not None

    @property
    def compression(self) -> CompressionType:
        return self._compression

    @property
    def compression_level(self) -> int | None:
        """The level given (None: the codec's default)."""
        return self._compression_level

    @property
    def compression_ratio_estimate(self) -> float:
        """The compression ratio estimate the size accounting uses (1.0 without compression)."""
        factor = self._ratio_factor
        return factor / COMPRESSION_RATE_ESTIMATION_FACTOR if factor else 1.0

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
        """The appended records as ``(timestamp, key, value, headers)``, in order (decoded from the
        stored bytes; headers None when a record has none). For splitting a batch."""
        built = self._built
        if built is not None and len(built) and self._compression != NO_COMPRESSION:
            # close() compressed the records in place: decode the built batch instead
            return [(r.timestamp, r.key, r.value, r.headers or None) for r in decode_batch(built).records]
        raw = bytes(memoryview(self._buf)[RECORD_BATCH_OVERHEAD:self._pos])
        if self._stream is not None:
            raw = decompress_spilled(self._compression, self._spilled) + raw
        return [(r.timestamp, r.key, r.value, r.headers or None)
                for r in decode_records(raw, self.record_count, 0, self._base_timestamp, None)]

    def close(
        self,
        producer_id: int = NO_PRODUCER_ID,
        producer_epoch: int = NO_PRODUCER_EPOCH,
        base_sequence: int = NO_SEQUENCE,
        is_transactional: bool = False,
    ) -> memoryview:
        """Finish the batch and return a view of exactly its bytes (in ``buffer`` when it fits).

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
        count = self.record_count
        if not count:
            built = memoryview(bytearray())
        else:
            codec = self._compression
            out = self._buf
            size = self._pos
            if codec != NO_COMPRESSION:
                stream = self._stream
                with memoryview(out) as whole:
                    if stream is None:
                        payload = compress(codec, whole[RECORD_BATCH_OVERHEAD:size], self._compression_level)
                    else:
                        payload = self._spilled + stream.finish(whole[RECORD_BATCH_OVERHEAD:size])
                        self._spilled = b""
                        self._stream = None
                self.actual_compression_ratio = len(payload) / self.uncompressed_bytes
                size = RECORD_BATCH_OVERHEAD + len(payload)
                pooled = self._buffer
                if pooled is not None and out is not pooled and size <= len(pooled):
                    out = self._buf = pooled  # back in the pooled buffer: the uncompressed copy is freed
                elif size > len(out):
                    out = self._buf = bytearray(size)
                out[RECORD_BATCH_OVERHEAD:size] = payload
            try:
                built = _finish_batch(out, size, int(codec) | (TRANSACTIONAL_FLAG if is_transactional else 0),
                                      count - 1, self._base_timestamp, self._max_timestamp, producer_id,
                                      producer_epoch, base_sequence, count, crc32c)
            except (struct.error, OverflowError) as exc:
                raise InvalidRecordInputError(f"batch header field out of range: {exc}") from exc
        self._built = built
        self._built_state = state
        self.estimated_size_in_bytes = len(built)
        return built


    def append_tails(self, offsets: memoryview, data: memoryview, start: int, stop: int, timestamp: int) -> int:
        """Append records whose tails (``sparkafka.producer.arrow.tails``) are rows ``[start, stop)`` of
        ``offsets``/``data``, all with ``timestamp``, as many as fit (``try_append``'s rule, its spills
        included; the first record of an empty batch always fits). Returns how many were appended (0 if
        closed, or if the batch has records in a short buffer: ``is_short``)."""
        if self._appends_closed or start >= stop:
            return 0
        n = self.record_count
        if n and self.is_short():  # the caller grows a short buffer first (RecordAccumulator.append_tails)
            return 0
        if not n:
            self._base_timestamp = timestamp
        d = timestamp - self._base_timestamp
        limit = self._write_limit
        first = start
        while True:
            count = self._append_tails_once(offsets, data, start, stop, n, d, limit)
            start += count
            n += count
            if (start >= stop or not self._ratio_factor or self._pos == RECORD_BATCH_OVERHEAD
                    or self._compression not in SPILLING_CODECS):
                break
            # refused by the cap of bytes held uncompressed, not by the estimate: spill, as try_append does
            body = 1 + varint_size(d) + varint_size(n) + offsets[start + 1] - offsets[start]
            if self._pos - RECORD_BATCH_OVERHEAD + varint_size(body) + body <= MAX_UNCOMPRESSED_RATIO * limit:
                break
            self._spill()
        if start > first and timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        return start - first

    def _append_tails_once(self, offsets: memoryview, data: memoryview, start: int, stop: int, n: int, d: int,
                           limit: int) -> int:
        """One pass of ``append_tails``: the rows that fit without a spill; returns how many."""
        uncompressed = self.uncompressed_bytes
        factor = self._ratio_factor
        pos = self._pos
        if _c_append_tails is not None:
            buf = self._buf
            count, written = _c_append_tails(buf, buf is self._buffer, pos, n, d, offsets, data, start, stop,
                                             uncompressed, self.estimated_size_in_bytes, factor, limit)
            if count < 0:  # the records that fit would run past the pooled buffer: go private, again
                self._target(pos + written)
                count, written = _c_append_tails(self._buf, False, pos, n, d, offsets, data, start, stop,
                                                 uncompressed, self.estimated_size_in_bytes, factor, limit)
        else:
            count, written = self._append_tails_py(offsets, data, start, stop, n, d, uncompressed, limit)
        if not count:
            return 0
        self._pos = pos + written
        uncompressed += written
        self.uncompressed_bytes = uncompressed
        self.estimated_size_in_bytes = RECORD_BATCH_OVERHEAD + (int(uncompressed * factor) if factor else uncompressed)
        self.record_count = n + count
        return int(count)

    def append_encoded(self, records: memoryview, count: int, timestamp: int, limit: int) -> bool:
        """Write ``count`` whole records (``tails_vector.encode_run``: offset deltas from 0, timestamp delta 0,
        laid out for write limit ``limit`` without compression) into this empty batch, all with ``timestamp``.
        False, with nothing written, unless the batch is empty, open, uncompressed, has that write limit and
        its buffer holds them: the caller then appends the rows with ``append_tails``."""
        end = RECORD_BATCH_OVERHEAD + len(records)
        if (self.record_count or self._appends_closed or self._ratio_factor or limit != self._write_limit
                or end > limit or end > len(self._buf) or count <= 0):
            return False
        self._buf[RECORD_BATCH_OVERHEAD:end] = records
        self._base_timestamp = timestamp
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp
        self._pos = end
        self.uncompressed_bytes = end - RECORD_BATCH_OVERHEAD
        self.estimated_size_in_bytes = end
        self.record_count = count
        return True

    def _append_tails_py(self, offsets: memoryview, data: memoryview, start: int, stop: int, n: int, d: int,
                         uncompressed: int, limit: int) -> tuple[int, int]:
        """``append_tails`` in Python: ``(count, bytes written)``. Without compression, given at least
        ``tails_vector.MIN_ROWS`` rows and room for as many like the first, numpy does it
        (``tails_vector.encode_tails``)."""
        V = VARINT
        N = SMALL
        tsb = V[d] if 0 <= d < N else zigzag_varint(d)
        fixed = 1 + len(tsb)
        factor = self._ratio_factor
        cap = MAX_UNCOMPRESSED_RATIO * limit - (self._pos - RECORD_BATCH_OVERHEAD)  # what this call may add
        estimate = self.estimated_size_in_bytes
        if not factor and stop - start >= VECTOR_MIN_ROWS and (
                (limit - estimate) // (offsets[start + 1] - offsets[start] + fixed + 3) >= VECTOR_MIN_ROWS):
            np = numpy_module()
            if np is not None:
                count, records = encode_tails(np, offsets, data, start, stop, n, tsb, estimate, uncompressed, limit)
                if not count:
                    return 0, 0
                pos = self._pos
                end = pos + len(records)
                self._target(end)[pos:end] = memoryview(records)
                return count, len(records)
        pieces: list[bytes | memoryview] = []
        before = uncompressed
        i = start
        lo = offsets[i]
        while i < stop:
            hi = offsets[i + 1]
            od = V[n] if n < N else zigzag_varint(n)
            body = fixed + len(od) + hi - lo
            total = (1 if body < 64 else 2 if body < 8192 else varint_size(body)) + body
            if n and (estimate + total > limit or (factor and uncompressed - before + total > cap)):
                break
            pieces += (V[body] if body < N else zigzag_varint(body), b"\x00", tsb, od, data[lo:hi])
            uncompressed += total
            estimate = RECORD_BATCH_OVERHEAD + (int(uncompressed * factor) if factor else uncompressed)
            n += 1
            i += 1
            lo = hi
        written = uncompressed - before
        if written:
            pos = self._pos
            end = pos + written
            self._target(end)[pos:end] = b"".join(pieces)
        return i - start, written


def set_producer_state(
    batch: bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    is_transactional: bool,
) -> None:
    """Rewrite producer id, epoch, base sequence and the transactional bit of a closed batch in place,
    then recompute its CRC (``sparkafka._accel.patch_producer_state`` when the accelerator is built,
    else ``_set_producer_state_py``)."""
    if _c_patch_producer_state is not None:
        try:
            problem = _c_patch_producer_state(batch, producer_id, producer_epoch, base_sequence, is_transactional,
                                              crc32c)
        except OverflowError as exc:
            raise struct.error(str(exc)) from exc
    else:
        problem = _set_producer_state_py(batch, producer_id, producer_epoch, base_sequence, is_transactional)
    if problem is not None:
        raise CorruptRecordBatchError(problem)


def _set_producer_state_py(batch: bytearray | memoryview, producer_id: int, producer_epoch: int,
                           base_sequence: int, is_transactional: bool) -> str | None:
    """``set_producer_state``'s work: None when done, else why ``batch`` is not a v2 batch (nothing
    changed then). The reference of ``sparkafka._accel.patch_producer_state`` (``_c/_batch.c``)."""
    if len(batch) < RECORD_BATCH_OVERHEAD or batch[16] != MAGIC:
        return f"not a v2 record batch (need >= {RECORD_BATCH_OVERHEAD} bytes and magic {MAGIC})"
    (length,) = _BATCH_LENGTH.unpack_from(batch, 8)
    end = LOG_OVERHEAD + length
    if length < RECORD_BATCH_OVERHEAD - LOG_OVERHEAD or end > len(batch):
        return f"batchLength {length} does not match the {len(batch)} bytes given"
    (attributes,) = _ATTRIBUTES.unpack_from(batch, ATTRIBUTES_OFFSET)
    attributes = (attributes | TRANSACTIONAL_FLAG) if is_transactional else (attributes & ~TRANSACTIONAL_FLAG)
    _ATTRIBUTES.pack_into(batch, ATTRIBUTES_OFFSET, attributes)
    _PRODUCER_STATE.pack_into(batch, PRODUCER_ID_OFFSET, producer_id, producer_epoch, base_sequence)
    _CRC.pack_into(batch, CRC_OFFSET, crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:end]))
    return None


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
