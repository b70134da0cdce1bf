"""The sink's task body and its batch and streaming Arrow writers.

How it works: Spark pickles a writer built on the driver (options and column plan already
validated) and calls ``write(iterator of pyarrow.RecordBatch)`` once per task in an executor's
Python worker. ``write_partition`` leases the process's cached producer for the config, hands each
Arrow batch to ``send_planned`` (values checked per batch before any of its rows is sent), folds
finished futures into a ``DeliveryReport`` as it goes so memory stays bounded, then ``flush()``es
and waits for every record before returning. Any failed record fails the task (the producer is
evicted and the first error is chained) so that Spark retries it; once a failure is known the task
stops reading its input, as Spark's Kafka sink does; a retried task sends its whole
partition again, so records of a failed attempt that did reach Kafka appear twice: the guarantee is
at-least-once. ``commit``/``abort`` run on the driver and log a ``WriteSummary``.

Exactly-once (``sparkafka.guarantee=exactly_once``): the task builds its own transactional producer
(``transactional.id`` from the sink id, the Spark partition and the attempt: ``exactly_once.transactional_id``),
initializes it, sends the same way, flushes and does not commit; the message carries the open transaction
for the driver's ``ExactlyOnceSink``, which commits every task's transaction or none. A task without rows
opens nothing; a failing task aborts its transaction before it raises. The producer is closed at the end
of the task (closing leaves the transaction open); a later micro-batch's task re-initializes the same id.
The driver builds the writer after finishing what a dead driver left (``ExactlyOnceSink.recover``); a
batch write whose sink id was committed by an earlier run sends nothing.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from sparkafka.errors import InvalidRecordInputError, KafkaError
from sparkafka.producer.arrow.report import ArrowSendResult, DeliveryReport
from sparkafka.producer.arrow.send import ColumnPlan, ProducerLike, send_planned
from sparkafka.producer.txn_commit import TransactionHandle
from sparkafka.spark.commit import SparkafkaCommitMessage, WriteSummary
from sparkafka.spark.decision_log import SinkTransaction
from sparkafka.spark.exactly_once import BATCH_WRITE, BATCH_WRITE_QUERY, ExactlyOnceSink, transactional_id
from sparkafka.spark.options import (
    EXACTLY_ONCE,
    FAIL_FIRST_ATTEMPT_OPTION,
    KILL_FIRST_ATTEMPT_OPTION,
    STALL_FIRST_ATTEMPT_OPTION,
    SUMMARY_PATH_OPTION,
    SinkOptions,
)
from sparkafka.spark.producer_cache import ProducerCache, shared_cache

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["InjectedTaskFailure", "SparkafkaBatchWriter", "SparkafkaStreamWriter", "write_partition"]

log = logging.getLogger("sparkafka.spark")


class InjectedTaskFailure(RuntimeError):
    """Raised by the ``sparkafka.fault.fail.first.attempt.after.records`` test option."""


def _task_identity() -> tuple[int, int, int | None, str | None]:
    """``(partition_id, attempt, streaming_batch_id, query_id)`` of the running Spark task (0, 0, None,
    None outside Spark)."""
    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0, None, None
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    query = ctx.getLocalProperty("sql.streaming.queryId")
    return ctx.partitionId(), ctx.attemptNumber(), int(batch) if batch else None, query or None


def _drain(pending: deque[ArrowSendResult], report: DeliveryReport) -> None:
    while pending and pending[0].poll():
        report.merge(pending.popleft().report)


def _send_all(producer: ProducerLike, plan: ColumnPlan, batches: Iterator[pa.RecordBatch], options: SinkOptions,
              partition_id: int, attempt: int) -> tuple[int, DeliveryReport]:
    """Send every batch, flush and wait; returns (rows, report). The fault options act on attempt 0."""
    fail_after = options.fail_first_attempt_after if attempt == 0 else None
    kill_after = options.kill_first_attempt_after if attempt == 0 else None
    stop_after = fail_after if fail_after is not None else kill_after
    report = DeliveryReport()
    pending: deque[ArrowSendResult] = deque()
    rows = 0
    for batch in batches:
        n = batch.num_rows
        if stop_after is not None and rows + n >= stop_after:
            pending.append(send_planned(producer, plan, batch.slice(0, stop_after - rows)))
            producer.flush()
            for result in pending:
                result.wait()
            if fail_after is None:
                log.warning("%s: task %d attempt %d exits its Python worker after %d records",
                            KILL_FIRST_ATTEMPT_OPTION, partition_id, attempt, stop_after)
                os._exit(17)  # as a killed executor: no cleanup, no abort
            raise InjectedTaskFailure(
                f"injected failure of task {partition_id} attempt {attempt} after {fail_after} records "
                f"({FAIL_FIRST_ATTEMPT_OPTION})")
        rows += n
        result = send_planned(producer, plan, batch)
        pending.append(result)
        _drain(pending, report)
        if report.failed or result.report.failed or (pending and pending[0].report.failed):
            # A record already failed, so the task will fail: stop reading its input (as Spark's
            # Kafka sink does) instead of waiting up to max.block.ms per batch while Kafka is away.
            break
    producer.flush()
    while pending:
        report.merge(pending.popleft().wait())
    if attempt == 0 and partition_id == options.stall_first_attempt_of:
        _stall(options, partition_id)
    return rows, report


def _stall(options: SinkOptions, partition_id: int) -> None:
    """The stall fault: a straggler whose records are all sent (and, under exactly-once, whose transaction is
    open); Spark kills it once a speculative copy of the task succeeded."""
    log.warning("%s: task %d attempt 0 sent its records and now sleeps %d ms", STALL_FIRST_ATTEMPT_OPTION,
                partition_id, options.stall_first_attempt_ms)
    time.sleep(options.stall_first_attempt_ms / 1000)


def _failed(report: DeliveryReport, partition_id: int, attempt: int) -> KafkaError:
    kinds = ", ".join(f"{n} {name}" for name, n in sorted(report.errors.items()))
    exc = KafkaError(
        f"task {partition_id} (attempt {attempt}): {report.failed} of {report.records} records "
        f"failed ({kinds}); failing the task so Spark retries it. First error: {report.first_error}")
    exc.__cause__ = report.first_error
    return exc


def _message(report: DeliveryReport, rows: int, started: float, partition_id: int, attempt: int,
             batch_id: int | None, transaction: SinkTransaction | None = None,
             query_id: str | None = None) -> SparkafkaCommitMessage:
    offsets = tuple((t, p, r.first, r.last, r.count) for (t, p), r in report.offset_ranges().items())
    return SparkafkaCommitMessage(
        partition_id=partition_id, attempt=attempt, rows=rows, acknowledged=report.acknowledged,
        bytes=report.bytes, seconds=round(time.monotonic() - started, 3), offsets=offsets,
        batch_id=batch_id, pid=os.getpid(), transaction=transaction, query_id=query_id)


def write_partition(options: SinkOptions, plan: ColumnPlan, batches: Iterator[pa.RecordBatch], *,
                    cache: ProducerCache | None = None) -> SparkafkaCommitMessage:
    """Send every row of one task's batches, flush, and report; raises if any record failed."""
    if options.exactly_once:
        return write_partition_transactional(options, plan, batches)
    partition_id, attempt, batch_id, _ = _task_identity()
    cache = cache if cache is not None else shared_cache()
    started = time.monotonic()
    key, producer = cache.acquire(options.producer_config, options.idle_timeout_ms)
    try:
        rows, report = _send_all(producer, plan, batches, options, partition_id, attempt)
    except (InvalidRecordInputError, InjectedTaskFailure):
        raise
    except KafkaError:
        cache.evict(key, producer)
        raise
    finally:
        cache.release(key, producer)
    if report.failed:
        cache.evict(key, producer)
        raise _failed(report, partition_id, attempt)
    return _message(report, rows, started, partition_id, attempt, batch_id)


def _new_producer(config: dict[str, str]) -> Any:
    from sparkafka.producer.producer import KafkaProducer

    return KafkaProducer(config)


def write_partition_transactional(
        options: SinkOptions, plan: ColumnPlan, batches: Iterator[pa.RecordBatch], *, factory: Any = _new_producer,
        task: tuple[int, int, int | None, str | None] | None = None) -> SparkafkaCommitMessage:
    """Exactly-once task body: send every row inside a transaction left open for the driver to commit.
    ``task``: (Spark partition, attempt, batch id, query id) instead of the running task's (for tests)."""
    partition_id, attempt, batch_id, query_id = task if task is not None else _task_identity()
    started = time.monotonic()
    assert options.sink_id is not None, "the driver sets the sink id of an exactly-once write"
    first = next((b for b in batches if b.num_rows), None)  # a task of empty batches has no rows either
    if first is None or options.skip_write:
        return _message(DeliveryReport(), 0, started, partition_id, attempt, batch_id, None, query_id)
    txn_id = transactional_id(options.sink_id, partition_id, attempt)
    producer = factory(options.transactional_config(txn_id))
    try:
        producer.init_transactions()
        producer.begin_transaction()
        rows, report = _send_all(producer, plan, _chain(first, batches), options, partition_id, attempt)
        if report.failed:
            raise _failed(report, partition_id, attempt)
        handle = TransactionHandle.of(producer.transaction_info())
    except BaseException:
        _abort_quietly(producer, txn_id)
        producer.close(10)
        raise
    # close(0) leaves the transaction open for the driver (any other close aborts it, as Java's); nothing
    # is left to send: every record was acknowledged
    producer.close(0)
    topic_partitions = tuple(sorted(report.offset_ranges()))
    txn = SinkTransaction(handle, partition_id, attempt, report.acknowledged, topic_partitions)
    return _message(report, rows, started, partition_id, attempt, batch_id, txn, query_id)


def _chain(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    yield first
    yield from rest


def _abort_quietly(producer: Any, txn_id: str) -> None:
    try:
        producer.abort_transaction(10)
    except Exception:  # the task fails anyway; the driver's sweep or the broker's timeout ends it
        log.warning("task transaction %r: abort after a failure did not complete", txn_id, exc_info=True)


def _write_summary(summary: WriteSummary, path: str) -> None:
    """Append the write's summary to ``sparkafka.summary.path``; a failure (checked writable when the write
    began: a full disk, a removed directory) is logged, not raised: the write's records are in Kafka (or its
    abort is done), and failing the write would make a re-run send them again."""
    try:
        summary.append_to(path)
    except OSError:
        log.error("could not append the write's summary to %s=%r: %s", SUMMARY_PATH_OPTION, path,
                  summary.describe(), exc_info=True)


def _commit(options: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    if options.exactly_once:
        outcome = ExactlyOnceSink(options).commit(BATCH_WRITE if batch_id is None else batch_id, messages,
                                                  BATCH_WRITE_QUERY if batch_id is None else None)
        summary = WriteSummary.from_messages(messages, outcome.status, batch_id, guarantee=EXACTLY_ONCE,
                                             transactions=outcome.transactions)
    else:
        summary = WriteSummary.from_messages(messages, "committed", batch_id)
    log.info("%s", summary.describe())
    if options.summary_path:
        _write_summary(summary, options.summary_path)


def _abort(options: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    if options.exactly_once:
        outcome = ExactlyOnceSink(options).abort(BATCH_WRITE if batch_id is None else batch_id, messages,
                                                 BATCH_WRITE_QUERY if batch_id is None else None)
        summary = WriteSummary.from_messages(messages, outcome.status, batch_id, guarantee=EXACTLY_ONCE,
                                             transactions=outcome.transactions)
        log.warning("%s", summary.describe())
        if options.summary_path:
            _write_summary(summary, options.summary_path)
        return
    summary = WriteSummary.from_messages(messages, "aborted", batch_id)
    log.warning(
        "sparkafka write aborted%s: %d of %d tasks failed or were cancelled (a stopped query cancels its "
        "running micro-batch); the %d tasks that completed left %d records in Kafka (%s). Kafka writes "
        "cannot be undone: re-running the write duplicates them (at-least-once).",
        f" (micro-batch {batch_id})" if batch_id is not None else "", summary.failed_tasks, summary.tasks,
        summary.tasks - summary.failed_tasks, summary.acknowledged,
        ", ".join(f"{tp}=[{r[0]}..{r[1]}]" for tp, r in summary.partitions.items()) or "no offsets")
    if options.summary_path:
        _write_summary(summary, options.summary_path)


class SparkafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("sparkafka")``: one Arrow write per task, summary on the driver."""

    def __init__(self, options: SinkOptions, plan: ColumnPlan) -> None:
        self.options = options
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.options, self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _commit(self.options, messages, None)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _abort(self.options, messages, None)


class SparkafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("sparkafka")``: the same task body for every micro-batch."""

    def __init__(self, options: SinkOptions, plan: ColumnPlan) -> None:
        self.options = options
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return write_partition(self.options, self.plan, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _commit(self.options, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _abort(self.options, messages, batchId)
