"""The exactly-once sink's driver protocol on Apache Kafka, without a Spark session.

How it works: "tasks" are ``write_partition_transactional`` calls given their Spark partition and attempt;
they leave real transactions open, exactly as in an executor. ``ExactlyOnceSink`` then commits or aborts
them through the decision log and the transaction finisher; confluent-kafka reads the topic back at
``isolation.level=read_committed``. Covered here: a repeated commit and a re-run batch are skipped, an
abort after the commit point finishes the commit, a transaction the broker timed out before the commit
point fails the write with nothing visible, and a new query reusing a sink id is refused. The decision
log finds a sink's latest decision behind hundreds of other sinks' records.
"""

from __future__ import annotations

import collections
import uuid
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from sparkafka import errors
from sparkafka.producer.arrow.send import plan_columns
from sparkafka.producer.txn_commit import TransactionFinisher
from sparkafka.spark.commit import SparkafkaCommitMessage
from sparkafka.spark.datasource import SparkafkaDataSource
from sparkafka.spark.decision_log import ABORTED, COMMITTED, PREPARED, Decision, DecisionLog
from sparkafka.spark.exactly_once import BATCH_WRITE, BATCH_WRITE_QUERY, ExactlyOnceSink
from sparkafka.spark.options import SinkOptions
from sparkafka.spark.writer import write_partition_transactional
from support.consume import consume_all, create_topic
from support.kafka_cluster import KafkaCluster


@pytest.fixture(params=["kafka", "kafka_tv1"])
def cluster(request: pytest.FixtureRequest) -> KafkaCluster:
    node: KafkaCluster = request.getfixturevalue(request.param)
    return node


def _options(node: KafkaCluster, topic: str, sink_id: str, **extra: str) -> SinkOptions:
    return SinkOptions.parse({"kafka.bootstrap.servers": node.bootstrap, "topic": topic, "kafka.linger.ms": "5",
                              "sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": sink_id, **extra})


def _rows(tag: str, count: int) -> Iterator[pa.RecordBatch]:
    keys = [f"{tag}-{n}" for n in range(count)]
    yield pa.record_batch([pa.array(keys), pa.array(keys)], names=["key", "value"])


def _task(options: SinkOptions, tag: str, count: int, partition: int, attempt: int = 0, batch: int | None = None,
          query: str | None = None) -> SparkafkaCommitMessage:
    batches = list(_rows(tag, count))
    plan = plan_columns(batches[0].schema, topic=options.topic)
    return write_partition_transactional(options, plan, iter(batches), task=(partition, attempt, batch, query))


def _committed(node: KafkaCluster, topic: str, expected: int | None = None) -> collections.Counter[bytes]:
    records = consume_all(node.bootstrap, topic, expected_count=expected, timeout=60, isolation_level="read_committed")
    return collections.Counter(r.key or b"" for r in records)


def _latest(node: KafkaCluster, sink_id: str) -> Decision:
    with DecisionLog({"bootstrap.servers": node.bootstrap}) as log:
        decision = log.latest(sink_id)
    assert decision is not None
    return decision


def test_a_repeated_commit_and_a_rerun_batch_write_nothing_twice(kafka: KafkaCluster) -> None:
    topic, sink_id = f"eod-rerun-{uuid.uuid4().hex[:8]}", f"rerun-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 2)
    options = _options(kafka, topic, sink_id)
    sink = ExactlyOnceSink(options)
    first = [_task(options, "a", 300, 0, batch=0), _task(options, "b", 200, 1, batch=0), None]
    assert sink.commit(0, first).status == "committed"
    assert sink.commit(0, first).status == "skipped"  # Spark may call commit again for the same batch
    # the batch re-run after a restart: same ids, new transactions, aborted by the commit
    rerun = [_task(options, "a", 300, 0, batch=0), _task(options, "b", 200, 1, batch=0)]
    assert sink.commit(0, rerun).status == "skipped"
    assert sink.commit(1, [_task(options, "c", 100, 0, batch=1)]).status == "committed"
    keys = _committed(kafka, topic, 600)
    assert set(keys.values()) == {1} and len(keys) == 600
    decision = _latest(kafka, sink_id)
    assert (decision.state, decision.batch, decision.last_committed) == (COMMITTED, 1, 1)
    with TransactionFinisher({"bootstrap.servers": kafka.bootstrap}) as finisher:
        assert finisher.list_open(f"sparkafka/{sink_id}/") == []


def test_abort_after_the_commit_point_finishes_the_commit(kafka: KafkaCluster) -> None:
    topic, sink_id = f"eod-prepared-{uuid.uuid4().hex[:8]}", f"prepared-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 2)
    options = _options(kafka, topic, sink_id)
    messages = [_task(options, "a", 250, 0), _task(options, "b", 150, 1)]
    txns = tuple(m.transaction for m in messages if m.transaction is not None)
    # a driver that recorded the commit point and died before any EndTxn
    with DecisionLog(options.driver_config()) as log:
        log.record(Decision(sink_id, 0, PREPARED, None, txns))
    # an orphan of a losing attempt, open on the same topic: the commit sweeps it
    _task(options, "orphan", 50, 1, attempt=1)
    outcome = ExactlyOnceSink(options).abort(0, messages)
    assert (outcome.status, outcome.transactions) == ("committed", 2)
    keys = _committed(kafka, topic, 400)
    assert set(keys.values()) == {1} and {k.split(b"-")[0] for k in keys} == {b"a", b"b"} and len(keys) == 400
    assert _latest(kafka, sink_id).state == COMMITTED
    with TransactionFinisher({"bootstrap.servers": kafka.bootstrap}) as finisher:
        assert finisher.list_open(f"sparkafka/{sink_id}/") == []


def test_a_transaction_timed_out_before_the_commit_point_fails_the_write(cluster: KafkaCluster) -> None:
    topic, sink_id = f"eod-timeout-{uuid.uuid4().hex[:8]}", f"timeout-{uuid.uuid4().hex[:8]}"
    create_topic(cluster.bootstrap, topic, 2)
    short = _options(cluster, topic, sink_id, **{"kafka.transaction.timeout.ms": "1500"})
    messages = [_task(short, "a", 100, 0), _task(_options(cluster, topic, sink_id), "b", 100, 1)]
    expired = messages[0].transaction
    assert expired is not None
    with TransactionFinisher({"bootstrap.servers": cluster.bootstrap}) as finisher:
        # the coordinator aborts it 1.5 s after it started (it checks every second on these nodes)
        for _ in range(300):
            if finisher.describe([expired.handle.transactional_id])[expired.handle.transactional_id].state != "Ongoing":
                break
            finisher.admin.client.poll(100, finisher.admin.client.clock.monotonic_ms())
    with pytest.raises(errors.TransactionLostError) as lost:
        ExactlyOnceSink(short).commit(0, messages)
    text = str(lost.value)
    assert "1 of 2 task transactions were aborted by the broker before the driver could commit" in text
    assert f"Spark partition 0 attempt 0 (100 records to {topic}-" in text
    assert "kafka.transaction.timeout.ms is 1500 ms" in text and "transaction.max.timeout.ms" in text
    assert "Nothing of this write was committed" in text
    assert _committed(cluster, topic) == collections.Counter()
    assert _latest(cluster, sink_id).state == ABORTED


def test_a_new_query_reusing_a_sink_id_is_refused(kafka: KafkaCluster) -> None:
    topic, sink_id = f"eod-query-{uuid.uuid4().hex[:8]}", f"query-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 1)
    options = _options(kafka, topic, sink_id)
    sink = ExactlyOnceSink(options)
    assert sink.commit(0, [_task(options, "a", 10, 0, batch=0, query="q-1")]).status == "committed"
    with pytest.raises(errors.ConfigError, match=r"already committed batches up to 0 for streaming query q-1.*q-2"):
        sink.commit(0, [_task(options, "b", 10, 0, batch=0, query="q-2")])
    assert set(_committed(kafka, topic, 10)) == {b"a-%d" % n for n in range(10)}


def test_the_sink_keeps_its_query_id_through_batches_without_task_messages(kafka: KafkaCluster) -> None:
    """A micro-batch whose tasks were all cancelled (Spark's abort gets ``[None]``) or that had no task
    records no query id of its own; the decision keeps the sink's, so a new query reusing the sink id is
    still refused instead of having its first batches skipped as written. A batch write with that sink id
    is refused too."""
    topic, sink_id = f"eod-keep-{uuid.uuid4().hex[:8]}", f"keep-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 1)
    options = _options(kafka, topic, sink_id)
    sink = ExactlyOnceSink(options)
    assert sink.commit(0, [_task(options, "a", 10, 0, batch=0, query="q-1")]).status == "committed"
    assert sink.abort(1, [None]).status == "aborted"
    assert _latest(kafka, sink_id).query_id == "q-1"
    assert sink.commit(2, []).status == "committed"
    assert _latest(kafka, sink_id).query_id == "q-1"
    with pytest.raises(errors.ConfigError, match=r"already committed batches up to 2 for streaming query q-1.*q-2"):
        sink.commit(0, [_task(options, "b", 10, 0, batch=0, query="q-2")])
    running = [_task(options, "c", 10, 0, batch=3, query="q-1")]  # the query's next batch, not committed yet
    source = SparkafkaDataSource({"kafka.bootstrap.servers": kafka.bootstrap, "topic": topic,
                                  "sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": sink_id})
    schema = StructType([StructField("key", StringType()), StructField("value", StringType())])
    with pytest.raises(errors.ConfigError, match=r"belongs to streaming query q-1"):
        source.writer(schema, False)
    assert sink.commit(3, running).status == "committed"  # refused before sweeping: its transaction is intact
    assert set(_committed(kafka, topic, 20)) == {b"%s-%d" % (t, n) for t in (b"a", b"c") for n in range(10)}


def test_a_streaming_query_cannot_reuse_a_batch_writes_sink_id(kafka: KafkaCluster) -> None:
    """A batch write's decisions record ``BATCH_WRITE_QUERY``: a streaming query reusing the sink id is
    refused at its batch 0 instead of having it skipped as written by the batch write; the batch write
    itself, run again, is still recognised as done (its writer sends nothing)."""
    topic, sink_id = f"eod-bw-{uuid.uuid4().hex[:8]}", f"bw-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 1)
    options = _options(kafka, topic, sink_id)
    sink = ExactlyOnceSink(options)
    assert sink.commit(BATCH_WRITE, [_task(options, "a", 10, 0)], BATCH_WRITE_QUERY).status == "committed"
    assert _latest(kafka, sink_id).query_id == BATCH_WRITE_QUERY
    with pytest.raises(errors.ConfigError, match=r"up to 0 for a batch write, and this is query q-1 at batch 0"):
        sink.commit(0, [_task(options, "b", 10, 0, batch=0, query="q-1")])
    source = SparkafkaDataSource({"kafka.bootstrap.servers": kafka.bootstrap, "topic": topic,
                                  "sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": sink_id})
    schema = StructType([StructField("key", StringType()), StructField("value", StringType())])
    assert source.writer(schema, False).options.skip_write
    assert set(_committed(kafka, topic, 10)) == {b"a-%d" % n for n in range(10)}


def test_a_task_without_rows_opens_no_transaction(kafka: KafkaCluster) -> None:
    topic, sink_id = f"eod-empty-{uuid.uuid4().hex[:8]}", f"empty-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap, topic, 1)
    options = _options(kafka, topic, sink_id)
    plan = plan_columns(pa.schema([("key", pa.string()), ("value", pa.string())]), topic=topic)
    made: list[Any] = []
    message = write_partition_transactional(options, plan, iter([]), factory=made.append, task=(0, 0, None, None))
    assert message.transaction is None and made == []
    empty = pa.record_batch([pa.array([], pa.string()), pa.array([], pa.string())], names=["key", "value"])
    message = write_partition_transactional(options, plan, iter([empty, empty]), factory=made.append,
                                            task=(0, 0, None, None))
    assert message.transaction is None and made == []  # only empty batches: no rows, no transaction
    assert ExactlyOnceSink(options).commit(0, [message]).status == "committed"
    assert _latest(kafka, sink_id).transactions == ()


def test_the_decision_log_finds_a_sink_behind_other_sinks(kafka: KafkaCluster) -> None:
    topic = f"eod-log-{uuid.uuid4().hex[:8]}"  # a log of its own: created on the first record
    config = {"bootstrap.servers": kafka.bootstrap}
    with DecisionLog(config, topic) as log:
        assert log.latest("mine") is None  # no topic yet: nothing recorded, nothing created
        log.record(Decision("mine", 0, COMMITTED, 0))
        log.record(Decision("mine", 1, PREPARED, 0))
        for n in range(400):  # other sinks write after it: the reader looks further back window by window
            log.record(Decision(f"other-{n % 7}", n, COMMITTED, n))
    with DecisionLog(config, topic) as log:
        mine = log.latest("mine")
        assert mine is not None and (mine.batch, mine.state, mine.last_committed) == (1, PREPARED, 0)
        assert mine.written_ms > 0
        other = log.latest("other-3")
        assert other is not None and other.batch == 395
        assert log.latest("nobody") is None


def test_a_broker_without_the_transaction_admin_apis_is_refused_before_any_task(tansu: Any) -> None:
    """Tansu answers neither DescribeTransactions nor ListTransactions: a streaming query ran its tasks and
    died at its first commit saying only "Writing job failed" (found by a Spark sink review), a batch write
    named a bare api key. recover(), which writer() and streamWriter() call first, now says what is needed."""
    options = SinkOptions.parse({"kafka.bootstrap.servers": tansu.bootstrap_servers, "topic": "t",
                                 "sparkafka.guarantee": "exactly_once", "sparkafka.sink.id": "no-admin-apis"})
    with pytest.raises(errors.ConfigError, match=r"sparkafka.guarantee=exactly_once needs a broker that answers "
                                                 r"DescribeTransactions and ListTransactions") as info:
        ExactlyOnceSink(options).recover(sweep=False)
    assert info.value.key == "sparkafka.guarantee"
