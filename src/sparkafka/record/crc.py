"""CRC-32C (Castagnoli), the checksum of a v2 record batch (Java ``Crc32C``, ``DefaultRecordBatch``).

How it works: ``crc32c`` is the C implementation from the ``crc32c`` package when it can be
imported, otherwise ``crc32c_python``, a byte-at-a-time table version. Both take the data and
an optional ``value`` (a previous result) so a checksum can be continued over several pieces:
``crc32c(b, crc32c(a)) == crc32c(a + b)``.
"""

from __future__ import annotations

from typing import Protocol

Buffer = bytes | bytearray | memoryview

_POLY = 0x82F63B78  # reflected Castagnoli polynomial


class Crc32cFunction(Protocol):
    def __call__(self, data: Buffer, value: int = 0) -> int: ...


def _make_table() -> tuple[int, ...]:
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _make_table()


def crc32c_python(data: Buffer, value: int = 0) -> int:
    """CRC-32C of ``data`` continuing from ``value``, in pure Python (slow; fallback only)."""
    table = _TABLE
    crc = value ^ 0xFFFFFFFF
    for byte in bytes(data):
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


crc32c: Crc32cFunction
"""CRC-32C of ``data`` continuing from ``value`` (0 to start)."""
HAVE_C_CRC32C: bool
"""True when the C implementation is in use."""

try:
    from crc32c import crc32c as _crc32c_c
except ImportError:  # pragma: no cover - the package is a dependency
    crc32c = crc32c_python
    HAVE_C_CRC32C = False
else:
    crc32c = _crc32c_c
    HAVE_C_CRC32C = True
