"""The sparkafka sink in a real Spark session (local[2,4]) against the embedded Tansu broker.

Every write is read back independently with confluent-kafka (``support.consume``) and compared.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from sparkafka.spark import read_summaries
from support.consume import consume_all, create_topic

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def sink(df: Any, bootstrap: str, **options: str) -> Any:
    writer = df.write.format("sparkafka").option("kafka.bootstrap.servers", bootstrap)
    for k, v in options.items():
        writer = writer.option(k, v)
    return writer.mode("append")


def test_batch_write_with_keys_headers_and_partitions(spark: Any, broker: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    rows, partitions = 100_000, 4
    topic = topic_name("batch")
    create_topic(broker.bootstrap_servers, topic, partitions)
    i = F.col("id")
    df = spark.range(0, rows, 1, 4).select(
        F.format_string("k%06d", i).alias("key"),
        F.concat(F.lit('{"n":'), i.cast("string"), F.lit("}")).alias("value"),
        (i % partitions).cast("int").alias("partition"),
        F.array(F.struct(F.lit("id").alias("key"), i.cast("string").cast("binary").alias("value")),
                F.struct(F.lit("src").alias("key"), F.lit("test").cast("binary").alias("value")))
        .alias("headers"),
    )
    summary_path = str(tmp_path / "summary.jsonl")
    sink(df, broker.bootstrap_servers, topic=topic, **{"sparkafka.summary.path": summary_path}).save()

    records = consume_all(broker.bootstrap_servers, topic, rows, timeout=60)
    assert len(records) == rows
    by_key = {r.key: r for r in records}
    assert len(by_key) == rows
    for n in range(rows):
        r = by_key[f"k{n:06d}".encode()]
        assert r.partition == n % partitions
        assert r.value == f'{{"n":{n}}}'.encode()
        assert r.headers == [("id", str(n).encode()), ("src", b"test")]

    (summary,) = read_summaries(summary_path)
    assert (summary.status, summary.rows, summary.acknowledged, summary.failed_tasks) == (
        "committed", rows, rows, 0)
    per_partition = {p: sum(1 for r in records if r.partition == p) for p in range(partitions)}
    assert {int(k.rsplit(":", 1)[1]): v[2] for k, v in summary.partitions.items()} == per_partition
    for name, (first, last, count) in summary.partitions.items():
        assert (first, last) == (0, count - 1), name


def test_topic_column_binary_values_and_null_keys(spark: Any, broker: Any) -> None:
    from pyspark.sql import functions as F

    a, b = topic_name("col-a"), topic_name("col-b")
    for t in (a, b):
        create_topic(broker.bootstrap_servers, t, 2)
    i = F.col("id")
    df = spark.range(0, 1000, 1, 2).select(
        F.when(i % 2 == 0, F.lit(a)).otherwise(F.lit(b)).alias("topic"),
        F.when(i % 10 == 0, F.lit(None).cast("binary"))
        .otherwise(i.cast("string").cast("binary")).alias("key"),
        F.format_string("v%d", i).cast("binary").alias("value"),
    )
    sink(df, broker.bootstrap_servers).save()
    got_a = consume_all(broker.bootstrap_servers, a, 500)
    got_b = consume_all(broker.bootstrap_servers, b, 500)
    assert sorted(r.value or b"" for r in got_a) == sorted(f"v{n}".encode() for n in range(0, 1000, 2))
    assert sorted(r.value or b"" for r in got_b) == sorted(f"v{n}".encode() for n in range(1, 1000, 2))
    assert sum(1 for r in got_a + got_b if r.key is None) == 100


def test_streaming_query_is_checkpointed(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = topic_name("stream")
    create_topic(broker.bootstrap_servers, topic, 3)
    src, checkpoint = tmp_path / "in", str(tmp_path / "checkpoint")
    src.mkdir()
    summary_path = str(tmp_path / "summary.jsonl")

    def add_file(index: int, count: int) -> None:
        lines = [json.dumps({"key": f"f{index}-{n}", "value": f"payload {index}/{n}"}) for n in range(count)]
        (src / f"part-{index}.json").write_text("\n".join(lines) + "\n")

    def run_available() -> None:
        query = (spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", 1)
                 .json(str(src)).writeStream.format("sparkafka")
                 .option("kafka.bootstrap.servers", broker.bootstrap_servers).option("topic", topic)
                 .option("sparkafka.summary.path", summary_path)
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        assert query.awaitTermination(120)
        assert query.exception() is None

    for index in range(3):
        add_file(index, 400)
    run_available()
    summaries = read_summaries(summary_path)
    assert [(s.status, s.batch_id, s.acknowledged) for s in summaries] == [
        ("committed", 0, 400), ("committed", 1, 400), ("committed", 2, 400)]

    add_file(3, 250)
    run_available()  # restarts from the checkpoint: only the new file is sent
    assert [(s.batch_id, s.acknowledged) for s in read_summaries(summary_path)][3:] == [(3, 250)]

    records = consume_all(broker.bootstrap_servers, topic, 1450)
    assert len(records) == 1450
    assert {r.key for r in records} == {f"f{i}-{n}".encode() for i, c in enumerate((400, 400, 400, 250))
                                        for n in range(c)}
    assert all(r.value == f"payload {r.key.decode()[1:].replace('-', '/')}".encode()  # type: ignore[union-attr]
               for r in records)


def test_failed_first_attempts_are_retried_without_losing_records(
        spark: Any, broker: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    rows, fail_after = 20_000, 3_000
    topic = topic_name("retry")
    create_topic(broker.bootstrap_servers, topic, 2)
    df = spark.range(0, rows, 1, 2).select(F.format_string("r%d", "id").alias("key"),
                                           F.col("id").cast("string").alias("value"))
    summary_path = str(tmp_path / "summary.jsonl")
    sink(df, broker.bootstrap_servers, topic=topic, **{
        "sparkafka.summary.path": summary_path,
        "sparkafka.fault.fail.first.attempt.after.records": str(fail_after)}).save()

    (summary,) = read_summaries(summary_path)
    assert summary.retried_tasks == 2 and summary.acknowledged == rows
    # Each task's first attempt delivered fail_after records, then failed; its retry sent everything.
    records = consume_all(broker.bootstrap_servers, topic, rows + 2 * fail_after)
    assert len(records) == rows + 2 * fail_after
    assert {r.key for r in records} == {f"r{n}".encode() for n in range(rows)}


# ------------------------------------------------------------------------------------------ bad input


def _bad_cases(topic: str) -> list[tuple[str, Any, dict[str, str], str, bool]]:
    """(name, df builder, options, expected message, overwrite)."""
    return [
        ("no value column", lambda s: s.range(3).selectExpr("cast(id as string) as key"),
         {"topic": topic}, "no 'value' column", False),
        ("wrong value type", lambda s: s.range(3).selectExpr("id as value"),
         {"topic": topic}, "column 'value' has type bigint", False),
        ("wrong headers type", lambda s: s.range(3).selectExpr("'v' as value", "array('x') as headers"),
         {"topic": topic}, "column 'headers' has type array<string>", False),
        ("no topic", lambda s: s.range(3).selectExpr("'v' as value"), {}, "no topic", False),
        ("unknown option", lambda s: s.range(3).selectExpr("'v' as value"),
         {"topic": topic, "topc": "x"}, "unknown option 'topc'", False),
        ("unknown kafka option", lambda s: s.range(3).selectExpr("'v' as value"),
         {"topic": topic, "kafka.lnger.ms": "5"}, "did you mean 'linger.ms'", False),
        ("overwrite", lambda s: s.range(3).selectExpr("'v' as value"), {"topic": topic}, "overwrite", True),
        ("null topic in a row", lambda s: s.range(0, 5, 1, 1).selectExpr(
            "'v' as value", f"case when id = 3 then null else '{topic}' end as topic"),
         {}, "row 3 of the batch has a null 'topic'", False),
    ]


@pytest.mark.parametrize("case", range(8), ids=[c[0] for c in _bad_cases("t")])
def test_bad_input_fails_before_anything_is_sent(spark: Any, broker: Any, case: int) -> None:
    topic = topic_name("bad")
    create_topic(broker.bootstrap_servers, topic, 1)
    _, build, options, message, overwrite = _bad_cases(topic)[case]
    writer = build(spark).write.format("sparkafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for k, v in options.items():
        writer = writer.option(k, v)
    with pytest.raises(Exception, match=message):
        writer.mode("overwrite" if overwrite else "append").save()
    assert consume_all(broker.bootstrap_servers, topic) == []

