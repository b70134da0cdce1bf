"""Codec framing (gzip, xerial snappy, Kafka lz4, zstd) and compression level validation."""

from __future__ import annotations

import gzip
import os
import random
import struct

import cramjam
import lz4.block
import lz4.frame
import pytest
import zstandard

from sparkafka.errors import ConfigError, CorruptRecordBatchError
from sparkafka.record.compression import (
    LZ4_KAFKA_HEADER,
    SNAPPY_HEADER,
    CompressionType,
    compress,
    decompress,
    level_config_key,
    validate_level,
)

CODECS = list(CompressionType)
COMPRESSIBLE = b"".join(b"record-%06d;" % i for i in range(20000))  # 240 KB, several blocks for every codec


def test_codec_ids_and_names() -> None:
    assert [int(c) for c in CODECS] == [0, 1, 2, 3, 4]
    assert CompressionType.from_name("lz4") is CompressionType.LZ4
    assert CompressionType.from_name("ZSTD") is CompressionType.ZSTD
    assert CompressionType.from_name("none") is CompressionType.NONE
    with pytest.raises(ConfigError) as info:
        CompressionType.from_name("brotli")
    assert info.value.key == "compression.type"
    assert "brotli" in str(info.value)


@pytest.mark.parametrize(
    ("codec", "good", "bad", "default", "text"),
    [
        (CompressionType.GZIP, [1, 9, -1], [0, 10, -2], -1, "1..9 or -1"),
        (CompressionType.LZ4, [1, 9, 17], [0, 18, -1], 9, "1..17"),
        (CompressionType.ZSTD, [-131072, -5, 0, 3, 22], [23, -131073], 3, "-131072..22"),
    ],
)
def test_level_ranges(
    codec: CompressionType, good: list[int], bad: list[int], default: int, text: str
) -> None:
    key = f"compression.{codec.name.lower()}.level"
    assert level_config_key(codec) == key
    assert validate_level(codec, None) == default
    for level in good:
        assert validate_level(codec, level) == level
    for level in bad:
        with pytest.raises(ConfigError) as info:
            validate_level(codec, level)
        assert info.value.key == key
        assert key in str(info.value) and text in str(info.value)
    with pytest.raises(ConfigError):
        validate_level(codec, True)
    with pytest.raises(ConfigError):
        validate_level(codec, 3.0)  # type: ignore[arg-type]


def test_levelless_codecs() -> None:
    assert validate_level(CompressionType.SNAPPY, None) is None
    assert validate_level(CompressionType.NONE, None) is None
    with pytest.raises(ConfigError) as info:
        validate_level(CompressionType.SNAPPY, 1)
    assert info.value.key == "compression.snappy.level"
    with pytest.raises(ConfigError):
        compress(CompressionType.LZ4, b"x", 99)


@pytest.mark.parametrize("codec", CODECS, ids=lambda c: c.name)
@pytest.mark.parametrize("size", [0, 1, 100, 32 * 1024, 32 * 1024 + 1, 64 * 1024 + 7, 200_000])
def test_round_trip_sizes(codec: CompressionType, size: int) -> None:
    data = (COMPRESSIBLE * 2)[:size]
    assert decompress(codec, compress(codec, data)) == data
    noise = random.Random(size).randbytes(size)
    assert decompress(codec, compress(codec, memoryview(noise))) == noise


@pytest.mark.parametrize(
    ("codec", "levels"),
    [
        (CompressionType.GZIP, [1, 9, -1]),
        (CompressionType.LZ4, [1, 2, 3, 9, 12, 17]),
        (CompressionType.ZSTD, [-131072, -1, 1, 22]),
    ],
)
def test_round_trip_levels(codec: CompressionType, levels: list[int]) -> None:
    data = COMPRESSIBLE[:50_000]
    for level in levels:
        out = compress(codec, data, level)
        if level > -1000:  # zstd's most negative levels barely compress
            assert len(out) < len(data)
        assert decompress(codec, out) == data


# -- gzip

def test_gzip_is_rfc1952() -> None:
    out = compress(CompressionType.GZIP, COMPRESSIBLE, 6)
    assert out[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(out) == COMPRESSIBLE


def test_gzip_reader_accepts_concatenated_members() -> None:
    data = gzip.compress(b"abc") + gzip.compress(b"def")
    assert decompress(CompressionType.GZIP, data) == b"abcdef"


# -- snappy

def test_snappy_xerial_framing() -> None:
    data = COMPRESSIBLE[:100_000]
    out = compress(CompressionType.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    assert out[:16] == SNAPPY_HEADER
    # walk the blocks: int32 BE length + raw snappy, each of at most 32 KiB of input
    pos, pieces = 16, []
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        pos += 4
        pieces.append(bytes(cramjam.snappy.decompress_raw(out[pos:pos + length])))
        pos += length
    assert pos == len(out)
    assert [len(p) for p in pieces] == [32768, 32768, 32768, 100_000 - 3 * 32768]
    assert b"".join(pieces) == data


def test_snappy_reader_accepts_raw_block_and_concatenated_streams() -> None:
    raw = bytes(cramjam.snappy.compress_raw(b"hello snappy" * 10))
    assert decompress(CompressionType.SNAPPY, raw) == b"hello snappy" * 10
    two = compress(CompressionType.SNAPPY, b"first|") + compress(CompressionType.SNAPPY, b"second")
    assert decompress(CompressionType.SNAPPY, two) == b"first|second"


def test_snappy_truncated_block() -> None:
    out = compress(CompressionType.SNAPPY, COMPRESSIBLE[:1000])
    with pytest.raises(CorruptRecordBatchError):
        decompress(CompressionType.SNAPPY, out[:-3])
    with pytest.raises(CorruptRecordBatchError):
        decompress(CompressionType.SNAPPY, out[:18])


# -- lz4

def test_lz4_kafka_header() -> None:
    expected = bytes([0x04, 0x22, 0x4D, 0x18, 0x60, 0x40, 0x82])
    assert expected == LZ4_KAFKA_HEADER
    for level in (None, 1, 9, 17):
        out = compress(CompressionType.LZ4, COMPRESSIBLE, level)
        assert out[:7] == LZ4_KAFKA_HEADER
        assert out[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum


@pytest.mark.parametrize("level", [1, 2, 3, 9, 17])
def test_lz4_levels_pick_the_compressor_java_picks(level: int) -> None:
    """Java's Lz4BlockOutputStream: lz4-java's fastCompressor at Kafka's default level 9, its
    highCompressor(level) at every other level, 1 and 2 included."""
    data = COMPRESSIBLE[:60_000]
    block = (lz4.block.compress(data, store_size=False) if level == 9 else
             lz4.block.compress(data, mode="high_compression", compression=level, store_size=False))
    expected = LZ4_KAFKA_HEADER + struct.pack("<I", len(block)) + block + b"\x00\x00\x00\x00"
    assert compress(CompressionType.LZ4, data, level) == expected


def _lz4_frame_blocks(out: bytes) -> list[tuple[bool, bytes]]:
    """The blocks of an lz4 frame with Kafka's 7-byte header, up to its end mark (which must end ``out``):
    (stored uncompressed, the block's bytes decompressed)."""
    pos, blocks = 7, []
    while True:
        (word,) = struct.unpack_from("<I", out, pos)
        pos += 4
        if word == 0:
            break
        size = word & 0x7FFFFFFF
        stored = bool(word & 0x80000000)
        raw = out[pos:pos + size]
        blocks.append((stored, raw if stored else lz4.block.decompress(raw, uncompressed_size=65536)))
        pos += size
    assert pos == len(out)
    return blocks


def test_lz4_blocks_are_at_most_64k() -> None:
    data = os.urandom(150_000)  # incompressible: blocks are stored raw with the high bit set
    blocks = _lz4_frame_blocks(compress(CompressionType.LZ4, data))
    assert all(stored for stored, _ in blocks)
    assert [len(b) for _, b in blocks] == [65536, 65536, 150_000 - 131072]


def test_lz4_reader_accepts_other_frames() -> None:
    data = COMPRESSIBLE
    variants = [
        lz4.frame.compress(data, block_checksum=True, store_size=True),  # librdkafka style content size
        lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX256KB, block_linked=False),
        lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX4MB, content_checksum=True),
        lz4.frame.compress(data, block_size=lz4.frame.BLOCKSIZE_MAX1MB, block_checksum=True,
                           store_size=False, compression_level=9),
    ]
    for frame in variants:
        assert decompress(CompressionType.LZ4, frame) == data


def test_lz4_reader_hand_built_java_frame() -> None:
    # What Kafka's Lz4BlockOutputStream writes: header, one compressed and one stored block, end mark.
    part1, part2 = COMPRESSIBLE[:65536], os.urandom(1000)
    block = lz4.block.compress(part1, store_size=False)
    frame = (LZ4_KAFKA_HEADER + struct.pack("<I", len(block)) + block
             + struct.pack("<I", len(part2) | 0x80000000) + part2 + b"\x00\x00\x00\x00")
    assert decompress(CompressionType.LZ4, frame) == part1 + part2


# -- zstd

def test_zstd_frames_without_content_size() -> None:
    data = COMPRESSIBLE
    no_size = zstandard.ZstdCompressor(write_content_size=False).compress(data)
    assert decompress(CompressionType.ZSTD, no_size) == data
    cctx = zstandard.ZstdCompressor()
    chunker = cctx.compressobj()
    streamed = chunker.compress(data[:1000]) + chunker.compress(data[1000:]) + chunker.flush()
    assert decompress(CompressionType.ZSTD, streamed) == data
    two = cctx.compress(b"one|") + cctx.compress(b"two")
    assert decompress(CompressionType.ZSTD, two) == b"one|two"
    assert zstandard.ZstdDecompressor().decompress(compress(CompressionType.ZSTD, data)) == data


# -- corrupt input

@pytest.mark.parametrize("codec", CODECS[1:], ids=lambda c: c.name)
def test_garbage_and_truncation_raise_corrupt(codec: CompressionType) -> None:
    out = compress(codec, COMPRESSIBLE[:5000])
    with pytest.raises(CorruptRecordBatchError):
        decompress(codec, out[: len(out) // 2])
    if codec != CompressionType.SNAPPY:  # any bytes without the header form a raw snappy attempt
        with pytest.raises(CorruptRecordBatchError):
            decompress(codec, b"\x00garbage-garbage-garbage")


def test_unknown_codec_id() -> None:
    with pytest.raises(CorruptRecordBatchError):
        decompress(6, b"abc")


# -- streams (a batch's records compressed in pieces: RecordBatchBuilder._spill)

@pytest.mark.parametrize(("codec", "level"), [
    (CompressionType.SNAPPY, None), (CompressionType.LZ4, None), (CompressionType.LZ4, 1), (CompressionType.LZ4, 17),
])
def test_stream_pieces_decode_as_one_payload(codec: CompressionType, level: int | None) -> None:
    """Pieces of random lengths (empty ones too): every prefix of spilled pieces decodes to the data spilled
    so far, and all pieces with the finish decode (with the one-shot reader) to the whole data."""
    from sparkafka.record.compression import CompressionStream, decompress_spilled

    rng = random.Random(int(codec) * 100 + (level or 0))
    data = COMPRESSIBLE[:100_000] + os.urandom(70_000) + COMPRESSIBLE[:90_000]
    stream = CompressionStream(codec, level)
    spilled = b""
    pos = 0
    while pos < len(data) - 40_000:
        step = rng.choice([0, 1, 100, 5_000, 32_768, 65_536, 70_000])
        spilled += stream.spill(data[pos:pos + step])
        pos += step
        assert decompress_spilled(codec, spilled) == data[:pos]
    whole = spilled + stream.finish(data[pos:])
    assert decompress(codec, whole) == data
    if codec == CompressionType.LZ4:
        assert whole.startswith(LZ4_KAFKA_HEADER) and whole.endswith(b"\x00\x00\x00\x00")
        assert lz4.frame.decompress(whole) == data
    if codec == CompressionType.SNAPPY:
        assert whole.startswith(SNAPPY_HEADER) and whole.count(SNAPPY_HEADER) == 1


@pytest.mark.parametrize("codec", [CompressionType.NONE, CompressionType.GZIP, CompressionType.ZSTD])
def test_only_block_codecs_stream(codec: CompressionType) -> None:
    """gzip and zstd would keep a compressor context per open batch: no stream for them (nor for none)."""
    from sparkafka.record.compression import CompressionStream

    with pytest.raises(ConfigError, match=r"compression\.type"):
        CompressionStream(codec)


def test_lz4_stream_writes_kafka_frames_of_independent_blocks_of_at_most_64k() -> None:
    """Kafka's frame (its header, end mark 0, no checksums) with blocks of at most 64 KiB; a block that does
    not shrink is stored with the size's high bit set, as lz4.frame stores it."""
    from sparkafka.record.compression import CompressionStream

    incompressible = os.urandom(100_000)
    stream = CompressionStream(CompressionType.LZ4)
    out = stream.spill(COMPRESSIBLE[:150_000]) + stream.finish(incompressible)
    assert out[:7] == LZ4_KAFKA_HEADER
    blocks = _lz4_frame_blocks(out)
    assert [len(b) for _, b in blocks] == [65536, 65536, 18928, 65536, 34464]
    assert [raw for raw, _ in blocks] == [False, False, False, True, True]
    assert b"".join(b for _, b in blocks) == COMPRESSIBLE[:150_000] + incompressible
