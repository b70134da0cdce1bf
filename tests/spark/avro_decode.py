"""A minimal Avro binary decoder for flat records (test oracle for the built-in encoder).

How it works: walks the writer schema's fields in order, reading zigzag varints, IEEE floats,
length-prefixed bytes/strings, fixed-size decimals and ``[type, "null"]`` unions. Written from
the Avro specification, independently of ``sparkafka.cli.avro_fallback``.
"""

from __future__ import annotations

import datetime
import decimal
import struct
from typing import Any


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def long(self) -> int:
        shift = result = 0
        while True:
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return (result >> 1) ^ -(result & 1)

    def take(self, n: int) -> bytes:
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out


def _read(r: _Reader, t: Any) -> Any:
    if isinstance(t, list):
        branch = r.long()
        return _read(r, t[branch])
    if t == "null":
        return None
    if isinstance(t, dict):
        logical = t.get("logicalType")
        if t["type"] == "fixed":
            raw = r.take(t["size"])
            unscaled = int.from_bytes(raw, "big", signed=True)
            return decimal.Decimal(unscaled).scaleb(-t["scale"])
        if logical == "timestamp-micros":
            return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(
                microseconds=r.long())
        if logical == "date":
            return datetime.date(1970, 1, 1) + datetime.timedelta(days=r.long())
        return _read(r, t["type"])
    if t in ("int", "long"):
        return r.long()
    if t == "boolean":
        return r.take(1) == b"\x01"
    if t == "float":
        return struct.unpack("<f", r.take(4))[0]
    if t == "double":
        return struct.unpack("<d", r.take(8))[0]
    if t == "bytes":
        return r.take(r.long())
    if t == "string":
        return r.take(r.long()).decode()
    raise ValueError(f"unsupported Avro type {t!r}")


def decode_record(schema: dict[str, Any], data: bytes) -> dict[str, Any]:
    r = _Reader(data)
    out = {f["name"]: _read(r, f["type"]) for f in schema["fields"]}
    if r.pos != len(data):
        raise ValueError(f"{len(data) - r.pos} trailing bytes")
    return out
