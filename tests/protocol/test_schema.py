"""The table-driven codec on small hand-written schemas: versions, nullability, tags, defaults, errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka.errors import ProtocolError, UnsupportedVersionError
from sparkafka.protocol import codec
from sparkafka.protocol.schema import ArrayOf, Field, Schema, Versions

from .strategies import body_strategy, expected_decode

ITEM = Schema("Item", [Field("id", "int32"), Field("label", "string", "1+", nullable_versions="2+")])
MSG = Schema(
    "Msg",
    [
        Field("a", "int16"),
        Field("b", "int64", "1+", default=-1),
        Field("items", ArrayOf(ITEM), nullable_versions="2+"),
        Field("ids", ArrayOf("int32")),
        Field("client", "string", flexible_versions="none", nullable_versions="0+", default=None),
        Field("note", "string", "3+", tag=0, tagged_versions="3+", default=None, nullable_versions="3+"),
        Field("epoch", "int32", "3+", tag=4, tagged_versions="3+", default=-1),
        Field("blob", "bytes", "2+"),
    ],
    valid_versions="0-3",
    flexible_versions="3+",
)


def test_versions_parsing() -> None:
    assert repr(Versions.parse("3+")) == "3+"
    assert repr(Versions.parse("0-12")) == "0-12"
    assert repr(Versions.parse("5")) == "5"
    assert not Versions.parse("none")
    assert 12 in Versions.parse("0-12") and 13 not in Versions.parse("0-12")
    assert Versions.parse("2+").intersect(Versions.parse("0-3")) == Versions.parse("2-3")
    with pytest.raises(ProtocolError, match="bad version range"):
        Versions.parse("x+")


def test_v0_classic_encoding_skips_later_fields() -> None:
    wire = codec.encode(MSG, {"a": 1, "b": 99, "items": [{"id": 7, "label": "x"}], "ids": [1, 2], "blob": b"zz"}, 0)
    assert wire.hex() == "00010000000100000007000000020000000100000002ffff"
    decoded = codec.decode(MSG, wire, 0)
    assert decoded == {
        "a": 1,
        "b": -1,
        "items": [{"id": 7, "label": ""}],
        "ids": [1, 2],
        "client": None,
        "note": None,
        "epoch": -1,
        "blob": b"",
    }


def test_flexible_encoding_tags_and_field_level_flexible_none() -> None:
    body: dict[str, Any] = {
        "a": 1,
        "b": 2,
        "items": None,
        "ids": [],
        "client": "c",
        "note": "hi",
        "epoch": -1,
        "blob": b"\x01",
    }
    wire = codec.encode(MSG, body, 3)
    assert wire.hex() == (
        "0001"
        "0000000000000002"
        "00"  # items: null compact array
        "01"  # ids: empty compact array
        "000163"  # client keeps the int16 length ("flexibleVersions": "none")
        "0201"  # blob: compact bytes
        "01"
        "00"
        "03"
        "036869"  # one tag: 0 -> compact string "hi"; epoch == default so not written
    )
    assert codec.decode(MSG, wire, 3) == body
    with_epoch = codec.encode(MSG, {**body, "note": None, "epoch": 5}, 3)
    assert with_epoch.endswith(bytes.fromhex("01040400000005"))
    assert codec.decode(MSG, with_epoch, 3)["epoch"] == 5


def test_unknown_tags_are_skipped() -> None:
    wire = bytearray(codec.encode(MSG, {}, 3))
    assert wire[-1] == 0
    wire[-1:] = bytes.fromhex("020102abcd040400000009")  # unknown tag 1, then epoch
    decoded = codec.decode(MSG, bytes(wire), 3)
    assert decoded["epoch"] == 9
    assert decoded["note"] is None


def test_nullability_is_per_version() -> None:
    with pytest.raises(ProtocolError, match=r"Msg.items \(v1\): null is not allowed"):
        codec.encode(MSG, {"items": None}, 1)
    assert codec.decode(MSG, codec.encode(MSG, {"items": None}, 2), 2)["items"] is None
    with pytest.raises(ProtocolError, match=r"Msg.items -> Item.label \(v1\): null is not allowed"):
        codec.encode(MSG, {"items": [{"id": 1, "label": None}]}, 1)
    # a null on the wire for a non-nullable field is rejected on decode too
    with pytest.raises(ProtocolError, match=r"Msg.items \(v1\): null found"):
        codec.decode(MSG, bytes.fromhex("00010000000000000000ffffffff00000000ffff"), 1)


def test_encode_errors_name_field_and_limit() -> None:
    with pytest.raises(
        ProtocolError, match=r"Msg.a \(v0\): cannot encode 32768 as int16 \(range \[-32768, 32767\]\)"
    ):
        codec.encode(MSG, {"a": 32768}, 0)
    with pytest.raises(ProtocolError, match=r"Msg.b \(v1\): cannot encode 'x' as int64"):
        codec.encode(MSG, {"a": 1, "b": "x"}, 1)
    with pytest.raises(ProtocolError, match=r"Msg.ids \(v0\): cannot encode 4294967296 as int32"):
        codec.encode(MSG, {"ids": [1, 1 << 32]}, 0)
    with pytest.raises(ProtocolError, match=r"Msg.items -> Item.id \(v0\): cannot encode None as int32"):
        codec.encode(MSG, {"items": [{"id": None}]}, 0)
    with pytest.raises(ProtocolError, match=r"Msg \(v0\): expected a mapping, got list"):
        codec.encode(MSG, [1], 0)  # type: ignore[arg-type]
    with pytest.raises(ProtocolError, match=r"Msg.client \(v0\): 40000 UTF-8 bytes exceed"):
        codec.encode(MSG, {"client": "x" * 40000}, 0)
    with pytest.raises(UnsupportedVersionError, match=r"Msg has no version 4 \(valid versions 0-3\)"):
        codec.encode(MSG, {}, 4)


def test_decode_errors_name_the_field_path() -> None:
    wire = codec.encode(MSG, {"items": [{"id": 1, "label": "abcdef"}]}, 1)
    with pytest.raises(ProtocolError, match=r"Msg.items -> truncated input reading Item.label \(v1\)"):
        codec.decode(MSG, wire[:20], 1)
    with pytest.raises(ProtocolError, match=r"reading Msg.a \(v0\) at offset 0"):
        codec.decode(MSG, b"\x00", 0)


def test_defaults_are_fresh_objects() -> None:
    d1 = codec.decode(MSG, codec.encode(MSG, {}, 0), 0)
    d2 = codec.decode(MSG, codec.encode(MSG, {}, 0), 0)
    d1["items"].append({"id": 1})
    assert d2["items"] == []
    s = Schema("S", [Field("inner", Schema("In", [Field("xs", ArrayOf("int8"))]), "1+")])
    e1, e2 = codec.decode(s, b"", 0), codec.decode(s, b"", 0)
    e1["inner"]["xs"].append(1)
    assert e2["inner"] == {"xs": []}


def test_schema_definition_errors() -> None:
    with pytest.raises(ProtocolError, match="unknown type"):
        Field("x", "int128")
    with pytest.raises(ProtocolError, match="tag and tagged_versions go together"):
        Field("x", "int8", tag=1)
    with pytest.raises(ProtocolError, match="duplicate field"):
        Schema("S", [Field("x", "int8"), Field("x", "int16")])
    with pytest.raises(ProtocolError, match="duplicate tag"):
        Schema(
            "S",
            [
                Field("x", "int8", tag=0, tagged_versions="0+"),
                Field("y", "int8", tag=0, tagged_versions="0+"),
            ],
        )


def test_compiled_codecs_are_cached() -> None:
    assert codec.codec_for(MSG, 2) is codec.codec_for(MSG, 2)
    assert codec.codec_for(MSG, 2) is not codec.codec_for(MSG, 3)


_KINDS = [
    "int8",
    "int16",
    "int32",
    "int64",
    "uint16",
    "uint32",
    "float64",
    "bool",
    "uuid",
    "string",
    "bytes",
    "records",
]
ALL_TYPES = Schema(
    "AllTypes",
    [
        *(
            Field(k, k, nullable_versions="1+" if k in ("string", "bytes", "records") else None)
            for k in _KINDS
        ),
        *(Field(f"{k}_array", ArrayOf(k), nullable_versions="1+") for k in _KINDS),
        Field("struct", ITEM),
        Field("tagged_struct", ITEM, "2+", tag=3, tagged_versions="2+"),
        Field("tagged_uuid_array", ArrayOf("uuid"), "2+", tag=1, tagged_versions="2+"),
    ],
    valid_versions="0-2",
    flexible_versions="2+",
)


@pytest.mark.parametrize("version", [0, 1, 2])
@settings(max_examples=40, deadline=None, database=None)
@given(data=st.data())
def test_every_type_roundtrips(version: int, data: st.DataObject) -> None:
    body = data.draw(body_strategy(ALL_TYPES, version))
    wire = codec.encode(ALL_TYPES, body, version)
    assert codec.decode(ALL_TYPES, wire, version) == expected_decode(ALL_TYPES, version, body)
    for cut in range(0, len(wire), 7):
        with pytest.raises(ProtocolError):
            codec.decode(ALL_TYPES, wire[:cut], version)
