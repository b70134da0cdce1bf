"""The built-in Avro encoder, checked against known encodings and an independent decoder."""

from __future__ import annotations

import datetime
import decimal
from typing import TYPE_CHECKING

import pytest
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

from sparkafka.cli.avro_fallback import avro_schema, decimal_size, row_encoder, zigzag_varint
from sparkafka.errors import InvalidRecordInputError

if TYPE_CHECKING:  # pytest puts tests/spark on sys.path; mypy names the module from tests/
    from spark.avro_decode import decode_record
else:
    from avro_decode import decode_record


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
    epoch = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
    ts_micros = (ts - epoch) // datetime.timedelta(microseconds=1)
    day = (datetime.date(2024, 2, 29) - datetime.date(1970, 1, 1)).days
    schema = avro_schema(fields)
    assert schema["fields"][1] == {"name": "i", "type": "int"}  # not nullable: no union
    assert schema["fields"][0]["type"] == ["string", "null"]
    encode = row_encoder(fields)
    # Values as the UDF receives them: dates and timestamps already epoch days / microseconds.
    first = encode(("héllo", -5, 2**40, 1.5, 0.5, True, bytearray(b"\x00\xff"), decimal.Decimal("-12.34"),
                    day, ts_micros))
    second = encode((None, 2**31 - 1, None, -0.25, None, False, b"", decimal.Decimal("99999999.99"), None, None))
    assert decode_record(schema, first) == {
        "s": "héllo", "i": -5, "l": 2**40, "d": 1.5, "f": 0.5, "b": True, "raw": b"\x00\xff",
        "amount": decimal.Decimal("-12.34"), "day": datetime.date(2024, 2, 29), "ts": ts}
    assert decode_record(schema, second) == {
        "s": None, "i": 2**31 - 1, "l": None, "d": -0.25, "f": None, "b": False, "raw": b"",
        "amount": decimal.Decimal("99999999.99"), "day": None, "ts": None}
    assert first[:1] == b"\x00" and second[:1] == b"\x02"  # union branches: value, then null


def test_nested_types_are_refused_by_name() -> None:
    with pytest.raises(InvalidRecordInputError, match="column 'tags' has type array<string>"):
        avro_schema([StructField("tags", ArrayType(StringType()))])


def test_null_in_a_non_nullable_column_is_refused() -> None:
    encode = row_encoder([StructField("n", LongType(), False)])
    assert encode((1,)) == b"\x02"
    with pytest.raises(InvalidRecordInputError, match="'n' is declared not null"):
        encode((None,))
