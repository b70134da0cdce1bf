"""A small Avro binary encoder for flat rows, used when Spark's ``spark-avro`` package is absent.

How it works: ``to_avro(struct(*))`` needs the ``spark-avro`` jar, which is not part of PySpark's
distribution. ``encode_avro(df, columns, keep)`` is the fallback: Spark turns dates and timestamps
into epoch days / microseconds, then a plain Python UDF (no pandas needed) encodes each row with
``row_encoder``: zigzag varints for int/long/date/timestamp, IEEE little-endian floats,
length-prefixed strings and bytes, fixed-size two's-complement decimals. The writer schema
(``avro_schema``) follows the one Spark's ``to_avro`` derives: nullable fields are unions
``[type, "null"]``, decimals are ``fixed`` of Spark's size with the decimal logical type,
timestamps are ``timestamp-micros``. Only flat rows of primitive types are supported; nested types
raise ``InvalidRecordInputError`` naming the column. It costs a few microseconds per field.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
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
    TimestampNTZType,
    TimestampType,
)

from sparkafka.errors import InvalidRecordInputError

__all__ = ["avro_schema", "decimal_size", "encode_avro", "row_encoder", "zigzag_varint"]

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


def _field_encoder(dt: DataType) -> Callable[[Any], bytes]:
    """Encoder of one non-null value as the UDF receives it (dates and timestamps pre-converted to
    epoch days / microseconds by ``encode_avro``)."""
    if isinstance(dt, BooleanType):
        return lambda v: b"\x01" if v else b"\x00"
    if isinstance(dt, (ByteType, ShortType, IntegerType, LongType, DateType, TimestampType,
                       TimestampNTZType)):
        return zigzag_varint
    if isinstance(dt, FloatType):
        return _FLOAT.pack
    if isinstance(dt, DoubleType):
        return _DOUBLE.pack
    if isinstance(dt, StringType):
        def text(v: str) -> bytes:
            raw = v.encode()
            return zigzag_varint(len(raw)) + raw
        return text
    if isinstance(dt, BinaryType):
        return lambda v: zigzag_varint(len(v)) + bytes(v)
    if isinstance(dt, DecimalType):
        scale, size = dt.scale, decimal_size(dt.precision)
        return lambda v: int(v.scaleb(scale)).to_bytes(size, "big", signed=True)
    raise InvalidRecordInputError(f"type {dt.simpleString()} is not supported by the Avro fallback")


def row_encoder(fields: Sequence[StructField]) -> Callable[[Sequence[Any]], bytes]:
    """A function encoding one row (values in ``fields`` order) as an Avro record body."""
    avro_schema(fields)  # refuses unsupported types, naming the column
    plan = [(f.name, _field_encoder(f.dataType), f.nullable) for f in fields]

    def encode(values: Sequence[Any]) -> bytes:
        out = []
        for (name, enc, nullable), v in zip(plan, values):
            if v is None:
                if not nullable:
                    raise InvalidRecordInputError(f"column {name!r} is declared not null but holds a null")
                out.append(_NULL)
            elif nullable:
                out.append(_SOME + enc(v))
            else:
                out.append(enc(v))
        return b"".join(out)

    return encode


def _as_udf_input(df: DataFrame, field: StructField) -> Column:
    col = df[field.name]
    if isinstance(field.dataType, DateType):
        return F.unix_date(col)
    if isinstance(field.dataType, (TimestampType, TimestampNTZType)):
        return F.unix_micros(col.cast("timestamp"))
    return col


def encode_avro(df: DataFrame, columns: Sequence[str],
                keep: Sequence[str]) -> tuple[DataFrame, dict[str, Any]]:
    """``df`` reduced to the ``keep`` columns plus ``value`` = Avro encoding of ``columns``.

    Returns the DataFrame and the Avro writer schema. Raises ``InvalidRecordInputError`` at once for
    a column type the encoder does not handle. The encoding runs in a plain Python UDF (Arrow UDFs
    and ``mapInArrow`` would need pandas on the workers).
    """
    by_name = {f.name: f for f in df.schema.fields}
    fields = [by_name[c] for c in columns]
    schema = avro_schema(fields)
    encode = row_encoder(fields)
    to_avro = F.udf(lambda row: encode(tuple(row)), BinaryType(), useArrow=False)
    args = F.struct(*[_as_udf_input(df, f).alias(f"_{i}") for i, f in enumerate(fields)])
    return df.select(*[df[c] for c in keep], to_avro(args).alias("value")), schema


def schema_json(schema: dict[str, Any]) -> str:
    return json.dumps(schema, separators=(",", ":"))
