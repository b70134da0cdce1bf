"""The built-in Avro encoder, checked against known encodings and an independent decoder."""

from __future__ import annotations

import datetime
import decimal

import pyarrow as pa
import pytest
from avro_decode import decode_record
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    TimestampType,
)

from sparkafka.errors import InvalidRecordInputError
from sparkafka.spark.avro_fallback import avro_schema, decimal_size, encode_batch, zigzag_varint


@pytest.mark.parametrize(("n", "encoded"), [(0, b"\x00"), (-1, b"\x01"), (1, b"\x02"), (-64, b"\x7f"),
                                            (64, b"\x80\x01"), (2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),
                                            (-(2**63), b"\xff" * 9 + b"\x01")])
def test_zigzag_varint_matches_the_avro_spec(n: int, encoded: bytes) -> None:
    assert zigzag_varint(n) == encoded


def test_decimal_sizes_follow_spark() -> None:
    assert [decimal_size(p) for p in (1, 2, 3, 9, 10, 18, 38)] == [1, 1, 2, 4, 5, 8, 16]


def test_rows_round_trip_through_an_independent_decoder() -> None:
    fields = [StructField("s", StringType()), StructField("i", IntegerType(), False),
              StructField("l", LongType()), StructField("d", DoubleType()), StructField("f", FloatType()),
              StructField("b", BooleanType()), StructField("raw", BinaryType()),
              StructField("amount", DecimalType(10, 2)), StructField("day", DateType()),
              StructField("ts", TimestampType())]
    ts = datetime.datetime(2025, 3, 4, 5, 6, 7, 890123, tzinfo=datetime.timezone.utc)
    batch = pa.record_batch({
        "s": pa.array(["héllo", None]),
        "i": pa.array([-5, 2**31 - 1], pa.int32()),
        "l": pa.array([2**40, None], pa.int64()),
        "d": pa.array([1.5, -0.25]),
        "f": pa.array([0.5, None], pa.float32()),
        "b": pa.array([True, False]),
        "raw": pa.array([b"\x00\xff", b""]),
        "amount": pa.array([decimal.Decimal("-12.34"), decimal.Decimal("99999999.99")], pa.decimal128(10, 2)),
        "day": pa.array([datetime.date(2024, 2, 29), None], pa.date32()),
        "ts": pa.array([ts, None], pa.timestamp("us", "UTC")),
    })
    schema = avro_schema(fields)
    assert schema["fields"][1] == {"name": "i", "type": "int"}  # not nullable: no union
    assert schema["fields"][0]["type"] == ["string", "null"]
    encoded = encode_batch(batch, fields).to_pylist()
    first, second = (decode_record(schema, e) for e in encoded)
    assert first == {"s": "héllo", "i": -5, "l": 2**40, "d": 1.5, "f": 0.5, "b": True, "raw": b"\x00\xff",
                     "amount": decimal.Decimal("-12.34"), "day": datetime.date(2024, 2, 29), "ts": ts}
    assert second == {"s": None, "i": 2**31 - 1, "l": None, "d": -0.25, "f": None, "b": False, "raw": b"",
                      "amount": decimal.Decimal("99999999.99"), "day": None, "ts": None}


def test_nested_types_are_refused_by_name() -> None:
    with pytest.raises(InvalidRecordInputError, match="column 'tags' has type array<string>"):
        avro_schema([StructField("tags", ArrayType(StringType()))])


def test_null_in_a_non_nullable_column_is_refused() -> None:
    fields = [StructField("n", LongType(), False)]
    with pytest.raises(InvalidRecordInputError, match="'n' is declared not null"):
        encode_batch(pa.record_batch({"n": pa.array([1, None])}), fields)
