"""``SparkafkaDataSource``: the ``sparkafka`` format for Spark 4's Python Data Source API.

How it works: Spark instantiates the data source on the driver with the write's options and calls
``writer(schema, overwrite)`` (batch) or ``streamWriter(schema, overwrite)`` (streaming). Both parse
the options (``SinkOptions.parse``) and check the DataFrame's columns with the same
``producer.arrow.send.plan_columns`` that checks Arrow batches: the Spark schema of the relevant columns is
converted to Arrow first, and error messages show Spark's type names. So a missing ``value``
column, a wrong column type, no topic at all, an unknown option or a bad ``kafka.*`` producer
setting fails the query before any task starts. Batch writes accept only ``mode("append")``: Kafka
topics cannot be overwritten. The returned writers receive rows as Arrow record batches.

Exactly-once: ``writer()``/``streamWriter()`` run on the driver before any task of the write, so they
settle the sink's past first (``ExactlyOnceSink.recover``: a write a dead driver left PREPARED is
committed). A batch write without ``sparkafka.sink.id`` gets a random one; a batch write whose sink id an
earlier run committed sends nothing (``skip_write``), and a batch write sweeps the sink's open
transactions. A streaming query without a sink id uses its query id, read from the checkpoint's
``metadata`` file when the checkpoint location is a local path; otherwise the option is required.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from dataclasses import replace

from pyspark.sql.datasource import DataSource
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from sparkafka.errors import ConfigError, InvalidRecordInputError
from sparkafka.producer.arrow.send import ColumnPlan, plan_columns
from sparkafka.spark.commit import WriteSummary
from sparkafka.spark.exactly_once import BATCH_WRITE, BATCH_WRITE_QUERY, ExactlyOnceSink
from sparkafka.spark.options import SINK_ID_OPTION, SinkOptions
from sparkafka.spark.writer import SparkafkaBatchWriter, SparkafkaStreamWriter

log = logging.getLogger("sparkafka.spark")

__all__ = ["SINK_COLUMNS", "SparkafkaDataSource", "plan_spark_schema"]

SINK_COLUMNS = ("value", "key", "topic", "partition", "headers")


def plan_spark_schema(schema: StructType, topic: str | None) -> ColumnPlan:
    """Check a DataFrame schema against the Kafka sink contract (same rules as Arrow batches).

    A ``topic`` option overrides the ``topic`` column, which is then not read nor type-checked (as in
    Spark's Kafka sink)."""
    if "value" not in schema.names:  # named here with every column of the input, not only the sink's
        raise InvalidRecordInputError(
            f"the input has no 'value' column (columns: {', '.join(schema.names) or 'none'}); the Kafka sink "
            "needs a string or binary value column (column names are case-sensitive, as in Spark's Kafka sink)")
    fields = [f for f in schema.fields
              if f.name in SINK_COLUMNS and not (topic is not None and f.name == "topic")]
    spark_types = {f.name: f.dataType.simpleString() for f in fields}
    try:
        arrow_schema = to_arrow_schema(StructType(fields))
    except Exception as exc:  # a type Arrow cannot hold is certainly not one the sink takes
        raise InvalidRecordInputError(
            f"the sink columns ({', '.join(f'{n}: {t}' for n, t in spark_types.items())}) do not "
            f"match the Kafka sink contract: {exc}") from exc
    try:
        return plan_columns(arrow_schema, topic=topic)
    except InvalidRecordInputError as exc:
        message = str(exc)
        for f, arrow_field in zip(fields, arrow_schema, strict=True):
            arrow_name = str(arrow_field.type)
            message = message.replace(f"column {f.name!r} has type {arrow_name};",
                                      f"column {f.name!r} has type {spark_types[f.name]};")
        if message == str(exc):
            raise
        raise type(exc)(message) from None


class SparkafkaDataSource(DataSource):
    """Write a DataFrame to Kafka: ``df.write.format("sparkafka").option(...).save()``.

    Columns as Spark's Kafka sink: ``value`` (string/binary, required), ``key`` (string/binary),
    ``topic`` (string; the ``topic`` option overrides it), ``partition`` (int),
    ``headers`` (array<struct<key: string, value: binary>>). Options: ``kafka.bootstrap.servers``
    (required), ``topic``, any ``kafka.<producer config>`` (Java names), and
    ``sparkafka.summary.path`` / ``sparkafka.producer.idle.timeout.ms``.
    """

    @classmethod
    def name(cls) -> str:
        return "sparkafka"

    def _prepare(self, schema: StructType) -> tuple[SinkOptions, ColumnPlan]:
        options = SinkOptions.parse(self.options)
        plan = plan_spark_schema(schema, options.topic)
        if options.summary_path:  # the driver's file: checked here, not where the executors parse the options
            WriteSummary.check_path(options.summary_path)
        return options, plan

    def writer(self, schema: StructType, overwrite: bool) -> SparkafkaBatchWriter:
        if overwrite:
            raise ConfigError(
                "save mode 'overwrite' is not supported by the sparkafka sink: Kafka topics are "
                "append-only; use mode('append')", "mode")
        options, plan = self._prepare(schema)
        if options.exactly_once:
            options = options.with_sink_id(options.sink_id or f"batch-{uuid.uuid4().hex}")
            sink = ExactlyOnceSink(options)
            latest = sink.recover(sweep=False)
            if latest is not None and latest.query_id not in (None, BATCH_WRITE_QUERY):  # refused before sweeping
                raise ConfigError(
                    f"sink id {options.sink_id!r} belongs to streaming query {latest.query_id} (batches up to "
                    f"{latest.last_committed} committed): a batch write with it would be taken for a batch that "
                    f"query wrote and skipped. Give the batch write its own {SINK_ID_OPTION}.", SINK_ID_OPTION)
            sink.sweep()
            if latest is not None and latest.is_committed(BATCH_WRITE):
                log.warning("sink %r: this batch write was committed by an earlier run; nothing is sent again "
                            "(use a new %s for a new write)", options.sink_id, SINK_ID_OPTION)
                options = replace(options, skip_write=True)
        return SparkafkaBatchWriter(options, plan)

    def streamWriter(self, schema: StructType, overwrite: bool) -> SparkafkaStreamWriter:
        # Complete output mode asks for "overwrite": Kafka can only append, as Spark's Kafka sink does.
        options, plan = self._prepare(schema)
        if options.exactly_once:
            options = options.with_sink_id(options.sink_id or _query_id_of(options.checkpoint_location))
            ExactlyOnceSink(options).recover(sweep=False)
        return SparkafkaStreamWriter(options, plan)


def _query_id_of(checkpoint: str | None) -> str:
    """The streaming query id in ``<checkpoint>/metadata`` (written by Spark's StreamExecution at start)."""
    path = checkpoint[len("file:"):] if checkpoint and checkpoint.startswith("file:") else checkpoint
    if path and "://" not in path:
        try:
            with open(os.path.join(path, "metadata"), encoding="utf-8") as f:
                return str(json.loads(f.readline())["id"])
        except (OSError, ValueError, KeyError):
            pass
    raise ConfigError(
        f"option {SINK_ID_OPTION!r} is required for an exactly-once streaming query whose checkpoint location "
        f"is not a local path with Spark's metadata file ({checkpoint!r}): give the query a stable sink id",
        SINK_ID_OPTION)
