"""Writer/Reader primitives: Kafka's varint test vectors, round trips, bounds checks and limits."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka.errors import ProtocolError
from sparkafka.protocol.primitives import (
    ZERO_UUID,
    Reader,
    Writer,
    read_uvarint,
    read_varint,
    read_varlong,
    uvarint_bytes,
    uvarint_size,
    write_uvarint,
    write_varint,
    write_varlong,
)

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1

# from Kafka's ByteUtilsTest
VARINT_VECTORS = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (8191, "fe7f"),
    (8192, "808001"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]
UVARINT_VECTORS = [
    (-1, "ffffffff0f"),
    (8192, "8040"),
    (INT32_MIN, "8080808008"),
    (0, "00"),
    (127, "7f"),
    (128, "8001"),
]


@pytest.mark.parametrize(("value", "hexbytes"), VARINT_VECTORS)
def test_varint_vectors(value: int, hexbytes: str) -> None:
    out = bytearray()
    write_varint(out, value)
    assert out.hex() == hexbytes
    assert read_varint(bytes.fromhex(hexbytes), 0) == (value, len(hexbytes) // 2)


@pytest.mark.parametrize(("value", "hexbytes"), UVARINT_VECTORS)
def test_unsigned_varint_vectors(value: int, hexbytes: str) -> None:
    out = bytearray()
    write_uvarint(out, value)
    assert out.hex() == hexbytes
    decoded, end = read_uvarint(bytes.fromhex(hexbytes), 0)
    assert decoded == value & 0xFFFFFFFF
    assert end == len(hexbytes) // 2
    assert uvarint_size(value & 0xFFFFFFFF) == len(hexbytes) // 2


def test_varlong_vector() -> None:
    out = bytearray()
    write_varlong(out, 17179869183)
    assert out.hex() == "feffffff7f"
    assert read_varlong(bytes(out), 0) == (17179869183, 5)


def test_fifth_varint_byte_with_high_bit_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="longer than 5 bytes"):
        read_uvarint(bytes.fromhex("ffffffff80"), 0)
    with pytest.raises(ProtocolError, match="varint"):
        read_varint(bytes.fromhex("ffffffffff01"), 0)


def test_varlong_longer_than_10_bytes_is_rejected() -> None:
    with pytest.raises(ProtocolError, match="longer than 10 bytes"):
        read_varlong(b"\xff" * 10 + b"\x01", 0)


def test_truncated_varint_names_what_was_read() -> None:
    with pytest.raises(ProtocolError, match=r"truncated input reading record length at offset 1"):
        read_varint(b"\x00\x80\x80", 1, "record length")


def test_varint_range_checked_on_write() -> None:
    with pytest.raises(ProtocolError, match="int32 range"):
        write_varint(bytearray(), INT32_MAX + 1)
    with pytest.raises(ProtocolError, match="int64 range"):
        write_varlong(bytearray(), INT64_MIN - 1)


@settings(max_examples=200)
@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_roundtrip(n: int) -> None:
    out = bytearray()
    write_varint(out, n)
    assert len(out) <= 5
    assert read_varint(bytes(out), 0) == (n, len(out))


@settings(max_examples=200)
@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_roundtrip(n: int) -> None:
    out = bytearray()
    write_varlong(out, n)
    assert len(out) <= 10
    assert read_varlong(bytes(out), 0) == (n, len(out))


@settings(max_examples=200)
@given(st.integers(0, (1 << 32) - 1))
def test_uvarint_roundtrip(n: int) -> None:
    data = uvarint_bytes(n)
    assert len(data) == uvarint_size(n)
    assert read_uvarint(data, 0) == (n, len(data))


@settings(max_examples=300)
@given(st.one_of(st.integers(-(1 << 31), (1 << 32) - 1),
                 st.sampled_from([0, 0x7F, 0x80, 0x3FFF, 0x4000, 0x1FFFFF, 0x200000, -1])))
def test_uvarint_bytes_short_paths_equal_the_general_writer(n: int) -> None:
    out = bytearray()
    write_uvarint(out, n)
    assert uvarint_bytes(n) == bytes(out)


def _write_all(w: Writer, v: dict[str, object]) -> None:
    w.int8(v["i8"])  # type: ignore[arg-type]
    w.int16(v["i16"])  # type: ignore[arg-type]
    w.int32(v["i32"])  # type: ignore[arg-type]
    w.int64(v["i64"])  # type: ignore[arg-type]
    w.uint32(v["u32"])  # type: ignore[arg-type]
    w.float64(v["f64"])  # type: ignore[arg-type]
    w.bool_(v["b"])  # type: ignore[arg-type]
    w.uuid(v["uuid"])  # type: ignore[arg-type]
    w.varint(v["i32"])  # type: ignore[arg-type]
    w.varlong(v["i64"])  # type: ignore[arg-type]
    w.string(v["s"])  # type: ignore[arg-type]
    w.nullable_string(v["ns"])  # type: ignore[arg-type]
    w.compact_string(v["s"])  # type: ignore[arg-type]
    w.compact_nullable_string(v["ns"])  # type: ignore[arg-type]
    w.bytes_(v["by"])  # type: ignore[arg-type]
    w.nullable_bytes(v["nby"])  # type: ignore[arg-type]
    w.compact_bytes(v["by"])  # type: ignore[arg-type]
    w.compact_nullable_bytes(v["nby"])  # type: ignore[arg-type]
    w.array(v["arr"], Writer.int32)  # type: ignore[arg-type]
    w.compact_array(v["arr"], Writer.int32)  # type: ignore[arg-type]
    w.tagged_fields(v["tags"])  # type: ignore[arg-type]


PRIMITIVES = st.fixed_dictionaries(
    {
        "i8": st.integers(-128, 127),
        "i16": st.integers(-(1 << 15), (1 << 15) - 1),
        "i32": st.integers(INT32_MIN, INT32_MAX),
        "i64": st.integers(INT64_MIN, INT64_MAX),
        "u32": st.integers(0, (1 << 32) - 1),
        "f64": st.floats(allow_nan=False),
        "b": st.booleans(),
        "uuid": st.binary(min_size=16, max_size=16),
        "s": st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
        "ns": st.none() | st.text(alphabet=st.characters(codec="utf-8"), max_size=20),
        "by": st.binary(max_size=30),
        "nby": st.none() | st.binary(max_size=30),
        "arr": st.none() | st.lists(st.integers(INT32_MIN, INT32_MAX), max_size=5),
        "tags": st.dictionaries(st.integers(0, 300), st.binary(max_size=10), max_size=4),
    }
)


@settings(max_examples=100)
@given(PRIMITIVES)
def test_writer_reader_roundtrip(v: dict[str, object]) -> None:
    w = Writer()
    _write_all(w, v)
    data = w.to_bytes()
    r = Reader(memoryview(data))
    assert r.int8() == v["i8"]
    assert r.int16() == v["i16"]
    assert r.int32() == v["i32"]
    assert r.int64() == v["i64"]
    assert r.uint32() == v["u32"]
    assert r.float64() == v["f64"]
    assert r.bool_() == v["b"]
    assert r.uuid() == v["uuid"]
    assert r.varint() == v["i32"]
    assert r.varlong() == v["i64"]
    assert r.string() == v["s"]
    assert r.nullable_string() == v["ns"]
    assert r.compact_string() == v["s"]
    assert r.compact_nullable_string() == v["ns"]
    assert r.bytes_() == v["by"]
    assert r.nullable_bytes() == v["nby"]
    assert r.compact_bytes() == v["by"]
    assert r.compact_nullable_bytes() == v["nby"]
    assert r.array(Reader.int32) == v["arr"]
    assert r.compact_array(Reader.int32) == v["arr"]
    assert r.tagged_fields() == v["tags"]
    assert r.remaining() == 0

    # every strict prefix is truncated input, reported as ProtocolError (never IndexError/struct.error)
    for cut in range(0, len(data), max(1, len(data) // 17)):
        r = Reader(data[:cut])
        with pytest.raises(ProtocolError):
            _read_all(r)


def _read_all(r: Reader) -> None:
    r.int8()
    r.int16()
    r.int32()
    r.int64()
    r.uint32()
    r.float64()
    r.bool_()
    r.uuid()
    r.varint()
    r.varlong()
    r.string()
    r.nullable_string()
    r.compact_string()
    r.compact_nullable_string()
    r.bytes_()
    r.nullable_bytes()
    r.compact_bytes()
    r.compact_nullable_bytes()
    r.array(Reader.int32)
    r.compact_array(Reader.int32)
    r.tagged_fields()


def test_known_encodings() -> None:
    w = Writer()
    w.nullable_string(None)
    w.compact_nullable_string(None)
    w.nullable_bytes(None)
    w.compact_nullable_bytes(None)
    w.array(None, Writer.int32)
    w.compact_array(None, Writer.int32)
    w.string("ab")
    w.compact_string("ab")
    w.tagged_fields({5: b"x", 1: b"yz"})
    assert w.to_bytes().hex() == (
        "ffff"
        "00"
        "ffffffff"
        "00"
        "ffffffff"
        "00"  # nulls
        "00026162"
        "036162"  # "ab" classic / compact
        "02"
        "0102797a"
        "050178"  # tags sorted: 1 -> "yz", 5 -> "x"
    )


def test_truncation_messages_name_the_field() -> None:
    with pytest.raises(
        ProtocolError, match=r"truncated input reading leader_epoch at offset 0: need 4 byte\(s\), 3 left"
    ):
        Reader(b"\x00\x00\x00").int32("leader_epoch")
    with pytest.raises(ProtocolError, match="truncated input reading host at offset 2: need 5"):
        Reader(b"\x00\x05abc").string("host")
    with pytest.raises(ProtocolError, match="topic_id"):
        Reader(bytes(15)).uuid("topic_id")


def test_null_and_invalid_lengths() -> None:
    with pytest.raises(ProtocolError, match="null found"):
        Reader(b"\xff\xff").string("name")
    with pytest.raises(ProtocolError, match="invalid length -2"):
        Reader(b"\xff\xfe").nullable_string("name")
    with pytest.raises(ProtocolError, match="null found"):
        Reader(b"\x00").compact_string("name")
    with pytest.raises(ProtocolError, match="invalid array length -5"):
        Reader(b"\xff\xff\xff\xfb").array(Reader.int32, "replicas")
    with pytest.raises(ProtocolError, match="cannot fit"):
        Reader(b"\x7f\xff\xff\xff" + bytes(8)).array(Reader.int32, "replicas")
    with pytest.raises(ProtocolError, match="invalid UTF-8"):
        Reader(b"\x00\x02\xff\xfe").string("name")


def test_write_limits_name_field_and_limit() -> None:
    w = Writer()
    with pytest.raises(
        ProtocolError, match=r"acks: cannot encode 40000 as int16 \(range \[-32768, 32767\]\)"
    ):
        w.int16(40000, "acks")
    with pytest.raises(ProtocolError, match="uint32"):
        w.uint32(-1)
    with pytest.raises(ProtocolError, match="32767"):
        w.string("x" * 40000, "topic")
    with pytest.raises(ProtocolError, match="null is not allowed"):
        w.string(None, "topic")
    with pytest.raises(ProtocolError, match="expected 16 bytes"):
        w.uuid(b"short", "topic_id")


def test_uuid_accepts_uuid_objects_and_decodes_to_bytes() -> None:
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    w = Writer()
    w.uuid(u)
    w.uuid(ZERO_UUID)
    r = Reader(w.to_bytes())
    assert r.uuid() == u.bytes
    assert r.uuid() == bytes(16)


def test_skip_tagged_fields() -> None:
    w = Writer()
    w.tagged_fields({0: b"abc", 7: b""})
    w.int8(9)
    r = Reader(w.to_bytes())
    r.skip_tagged_fields()
    assert r.int8() == 9
    with pytest.raises(ProtocolError, match="tag 0 data"):
        Reader(b"\x01\x00\x05ab").skip_tagged_fields()
