"""DataFrames for the ``sparkafka pipeline`` job: a realistic order-event generator, input readers,
and the shaping of any row into a Kafka record (key, value, headers).

How it works: ``generate_orders`` builds its rows in Spark (``spark.range`` plus column expressions;
pseudo-random but deterministic fields come from ``xxhash64`` of the id with a per-field seed), so
it scales with the cluster and two runs produce identical data. ``read_input`` picks Parquet, CSV or
JSON from the path's extension (or the files inside a directory) unless told. ``shape_records``
turns each row into ``key`` (a chosen column as a string), ``value`` (JSON of the whole row by
default, the raw bytes of one column, or Avro: Spark's ``to_avro`` when the ``spark-avro`` jar is on
the classpath, else the built-in encoder of ``avro_fallback``) and ``headers`` (constant
``source``/``schema``/``content-type`` entries).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType

from sparkafka.cli.avro_fallback import encode_avro, schema_json
from sparkafka.errors import ConfigError, InvalidRecordInputError

__all__ = [
    "MAX_ROWS",
    "VALUE_FORMATS",
    "ShapedRecords",
    "avro_available",
    "detect_format",
    "generate_orders",
    "read_input",
    "shape_records",
]

VALUE_FORMATS = ("json", "raw", "avro")
INPUT_FORMATS = {".parquet": "parquet", ".pq": "parquet", ".csv": "csv", ".json": "json",
                 ".jsonl": "json", ".ndjson": "json"}
CURRENCIES = ("USD", "EUR", "GBP", "JPY", "CHF", "CAD")
# Weighted by repetition: most orders are paid or shipped, a few cancelled or refunded.
STATUSES = ("created", "paid", "paid", "paid", "shipped", "shipped", "shipped", "delivered", "delivered",
            "cancelled", "refunded")
BASE_EPOCH_S = 1_735_689_600  # 2025-01-01T00:00:00Z
CUSTOMERS = 50_000
_MAX_TIMESTAMP_S = ((1 << 63) - 1) // 1_000_000
"""The latest second Spark can make a timestamp of (it keeps microseconds in a Java long)."""
MAX_ROWS = (_MAX_TIMESTAMP_S - BASE_EPOCH_S - 59) // 2 + 1
"""Most rows ``generate_orders`` can make (4,610,818,173,598): row ``id`` is created at ``BASE_EPOCH_S + 2 * id``
plus up to 59 s, which must stay a Spark timestamp (one more row can fail the job with DATETIME_OVERFLOW).
Spark's ``range()`` itself takes a Java long (up to 2**63 - 1)."""


def _pick(seed: int, modulus: int, id_col: Column) -> Column:
    """A deterministic pseudo-random integer in ``[0, modulus)`` per id."""
    return F.pmod(F.xxhash64(id_col, F.lit(seed)), F.lit(modulus))


def generate_orders(spark: SparkSession, rows: int, partitions: int | None = None) -> DataFrame:
    """``rows`` order events: order_id, customer_id, amount, currency, status, created_at, items."""
    if not 0 <= rows <= MAX_ROWS:
        raise ConfigError(f"rows must be in 0..{MAX_ROWS} (MAX_ROWS: the created_at of more rows can leave Spark's "
                          f"timestamps), got {rows}", "rows")
    num = partitions or spark.sparkContext.defaultParallelism
    ids = spark.range(0, rows, 1, num)
    i = F.col("id")
    return ids.select(
        F.format_string("ord-%010d", i).alias("order_id"),
        F.format_string("cust-%06d", _pick(1, CUSTOMERS, i)).alias("customer_id"),
        ((_pick(2, 50_000, i) + F.lit(99)) / F.lit(100)).cast("decimal(10,2)").alias("amount"),
        F.element_at(F.array(*[F.lit(c) for c in CURRENCIES]),
                     (_pick(3, len(CURRENCIES), i) + 1).cast("int")).alias("currency"),
        F.element_at(F.array(*[F.lit(s) for s in STATUSES]),
                     (_pick(4, len(STATUSES), i) + 1).cast("int")).alias("status"),
        F.timestamp_seconds(F.lit(BASE_EPOCH_S) + i * 2 + _pick(5, 60, i)).alias("created_at"),
        (_pick(6, 10, i) + 1).cast("int").alias("items"),
    )


def detect_format(path: str) -> str:
    """``parquet``, ``csv`` or ``json`` from the path's extension or, for a directory, its files."""
    candidates = [path]
    if os.path.isdir(path):
        candidates = sorted(os.listdir(path))
    for name in candidates:
        ext = os.path.splitext(name)[1].lower()
        if ext in INPUT_FORMATS:
            return INPUT_FORMATS[ext]
    if os.path.isdir(path) and any(n.startswith("part-") and ".snappy" in n for n in candidates):
        return "parquet"
    raise ConfigError(
        f"cannot tell the format of {path!r} from its extension ({', '.join(sorted(INPUT_FORMATS))}); "
        "pass --format parquet|csv|json", "format")


def input_format(path: str, fmt: str | None = None) -> str:
    """The format to read ``path`` with (``fmt``, or else ``detect_format``'s); a ``ConfigError`` when a local
    path does not exist or its format cannot be told (checked before Spark starts, and again by ``read_input``)."""
    if not os.path.exists(path) and "://" not in path:
        raise ConfigError(f"input {path!r} does not exist", "input")
    return fmt or detect_format(path)


def read_input(spark: SparkSession, path: str, fmt: str | None = None) -> DataFrame:
    """Read a Parquet, CSV (with a header row; types inferred) or JSON-lines dataset."""
    fmt = input_format(path, fmt)
    if fmt == "parquet":
        return spark.read.parquet(path)
    if fmt == "csv":
        return spark.read.option("header", "true").option("inferSchema", "true").csv(path)
    if fmt == "json":
        return spark.read.json(path)
    raise ConfigError(f"unknown input format {fmt!r}; use parquet, csv or json", "format")


def avro_available(spark: SparkSession) -> bool:
    """Whether Spark's ``spark-avro`` (``to_avro``) is on the JVM classpath."""
    jvm: Any = spark.sparkContext._jvm
    try:
        jvm.java.lang.Class.forName("org.apache.spark.sql.avro.CatalystDataToAvro")
    except Exception:
        return False
    return True


@dataclass(frozen=True)
class ShapedRecords:
    """Rows shaped for the sink, and how."""

    df: DataFrame
    key_column: str
    value_format: str
    avro_schema: str | None = None
    """The Avro writer schema (JSON) when ``value_format`` is avro."""
    avro_encoder: str | None = None
    """``spark-avro`` or ``built-in``."""


def shape_records(
    df: DataFrame,
    *,
    key_column: str | None = None,
    value_format: str = "json",
    value_column: str | None = None,
    headers: Mapping[str, str] | None = None,
    prefer_builtin_avro: bool = False,
) -> ShapedRecords:
    """Turn every row into the sink's ``key``, ``value`` and ``headers`` columns."""
    columns = list(df.columns)
    if not columns:
        raise InvalidRecordInputError("the input has no columns")
    key_name = key_column or ("order_id" if "order_id" in columns else columns[0])
    if key_name not in columns:
        raise ConfigError(f"key column {key_name!r} is not in the input (columns: {', '.join(columns)})",
                          "key-column")
    key_type = df.schema[key_name].dataType
    key = df[key_name] if isinstance(key_type, (StringType, BinaryType)) else df[key_name].cast("string")
    all_headers = dict(headers or {})
    all_headers.setdefault("content-type", {"json": "application/json", "raw": "application/octet-stream",
                                            "avro": "application/avro"}.get(value_format, value_format))
    header_col = F.array(*[F.struct(F.lit(k).alias("key"), F.lit(v).cast("binary").alias("value"))
                           for k, v in all_headers.items()])
    if value_format == "json":
        value = F.to_json(F.struct(*[df[c] for c in columns]))
        return ShapedRecords(df.select(key.alias("key"), value.alias("value"), header_col.alias("headers")),
                             key_name, value_format)
    if value_format == "raw":
        name = value_column or "value"
        if name not in columns:
            raise ConfigError(
                f"--value-format raw sends one column as is: {name!r} is not in the input "
                f"(columns: {', '.join(columns)}); choose it with --value-column", "value-column")
        vtype = df.schema[name].dataType
        value = df[name] if isinstance(vtype, (StringType, BinaryType)) else df[name].cast("string")
        return ShapedRecords(df.select(key.alias("key"), value.alias("value"), header_col.alias("headers")),
                             key_name, value_format)
    if value_format == "avro":
        session = df.sparkSession
        if avro_available(session) and not prefer_builtin_avro:
            from pyspark.sql.avro.functions import to_avro

            value = to_avro(F.struct(*[df[c] for c in columns]))
            shaped = df.select(key.alias("key"), value.alias("value"), header_col.alias("headers"))
            return ShapedRecords(shaped, key_name, value_format, None, "spark-avro")
        staged = df.select(key.alias("__sparkafka_key"), header_col.alias("__sparkafka_headers"),
                           *[df[c] for c in columns])
        encoded, schema = encode_avro(staged, columns, ["__sparkafka_key", "__sparkafka_headers"])
        shaped = encoded.select(F.col("__sparkafka_key").alias("key"), F.col("value"),
                                F.col("__sparkafka_headers").alias("headers"))
        return ShapedRecords(shaped, key_name, value_format, schema_json(schema), "built-in")
    raise ConfigError(f"unknown value format {value_format!r}; use one of {', '.join(VALUE_FORMATS)}",
                      "value-format")
