"""Benchmark: the sparkafka pipeline vs the usual ``foreachPartition`` + confluent-kafka pattern.

How it works: one Spark session (``local[2,4]`` by default) and one broker (an embedded Tansu
unless ``--bootstrap-servers`` is given) serve every run. The data is the pipeline's order-event
generator, shaped into key / JSON value / headers by ``shape_records``; it is generated inside Spark
identically for every run (deterministic hashing), so each run pays the same generation cost. Runs:

1. ``noop``: the same DataFrame written to Spark's ``noop`` sink: the cost of generating and
   shaping the rows alone (a ceiling for both Kafka runs).
2. ``sparkafka``: ``df.write.format("sparkafka")`` (Arrow batches, cached producer per worker).
3. ``foreachPartition``: ``df.foreachPartition(f)`` where ``f`` builds a confluent-kafka
   ``Producer`` and calls ``produce`` + ``poll(0)`` per row, then ``flush()``: how PySpark users
   publish to Kafka from Python today.

Each Kafka run writes to its own fresh topic with the same partition count, and is verified
afterwards by reading the topic back (record count; not timed). A small warm-up of both paths runs first so
Python worker start-up is not measured. Prints rows/s for each run and the sparkafka /
foreachPartition ratio. Not a test: run it by hand, e.g.
``python benchmarks/pipeline_vs_foreachpartition.py --rows 2000000``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import uuid
from collections.abc import Iterable, Iterator
from typing import Any

DEFAULT_ROWS = 2_000_000


def send_partition_with_confluent(rows: Iterable[Any], bootstrap: str, topic: str) -> None:
    """The usual foreachPartition body: one confluent-kafka Producer per partition."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap})
    produce, poll = producer.produce, producer.poll
    for row in rows:
        headers = [(h.key, h.value) for h in row.headers] if row.headers else None
        while True:
            try:
                produce(topic, value=row.value, key=row.key, headers=headers)
                break
            except BufferError:  # the local queue is full: serve delivery reports and retry
                poll(0.05)
        poll(0)
    remaining = producer.flush(120)
    if remaining:
        raise RuntimeError(f"{remaining} records were not delivered within 120 s")


def count_records(bootstrap: str, topic: str, partitions: int, timeout: float = 300.0,
                  isolation_level: str = "read_committed") -> int:
    """Records in the topic, counted by reading every partition to its end with confluent-kafka (at
    librdkafka's default isolation level, read_committed, unless told).

    (Not ListOffsets: Tansu reports the base offset of a partition's last batch as its end offset.)
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-count-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "isolation.level": isolation_level})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    count, deadline = 0, time.monotonic() + timeout
    at_end: set[int] = set()
    try:
        while len(at_end) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                error = message.error()
                if error is None:
                    count += 1
                    at_end.discard(message.partition())
                elif error.code() == KafkaError._PARTITION_EOF:
                    partition = message.partition()
                    if partition is not None:
                        at_end.add(partition)
    finally:
        consumer.close()
    return count


def _create(bootstrap: str, topic: str, partitions: int) -> None:
    from sparkafka.net.admin import AdminClient

    with AdminClient(bootstrap) as admin:
        admin.create_topics([(topic, partitions, 1)], exist_ok=True)


@contextlib.contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from sparkafka.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        print(f"embedded Tansu broker at {broker.bootstrap_servers}", file=sys.stderr)
        yield broker.bootstrap_servers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=DEFAULT_ROWS)
    parser.add_argument("--partitions", type=int, default=6, help="topic partitions")
    parser.add_argument("--input-partitions", type=int, default=None, help="Spark tasks (default: cores)")
    parser.add_argument("--bootstrap-servers", default=None, help="default: an embedded Tansu broker")
    parser.add_argument("--master", default="local[2,4]")
    parser.add_argument("-X", "--producer-config", action="append", default=[], metavar="KEY=VALUE",
                        help="sparkafka producer settings (Java names)")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession

    from sparkafka.cli.orders import generate_orders, shape_records
    from sparkafka.cli.pipeline import run_pipeline
    from sparkafka.spark import register

    producer_config = dict(pair.split("=", 1) for pair in args.producer_config)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(args.master).appName("sparkafka-benchmark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    headers = {"source": "sparkafka-generator", "schema": "sparkafka.orders.v1"}

    def shaped(rows: int) -> Any:
        return shape_records(generate_orders(spark, rows, args.input_partitions), headers=headers).df

    def foreach_run(rows: int, bootstrap: str) -> tuple[float, int]:
        topic = f"bench-foreach-{uuid.uuid4().hex[:6]}"
        _create(bootstrap, topic, args.partitions)
        df = shaped(rows)
        started = time.monotonic()
        df.foreachPartition(lambda it: send_partition_with_confluent(it, bootstrap, topic))
        seconds = time.monotonic() - started
        return seconds, count_records(bootstrap, topic, args.partitions)

    def sparkafka_run(rows: int, bootstrap: str) -> tuple[float, int]:
        topic = f"bench-sparkafka-{uuid.uuid4().hex[:6]}"
        result = run_pipeline(spark, bootstrap, rows=rows, input_partitions=args.input_partitions,
                              topic=topic, partitions=args.partitions, producer_config=producer_config)
        return result.seconds, count_records(bootstrap, topic, args.partitions)

    try:
        with _broker(args.bootstrap_servers) as bootstrap:
            print("warming up (Python workers, metadata)...", file=sys.stderr)
            sparkafka_run(20_000, bootstrap)
            foreach_run(20_000, bootstrap)

            started = time.monotonic()
            shaped(args.rows).write.format("noop").mode("overwrite").save()
            noop_s = time.monotonic() - started
            print(f"noop done in {noop_s:.1f} s", file=sys.stderr)
            sk_s, sk_n = sparkafka_run(args.rows, bootstrap)
            print(f"sparkafka done in {sk_s:.1f} s", file=sys.stderr)
            fe_s, fe_n = foreach_run(args.rows, bootstrap)
            print(f"foreachPartition done in {fe_s:.1f} s", file=sys.stderr)
    finally:
        spark.stop()

    for name, n in (("sparkafka", sk_n), ("foreachPartition", fe_n)):
        if n != args.rows:
            print(f"WARNING: {name} left {n:,} records in its topic, expected {args.rows:,}", file=sys.stderr)
        else:
            print(f"verified: {name} left exactly {n:,} records in its topic", file=sys.stderr)
    print(f"\n{args.rows:,} rows, {args.partitions} topic partitions, master {args.master}")
    print(f"{'run':<26}{'seconds':>10}{'rows/s':>14}")
    for name, seconds in (("noop (generate + shape)", noop_s), ("sparkafka sink", sk_s),
                          ("foreachPartition+confluent", fe_s)):
        print(f"{name:<26}{seconds:>10.2f}{args.rows / seconds:>14,.0f}")
    print(f"\nsparkafka / foreachPartition throughput ratio: {fe_s / sk_s:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
