"""Zigzag varints used inside v2 records (Java ``ByteUtils.writeVarint`` / ``writeVarlong``).

How it works: ``zigzag_varint(n)`` encodes any int (varint and varlong share the encoding for
values in range); ``VARINT`` is a tuple of the ready-made encodings of 0..SMALL-1 so the batch
encoder turns lengths and offset deltas into bytes with one tuple lookup (``VARINT_ATTR0`` also
appends a record's attributes byte). ``varint_size`` gives
the encoded length without encoding. ``read_varint`` decodes, rejecting over-long encodings.
"""

from __future__ import annotations

from sparkafka.errors import CorruptRecordBatchError

SMALL = 1 << 14
"""Values below this have a precomputed encoding in ``VARINT``."""


def zigzag_varint(n: int) -> bytes:
    """Zigzag + LEB128 encoding of a signed int (int32 or int64)."""
    u = (n << 1) if n >= 0 else ((-n) << 1) - 1
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


VARINT: tuple[bytes, ...] = tuple(zigzag_varint(i) for i in range(SMALL))
"""``VARINT[n]`` is ``zigzag_varint(n)`` for ``0 <= n < SMALL``."""

VARINT_ATTR0: tuple[bytes, ...] = tuple(v + b"\x00" for v in VARINT[:4096])
"""``VARINT_ATTR0[n]`` is ``zigzag_varint(n) + b"\\x00"``: a record's length followed by its attributes
byte (always 0), for record bodies below 4096 bytes (one piece instead of two in the batch encoder)."""

NULL_LENGTH = b"\x01"
"""The encoding of -1, the length of a null key/value/header value."""


def varint_size(n: int) -> int:
    """Bytes needed for the zigzag varint of ``n``."""
    u = (n << 1) if n >= 0 else ((-n) << 1) - 1
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


def read_varint(buf: bytes, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Decode a zigzag varint at ``pos``; returns (value, next position).

    ``max_bytes`` is 5 for varint and 10 for varlong; a longer encoding or the end of ``buf`` raises
    ``CorruptRecordBatchError``.
    """
    try:
        b = buf[pos]
        if b < 0x80:
            return (b >> 1) ^ -(b & 1), pos + 1
        u = b & 0x7F
        shift = 7
        start = pos
        pos += 1
        while True:
            b = buf[pos]
            pos += 1
            u |= (b & 0x7F) << shift
            if b < 0x80:
                break
            shift += 7
            if pos - start >= max_bytes:
                raise CorruptRecordBatchError(
                    f"varint at byte {start} is longer than {max_bytes} bytes")
    except IndexError:
        raise CorruptRecordBatchError(f"data ends inside a varint at byte {pos}") from None
    return (u >> 1) ^ -(u & 1), pos
