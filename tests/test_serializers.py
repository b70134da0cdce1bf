"""Built-in serializers, spec resolution and the error-wrapping ``serialize`` helper."""

from __future__ import annotations

import json
import pickle
import struct
import uuid
from typing import Any

import pytest

from sparkafka.errors import ConfigError, SerializationError
from sparkafka.serializers import (
    BUILTIN_SERIALIZERS,
    UnsupportedInputError,
    original_spec,
    passes_bytes_through,
    resolve_serializer,
    serialize,
    serialize_bytes,
    serialize_double,
    serialize_float,
    serialize_int,
    serialize_json,
    serialize_long,
    serialize_short,
    serialize_str,
    serialize_uuid,
    serializer_name,
)


def upper_bytes(topic: str, value: Any) -> bytes:
    return f"{topic}:{value}".upper().encode()


def one_arg(value: Any) -> bytes:
    return repr(value).encode()


class JavaStyle:
    def serialize(self, topic: str, data: Any) -> bytes:
        return b"J" + str(data).encode()


class Broken:
    def __init__(self) -> None:
        raise RuntimeError("no config")


# ------------------------------------------------------------------------------------------------- built-ins


def test_bytes_passes_bytes_and_none_and_copies_buffers() -> None:
    payload = b"abc"
    assert serialize_bytes("t", payload) is payload
    assert serialize_bytes("t", None) is None
    assert serialize_bytes("t", bytearray(b"xy")) == b"xy"
    assert type(serialize_bytes("t", bytearray(b"xy"))) is bytes
    assert serialize_bytes("t", memoryview(b"hello")[1:3]) == b"el"
    with pytest.raises(UnsupportedInputError, match="accepts bytes, bytearray or memoryview, got str"):
        serialize_bytes("t", "text")


def test_str_is_utf8_and_strict_about_types() -> None:
    assert serialize_str("t", "héllo €") == "héllo €".encode()
    assert serialize_str("t", None) is None
    assert serialize_str("t", b"raw") == b"raw"
    with pytest.raises(UnsupportedInputError, match="got int"):
        serialize_str("t", 5)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, b"\x00\x00\x00\x00"), (1, b"\x00\x00\x00\x01"), (-1, b"\xff\xff\xff\xff"),
     (2**31 - 1, b"\x7f\xff\xff\xff"), (-(2**31), b"\x80\x00\x00\x00"), (258, b"\x00\x00\x01\x02")],
)
def test_int_matches_java_integer_serializer(value: int, expected: bytes) -> None:
    assert serialize_int("t", value) == expected


@pytest.mark.parametrize("value", [2**31, -(2**31) - 1])
def test_int_out_of_range_names_the_limits(value: int) -> None:
    with pytest.raises(OverflowError, match=r"-2147483648 <= value <= 2147483647"):
        serialize_int("t", value)


def test_int_rejects_bool_and_float_but_accepts_index_types() -> None:
    with pytest.raises(UnsupportedInputError):
        serialize_int("t", True)
    with pytest.raises(UnsupportedInputError):
        serialize_int("t", 1.0)

    class Index:
        def __index__(self) -> int:
            return 7

    assert serialize_int("t", Index()) == b"\x00\x00\x00\x07"


def test_long_short_float_double_uuid() -> None:
    assert serialize_long("t", -2) == b"\xff" * 7 + b"\xfe"
    assert serialize_long("t", 2**63 - 1) == b"\x7f" + b"\xff" * 7
    with pytest.raises(OverflowError):
        serialize_long("t", 2**63)
    assert serialize_short("t", 513) == b"\x02\x01"
    with pytest.raises(OverflowError):
        serialize_short("t", 40000)
    assert serialize_float("t", 1.5) == struct.pack(">f", 1.5)
    assert serialize_double("t", 1.5) == b"?\xf8\x00\x00\x00\x00\x00\x00"
    assert serialize_double("t", 2) == struct.pack(">d", 2.0)
    with pytest.raises(UnsupportedInputError):
        serialize_double("t", "1.5")
    u = uuid.UUID("12345678-1234-5678-1234-567812345678")
    assert serialize_uuid("t", u) == b"12345678-1234-5678-1234-567812345678"
    assert serialize_uuid("t", "12345678123456781234567812345678") == b"12345678-1234-5678-1234-567812345678"


def test_json_is_compact_utf8() -> None:
    out = serialize_json("t", {"a": [1, 2], "b": "é"})
    assert out == '{"a":[1,2],"b":"é"}'.encode()
    assert json.loads(out or b"") == {"a": [1, 2], "b": "é"}
    assert serialize_json("t", None) is None
    assert serialize_json("t", b"{}") == b"{}"
    with pytest.raises(TypeError):
        serialize_json("t", {1, 2})


def test_builtins_agree_with_confluent_kafka() -> None:
    ser = pytest.importorskip("confluent_kafka.serialization")
    for value in (0, -2, 123456789, -(2**31)):
        assert serialize_int("t", value) == ser.IntegerSerializer()(value)
    for fvalue in (0.1, -3.25, 1e300):
        assert serialize_double("t", fvalue) == ser.DoubleSerializer()(fvalue)
    assert serialize_str("t", "日本") == ser.StringSerializer()("日本")


# ------------------------------------------------------------------------------------------------ resolution


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, serialize_bytes), ("bytes", serialize_bytes), ("BYTES", serialize_bytes),
        ("str", serialize_str), ("string", serialize_str), (" String ", serialize_str),
        ("int", serialize_int), ("integer", serialize_int), ("long", serialize_long),
        ("json", serialize_json),
        ("org.apache.kafka.common.serialization.StringSerializer", serialize_str),
        ("org.apache.kafka.common.serialization.ByteArraySerializer", serialize_bytes),
        ("org.apache.kafka.common.serialization.IntegerSerializer", serialize_int),
        ("LongSerializer", serialize_long),
        ("org.apache.kafka.common.serialization.UUIDSerializer", serialize_uuid),
    ],
)
def test_resolve_names(spec: str | None, expected: Any) -> None:
    assert resolve_serializer(spec, "value") is expected


def test_resolve_callables() -> None:
    assert resolve_serializer(upper_bytes, "key") is upper_bytes
    adapted = resolve_serializer(one_arg, "value")
    assert adapted("topic", 5) == b"5"
    assert resolve_serializer(lambda v: b"x", "value")("t", 1) == b"x"
    from_class = resolve_serializer(JavaStyle, "value")
    assert from_class("t", 3) == b"J3"
    assert resolve_serializer(JavaStyle(), "value")("t", 4) == b"J4"
    assert resolve_serializer(f"{__name__}:upper_bytes", "value") is upper_bytes


def test_a_java_shaped_serializer_with_a_defaulted_value_gets_the_topic_and_the_value() -> None:
    """``def ser(topic, data=None)`` has one required parameter but Java's shape: it was called ``f(obj)``,
    so the value landed in ``topic`` and every record became a tombstone (None) without an error."""
    def java_shaped(topic: str, data: object = None) -> bytes | None:
        return None if data is None else f"{topic}:{data}".encode()

    assert resolve_serializer(java_shaped, "value")("t", 5) == b"t:5"
    # a one-argument shape whose parameter is named otherwise, or that takes nothing more, stays f(obj)
    assert resolve_serializer(lambda value, scale=2: str(value * scale).encode(), "value")("t", 5) == b"10"
    assert resolve_serializer(lambda topic: str(topic).encode(), "value")("t", 5) == b"5"


def test_resolve_errors_name_the_key() -> None:
    with pytest.raises(ConfigError, match=r"unknown value.serializer 'avro'") as info:
        resolve_serializer("avro", "value")
    assert info.value.key == "value.serializer"
    with pytest.raises(ConfigError, match=r"'key\.serializer' must be a serializer name") as info:
        resolve_serializer(42, "key")
    assert info.value.key == "key.serializer"
    with pytest.raises(ConfigError, match=r"could not import 'no_such_module_x:f' for 'value\.serializer'"):
        resolve_serializer("no_such_module_x:f", "value")
    with pytest.raises(ConfigError, match="could not instantiate Broken"):
        resolve_serializer(Broken, "value")
    with pytest.raises(ConfigError, match=r"unknown value\.serializer"):
        resolve_serializer("org.apache.kafka.common.serialization.VoidSerializer", "value")


def test_passes_bytes_through_only_for_builtins() -> None:
    assert all(passes_bytes_through(fn) for fn in BUILTIN_SERIALIZERS.values())
    assert not passes_bytes_through(upper_bytes)
    assert not passes_bytes_through(resolve_serializer(one_arg, "value"))
    for fn in BUILTIN_SERIALIZERS.values():
        assert fn("t", b"raw") == b"raw"
        assert fn("t", None) is None


def test_names_and_original_spec() -> None:
    assert serializer_name(serialize_json) == "json"
    assert serializer_name(upper_bytes) == f"{__name__}:upper_bytes"
    assert serializer_name(resolve_serializer(one_arg, "value")) == f"{__name__}:one_arg"
    assert serializer_name(resolve_serializer(JavaStyle, "value")) == f"{__name__}:JavaStyle"
    assert original_spec(serialize_str) == "str"
    assert original_spec(resolve_serializer(one_arg, "value")) is one_arg


def test_resolved_serializers_pickle() -> None:
    for spec in ("json", upper_bytes, one_arg, JavaStyle):
        ser = resolve_serializer(spec, "value")
        again = pickle.loads(pickle.dumps(ser))
        assert again("t", 9) == ser("t", 9)


# ----------------------------------------------------------------------------------------------- serialize()


def test_serialize_wraps_failures_with_topic_field_and_cause() -> None:
    with pytest.raises(SerializationError, match=r"could not serialize value for topic 'orders': ") as info:
        serialize(serialize_int, "orders", "value", 2**40)
    assert isinstance(info.value.__cause__, OverflowError)
    assert "2147483647" in str(info.value)


def test_serialize_suggests_a_serializer_for_non_bytes() -> None:
    with pytest.raises(SerializationError) as info:
        serialize(serialize_bytes, "t", "value", {"a": 1})
    text = str(info.value)
    assert "got dict" in text and "value.serializer" in text and "'json'" in text
    with pytest.raises(SerializationError, match=r"set key\.serializer"):
        serialize(serialize_bytes, "t", "key", "k")


def test_serialize_checks_the_result_type() -> None:
    returns_bytearray: Any = lambda t, v: bytearray(b"ab")  # noqa: E731
    returns_str: Any = lambda t, v: "text"  # noqa: E731
    assert serialize(returns_bytearray, "t", "value", 1) == b"ab"
    assert serialize(serialize_bytes, "t", "value", None) is None
    with pytest.raises(SerializationError, match="returned str, expected bytes or None"):
        serialize(returns_str, "t", "value", 1)


def test_serialize_does_not_double_wrap() -> None:
    def raiser(topic: str, value: Any) -> bytes:
        raise SerializationError("inner")

    with pytest.raises(SerializationError, match=r"^inner$"):
        serialize(raiser, "t", "value", 1)


def test_serialize_describes_exceptions_without_message() -> None:
    def raiser(topic: str, value: Any) -> bytes:
        raise KeyError

    with pytest.raises(SerializationError, match=r"could not serialize key for topic 't': KeyError$"):
        serialize(raiser, "t", "key", 1)
