"""The sink's task body, commit/abort and schema checks, outside Spark (fake producers, no JVM)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from sparkafka.errors import ConfigError, InvalidRecordInputError, KafkaError
from sparkafka.producer.arrow.send import plan_columns
from sparkafka.spark import SparkafkaDataSource, read_summaries
from sparkafka.spark.commit import SparkafkaCommitMessage, WriteSummary
from sparkafka.spark.datasource import plan_spark_schema
from sparkafka.spark.options import SinkOptions
from sparkafka.spark.producer_cache import ProducerCache
from sparkafka.spark.writer import (
    InjectedTaskFailure,
    SparkafkaBatchWriter,
    SparkafkaStreamWriter,
    write_partition,
)

if TYPE_CHECKING:  # pytest puts tests/spark on sys.path; mypy names the module from tests/
    from spark.spark_fakes import FakeProducer
else:
    from spark_fakes import FakeProducer

OPTS = SinkOptions.parse({"kafka.bootstrap.servers": "x:1", "topic": "t"})


class Factory:
    def __init__(self, **kwargs: object) -> None:
        self.kwargs = kwargs
        self.made: list[FakeProducer] = []

    def __call__(self, config: Mapping[str, str]) -> FakeProducer:
        p = FakeProducer(**self.kwargs)  # type: ignore[arg-type]
        self.made.append(p)
        return p


def batches(n: int, size: int) -> list[pa.RecordBatch]:
    return [pa.record_batch([pa.array([f"v{i}-{j}" for j in range(size)]),
                             pa.array([f"k{i}-{j}" for j in range(size)])], names=["value", "key"])
            for i in range(n)]



def test_task_sends_everything_flushes_and_reports_offsets() -> None:
    factory = Factory(partitions=2, complete=False)
    cache = ProducerCache(factory, reaper=False)
    msg = write_partition(OPTS, plan_columns(batches(1, 1)[0].schema, topic="t"), iter(batches(3, 4)),
                          cache=cache)
    producer = factory.made[0]
    assert producer.flushes == 1 and len(producer.sent) == 12
    assert (msg.rows, msg.acknowledged, msg.partition_id, msg.attempt) == (12, 12, 0, 0)
    assert msg.offsets == (("t", 0, 0, 5, 6), ("t", 1, 0, 5, 6))
    assert msg.bytes == sum(len(s.value or b"") + len(s.key or b"") for s in producer.sent)
    # the producer stays cached for the next task
    write_partition(OPTS, plan_columns(batches(1, 1)[0].schema, topic="t"), iter(batches(1, 1)),
                    cache=cache)
    assert len(factory.made) == 1


def test_failed_record_fails_the_task_and_evicts_the_producer() -> None:
    factory = Factory(fail_when=lambda s: s.key == b"k1-2")
    cache = ProducerCache(factory, reaper=False)
    p = plan_columns(batches(1, 1)[0].schema, topic="t")
    with pytest.raises(KafkaError, match=r"1 of 8 records failed \(1 KafkaError\).*k1-2") as info:
        write_partition(OPTS, p, iter(batches(3, 4)), cache=cache)
    assert isinstance(info.value.__cause__, KafkaError)
    assert factory.made[0].closed
    write_partition(OPTS, p, iter(batches(1, 1)), cache=cache)
    assert len(factory.made) == 2


def test_bad_batch_fails_before_sending_it() -> None:
    factory = Factory()
    cache = ProducerCache(factory, reaper=False)
    schema = pa.schema([("value", pa.string()), ("topic", pa.string())])
    good = pa.record_batch([pa.array(["a"]), pa.array(["t"])], schema=schema)
    bad = pa.record_batch([pa.array(["b", "c"]), pa.array(["t", None])], schema=schema)
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "x:1"})
    with pytest.raises(InvalidRecordInputError, match="null 'topic'"):
        write_partition(opts, plan_columns(schema), iter([good, bad]), cache=cache)
    assert [s.value for s in factory.made[0].sent] == [b"a"]
    assert not factory.made[0].closed  # a data error is not the producer's fault


def test_injected_failure_sends_then_raises_on_first_attempt_only() -> None:
    factory = Factory()
    cache = ProducerCache(factory, reaper=False)
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "x:1", "topic": "t",
                              "sparkafka.fault.fail.first.attempt.after.records": "6"})
    with pytest.raises(InjectedTaskFailure, match="after 6 records"):
        write_partition(opts, plan_columns(batches(1, 1)[0].schema, topic="t"), iter(batches(3, 4)),
                        cache=cache)
    assert len(factory.made[0].sent) == 6 and factory.made[0].flushes == 1


def test_summary_adds_up_tasks_and_is_appended_as_json(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = str(tmp_path / "summary.jsonl")
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "x:1", "topic": "t",
                              "sparkafka.summary.path": path})
    m1 = SparkafkaCommitMessage(0, 0, 10, 10, 100, 0.5, (("t", 0, 0, 4, 5), ("t", 1, 10, 14, 5)))
    m2 = SparkafkaCommitMessage(1, 1, 6, 6, 60, 0.25, (("t", 1, 15, 20, 6),))
    writer = SparkafkaBatchWriter(opts, plan_columns(batches(1, 1)[0].schema, topic="t"))
    with caplog.at_level(logging.INFO, logger="sparkafka.spark"):
        writer.commit([m1, m2])
        SparkafkaStreamWriter(opts, writer.plan).abort([m1, None], 7)
    first, second = read_summaries(path)
    assert (first.status, first.rows, first.acknowledged, first.bytes, first.retried_tasks) == (
        "committed", 16, 16, 160, 1)
    assert first.partitions == {"t:0": [0, 4, 5], "t:1": [10, 20, 11]}
    assert (second.status, second.batch_id, second.failed_tasks, second.acknowledged) == ("aborted", 7, 1, 10)
    assert "16 records acknowledged" in caplog.text
    assert "1 of 2 tasks failed" in caplog.text and "left 10 records in Kafka" in caplog.text
    assert WriteSummary.from_json(first.to_json()) == first


def test_a_summary_path_that_cannot_be_appended_to_is_refused_before_any_task_and_never_fails_a_commit(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Found by a Spark sink review: a summary path in a missing directory failed the write at commit time,
    after every record was in Kafka (a re-run sent them again; a streaming query died at its first commit).
    writer() and streamWriter() check it on the driver now, and a summary that cannot be written later (a
    directory removed meanwhile) is logged, not raised: the write itself succeeded."""
    schema = StructType([StructField("value", StringType())])
    bad = str(tmp_path / "missing" / "summary.jsonl")
    for make in ("writer", "streamWriter"):
        source = SparkafkaDataSource(options={"kafka.bootstrap.servers": "x:1", "topic": "t",
                                              "sparkafka.summary.path": bad})
        with pytest.raises(ConfigError, match=r"sparkafka\.summary\.path .* cannot be appended to") as info:
            getattr(source, make)(schema, False)
        assert info.value.key == "sparkafka.summary.path"
    gone = tmp_path / "gone"
    gone.mkdir()
    path = str(gone / "summary.jsonl")
    source = SparkafkaDataSource(options={"kafka.bootstrap.servers": "x:1", "topic": "t",
                                          "sparkafka.summary.path": path})
    writer = source.writer(schema, False)
    assert Path(path).exists()  # created, empty, by the check
    Path(path).unlink()
    gone.rmdir()
    with caplog.at_level(logging.ERROR, logger="sparkafka.spark"):
        writer.commit([SparkafkaCommitMessage(0, 0, 1, 1, 10, 0.1, (("t", 0, 0, 0, 1),))])
    assert "could not append the write's summary" in caplog.text


# ----------------------------------------------------------------------------------- driver checks

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def test_spark_schema_errors_use_spark_type_names() -> None:
    schema = StructType([StructField("value", LongType()), StructField("topic", StringType())])
    with pytest.raises(InvalidRecordInputError, match=r"column 'value' has type bigint; .*string or binary"):
        plan_spark_schema(schema, None)


def test_spark_schema_errors_name_every_column_and_duplicates() -> None:
    """No 'value' column: the error lists the input's columns, not only the sink's (a 'Value' column shows);
    a sink column given twice is named instead of failing inside pyarrow."""
    schema = StructType([StructField("Value", StringType()), StructField("topic", StringType())])
    with pytest.raises(InvalidRecordInputError, match=r"no 'value' column \(columns: Value, topic\).*case-sensitive"):
        plan_spark_schema(schema, None)
    twice = StructType([StructField("value", StringType()), StructField("value", BinaryType()),
                        StructField("topic", StringType())])
    with pytest.raises(InvalidRecordInputError, match=r"2 columns named 'value'"):
        plan_spark_schema(twice, None)


def test_spark_schema_full_contract() -> None:
    schema = StructType([StructField("key", StringType()), StructField("value", BinaryType()),
                         StructField("topic", StringType()), StructField("partition", IntegerType()),
                         StructField("headers", HEADERS), StructField("other", LongType())])
    p = plan_spark_schema(schema, None)
    assert (p.key, p.value, p.topic_column, p.partition, p.headers) == (
        "key", "value", "topic", "partition", "headers")


def test_datasource_rejects_overwrite_and_bad_options() -> None:
    schema = StructType([StructField("value", StringType())])
    ds = SparkafkaDataSource({"kafka.bootstrap.servers": "x:1", "topic": "t"})
    with pytest.raises(ConfigError, match="overwrite"):
        ds.writer(schema, True)
    assert isinstance(ds.writer(schema, False), SparkafkaBatchWriter)
    assert isinstance(ds.streamWriter(schema, True), SparkafkaStreamWriter)
    with pytest.raises(InvalidRecordInputError, match="no topic"):
        SparkafkaDataSource({"kafka.bootstrap.servers": "x:1"}).writer(schema, False)
