"""A small Avro binary encoder for flat rows, used when Spark's ``spark-avro`` package is absent.

How it works: ``to_avro(struct(*))`` needs the ``spark-avro`` jar, which is not part of PySpark's
distribution. ``encode_avro(df, columns, keep)`` is the fallback: it runs ``mapInArrow`` and encodes
each Arrow batch column by column in Python (zigzag varints for int/long/date/timestamp, IEEE
little-endian floats, length-prefixed strings and bytes, fixed-size two's-complement decimals), then
concatenates each row's fields. The writer schema (``avro_schema``) follows the one Spark's
``to_avro`` derives: nullable fields are unions ``[type, "null"]``, decimals are ``fixed`` of
Spark's size with the decimal logical type, timestamps are ``timestamp-micros``. Only flat rows of
primitive types are supported; nested types raise ``InvalidRecordInputError`` naming the column. It
costs a few microseconds per field.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from sparkafka.errors import InvalidRecordInputError

__all__ = ["avro_schema", "encode_avro", "encode_batch", "zigzag_varint"]

_FLOAT = struct.Struct("<f")
_DOUBLE = struct.Struct("<d")
_NULL = b"\x02"  # union branch 1 ("null"), zigzag-encoded
_SOME = b"\x00"  # union branch 0 (the value's type)


def zigzag_varint(n: int) -> bytes:
    """Avro's int/long encoding: zigzag, then base-128 little-endian varint."""
    z = (n << 1) ^ (n >> 63)
    z &= 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def decimal_size(precision: int) -> int:
    """Bytes of the Avro ``fixed`` holding a decimal of ``precision`` digits (as Spark sizes it)."""
    size = 1
    while 2 ** (8 * size - 1) < 10**precision:
        size += 1
    return size


def _type_json(record: str, name: str, dt: DataType) -> Any:
    if isinstance(dt, BooleanType):
        return "boolean"
    if isinstance(dt, (ByteType, ShortType, IntegerType)):
        return "int"
    if isinstance(dt, LongType):
        return "long"
    if isinstance(dt, FloatType):
        return "float"
    if isinstance(dt, DoubleType):
        return "double"
    if isinstance(dt, StringType):
        return "string"
    if isinstance(dt, BinaryType):
        return "bytes"
    if isinstance(dt, DateType):
        return {"type": "int", "logicalType": "date"}
    if isinstance(dt, TimestampType):
        return {"type": "long", "logicalType": "timestamp-micros"}
    if isinstance(dt, TimestampNTZType):
        return {"type": "long", "logicalType": "local-timestamp-micros"}
    if isinstance(dt, DecimalType):
        return {"type": "fixed", "name": f"{record}.{name}.fixed", "size": decimal_size(dt.precision),
                "logicalType": "decimal", "precision": dt.precision, "scale": dt.scale}
    raise InvalidRecordInputError(
        f"column {name!r} has type {dt.simpleString()}, which the built-in Avro fallback does not encode "
        "(it handles flat rows of primitive types); add the spark-avro package for full to_avro support")


def avro_schema(fields: Sequence[StructField], name: str = "topLevelRecord") -> dict[str, Any]:
    """The Avro record schema the encoder writes (nullable fields are ``[type, "null"]`` unions)."""
    out = []
    for f in fields:
        t = _type_json(name, f.name, f.dataType)
        out.append({"name": f.name, "type": [t, "null"] if f.nullable else t})
    return {"type": "record", "name": name, "fields": out}


def _encoder(dt: DataType) -> Callable[[pa.Array], list[bytes | None]]:
    """A column encoder: Arrow array -> per-row encoded bytes (None for nulls)."""
    if isinstance(dt, BooleanType):
        return lambda a: [None if v is None else (b"\x01" if v else b"\x00") for v in a.to_pylist()]
    if isinstance(dt, (ByteType, ShortType, IntegerType, LongType)):
        return lambda a: [None if v is None else zigzag_varint(v) for v in a.to_pylist()]
    if isinstance(dt, FloatType):
        return lambda a: [None if v is None else _FLOAT.pack(v) for v in a.to_pylist()]
    if isinstance(dt, DoubleType):
        return lambda a: [None if v is None else _DOUBLE.pack(v) for v in a.to_pylist()]
    if isinstance(dt, (StringType, BinaryType)):
        def blobs(a: pa.Array) -> list[bytes | None]:
            if pa.types.is_string(a.type):
                a = a.cast(pa.binary())
            elif pa.types.is_large_string(a.type):
                a = a.cast(pa.large_binary())
            return [None if v is None else zigzag_varint(len(v)) + v for v in a.to_pylist()]
        return blobs
    if isinstance(dt, DateType):
        return lambda a: [None if v is None else zigzag_varint(v) for v in a.cast(pa.int32()).to_pylist()]
    if isinstance(dt, (TimestampType, TimestampNTZType)):
        def micros(a: pa.Array) -> list[bytes | None]:
            if a.type.unit != "us":
                a = a.cast(pa.timestamp("us", a.type.tz))
            return [None if v is None else zigzag_varint(v) for v in a.cast(pa.int64()).to_pylist()]
        return micros
    if isinstance(dt, DecimalType):
        scale, size = dt.scale, decimal_size(dt.precision)

        def decimals(a: pa.Array) -> list[bytes | None]:
            return [None if v is None else int(v.scaleb(scale)).to_bytes(size, "big", signed=True)
                    for v in a.to_pylist()]
        return decimals
    raise InvalidRecordInputError(f"type {dt.simpleString()} is not supported by the Avro fallback")


def encode_batch(batch: pa.RecordBatch, fields: Sequence[StructField]) -> pa.Array:
    """The Avro encoding of each row of ``batch`` (restricted to ``fields``) as a binary array."""
    columns: list[list[bytes | None]] = []
    for f in fields:
        encoded = _encoder(f.dataType)(batch.column(f.name))
        if f.nullable:
            encoded = [_NULL if v is None else _SOME + v for v in encoded]
        elif any(v is None for v in encoded):
            raise InvalidRecordInputError(f"column {f.name!r} is declared not null but holds a null")
        columns.append(encoded)
    if not columns:
        return pa.array([b""] * batch.num_rows, pa.binary())
    join = b"".join
    return pa.array([join(row) for row in zip(*columns)], pa.binary())


def encode_avro(df: DataFrame, columns: Sequence[str],
                keep: Sequence[str]) -> tuple[DataFrame, dict[str, Any]]:
    """``df`` reduced to the ``keep`` columns plus ``value`` = Avro encoding of ``columns``.

    Returns the DataFrame and the Avro writer schema. Raises ``InvalidRecordInputError`` at once for
    a column type the encoder does not handle.
    """
    by_name = {f.name: f for f in df.schema.fields}
    fields = [by_name[c] for c in columns]
    schema = avro_schema(fields)
    out_schema = StructType([by_name[c] for c in keep] + [StructField("value", BinaryType(), False)])

    def encode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            kept = [batch.column(c) for c in keep]
            yield pa.record_batch([*kept, encode_batch(batch, fields)], names=[*keep, "value"])

    return df.mapInArrow(encode, out_schema), schema


def schema_json(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))
