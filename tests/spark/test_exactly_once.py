"""Exactly-once batch writes in a real Spark session (local[2,4]) on Apache Kafka, both transaction protocols.

How it works: each test writes ``ROWS`` numbered rows (keys ``r<n>``) through the sink and reads the topic
back with confluent-kafka at ``isolation.level=read_committed``: every row must be there exactly once and
nothing else. Faults come from the sink's test options: a task's first attempt fails after sending part of
its rows (Spark retries it), or its Python worker exits at once (a killed executor: its transaction is
left open and the driver sweeps it), a Python UDF fails one partition on every attempt (the job fails after
the other tasks finished: nothing may be visible), or the driver's commit process exits after the commit
point (a second run with the same sink id must finish the commit). The same task-failure job in the
default at-least-once mode shows the duplicates, so the check can tell the two apart. Reading at
read_uncommitted shows that the failed attempts did write (and their records were aborted).
Speculative execution needs two hosts (Spark never starts a copy of a task on a host already running an
attempt of it): those tests run on a standalone cluster whose two one-core workers are on 127.0.0.2 and
127.0.0.3 (``support.spark_standalone``), submitting ``cluster_job.py`` with aggressive ``spark.speculation``
settings and the stall fault: the first attempt of one partition sends all its rows, then sleeps, so Spark
starts a speculative copy on the other host, which wins, and kills the straggler. The driver's log must show
that kill (two hosts), the summary and decision log the winning attempt 1, read_uncommitted the straggler's
rows (aborted), read_committed every row once; the at-least-once run of the same job has that partition twice.
``SPARKAFKA_EO_ROWS`` sets the row count (default 100000 to keep the suite fast; the issue's proof is
``SPARKAFKA_EO_ROWS=1000000``).
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkafka.producer.txn_commit import TransactionFinisher
from sparkafka.spark import read_summaries
from sparkafka.spark.decision_log import ABORTED, COMMITTED, DecisionLog
from sparkafka.spark.exactly_once import transactional_id
from support.consume import consume_all, create_topic
from support.kafka_cluster import KafkaCluster
from support.spark_standalone import StandaloneCluster

pytestmark = [pytest.mark.spark]

ROWS = int(os.environ.get("SPARKAFKA_EO_ROWS", "100000"))
TASKS = 4


@pytest.fixture(params=["kafka", "kafka_tv1"])
def cluster(request: pytest.FixtureRequest) -> KafkaCluster:
    node: KafkaCluster = request.getfixturevalue(request.param)
    return node


def _frame(spark: Any, rows: int = ROWS, fail_at: int | None = None) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    key = F.format_string("r%d", "id")
    if fail_at is not None:
        def fail_on(n: int) -> str:  # pickled by value: the workers cannot import this module
            if n == fail_at:
                raise ValueError(f"row {n} cannot be written")
            return f"r{n}"

        key = F.udf(fail_on, StringType(), useArrow=False)("id")
    return spark.range(0, rows, 1, TASKS).select(key.alias("key"), F.col("id").cast("string").alias("value"))


def _write(df: Any, node: KafkaCluster, topic: str, **options: str) -> None:
    writer = (df.write.format("sparkafka").mode("append").option("kafka.bootstrap.servers", node.bootstrap)
              .option("topic", topic).option("kafka.linger.ms", "20"))
    for name, value in options.items():
        writer = writer.option(name, value)
    writer.save()


def _exactly_once(sink_id: str, summary: Path, **extra: str) -> dict[str, str]:
    return {"sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": sink_id,
            "sparkafka.summary.path": str(summary), **extra}


def _committed_keys(node: KafkaCluster, topic: str, expected: int) -> collections.Counter[bytes]:
    records = consume_all(node.bootstrap, topic, expected_count=expected, timeout=90, isolation_level="read_committed")
    return collections.Counter(r.key or b"" for r in records)


def _assert_every_row_once(keys: collections.Counter[bytes], rows: int = ROWS) -> None:
    assert len(keys) == rows and set(keys.values()) == {1}, (len(keys), collections.Counter(keys.values()))
    assert set(keys) == {b"r%d" % n for n in range(rows)}


def test_failed_first_attempts_are_written_exactly_once(spark: Any, cluster: KafkaCluster, tmp_path: Path) -> None:
    topic, sink_id = f"eo-retry-{uuid.uuid4().hex[:8]}", f"retry-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    summary = tmp_path / "summary.jsonl"
    _write(_frame(spark), cluster, topic, **_exactly_once(
        sink_id, summary, **{"sparkafka.fault.fail.first.attempt.after.records": "3000"}))
    _assert_every_row_once(_committed_keys(cluster, topic, ROWS))
    # the failed attempts did send 3000 records each; their transactions were aborted
    everything = consume_all(cluster.bootstrap, topic, expected_count=ROWS + TASKS * 3000, timeout=90)
    assert len([r for r in everything if r.value is not None]) == ROWS + TASKS * 3000
    (s,) = read_summaries(str(summary))
    assert (s.status, s.guarantee, s.transactions, s.retried_tasks, s.acknowledged) == (
        "committed", "exactly_once", TASKS, TASKS, ROWS)
    with DecisionLog({"bootstrap.servers": cluster.bootstrap}) as log:
        decision = log.latest(sink_id)
    assert decision is not None and decision.state == COMMITTED and decision.last_committed == 0
    assert sorted(t.spark_partition for t in decision.transactions) == list(range(TASKS))
    assert all(t.attempt == 1 for t in decision.transactions)


def test_at_least_once_writes_the_failed_attempts_twice(spark: Any, kafka: KafkaCluster) -> None:
    topic = f"alo-retry-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 3)
    _write(_frame(spark), kafka, topic, **{"sparkafka.fault.fail.first.attempt.after.records": "3000"})
    keys = _committed_keys(kafka, topic, ROWS + TASKS * 3000)
    assert len(keys) == ROWS and sum(keys.values()) == ROWS + TASKS * 3000
    assert collections.Counter(keys.values()) == {1: ROWS - TASKS * 3000, 2: TASKS * 3000}


def test_a_killed_worker_leaves_an_open_transaction_that_the_driver_aborts(
        spark: Any, cluster: KafkaCluster, tmp_path: Path) -> None:
    topic, sink_id = f"eo-kill-{uuid.uuid4().hex[:8]}", f"kill-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    summary = tmp_path / "summary.jsonl"
    _write(_frame(spark), cluster, topic, **_exactly_once(
        sink_id, summary, **{"sparkafka.fault.kill.first.attempt.after.records": "2000"}))
    # read_committed reaches the end only if the killed attempts' transactions were aborted (else the
    # last stable offset stays behind them until transaction.timeout.ms, 15 minutes here)
    _assert_every_row_once(_committed_keys(cluster, topic, ROWS))
    (s,) = read_summaries(str(summary))
    assert (s.status, s.transactions, s.retried_tasks) == ("committed", TASKS, TASKS)


def test_a_failed_job_leaves_nothing_visible(spark: Any, cluster: KafkaCluster, tmp_path: Path) -> None:
    topic, sink_id = f"eo-fail-{uuid.uuid4().hex[:8]}", f"fail-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    summary = tmp_path / "summary.jsonl"
    with pytest.raises(Exception, match="cannot be written"):
        _write(_frame(spark, fail_at=ROWS - 10), cluster, topic, **_exactly_once(sink_id, summary))
    # the other tasks that finished before the job failed (all three, unless Spark cancelled one still
    # running on a loaded machine) wrote inside transactions left open until the driver aborted them
    (s,) = read_summaries(str(summary))
    assert s.status == "aborted" and s.failed_tasks >= 1 and s.transactions == TASKS - s.failed_tasks
    assert consume_all(cluster.bootstrap, topic, timeout=30, isolation_level="read_committed") == []
    written = consume_all(cluster.bootstrap, topic, timeout=30)
    assert len([r for r in written if r.value is not None]) >= s.transactions * (ROWS // TASKS)
    with DecisionLog({"bootstrap.servers": cluster.bootstrap}) as log:
        decision = log.latest(sink_id)
    assert decision is not None and (decision.state, decision.last_committed) == (ABORTED, None)


def test_a_driver_dead_after_the_commit_point_is_finished_by_the_next_run(
        spark: Any, cluster: KafkaCluster, tmp_path: Path) -> None:
    topic, sink_id = f"eo-driver-{uuid.uuid4().hex[:8]}", f"driver-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    summary = tmp_path / "summary.jsonl"
    # run 1: the commit process records PREPARED, commits one of the four transactions and dies
    with pytest.raises(Exception):  # noqa: B017 - Spark reports the dead Python process its own way
        _write(_frame(spark), cluster, topic, **_exactly_once(
            sink_id, summary, **{"sparkafka.fault.driver.exit.after.commits": "1"}))
    with DecisionLog({"bootstrap.servers": cluster.bootstrap}) as log:
        decision = log.latest(sink_id)
    assert decision is not None and decision.state == "PREPARED" and len(decision.transactions) == TASKS
    first = decision.transactions[0]
    # what the one committed transaction wrote is visible (read_committed stops at the first open one)
    visible = consume_all(cluster.bootstrap, topic, timeout=30, isolation_level="read_committed")
    assert len(visible) <= first.records
    # run 2, same sink id, same job: its driver finishes run 1's commit and sends nothing again
    _write(_frame(spark), cluster, topic, **_exactly_once(sink_id, summary))
    _assert_every_row_once(_committed_keys(cluster, topic, ROWS))
    (s,) = read_summaries(str(summary))
    assert (s.status, s.transactions, s.acknowledged) == ("skipped", 0, 0)
    with DecisionLog({"bootstrap.servers": cluster.bootstrap}) as log:
        decision = log.latest(sink_id)
    assert decision is not None and decision.state == COMMITTED and decision.lost == ()


# ------------------------------------------------------------------------------------------ streaming


def test_a_streaming_query_restarted_at_every_point_writes_each_row_once(
        spark: Any, cluster: KafkaCluster, tmp_path: Path) -> None:
    import json

    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    topic = f"eo-stream-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    src, checkpoint, marker = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "fail-now"
    src.mkdir()
    summary = tmp_path / "summary.jsonl"
    per_file = 600

    def add_file(index: int) -> None:
        lines = [json.dumps({"key": f"f{index}-{n}", "value": f"payload {index}/{n}"}) for n in range(per_file)]
        (src / f"part-{index}.json").write_text("\n".join(lines) + "\n")

    def run(**extra: str) -> BaseException | None:
        marked = str(marker)

        def fail_if_marked(key: str) -> str:  # pickled by value: the workers cannot import this module
            import os

            if key == "f3-599" and os.path.exists(marked):
                raise ValueError(f"row {key} cannot be written now")
            return key

        fail = F.udf(fail_if_marked, StringType(), useArrow=False)
        df = (spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", 1)
              .json(str(src)).repartition(3).select(fail("key").alias("key"), "value"))
        writer = (df.writeStream.format("sparkafka").option("kafka.bootstrap.servers", cluster.bootstrap)
                  .option("topic", topic).option("sparkafka.guarantee", "exactly_once")
                  .option("sparkafka.summary.path", str(summary)).option("checkpointLocation", str(checkpoint)))
        for name, value in extra.items():
            writer = writer.option(name, value)
        query = writer.trigger(availableNow=True).start()
        try:
            finished = query.awaitTermination(180)
        except Exception as exc:  # the query failed: Spark raises its StreamingQueryException here
            return exc
        assert finished, "the query did not process the available files in 180 s"
        error: BaseException | None = query.exception()
        return error

    def ok(**extra: str) -> bool:
        error = run(**extra)
        assert error is None, str(error)[:2000]
        return True

    def statuses() -> list[tuple[int | None, str]]:
        return [(s.batch_id, s.status) for s in read_summaries(str(summary))]

    for index in range(3):
        add_file(index)
    assert ok()
    assert statuses() == [(0, "committed"), (1, "committed"), (2, "committed")]

    # killed during the tasks: one task of batch 3 fails on every attempt, the others finished
    add_file(3)
    marker.touch()
    assert run() is not None
    assert statuses()[3:] == [(3, "aborted")]
    marker.unlink()

    # killed between the commit point and COMMITTED: batch 3 PREPARED, one of its transactions committed
    assert run(**{"sparkafka.fault.driver.exit.after.commits": "1"}) is not None
    assert len(statuses()) == 4

    # restarted: the driver finishes batch 3 before any task, Spark's re-run of batch 3 is skipped
    add_file(4)
    assert ok()
    assert statuses()[4:] == [(3, "skipped"), (4, "committed")]

    # killed after COMMITTED but before Spark's own commit log: batch 4 runs again and is skipped
    for name in ("4", ".4.crc"):  # Spark's commit log entry of batch 4 and its checksum
        (checkpoint / "commits" / name).unlink(missing_ok=True)
    add_file(5)
    assert ok()
    assert statuses()[6:] == [(4, "skipped"), (5, "committed")]

    records = consume_all(cluster.bootstrap, topic, expected_count=6 * per_file, timeout=90,
                          isolation_level="read_committed")
    keys = collections.Counter(r.key or b"" for r in records)
    assert set(keys.values()) == {1} and len(records) == 6 * per_file
    assert set(keys) == {f"f{i}-{n}".encode() for i in range(6) for n in range(per_file)}


def test_micro_batches_reuse_one_producer_id_per_task(spark: Any, cluster: KafkaCluster, tmp_path: Path) -> None:
    """Every micro-batch's task of Spark partition p initializes the same transactional id
    ``sparkafka/<sink id>/p/0``: the broker keeps one producer id per task, whose epoch rises by one per
    micro-batch (the task's InitProducerId; with Transactions V2 also the driver's EndTxn, KIP-890), and no
    other id of the sink appears."""
    import json

    topic, sink_id = f"eo-ids-{uuid.uuid4().hex[:8]}", f"ids-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    src, checkpoint = tmp_path / "in", tmp_path / "checkpoint"
    src.mkdir()
    partitions, per_file = 3, 300

    def add_file(index: int) -> None:
        lines = [json.dumps({"key": f"f{index}-{n}", "value": str(n)}) for n in range(per_file)]
        (src / f"part-{index}.json").write_text("\n".join(lines) + "\n")

    def run() -> None:
        df = (spark.readStream.schema("key string, value string").option("maxFilesPerTrigger", 1)
              .json(str(src)).repartition(partitions))
        query = (df.writeStream.format("sparkafka").option("kafka.bootstrap.servers", cluster.bootstrap)
                 .option("topic", topic).option("sparkafka.guarantee", "exactly_once")
                 .option("sparkafka.sink.id", sink_id).option("checkpointLocation", str(checkpoint))
                 .trigger(availableNow=True).start())
        assert query.awaitTermination(180), "the query did not process the available files in 180 s"
        assert query.exception() is None

    ids = [transactional_id(sink_id, p, a) for p in range(partitions) for a in range(2)]

    def describe() -> dict[str, tuple[int, int]]:
        with TransactionFinisher({"bootstrap.servers": cluster.bootstrap}) as finisher:
            return {t: (d.producer_id, d.producer_epoch) for t, d in finisher.describe(ids).items()
                    if d.state is not None}

    add_file(0)
    run()  # micro-batch 0
    before = describe()
    for index in range(1, 4):
        add_file(index)
    run()  # micro-batches 1, 2, 3 of the restarted query
    after = describe()
    first_attempts = {transactional_id(sink_id, p, 0) for p in range(partitions)}
    assert set(before) == set(after) == first_attempts  # no attempt-1 ids, nothing new per micro-batch
    bumps = 1 if cluster.features.get("transaction.version") == 1 else 2
    for tid in first_attempts:
        assert after[tid][0] == before[tid][0], (tid, before[tid], after[tid])  # the same producer id
        assert after[tid][1] - before[tid][1] == 3 * bumps, (tid, before[tid], after[tid])
    records = consume_all(cluster.bootstrap, topic, expected_count=4 * per_file, timeout=90,
                          isolation_level="read_committed")
    assert len(records) == 4 * per_file == len({r.key for r in records})


# ------------------------------------------------------------------------------------------ speculation

JOB = Path(__file__).resolve().parent / "cluster_job.py"
STALLED = 1
"""The Spark partition whose first attempt straggles."""
SPECULATION = {
    "spark.speculation": "true",
    "spark.speculation.interval": "100ms",
    "spark.speculation.quantile": "0.5",  # two of the four tasks finished
    "spark.speculation.multiplier": "1.5",
    "spark.speculation.minTaskRuntime": "1s",
    "spark.speculation.efficiency.enabled": "false",  # judge by run time alone
}
# TaskSetManager: "Killing attempt 0 for task 1.0 in stage 1.0 (TID 5) on 127.0.0.2 as the attempt 1 succeeded on
# 127.0.0.3"
_KILLED = re.compile(r"Killing attempt (\d+) for task (\d+)\.\d+ in stage \S+ \(TID \d+\) on (\S+) as the attempt "
                     r"(\d+) succeeded on (\S+)")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (no java on PATH and no JAVA_HOME)")
    spark_cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-speculation"),
                                      worker_hosts=("127.0.0.2", "127.0.0.3"))
    try:
        spark_cluster.start()
        yield spark_cluster
    finally:
        spark_cluster.stop()


def _speculative_job(standalone: StandaloneCluster, node: KafkaCluster, topic: str, work: Path,
                     **options: str) -> tuple[dict[str, Any], list[tuple[int, int, str, int, str]]]:
    """The cluster job with the straggler; returns its RESULT and the driver's kills of losing attempts."""
    # the executors run this venv's Python (sparkafka installed): shipping is test_cluster's subject
    conf = {**standalone.spark_conf(Path(sys.executable)), **SPECULATION}
    options = {"kafka.linger.ms": "20", "sparkafka.fault.stall.first.attempt.of.partition": str(STALLED),
               **options}
    args = ["--bootstrap", node.bootstrap, "--topic", topic, "--rows", str(ROWS), "--work", str(work),
            "--input-partitions", str(TASKS), *(f"--option={k}={v}" for k, v in options.items())]
    job = standalone.submit(f"speculation-{topic}", JOB, args, conf, result_file=work / "result.json")
    assert job.returncode == 0 and job.result is not None, f"job failed ({job.returncode}):\n{job.tail()}"
    kills = [(int(m[1]), int(m[2]), m[3], int(m[4]), m[5]) for m in _KILLED.finditer(job.log.read_text())]
    # the proof that Spark ran a speculative copy: the straggler, attempt 0 of STALLED on one host, was killed
    # because attempt 1 of the same task succeeded on the other
    assert any(lost == 0 and task == STALLED and won == 1 and lost_on != won_on
               for lost, task, lost_on, won, won_on in kills), f"no speculative win over the straggler: {kills}\n" \
        f"{job.tail()}"
    return job.result, kills


@pytest.mark.timeout(900)  # a spark-submit and, the first time, the cluster's start: minutes when busy
def test_speculative_attempts_are_written_exactly_once(standalone: StandaloneCluster, cluster: KafkaCluster,
                                                       tmp_path: Path) -> None:
    topic, sink_id = f"eo-spec-{uuid.uuid4().hex[:8]}", f"spec-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 3)
    result, kills = _speculative_job(standalone, cluster, topic, tmp_path,
                                     **{"sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": sink_id})
    (s,) = result["batch"]
    assert (s["status"], s["guarantee"], s["transactions"], s["acknowledged"]) == (
        "committed", "exactly_once", TASKS, ROWS), s
    assert s["retried_tasks"] == len({task for _, task, _, won, _ in kills if won > 0}) >= 1, (s, kills)
    with DecisionLog({"bootstrap.servers": cluster.bootstrap}) as log:
        decision = log.latest(sink_id)
    assert decision is not None and decision.state == COMMITTED
    assert {t.spark_partition: t.attempt for t in decision.transactions}[STALLED] == 1
    # read_committed: every row once (and reaching the end means no transaction of the write is left open)
    records = consume_all(cluster.bootstrap, topic, expected_count=ROWS, timeout=120, isolation_level="read_committed")
    keys = collections.Counter(r.key or b"" for r in records)
    assert len(records) == ROWS and set(keys.values()) == {1}
    assert set(keys) == {b"k%08d" % n for n in range(ROWS)}
    # the straggler did write its whole partition, in a transaction the driver aborted
    everything = consume_all(cluster.bootstrap, topic, expected_count=ROWS + ROWS // TASKS, timeout=120)
    assert len([r for r in everything if r.value is not None]) == ROWS + ROWS // TASKS
    straggler = transactional_id(sink_id, STALLED, 0)
    with TransactionFinisher({"bootstrap.servers": cluster.bootstrap}) as finisher:
        state = finisher.describe([straggler])[straggler].state
    assert state in ("CompleteAbort", "Empty"), state  # aborted, or fenced after the abort (InitProducerId)


@pytest.mark.timeout(900)  # a spark-submit and, the first time, the cluster's start: minutes when busy
def test_speculative_attempts_at_least_once_write_the_partition_twice(standalone: StandaloneCluster,
                                                                      kafka: KafkaCluster, tmp_path: Path) -> None:
    topic = f"alo-spec-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 3)
    result, _ = _speculative_job(standalone, kafka, topic, tmp_path)
    (s,) = result["batch"]
    assert (s["status"], s["retried_tasks"], s["acknowledged"]) == ("committed", 1, ROWS), s
    records = consume_all(kafka.bootstrap, topic, expected_count=ROWS + ROWS // TASKS, timeout=120)
    keys = collections.Counter(r.key or b"" for r in records)
    assert len(keys) == ROWS and collections.Counter(keys.values()) == {1: ROWS - ROWS // TASKS, 2: ROWS // TASKS}
