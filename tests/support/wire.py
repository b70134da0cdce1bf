"""A deliberately tiny raw Kafka client for probing brokers byte by byte in tests.

How it works: ``RawConnection.request`` frames one request (header v1, or v2 with an empty
tagged-field section when ``flexible``), sends it, reads one size-prefixed response,
checks the correlation id and returns the body after the response header (v0, or v1 with
its tag byte skipped when ``flexible``). ``record_batch`` builds an uncompressed
RecordBatch v2 (CRC-32C over attributes..end). It is independent of sparkafka's protocol
layer on purpose: it checks brokers, not our encoder.
"""

from __future__ import annotations

import socket
import struct

import crc32c

__all__ = ["RawConnection", "record_batch", "string", "compact_string", "uvarint"]

_SIZE = struct.Struct(">i")
_HEADER = struct.Struct(">hhih")
_BATCH_TAIL = struct.Struct(">hiqqqhii")  # attributes .. records count
_BATCH_HEAD = struct.Struct(">qiibI")  # base offset, length, leader epoch, magic, crc


def string(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return uvarint(len(data) + 1) + data


def _varint(value: int) -> bytes:
    return uvarint((value << 1) ^ (value >> 63))


def _record(index: int, value: bytes | None) -> bytes:
    body = b"\x00" + _varint(0) + _varint(index) + _varint(-1)
    body += _varint(-1) if value is None else _varint(len(value)) + value
    body += _varint(0)
    return _varint(len(body)) + body


def record_batch(values: list[bytes | None], producer_id: int = -1, producer_epoch: int = -1,
                 base_sequence: int = -1, attributes: int = 0, timestamp: int = 1_700_000_000_000,
                 corrupt_crc: bool = False) -> bytes:
    """An uncompressed RecordBatch v2 holding ``values`` (null keys, no headers)."""
    records = b"".join(_record(i, v) for i, v in enumerate(values))
    tail = _BATCH_TAIL.pack(attributes, len(values) - 1, timestamp, timestamp, producer_id, producer_epoch,
                            base_sequence, len(values)) + records
    crc = crc32c.crc32c(tail) ^ (1 if corrupt_crc else 0)
    length = _BATCH_HEAD.size - 12 + len(tail)
    return _BATCH_HEAD.pack(0, length, 0, 2, crc) + tail


class RawConnection:
    """One blocking connection; requests go one at a time unless ``send_only`` is used."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_only(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> int:
        self.correlation_id += 1
        header = _HEADER.pack(api_key, version, self.correlation_id, 4) + b"test"
        if flexible:
            header += b"\x00"
        self.sock.sendall(_SIZE.pack(len(header) + len(body)) + header + body)
        return self.correlation_id

    def receive(self) -> tuple[int, bytes]:
        """One raw response: (correlation id, bytes after the correlation id)."""
        (size,) = _SIZE.unpack(self._read(4))
        data = self._read(size)
        return _SIZE.unpack_from(data)[0], data[4:]

    def request(self, api_key: int, version: int, body: bytes, flexible: bool = False) -> bytes:
        sent = self.send_only(api_key, version, body, flexible)
        correlation_id, data = self.receive()
        assert correlation_id == sent, f"correlation id {correlation_id} != {sent}"
        return data[1:] if flexible and api_key != 18 else data

    def _read(self, size: int) -> bytes:
        chunks = b""
        while len(chunks) < size:
            chunk = self.sock.recv(size - len(chunks))
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks += chunk
        return chunks
