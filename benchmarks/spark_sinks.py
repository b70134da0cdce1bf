"""Spark's own Kafka sink against the sparkafka sink and Spark's noop sink: the same rows, one Spark master.

Usage: ``python benchmarks/spark_sinks.py`` (``--rows 2000000``, ``--data orders|keyed-100``,
``--repeat 2``, ``--partitions 6`` topic partitions, ``--input-partitions N`` Spark tasks, ``--master
local[2,4]``, ``--batch-size 16384``, ``--warmup-rows`` (default ``--rows``), ``--prime-rows 20000``,
``--bootstrap-servers`` for a running broker, ``--sinks`` a subset of noop python-noop kafka sparkafka
sparkafka-eo sparkafka-py, ``--out DIR``, default ``docs/bench/spark``). Exactly-once
next to at-least-once: ``--sinks sparkafka sparkafka-eo --rows 1000000``. ``--chart-from DIR`` only redraws
``DIR/sinks.png`` from ``DIR/results.json``.

How it works: Spark's Kafka connector (``org.apache.spark:spark-sql-kafka-0-10_2.13``, the version of
``benchmarks/spark-kafka/pom.xml``) is copied from Maven Central by ``mvn dependency:copy-dependencies``
into ``.cache/spark-kafka/jars`` once (again when the pom changes) and put on the session's classpath
(``spark.jars``). One Apache Kafka node (``tests/support/kafka_cluster.py``) serves every run unless
``--bootstrap-servers`` is given; one Spark session (``--master``) runs every write. The rows are built
inside Spark by JVM expressions, identically for every run: ``orders`` is the pipeline's order events
shaped by ``shape_records`` (string key, JSON value, three headers), ``keyed-100`` the producer suite's
keyed workload (8-byte keys from a pool of 65,536, one 100-byte value). Each run writes the same
DataFrame with the same options (``kafka.bootstrap.servers``, ``topic``, and ``kafka.acks=all``,
``kafka.enable.idempotence=true``, ``kafka.linger.ms=5``, ``kafka.batch.size``) through one sink:

* ``noop``: Spark's ``noop`` sink, the cost of building the rows alone (the ceiling of both Kafka sinks);
* ``python-noop``: a Python data source (``DataSourceArrowWriter``, as sparkafka's) whose writer reads every
  Arrow batch Spark hands it and drops it: the cost of building the rows, converting them to Arrow and
  moving them to the Python workers, which every Python data source pays; the ceiling of the sparkafka
  sinks (no broker is involved);
* ``kafka``: ``df.write.format("kafka")``, Spark's own sink (a JVM KafkaProducer per executor);
* ``sparkafka``: ``df.write.format("sparkafka")`` (Arrow batches to the Python producer);
* ``sparkafka-eo``: the same sink with ``sparkafka.guarantee=exactly_once`` and a new ``sparkafka.sink.id``
  per run: each task writes inside a transaction it leaves open, the driver records the decision and
  commits them all (``save()`` returns after that, so the commit is timed); read back at read_committed;
* ``sparkafka-py``: the same sink with the Python workers running without the C accelerator (what an
  executor gets from a zip without the compiled extension): registered a second time under the format
  ``sparkafka_noaccel`` while the SparkContext's ``environment`` holds ``SPARKAFKA_NO_ACCEL=1``, which
  Spark passes to the Python workers of that data source only (their own worker daemon); its writer
  fails the task if the accelerator was loaded anyway.

Every sink runs once first on ``--warmup-rows`` rows (by default as many as a timed run: Spark's JVM sink
kept getting faster for two more 2M-row rounds after a 50,000-row warm-up, so a short one let best-of-N
compare its warm run with the Python sinks' warm ones only by luck), not reported; then ``--repeat``
interleaved rounds (noop, kafka, sparkafka, noop, ...), the fastest run of each sink reported. Right
before each timed run the same sink writes ``--prime-rows`` rows untimed: Spark stops a Python worker
that has been idle for a minute (``PythonWorkerFactory``'s ``IDLE_WORKER_TIMEOUT_NS``) and a round of all
five sinks takes longer, so without it the sink whose workers no other sink shares (``sparkafka-py``, its
own worker daemon) began every timed run in freshly forked workers (imports, a new producer, its
metadata): their process ids were new each round, and it wrote 250k-305k rows/s against 405k alone;
Spark's JVM sink keeps its producers for ten minutes (``spark.kafka.producer.cache.timeout``). Each
Kafka run writes to a fresh topic with the same partition count, read back and counted by
confluent-kafka afterwards (not timed), then deleted. Reported: rows/s (wall time of ``save()``), CPU
seconds per million rows of the Spark process tree (the driver JVM, which runs the executors in local
mode, and its Python workers; from ``/proc``, children reaped during the run included), the records
read back (confluent-kafka at ``isolation.level=read_committed``, its default), and sparkafka's rate divided
by each sink's; then the exactly-once sink's rate and CPU per row divided by the at-least-once one's, and the
pure-Python sink's rate divided by the accelerated one's (issue 22's target: at least 0.5x). Writes
``results.md``, ``results.json`` and ``sinks.png`` (rows/s and CPU per million rows of every sink's best
run; needs matplotlib) under ``--out``. Spark's connector is fetched only when the ``kafka`` sink runs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

POM = HERE / "spark-kafka" / "pom.xml"
JARS = ROOT / ".cache" / "spark-kafka" / "jars"
STAMP = JARS / ".copied-stamp"
SINKS = ("noop", "python-noop", "kafka", "sparkafka", "sparkafka-eo", "sparkafka-py")
PURE_FORMAT = "sparkafka_noaccel"
"""The ``sparkafka-py`` sink's format name: the sparkafka sink with Python workers without the accelerator."""
DROP_FORMAT = "sparkafka_bench_drop"
"""The ``python-noop`` sink's format name: a Python data source whose writer drops its Arrow batches."""
KEY_POOL = 1 << 16
MVN_TIMEOUT_S = 900


def connector_version() -> str:
    text = POM.read_text(encoding="utf-8")
    start = text.index("<spark.version>") + len("<spark.version>")
    return text[start:text.index("</spark.version>", start)]


def connector_jars() -> list[Path]:
    """Spark's Kafka connector and what it needs beyond pyspark's own jars, copied once by Maven."""
    if not (STAMP.exists() and STAMP.stat().st_mtime >= POM.stat().st_mtime):
        if shutil.which("mvn") is None:
            raise SystemExit("Spark's Kafka connector is fetched with Maven: install it (apt-get install maven)")
        shutil.rmtree(JARS, ignore_errors=True)
        done = subprocess.run(["mvn", "-B", "-q", "-Dstyle.color=never", "-f", str(POM),
                               "dependency:copy-dependencies", "-DincludeScope=runtime",
                               f"-DoutputDirectory={JARS}"], capture_output=True, text=True,
                              timeout=MVN_TIMEOUT_S, check=False)
        if done.returncode != 0:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-30:])
            raise SystemExit(f"mvn dependency:copy-dependencies of {POM} failed:\n{tail}")
        STAMP.touch()
    jars = sorted(JARS.glob("*.jar"))
    if not any(j.name.startswith("spark-sql-kafka-0-10") for j in jars):
        raise SystemExit(f"no spark-sql-kafka-0-10 jar in {JARS}")
    return jars


def tree_cpu_ticks(root_pid: int) -> dict[int, int]:
    """User + system CPU ticks of ``root_pid`` and every live descendant, each with what its reaped children
    used (cutime, cstime): /proc/<pid>/stat fields 14-17, by process id."""
    parent: dict[int, int] = {}
    cpu: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                stat = f.read()
        except OSError:
            continue  # the process ended while we looked
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15])
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    tree: dict[int, int] = {}
    stack = [root_pid]
    while stack:
        pid = stack.pop()
        if pid in cpu:
            tree[pid] = cpu[pid]
        stack.extend(children.get(pid, ()))
    return tree


def cpu_seconds_since(before: dict[int, int], after: dict[int, int]) -> float:
    """CPU seconds the process tree used between two ``tree_cpu_ticks`` readings: per process, its ticks
    now minus its ticks then (a process new since then: all of them). A difference of the two trees' sums
    would lose, when a process leaves the tree, everything it used before the first reading: Spark stops a
    Python worker idle for a minute and pyspark's worker daemon ignores SIGCHLD, so the kernel reaps it
    without adding its time to anyone's cutime; one such exit once made a run read 1.02 CPU s per million rows
    against 3.6-4.0 in every other round. A process that ended between the readings loses only what it used
    after the first one (an idle worker: nothing); one reaped by a parent that waits for it (the JVM for the
    worker daemon) adds all its time to that parent's cutime, counted whole: neither happens while the
    workers are busy."""
    ticks = sum(now - before.get(pid, 0) for pid, now in after.items())
    return max(ticks, 0) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _broker(bootstrap: str | None) -> Iterator[tuple[str, str]]:
    if bootstrap:
        yield bootstrap, f"external {bootstrap}"
        return
    from support.kafka_cluster import KafkaCluster

    with KafkaCluster(nodes=1, name="bench-spark", heap="1g") as cluster:
        yield cluster.bootstrap, "Apache Kafka (one KRaft node, its own JVM with -Xms1g -Xmx1g, log on disk)"


def register_pure_python(spark: Any) -> None:
    """The sparkafka sink once more, as ``PURE_FORMAT``, for Python workers with ``SPARKAFKA_NO_ACCEL=1``:
    Spark keeps the SparkContext's ``environment`` of the moment a data source is registered and starts
    that data source's Python workers with it."""
    from sparkafka.spark import SparkafkaDataSource
    from sparkafka.spark.writer import SparkafkaBatchWriter

    class PurePythonWriter(SparkafkaBatchWriter):
        def write(self, iterator: Any) -> Any:
            from sparkafka.accel import ACCEL

            if ACCEL is not None:
                raise RuntimeError("the sparkafka-py sink's Python worker loaded the C accelerator: "
                                   "SPARKAFKA_NO_ACCEL=1 did not reach it")
            return super().write(iterator)

    class PurePythonDataSource(SparkafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return PURE_FORMAT

        def writer(self, schema: Any, overwrite: bool) -> Any:
            super().writer(schema, overwrite)  # its checks (save mode, options, columns)
            return PurePythonWriter(*self._prepare(schema))

    environment = spark.sparkContext.environment
    environment["SPARKAFKA_NO_ACCEL"] = "1"
    try:
        spark.dataSource.register(PurePythonDataSource)
    finally:
        del environment["SPARKAFKA_NO_ACCEL"]


def register_python_noop(spark: Any) -> None:
    """``DROP_FORMAT``: a Python data source taking Arrow batches as sparkafka's does, which reads each one
    (its row count) and keeps nothing; its tasks report the rows they saw, checked against the rows written."""
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

    class DropCommit(WriterCommitMessage):
        def __init__(self, rows: int) -> None:
            self.rows = rows

    class DropWriter(DataSourceArrowWriter):
        def __init__(self, expected: int) -> None:
            self.expected = expected

        def write(self, iterator: Any) -> Any:
            return DropCommit(sum(batch.num_rows for batch in iterator))

        def commit(self, messages: Any) -> None:
            seen = sum(m.rows for m in messages)
            if seen != self.expected:
                raise RuntimeError(f"the python-noop sink's tasks read {seen:,} rows, {self.expected:,} were written")

    class DropDataSource(DataSource):
        @classmethod
        def name(cls) -> str:
            return DROP_FORMAT

        def writer(self, schema: Any, overwrite: bool) -> Any:
            return DropWriter(int(self.options["rows"]))

    spark.dataSource.register(DropDataSource)


def rows_df(spark: Any, data: str, rows: int, partitions: int | None) -> Any:
    """The rows every sink writes (built by JVM expressions, the same for every run)."""
    from pyspark.sql import functions as F

    if data == "orders":
        from sparkafka.cli.orders import generate_orders, shape_records

        headers = {"source": "sparkafka-generator", "schema": "sparkafka.orders.v1"}
        return shape_records(generate_orders(spark, rows, partitions), headers=headers).df
    from sparkafka.cli.perf import random_payload

    num = partitions or spark.sparkContext.defaultParallelism
    ids = spark.range(0, rows, 1, num)
    key = F.lpad((F.col("id") % KEY_POOL).cast("string"), 8, "0").cast("binary")
    return ids.select(key.alias("key"), F.lit(random_payload(100)).alias("value"))


SINK_LABELS = {"noop": "noop (Spark builds the rows)",
               "python-noop": "Python data source that drops the rows", "kafka": 'format("kafka") (Spark\'s sink)',
               "sparkafka": 'format("sparkafka")', "sparkafka-eo": "sparkafka, exactly-once",
               "sparkafka-py": "sparkafka, no C accelerator"}


def chart(best: dict[str, dict[str, Any]], header: str, path: str) -> bool:
    """Two panels, one bar per sink: rows/s and CPU seconds per million rows of its best run."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    sinks = [s for s in SINKS if s in best]
    labels = [SINK_LABELS[s] for s in sinks]
    grey = {"noop": "#bbbbbb", "python-noop": "#888888", "kafka": "#ff7f0e"}
    colors = [grey.get(s, "#d62728") for s in sinks]
    fig, (rate, cpu) = plt.subplots(1, 2, figsize=(12, 0.6 * len(sinks) + 1.8))
    for ax, field, scale, title in ((rate, "rows_per_second", 1e-3, "thousand rows/s (best run)"),
                                    (cpu, "cpu_seconds_per_million", 1, "CPU s / M rows (Spark JVM + Python)")):
        values = [best[s][field] * scale for s in sinks]
        bars = ax.barh(labels, values, color=colors)
        ax.bar_label(bars, fmt="%.0f" if scale != 1 else "%.2f", padding=3, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(title, fontsize=10)
        ax.grid(axis="x", alpha=0.3)
    cpu.set_yticklabels([])
    first = header.split(". Run took")[0]
    fig.suptitle("\n".join(textwrap.wrap(first, 160)[:3]), fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--data", choices=("orders", "keyed-100"), default="orders")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds; the fastest run is reported")
    parser.add_argument("--partitions", type=int, default=6, help="topic partitions")
    parser.add_argument("--input-partitions", type=int, default=None, help="Spark tasks (default: cores)")
    parser.add_argument("--master", default="local[2,4]")
    parser.add_argument("--batch-size", type=int, default=16384, help="kafka.batch.size for both Kafka sinks")
    parser.add_argument("--warmup-rows", type=int, default=None,
                        help="rows of each sink's untimed first run (default: --rows)")
    parser.add_argument("--prime-rows", type=int, default=20_000,
                        help="rows each sink writes untimed right before each of its timed runs (0: none)")
    parser.add_argument("--bootstrap-servers", default=None, help="default: one Apache Kafka node of our own")
    parser.add_argument("--sinks", nargs="+", choices=SINKS, default=list(SINKS))
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench" / "spark"))
    parser.add_argument("--chart-from", default=None, metavar="DIR", help="only redraw DIR/sinks.png")
    args = parser.parse_args(argv)
    if args.chart_from:
        with open(os.path.join(args.chart_from, "results.json"), encoding="utf-8") as f:
            saved = json.load(f)
        return 0 if chart(saved["best"], saved["header"], os.path.join(args.chart_from, "sinks.png")) else 1
    sinks = [sink for sink in SINKS if sink in args.sinks]
    warmup_rows = args.rows if args.warmup_rows is None else max(1, args.warmup_rows)

    import pyspark
    from pipeline_vs_foreachpartition import count_records
    from pyspark.sql import SparkSession
    from run import cpu_model

    from sparkafka.net.admin import AdminClient
    from sparkafka.spark import register

    jars = connector_jars() if "kafka" in sinks else []
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(args.master).appName("sparkafka-spark-sinks")
             .config("spark.jars", ",".join(str(j) for j in jars))
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.pyspark.python", sys.executable)
             .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    register_pure_python(spark)
    register_python_noop(spark)
    jvm: Any = spark.sparkContext._jvm
    jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())  # the driver JVM (executors too, in local mode)
    options = {"kafka.acks": "all", "kafka.enable.idempotence": "true", "kafka.linger.ms": "5",
               "kafka.batch.size": str(args.batch_size)}

    def run(sink: str, rows: int, bootstrap: str) -> dict[str, Any]:
        df = rows_df(spark, args.data, rows, args.input_partitions)
        topic = f"bench-spark-{sink}-{uuid.uuid4().hex[:6]}"
        if sink == "noop":
            writer = df.write.format("noop").mode("overwrite")
        elif sink == "python-noop":
            writer = df.write.format(DROP_FORMAT).option("rows", str(rows)).mode("append")
        else:
            with AdminClient(bootstrap) as admin:
                admin.create_topics([(topic, args.partitions, 1)], exist_ok=True)
            fmt = {"sparkafka-py": PURE_FORMAT, "sparkafka-eo": "sparkafka"}.get(sink, sink)
            writer = (df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
                      .options(**options).mode("append"))
            if sink == "sparkafka-eo":
                writer = writer.option("sparkafka.guarantee", "exactly_once").option(
                    "sparkafka.sink.id", f"bench-{uuid.uuid4().hex[:8]}")
        # Spark finds a Python data source through the JVM thread's active session, which starting the Kafka
        # node was seen to unset (DATA_SOURCE_NOT_FOUND): made active again before each write, as the pipeline does
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        cpu0 = tree_cpu_ticks(jvm_pid)
        started = time.monotonic()
        writer.save()
        seconds = time.monotonic() - started
        cpu = cpu_seconds_since(cpu0, tree_cpu_ticks(jvm_pid))
        result = {"sink": sink, "rows": rows, "seconds": seconds, "rows_per_second": rows / seconds,
                  "cpu_seconds": cpu, "cpu_seconds_per_million": cpu / rows * 1e6, "read_back": None}
        if sink not in ("noop", "python-noop"):
            result["read_back"] = count_records(bootstrap, topic, args.partitions, isolation_level="read_committed")
            from confluent_kafka.admin import AdminClient as ConfluentAdmin

            for future in ConfluentAdmin({"bootstrap.servers": bootstrap}).delete_topics([topic]).values():
                with contextlib.suppress(Exception):
                    future.result(60)
        return result

    started = time.monotonic()
    best: dict[str, dict[str, Any]] = {}
    runs: list[dict[str, Any]] = []
    try:
        with _broker(args.bootstrap_servers) as (bootstrap, broker_name):
            for sink in sinks:  # warm-up: JIT, Python workers, metadata
                run(sink, warmup_rows, bootstrap)
            for attempt in range(args.repeat):
                for sink in sinks:
                    if args.prime_rows > 0:  # its Python workers alive and warm (see the module's docstring)
                        run(sink, args.prime_rows, bootstrap)
                    result = run(sink, args.rows, bootstrap)
                    result["attempt"] = attempt + 1
                    runs.append(result)
                    print(f"{sink:10s} {result['rows_per_second']:>12,.0f} rows/s "
                          f"{result['cpu_seconds_per_million']:6.2f} CPU s/M  read back {result['read_back']}",
                          file=sys.stderr, flush=True)
                    if sink not in best or result["rows_per_second"] > best[sink]["rows_per_second"]:
                        best[sink] = result
    finally:
        spark.stop()
    elapsed = time.monotonic() - started

    spark_version = pyspark.__version__
    connector = connector_version()
    mismatch = ("" if connector == spark_version else
                f" on Spark {spark_version}: Maven Central served no {spark_version} connector when "
                "benchmarks/spark-kafka/pom.xml was pinned")
    uses = f", spark-sql-kafka-0-10 {connector}{mismatch}" if "kafka" in sinks else ""
    header = (f"Machine: {os.cpu_count()} CPUs ({cpu_model()}), Python {platform.python_version()}, "
              f"pyspark {spark_version}"
              f"{uses}. Broker: {broker_name}. Master {args.master}, "
              f"{args.data} rows ({args.rows:,}), {args.partitions} topic partitions, "
              f"{args.input_partitions or 'default'} Spark tasks, kafka.batch.size {args.batch_size}, "
              f"an untimed warm-up run of {warmup_rows:,} rows per sink"
              + (f" and {args.prime_rows:,} rows right before each timed run" if args.prime_rows > 0 else "")
              + f", best of {args.repeat} interleaved runs. Run took {elapsed:.0f} s.")
    ours = best.get("sparkafka")
    lines = [header, "",
             "| sink | rows/s | seconds | CPU s / M rows (Spark JVM + Python workers) | records read back "
             "| sparkafka / sink (rows/s) |",
             "|---|---:|---:|---:|---:|---:|"]
    failed = False
    for sink in sinks:
        r = best[sink]
        ratio = f"{ours['rows_per_second'] / r['rows_per_second']:.2f}x" if ours and r is not ours else ""
        read_back = "-" if r["read_back"] is None else f"{r['read_back']:,}"
        if r["read_back"] is not None and r["read_back"] != args.rows:
            failed = True
            read_back += f" (expected {args.rows:,})"
        lines.append(f"| {sink} | {r['rows_per_second']:,.0f} | {r['seconds']:.2f} | "
                     f"{r['cpu_seconds_per_million']:.2f} | {read_back} | {ratio} |")
    floor = best.get("python-noop")
    noop = best.get("noop")
    if ours and floor and noop:
        lines += ["", f"Python data source floor (python-noop: Spark builds the rows, converts them to Arrow and hands "
                      f"them to the Python workers, which drop them): {floor['rows_per_second']:,.0f} rows/s = "
                      f"{floor['rows_per_second'] / noop['rows_per_second']:.2f}x noop; sparkafka = "
                      f"{ours['rows_per_second'] / floor['rows_per_second']:.2f}x python-noop, "
                      f"{ours['rows_per_second'] / noop['rows_per_second']:.2f}x noop (target >= 0.6x noop); "
                      f"CPU s / M rows above noop: python-noop "
                      f"{floor['cpu_seconds_per_million'] - noop['cpu_seconds_per_million']:.2f}, sparkafka "
                      f"{ours['cpu_seconds_per_million'] - noop['cpu_seconds_per_million']:.2f} (without the broker's)"]
    eo = best.get("sparkafka-eo")
    if ours and eo:
        lines += ["", f"Exactly-once (sparkafka-eo) / at-least-once (sparkafka), best runs: "
                      f"{eo['rows_per_second'] / ours['rows_per_second']:.2f}x the rows/s "
                      f"({eo['seconds']:.2f} s against {ours['seconds']:.2f} s), "
                      f"{eo['cpu_seconds_per_million'] / ours['cpu_seconds_per_million']:.2f}x the CPU per row; "
                      "per round: " + ", ".join(
                          f"{e['seconds'] / a['seconds']:.2f}x the time"
                          for e, a in zip([r for r in runs if r["sink"] == "sparkafka-eo"],
                                          [r for r in runs if r["sink"] == "sparkafka"], strict=True))]
    pure = best.get("sparkafka-py")
    if ours and pure:
        lines += ["", f"Pure Python (sparkafka-py, SPARKAFKA_NO_ACCEL=1 in its Python workers): "
                      f"{pure['rows_per_second'] / ours['rows_per_second']:.2f}x the accelerated sink's rows/s "
                      f"(target >= 0.5x), {pure['cpu_seconds_per_million'] / ours['cpu_seconds_per_million']:.2f}x "
                      "its CPU per row"]
    text = "\n".join(lines)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"header": header, "best": best, "runs": runs}, f, indent=1)
    if chart(best, header, os.path.join(args.out, "sinks.png")):
        print(f"\nchart: {os.path.relpath(os.path.join(args.out, 'sinks.png'), ROOT)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
