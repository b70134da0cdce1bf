"""Kafka wire primitives: a ``Writer`` that appends to a bytearray and a bounds-checked ``Reader``.

How it works: every Kafka field is one of a few encodings (all big-endian):

* fixed width: int8/16/32/64, uint32, float64, bool (1 byte), uuid (16 bytes);
* classic (non-flexible) variable width: string/nullable string with an int16 length (-1 = null),
  bytes with an int32 length (-1 = null), arrays with an int32 count (-1 = null);
* compact (flexible versions): the same with an *unsigned varint* of ``length + 1`` (0 = null);
* tagged-field sections (flexible versions): ``uvarint count``, then per field ``uvarint tag,
  uvarint size, data``, tags ascending;
* zigzag varint (int32) / varlong (int64), used inside records.

UUIDs are ``bytes`` of length 16 on both sides (decoding never builds ``uuid.UUID`` objects, which
keeps decoding cheap); the writer also accepts a ``uuid.UUID`` and writes its ``.bytes``.
``ZERO_UUID`` is Kafka's "no id" value.

``Reader`` keeps a position into a bytes/bytearray/memoryview and checks every read against the end
of the buffer: truncated input raises ``ProtocolError`` naming what was being read, the offset, and how
many bytes were needed and left. An unsigned varint longer than 5 bytes (varlong: 10) raises too.
The module-level ``write_*``/``read_*`` helpers are the fast paths the schema codec uses.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from sparkafka._types import MAX_STRING_BYTES as MAX_STRING_BYTES  # the rule the config checks too
from sparkafka.errors import ProtocolError

Buffer = bytes | bytearray | memoryview
T = TypeVar("T")

ZERO_UUID = bytes(16)

INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")
INT64 = struct.Struct(">q")
UINT16 = struct.Struct(">H")
UINT32 = struct.Struct(">I")
FLOAT64 = struct.Struct(">d")
BOOL = struct.Struct(">?")

INT_LIMITS: dict[str, tuple[int, int]] = {
    "int8": (-(1 << 7), (1 << 7) - 1),
    "int16": (-(1 << 15), (1 << 15) - 1),
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint16": (0, (1 << 16) - 1),
    "uint32": (0, (1 << 32) - 1),
}


# ---------------------------------------------------------------------------------------------
# varints


def zigzag32(n: int) -> int:
    """Zigzag-map a signed int32 to an unsigned int (0, -1, 1, -2 -> 0, 1, 2, 3)."""
    return ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF


def zigzag64(n: int) -> int:
    """Zigzag-map a signed int64 to an unsigned int."""
    return ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF


def unzigzag(u: int) -> int:
    """Invert ``zigzag32``/``zigzag64``."""
    return (u >> 1) ^ -(u & 1)


def write_uvarint(out: bytearray, n: int) -> None:
    """Append an unsigned LEB128 varint. Negative int32 values are written as their uint32 pattern
    (Java's ``writeUnsignedVarint(-1)`` gives ``FF FF FF FF 0F``)."""
    if n < 0:
        if n < -(1 << 31):
            raise ProtocolError(f"unsigned varint: value {n} is below the int32 minimum {-(1 << 31)}")
        n &= 0xFFFFFFFF
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)


_ONE_BYTE_UVARINTS = tuple(bytes((i,)) for i in range(0x80))


def uvarint_bytes(n: int) -> bytes:
    """The unsigned varint encoding of ``n`` as bytes."""
    if 0 <= n < 0x80:
        return _ONE_BYTE_UVARINTS[n]
    if 0 <= n < 0x200000:  # two or three bytes (lengths of batches up to 2 MiB)
        if n < 0x4000:
            return bytes(((n & 0x7F) | 0x80, n >> 7))
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    write_uvarint(out, n)
    return bytes(out)


def uvarint_size(n: int) -> int:
    """Bytes an unsigned varint of ``n`` (>= 0) takes."""
    size = 1
    while n >= 0x80:
        n >>= 7
        size += 1
    return size


def write_varint(out: bytearray, n: int) -> None:
    """Append a zigzag varint (int32)."""
    if not -(1 << 31) <= n < (1 << 31):
        raise ProtocolError(f"varint: value {n} is outside the int32 range [{-(1 << 31)}, {(1 << 31) - 1}]")
    write_uvarint(out, ((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def write_varlong(out: bytearray, n: int) -> None:
    """Append a zigzag varlong (int64)."""
    if not -(1 << 63) <= n < (1 << 63):
        raise ProtocolError(f"varlong: value {n} is outside the int64 range [{-(1 << 63)}, {(1 << 63) - 1}]")
    u = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _truncated(what: str, pos: int, need: int, left: int) -> ProtocolError:
    return ProtocolError(
        f"truncated input reading {what} at offset {pos}: need {need} byte(s), {max(left, 0)} left"
    )


def read_uvarint(buf: Buffer, pos: int, what: str = "unsigned varint") -> tuple[int, int]:
    """Read an unsigned varint (at most 5 bytes) at ``pos``; returns ``(value, new_pos)``."""
    end = len(buf)
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _truncated(what, start, pos - start + 1, end - start)
        b = buf[pos]
        pos += 1
        if shift == 28:
            if b & 0x80:
                raise ProtocolError(
                    f"{what} at offset {start} is longer than 5 bytes (5th byte has the high bit set)"
                )
            return (result | (b << 28)) & 0xFFFFFFFF, pos
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def read_uvarlong(buf: Buffer, pos: int, what: str = "unsigned varlong") -> tuple[int, int]:
    """Read an unsigned varlong (at most 10 bytes) at ``pos``; returns ``(value, new_pos)``."""
    end = len(buf)
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _truncated(what, start, pos - start + 1, end - start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos
        shift += 7
        if shift >= 70:
            raise ProtocolError(f"{what} at offset {start} is longer than 10 bytes")


def read_varint(buf: Buffer, pos: int, what: str = "varint") -> tuple[int, int]:
    """Read a zigzag varint (int32); returns ``(value, new_pos)``."""
    u, pos = read_uvarint(buf, pos, what)
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: Buffer, pos: int, what: str = "varlong") -> tuple[int, int]:
    """Read a zigzag varlong (int64); returns ``(value, new_pos)``."""
    u, pos = read_uvarlong(buf, pos, what)
    return (u >> 1) ^ -(u & 1), pos


# ---------------------------------------------------------------------------------------------
# Writer


def uuid_bytes(value: bytes | _uuid.UUID, what: str = "uuid") -> bytes:
    """A uuid value as its 16 bytes (accepts ``bytes``/``bytearray`` of length 16 or ``uuid.UUID``)."""
    if isinstance(value, _uuid.UUID):
        return value.bytes
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return bytes(value)
    raise ProtocolError(f"{what}: expected 16 bytes or uuid.UUID, got {type(value).__name__} {value!r:.40}")


def _pack(s: struct.Struct, kind: str, value: object, what: str | None) -> bytes:
    try:
        return s.pack(value)
    except (struct.error, TypeError):
        lo, hi = INT_LIMITS.get(kind, (None, None))
        limit = f" (range [{lo}, {hi}])" if lo is not None else ""
        raise ProtocolError(f"{what or kind}: cannot encode {value!r:.40} as {kind}{limit}") from None


class Writer:
    """Appends Kafka-encoded values to ``buf`` (a bytearray); ``to_bytes()`` returns the result."""

    __slots__ = ("buf",)

    def __init__(self) -> None:
        self.buf = bytearray()

    def __len__(self) -> int:
        return len(self.buf)

    def to_bytes(self) -> bytes:
        return bytes(self.buf)

    def raw(self, data: Buffer) -> None:
        self.buf += data

    def int8(self, v: int, what: str | None = None) -> None:
        self.buf += _pack(INT8, "int8", v, what)

    def int16(self, v: int, what: str | None = None) -> None:
        self.buf += _pack(INT16, "int16", v, what)

    def int32(self, v: int, what: str | None = None) -> None:
        self.buf += _pack(INT32, "int32", v, what)

    def int64(self, v: int, what: str | None = None) -> None:
        self.buf += _pack(INT64, "int64", v, what)

    def uint16(self, v: int, what: str | None = None) -> None:
        self.buf += _pack(UINT16, "uint16", v, what)

    def uint32(self, v: int, what: str | None = None) -> None:
        self.buf += _pack(UINT32, "uint32", v, what)

    def float64(self, v: float, what: str | None = None) -> None:
        self.buf += _pack(FLOAT64, "float64", v, what)

    def bool_(self, v: bool) -> None:
        self.buf.append(1 if v else 0)

    def uuid(self, v: bytes | _uuid.UUID, what: str = "uuid") -> None:
        self.buf += uuid_bytes(v, what)

    def varint(self, v: int) -> None:
        write_varint(self.buf, v)

    def varlong(self, v: int) -> None:
        write_varlong(self.buf, v)

    def uvarint(self, v: int) -> None:
        write_uvarint(self.buf, v)

    def string(self, v: str | None, what: str = "string") -> None:
        """int16 length + UTF-8 (not nullable)."""
        if v is None:
            raise ProtocolError(f"{what}: null is not allowed (non-nullable string)")
        data = v.encode()
        if len(data) > MAX_STRING_BYTES:
            raise ProtocolError(
                f"{what}: {len(data)} UTF-8 bytes exceed the int16 length limit {MAX_STRING_BYTES}"
            )
        self.buf += INT16.pack(len(data))
        self.buf += data

    def nullable_string(self, v: str | None, what: str = "nullable string") -> None:
        """int16 length + UTF-8, -1 for null."""
        if v is None:
            self.buf += b"\xff\xff"
        else:
            self.string(v, what)

    def compact_string(self, v: str | None, what: str = "compact string") -> None:
        """uvarint (length + 1) + UTF-8 (not nullable)."""
        if v is None:
            raise ProtocolError(f"{what}: null is not allowed (non-nullable string)")
        data = v.encode()
        if len(data) > MAX_STRING_BYTES:
            raise ProtocolError(
                f"{what}: {len(data)} UTF-8 bytes exceed the string length limit {MAX_STRING_BYTES}"
            )
        write_uvarint(self.buf, len(data) + 1)
        self.buf += data

    def compact_nullable_string(self, v: str | None, what: str = "compact nullable string") -> None:
        """uvarint (length + 1) + UTF-8, 0 for null."""
        if v is None:
            self.buf.append(0)
        else:
            self.compact_string(v, what)

    def bytes_(self, v: Buffer) -> None:
        """int32 length + data (not nullable)."""
        self.buf += INT32.pack(len(v))
        self.buf += v

    def nullable_bytes(self, v: Buffer | None) -> None:
        """int32 length + data, -1 for null."""
        if v is None:
            self.buf += b"\xff\xff\xff\xff"
        else:
            self.bytes_(v)

    def compact_bytes(self, v: Buffer) -> None:
        """uvarint (length + 1) + data (not nullable)."""
        write_uvarint(self.buf, len(v) + 1)
        self.buf += v

    def compact_nullable_bytes(self, v: Buffer | None) -> None:
        """uvarint (length + 1) + data, 0 for null."""
        if v is None:
            self.buf.append(0)
        else:
            self.compact_bytes(v)

    def array(self, items: Sequence[T] | None, write_item: Callable[[Writer, T], None]) -> None:
        """int32 count (-1 for null), then each item."""
        if items is None:
            self.buf += b"\xff\xff\xff\xff"
            return
        self.buf += INT32.pack(len(items))
        for item in items:
            write_item(self, item)

    def compact_array(self, items: Sequence[T] | None, write_item: Callable[[Writer, T], None]) -> None:
        """uvarint (count + 1) (0 for null), then each item."""
        if items is None:
            self.buf.append(0)
            return
        write_uvarint(self.buf, len(items) + 1)
        for item in items:
            write_item(self, item)

    def tagged_fields(self, fields: Mapping[int, Buffer] | None = None) -> None:
        """A tagged-field section: count, then ``tag, size, data`` in ascending tag order."""
        if not fields:
            self.buf.append(0)
            return
        write_uvarint(self.buf, len(fields))
        for tag in sorted(fields):
            data = fields[tag]
            write_uvarint(self.buf, tag)
            write_uvarint(self.buf, len(data))
            self.buf += data


# ---------------------------------------------------------------------------------------------
# Reader


class Reader:
    """Reads Kafka-encoded values from ``buf`` starting at ``pos``; every read is bounds-checked."""

    __slots__ = ("buf", "pos")

    def __init__(self, data: Buffer, offset: int = 0) -> None:
        self.buf: Buffer = data
        self.pos = offset

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _take(self, n: int, what: str) -> int:
        """Check ``n`` bytes are available, advance past them, return the old position."""
        pos = self.pos
        if pos + n > len(self.buf):
            raise _truncated(what, pos, n, len(self.buf) - pos)
        self.pos = pos + n
        return pos

    def raw(self, n: int, what: str = "raw bytes") -> bytes:
        pos = self._take(n, what)
        return bytes(self.buf[pos : pos + n])

    def int8(self, what: str = "int8") -> int:
        return int(INT8.unpack_from(self.buf, self._take(1, what))[0])

    def int16(self, what: str = "int16") -> int:
        return int(INT16.unpack_from(self.buf, self._take(2, what))[0])

    def int32(self, what: str = "int32") -> int:
        return int(INT32.unpack_from(self.buf, self._take(4, what))[0])

    def int64(self, what: str = "int64") -> int:
        return int(INT64.unpack_from(self.buf, self._take(8, what))[0])

    def uint16(self, what: str = "uint16") -> int:
        return int(UINT16.unpack_from(self.buf, self._take(2, what))[0])

    def uint32(self, what: str = "uint32") -> int:
        return int(UINT32.unpack_from(self.buf, self._take(4, what))[0])

    def float64(self, what: str = "float64") -> float:
        return float(FLOAT64.unpack_from(self.buf, self._take(8, what))[0])

    def bool_(self, what: str = "bool") -> bool:
        return self.buf[self._take(1, what)] != 0

    def uuid(self, what: str = "uuid") -> bytes:
        pos = self._take(16, what)
        return bytes(self.buf[pos : pos + 16])

    def varint(self, what: str = "varint") -> int:
        v, self.pos = read_varint(self.buf, self.pos, what)
        return v

    def varlong(self, what: str = "varlong") -> int:
        v, self.pos = read_varlong(self.buf, self.pos, what)
        return v

    def uvarint(self, what: str = "unsigned varint") -> int:
        v, self.pos = read_uvarint(self.buf, self.pos, what)
        return v

    def _utf8(self, n: int, what: str) -> str:
        pos = self._take(n, what)
        try:
            return str(self.buf[pos : pos + n], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{what} at offset {pos}: invalid UTF-8 ({e.reason})") from None

    def nullable_string(self, what: str = "nullable string") -> str | None:
        n = self.int16(what + " length")
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"{what}: invalid length {n} at offset {self.pos - 2}")
        return self._utf8(n, what)

    def string(self, what: str = "string") -> str:
        s = self.nullable_string(what)
        if s is None:
            raise ProtocolError(f"{what}: null found at offset {self.pos - 2} for a non-nullable string")
        return s

    def compact_nullable_string(self, what: str = "compact nullable string") -> str | None:
        n = self.uvarint(what + " length")
        if n == 0:
            return None
        return self._utf8(n - 1, what)

    def compact_string(self, what: str = "compact string") -> str:
        s = self.compact_nullable_string(what)
        if s is None:
            raise ProtocolError(f"{what}: null found for a non-nullable string (offset {self.pos - 1})")
        return s

    def nullable_bytes(self, what: str = "nullable bytes") -> bytes | None:
        n = self.int32(what + " length")
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"{what}: invalid length {n} at offset {self.pos - 4}")
        return self.raw(n, what)

    def bytes_(self, what: str = "bytes") -> bytes:
        b = self.nullable_bytes(what)
        if b is None:
            raise ProtocolError(f"{what}: null found at offset {self.pos - 4} for non-nullable bytes")
        return b

    def compact_nullable_bytes(self, what: str = "compact nullable bytes") -> bytes | None:
        n = self.uvarint(what + " length")
        if n == 0:
            return None
        return self.raw(n - 1, what)

    def compact_bytes(self, what: str = "compact bytes") -> bytes:
        b = self.compact_nullable_bytes(what)
        if b is None:
            raise ProtocolError(f"{what}: null found for non-nullable bytes (offset {self.pos - 1})")
        return b

    def array_length(self, what: str = "array", min_item_size: int = 1) -> int | None:
        """int32 count; None for null (-1).

        Rejects other negative counts and counts that the remaining bytes cannot hold."""
        n = self.int32(what + " length")
        if n < 0:
            if n == -1:
                return None
            raise ProtocolError(f"{what}: invalid array length {n} at offset {self.pos - 4}")
        self._check_count(n, what, min_item_size)
        return n

    def compact_array_length(self, what: str = "compact array", min_item_size: int = 1) -> int | None:
        """uvarint (count + 1); None for null (0)."""
        n = self.uvarint(what + " length")
        if n == 0:
            return None
        self._check_count(n - 1, what, min_item_size)
        return n - 1

    def _check_count(self, n: int, what: str, min_item_size: int) -> None:
        if min_item_size and n * min_item_size > len(self.buf) - self.pos:
            raise ProtocolError(
                f"{what}: array of {n} item(s) at offset {self.pos} cannot fit "
                f"in the {self.remaining()} byte(s) left"
            )

    def array(self, read_item: Callable[[Reader], T], what: str = "array") -> list[T] | None:
        n = self.array_length(what)
        if n is None:
            return None
        return [read_item(self) for _ in range(n)]

    def compact_array(self, read_item: Callable[[Reader], T], what: str = "compact array") -> list[T] | None:
        n = self.compact_array_length(what)
        if n is None:
            return None
        return [read_item(self) for _ in range(n)]

    def tagged_fields(self, what: str = "tagged fields") -> dict[int, bytes]:
        """A tagged-field section as ``{tag: raw data}``."""
        out: dict[int, bytes] = {}
        for _ in range(self.uvarint(what + " count")):
            tag = self.uvarint(what + " tag")
            size = self.uvarint(f"{what} tag {tag} size")
            out[tag] = self.raw(size, f"{what} tag {tag} data")
        return out

    def skip_tagged_fields(self, what: str = "tagged fields") -> None:
        for _ in range(self.uvarint(what + " count")):
            tag = self.uvarint(what + " tag")
            size = self.uvarint(f"{what} tag {tag} size")
            self._take(size, f"{what} tag {tag} data")
