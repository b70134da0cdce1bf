"""Compression codecs of record batches, framed exactly as the Java client frames them
(``org.apache.kafka.common.compress``: ``GzipCompression``, ``SnappyCompression``, ``Lz4Compression``,
``ZstdCompression``).

How it works: ``compress(codec, data, level)`` turns the encoded records of a batch into the bytes
that follow its 61-byte header; ``decompress`` reverses it and raises ``CorruptRecordBatchError``
on bad input.

- gzip: an RFC 1952 stream from zlib (wbits=31). The reader accepts concatenated members.
- snappy: xerial snappy-java framing. A 16-byte header (``\\x82SNAPPY\\0``, version 1, compatible 1),
  then for every 32 KiB of input an int32 big-endian length and a raw snappy block (cramjam).
  The reader also accepts a bare raw snappy block, and headers repeated between blocks.
- lz4: one LZ4 frame with Kafka's header ``04 22 4D 18 60 40 82`` (independent blocks, 64 KiB,
  no checksums, no content size, end mark 0), its blocks written with ``lz4.block`` (``_lz4_blocks``, which
  ``CompressionStream`` shares). Kafka's default level 9 uses the fast compressor, other levels the HC
  one, as ``Lz4BlockOutputStream`` does. The reader takes any
  standard frame (block checksums, content size, other block sizes, from Java or librdkafka).
- zstd: a standard frame from ``zstandard``; the reader handles frames without content size and
  several frames back to back.

``CompressionStream`` compresses one batch's records in pieces (``RecordBatchBuilder`` spills the records
it holds past twice its limit), for lz4 and snappy (``SPILLING_CODECS``): lz4 writes Kafka's frame block
by block, snappy its xerial chunks, so the pieces so far always decode (``decompress_spilled``) and all of
them with ``finish`` are one payload that ``decompress`` reads.

Levels are checked by ``validate_level``, which names the ``compression.<codec>.level`` key.

The libraries (cramjam, lz4, zstandard; gzip is zlib from the standard library) are imported on first
use of their codec, so a Python without them (a Spark executor running a shipped sparkafka) works for
uncompressed and gzip batches. ``require_codec`` imports a codec's library or raises ``ConfigError``
(key ``compression.type``) naming the missing package; the producer calls it when it is built.
"""

from __future__ import annotations

import importlib
import struct
import sys
import zlib
from enum import IntEnum
from types import ModuleType
from typing import Any

from sparkafka.errors import ConfigError, CorruptRecordBatchError

Buffer = bytes | bytearray | memoryview


class CompressionType(IntEnum):
    """Codec ids as stored in the low 3 bits of a batch's attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @classmethod
    def from_name(cls, name: str) -> CompressionType:
        """The codec for a ``compression.type`` value (``none``, ``gzip``, ``snappy``, ``lz4``, ``zstd``)."""
        if isinstance(name, str):
            member = cls.__members__.get(name.strip().upper())
            if member is not None:
                return member
        raise ConfigError(
            f"compression.type must be one of none, gzip, snappy, lz4, zstd; got {name!r}",
            key="compression.type",
        )

    @property
    def config_name(self) -> str:
        """The lowercase name used in configuration (``lz4``)."""
        return self.name.lower()


NO_COMPRESSION = CompressionType.NONE
"""``CompressionType.NONE`` for the per-batch checks (docs/DESIGN.md, Performance notes)."""

# codec -> (module to import, package to install)
_LIBRARIES: dict[CompressionType, tuple[str, str]] = {
    CompressionType.SNAPPY: ("cramjam", "cramjam"),
    CompressionType.LZ4: ("lz4.frame", "lz4"),
    CompressionType.ZSTD: ("zstandard", "zstandard"),
}
_loaded: dict[CompressionType, ModuleType] = {}


def require_codec(codec: CompressionType) -> None:
    """Import the library ``codec`` needs (none for none and gzip), or raise ``ConfigError`` naming the
    package to install."""
    if codec in _LIBRARIES and codec not in _loaded:
        _library(codec)


def _library(codec: CompressionType) -> Any:
    module = _loaded.get(codec)
    if module is not None:
        return module
    name, package = _LIBRARIES[codec]
    try:
        module = importlib.import_module(name)
    except ImportError as exc:
        raise ConfigError(
            f"compression.type {codec.config_name!r} needs the Python package {package!r}, which this "
            f"Python ({sys.executable}) cannot import ({exc}); install it (pip install {package}) or choose "
            "another compression.type (none and gzip need no package)", key="compression.type") from exc
    _loaded[codec] = module
    return module


# codec -> (min, max, default, extra allowed value or None)
_LEVELS: dict[CompressionType, tuple[int, int, int, int | None]] = {
    CompressionType.GZIP: (1, 9, -1, -1),
    CompressionType.LZ4: (1, 17, 9, None),
    CompressionType.ZSTD: (-131072, 22, 3, None),
}

GZIP_DEFAULT_LEVEL = -1
LZ4_DEFAULT_LEVEL = 9
ZSTD_DEFAULT_LEVEL = 3


def level_config_key(codec: CompressionType) -> str:
    """``compression.<codec>.level``."""
    return f"compression.{codec.config_name}.level"


def validate_level(codec: CompressionType, level: int | None) -> int | None:
    """Check a compression level for a codec and return the level to use (the codec default for None).

    Returns None for codecs without levels (none, snappy); giving them a level is an error.
    """
    codec = CompressionType(codec)
    limits = _LEVELS.get(codec)
    key = level_config_key(codec)
    if limits is None:
        if level is not None:
            raise ConfigError(f"{codec.config_name} compression has no level; got {level!r}", key=key)
        return None
    low, high, default, extra = limits
    if level is None:
        return default
    if isinstance(level, bool) or not isinstance(level, int):
        raise ConfigError(f"{key} must be an integer; got {level!r}", key=key)
    if low <= level <= high or level == extra:
        return level
    allowed = f"{low}..{high}" + (f" or {extra}" if extra is not None else "")
    raise ConfigError(f"{key} must be in {allowed}; got {level}", key=key)


# ---------------------------------------------------------------------------------------------- gzip

def _gzip_compress(data: Buffer, level: int) -> bytes:
    comp = zlib.compressobj(level, zlib.DEFLATED, 31)
    return comp.compress(data) + comp.flush()


def _gzip_decompress(data: Buffer) -> bytes:
    out = []
    rest = bytes(data)
    while True:
        d = zlib.decompressobj(31)
        out.append(d.decompress(rest))
        if not d.eof:
            raise CorruptRecordBatchError("gzip stream is truncated")
        rest = d.unused_data
        if not rest.startswith(b"\x1f\x8b"):  # like GZIPInputStream: ignore trailing non-gzip bytes
            return b"".join(out)


# -------------------------------------------------------------------------------------------- snappy

SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER = SNAPPY_MAGIC + struct.pack(">ii", 1, 1)
SNAPPY_BLOCK_SIZE = 32 * 1024
_INT32_BE = struct.Struct(">i")


def _snappy_compress(data: Buffer) -> bytes:
    view = memoryview(data)
    parts: list[bytes] = [SNAPPY_HEADER]
    pack = _INT32_BE.pack
    compress_raw = _library(CompressionType.SNAPPY).snappy.compress_raw
    for start in range(0, len(view), SNAPPY_BLOCK_SIZE):
        block = bytes(compress_raw(view[start:start + SNAPPY_BLOCK_SIZE]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: Buffer) -> bytes:
    view = memoryview(data)
    _snappy_decompress_raw = _library(CompressionType.SNAPPY).snappy.decompress_raw
    if bytes(view[:8]) != SNAPPY_MAGIC or len(view) < 16:
        return bytes(_snappy_decompress_raw(view))  # SnappyInputStream: no header => one raw block
    out = []
    pos = 16
    end = len(view)
    unpack = _INT32_BE.unpack_from
    while pos < end:
        if bytes(view[pos:pos + 8]) == SNAPPY_MAGIC and end - pos >= 16:  # a concatenated stream
            pos += 16
            continue
        if end - pos < 4:
            raise CorruptRecordBatchError("snappy stream is truncated in a block length")
        (length,) = unpack(view, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise CorruptRecordBatchError(
                f"snappy block length {length} exceeds the {end - pos} bytes remaining")
        out.append(bytes(_snappy_decompress_raw(view[pos:pos + length])))
        pos += length
    return b"".join(out)


# ----------------------------------------------------------------------------------------------- lz4

LZ4_KAFKA_HEADER = bytes.fromhex("04224d18604082")
LZ4_END_MARK = b"\x00\x00\x00\x00"
LZ4_BLOCK_SIZE = 64 * 1024
LZ4_UNCOMPRESSED_BIT = 0x80000000
_UINT32_LE = struct.Struct("<I")


def _lz4_compress(data: Buffer, level: int) -> bytes:
    return _lz4_blocks(data, level, True) + LZ4_END_MARK


def _lz4_blocks(data: Buffer, level: int, header: bool) -> bytes:
    """The blocks of Kafka's lz4 frame for ``data`` (its header first when asked, no end mark): independent
    blocks of at most 64 KiB; a block that does not shrink is stored as it is (the size's high bit set), as
    LZ4F_compressFrame and lz4-java do. Level 9 (Kafka's default) uses the fast compressor, every other level
    the HC one at that level, as Java's ``Lz4BlockOutputStream`` (lz4-java's fastCompressor or
    highCompressor(level))."""
    _library(CompressionType.LZ4)  # the ConfigError naming the package when lz4 is missing
    block = importlib.import_module("lz4.block")
    fast = level == LZ4_DEFAULT_LEVEL
    parts: list[bytes] = [LZ4_KAFKA_HEADER] if header else []
    view = memoryview(data)
    pack = _UINT32_LE.pack
    for start in range(0, len(view), LZ4_BLOCK_SIZE):
        chunk = view[start:start + LZ4_BLOCK_SIZE]
        packed: bytes = (block.compress(chunk, store_size=False) if fast else
                         block.compress(chunk, mode="high_compression", compression=level, store_size=False))
        if len(packed) >= len(chunk):
            parts += (pack(len(chunk) | LZ4_UNCOMPRESSED_BIT), bytes(chunk))
        else:
            parts += (pack(len(packed)), packed)
    return b"".join(parts)


def _lz4_decompress(data: Buffer) -> bytes:
    result: bytes = _library(CompressionType.LZ4).decompress(data)
    return result


# ---------------------------------------------------------------------------------------------- zstd

def _zstd_compress(data: Buffer, level: int) -> bytes:
    result: bytes = _library(CompressionType.ZSTD).ZstdCompressor(level=level).compress(data)
    return result


def _zstd_decompress(data: Buffer) -> bytes:
    dctx = _library(CompressionType.ZSTD).ZstdDecompressor()
    out: list[bytes] = []
    rest: Buffer = data
    while True:
        dobj = dctx.decompressobj()
        out.append(dobj.decompress(rest))
        if not dobj.eof:
            raise CorruptRecordBatchError("zstd frame is truncated")
        rest = dobj.unused_data
        if not rest:
            return b"".join(out)


# ------------------------------------------------------------------------------------------ dispatch

def compress(codec: CompressionType, data: Buffer, level: int | None = None) -> bytes:
    """Compress the encoded records of a batch with ``codec`` at ``level`` (None = codec default)."""
    if codec == CompressionType.NONE:
        return bytes(data)
    if codec == CompressionType.SNAPPY:
        return _snappy_compress(data)
    lvl = validate_level(codec, level)
    assert lvl is not None
    if codec == CompressionType.LZ4:
        return _lz4_compress(data, lvl)
    if codec == CompressionType.ZSTD:
        return _zstd_compress(data, lvl)
    if codec == CompressionType.GZIP:
        return _gzip_compress(data, lvl)
    raise ConfigError(f"compression.type id {int(codec)} is not a known codec", key="compression.type")


def decompress(codec: CompressionType | int, data: Buffer) -> bytes:
    """Inverse of ``compress``; any decoding failure becomes ``CorruptRecordBatchError``."""
    try:
        if codec == CompressionType.NONE:
            return bytes(data)
        if codec == CompressionType.GZIP:
            return _gzip_decompress(data)
        if codec == CompressionType.SNAPPY:
            return _snappy_decompress(data)
        if codec == CompressionType.LZ4:
            return _lz4_decompress(data)
        if codec == CompressionType.ZSTD:
            return _zstd_decompress(data)
    except (CorruptRecordBatchError, ConfigError):
        raise
    except Exception as exc:  # zlib.error, RuntimeError (lz4), ZstdError, cramjam errors
        name = CompressionType(codec).config_name
        raise CorruptRecordBatchError(f"{name} decompression failed: {exc}") from exc
    raise CorruptRecordBatchError(f"unknown compression codec id {int(codec)} (valid 0..4)")


# ------------------------------------------------------------------------------------ streaming

SPILLING_CODECS = frozenset({CompressionType.LZ4, CompressionType.SNAPPY})
"""The codecs a ``CompressionStream`` takes: block formats whose blocks are compressed independently, so a
stream keeps no compressor state between pieces. gzip and zstd would keep a compressor context per open
batch (zlib ~270 KB, zstd ~1.6 MB at level 3), which ``buffer.memory`` does not count."""


class CompressionStream:
    """One batch's records compressed in pieces, as Java's compressing output streams do (the records of a
    compressed batch pass through ``KafkaLZ4BlockOutputStream`` or snappy-java's ``SnappyOutputStream`` as
    they are appended). ``RecordBatchBuilder`` hands over the records it holds when they reach its cap
    (``spill``) and the rest at the end (``finish``); the pieces joined are one payload that ``decompress``
    reads, and the pieces so far always decode (``decompress_spilled``), since each ``spill`` ends on a whole
    block: lz4 blocks of at most 64 KiB behind Kafka's frame header (the end mark comes with ``finish``),
    snappy xerial chunks behind one header. Only ``SPILLING_CODECS``."""

    __slots__ = ("_codec", "_level", "_started")

    def __init__(self, codec: CompressionType, level: int | None = None) -> None:
        if codec not in SPILLING_CODECS:
            raise ConfigError(f"compression.type {CompressionType(codec).config_name!r} is not compressed in pieces",
                              key="compression.type")
        _library(codec)
        self._codec = codec
        self._level = validate_level(codec, level)
        self._started = False

    def spill(self, data: Buffer) -> bytes:
        """Compress ``data`` (the next records' bytes): the result, appended to the earlier ones, decodes."""
        if self._codec == CompressionType.LZ4:
            level = self._level
            assert level is not None
            header = not self._started
            self._started = True
            return _lz4_blocks(data, level, header)
        whole = _snappy_compress(data)
        if self._started:
            return whole[len(SNAPPY_HEADER):]
        self._started = True
        return whole

    def finish(self, data: Buffer) -> bytes:
        """Compress the last records' bytes and end the stream."""
        tail = self.spill(data)
        return tail + LZ4_END_MARK if self._codec == CompressionType.LZ4 else tail


def decompress_spilled(codec: CompressionType, data: Buffer) -> bytes:
    """The records' bytes of the pieces a ``CompressionStream`` has spilled so far (not finished)."""
    if not data:
        return b""
    if codec == CompressionType.LZ4:
        return decompress(codec, bytes(data) + LZ4_END_MARK)
    return decompress(codec, data)
