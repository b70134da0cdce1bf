"""The job the cluster tests submit (``spark-submit ... cluster_job.py``) or run as a Spark Connect client.

How it works: it gets the session (``--remote sc://...`` for Spark Connect, else the one spark-submit
configured), calls ``sparkafka.spark.register(spark)`` as a user would and records what it decided
(``ensure_executors_can_import`` answers from its per-session cache), writes ``--rows`` rows through
``format("sparkafka")`` (key ``k%08d``, a 100-byte value starting ``v%08d``) and, with
``--stream-topic``, runs a streaming query over ``--stream-files`` JSON files (one micro-batch each,
``availableNow``). ``--option name=value`` (repeated) adds options of the sink to the batch write (e.g.
exactly-once and a fault). Everything it learnt is written as JSON to ``<--work>/result.json`` (and printed
as a ``RESULT {json}`` line for whoever reads the log: spark-submit copies the driver's output through a JVM
thread in chunks, so a log line of Spark's can land inside it); the tests read the records back themselves.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--rows", type=int, required=True)
    parser.add_argument("--input-partitions", type=int, default=4)
    parser.add_argument("--work", required=True)
    parser.add_argument("--remote")
    parser.add_argument("--stream-topic")
    parser.add_argument("--stream-files", type=int, default=3)
    parser.add_argument("--stream-rows-per-file", type=int, default=20_000)
    parser.add_argument("--option", action="append", default=[], help="name=value: a sink option of the batch write")
    args = parser.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")

    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    from sparkafka.spark import read_summaries, register
    from sparkafka.spark.shipping import ensure_executors_can_import

    builder: Any = SparkSession.builder
    spark = builder.remote(args.remote).getOrCreate() if args.remote else builder.getOrCreate()
    result: dict[str, Any] = {"connect": bool(args.remote)}
    started = time.monotonic()
    register(spark)
    shipped = ensure_executors_can_import(spark)  # what register decided (asked once per session)
    result["register_seconds"] = round(time.monotonic() - started, 1)
    result["shipped"] = shipped.shipped
    result["ship_reason"] = shipped.reason
    result["executors"] = [{"executable": r.executable, "sparkafka": r.sparkafka, "pyarrow": r.pyarrow,
                            "crc32c": r.crc32c, "error": r.error} for r in shipped.reports]

    summary_path = os.path.join(args.work, "summary.jsonl")
    i = F.col("id")
    df = spark.range(0, args.rows, 1, args.input_partitions).select(
        F.format_string("k%08d", i).alias("key"),
        F.rpad(F.format_string("v%08d", i), 100, ".").alias("value"))
    writer = (df.write.format("sparkafka").mode("append").option("kafka.bootstrap.servers", args.bootstrap)
              .option("topic", args.topic).option("sparkafka.summary.path", summary_path))
    for name, _, value in (o.partition("=") for o in args.option):
        writer = writer.option(name, value)
    started = time.monotonic()
    writer.save()
    result["batch_seconds"] = round(time.monotonic() - started, 1)
    if not args.remote:  # the commit runs in this driver, which writes the summary (Connect: on the server)
        result["batch"] = [json.loads(s.to_json()) for s in read_summaries(summary_path)]

    if args.stream_topic:
        src = os.path.join(args.work, "stream-in")
        os.makedirs(src, exist_ok=True)
        n = args.stream_rows_per_file
        for f in range(args.stream_files):
            with open(os.path.join(src, f"part-{f}.json"), "w", encoding="utf-8") as out:
                out.writelines(json.dumps({"key": f"s{f}-{r:06d}", "value": f"stream {f}/{r}"}) + "\n"
                               for r in range(n))
        stream_summary = os.path.join(args.work, "stream-summary.jsonl")
        started = time.monotonic()
        query = (spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", 1).json(src)
                 .writeStream.format("sparkafka").option("kafka.bootstrap.servers", args.bootstrap)
                 .option("topic", args.stream_topic).option("sparkafka.summary.path", stream_summary)
                 .option("checkpointLocation", os.path.join(args.work, "checkpoint"))
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination()
            result["stream_exception"] = None
        except Exception as exc:  # reported, for the tests to judge (Spark Connect: see the README)
            result["stream_exception"] = str(exc)
        result["stream_seconds"] = round(time.monotonic() - started, 1)
        if not args.remote:
            result["stream"] = [json.loads(s.to_json()) for s in read_summaries(stream_summary)]
    text = json.dumps(result)
    partial = os.path.join(args.work, "result.json.partial")
    with open(partial, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(partial, os.path.join(args.work, "result.json"))  # whole or absent
    print("RESULT " + text, flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
