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
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from sparkafka.errors import InvalidRecordInputError, KafkaError
from sparkafka.producer.arrow.report import ArrowSendResult, DeliveryReport
from sparkafka.producer.arrow.send import ColumnPlan, send_planned
from sparkafka.spark.commit import SparkafkaCommitMessage, WriteSummary
from sparkafka.spark.options import FAIL_FIRST_ATTEMPT_OPTION, SinkOptions
from sparkafka.spark.producer_cache import ProducerCache, shared_cache

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["InjectedTaskFailure", "SparkafkaBatchWriter", "SparkafkaStreamWriter", "write_partition"]

log = logging.getLogger("sparkafka.spark")


class InjectedTaskFailure(RuntimeError):
    """Raised by the ``sparkafka.fault.fail.first.attempt.after.records`` test option."""


def _task_identity() -> tuple[int, int, int | None]:
    """``(partition_id, attempt, streaming_batch_id)`` of the running Spark task (0, 0, None outside)."""
    ctx = TaskContext.get()
    if ctx is None:
        return 0, 0, None
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return ctx.partitionId(), ctx.attemptNumber(), int(batch) if batch else None


def _drain(pending: deque[ArrowSendResult], report: DeliveryReport) -> None:
    while pending and pending[0].poll():
        report.merge(pending.popleft().report)


def write_partition(options: SinkOptions, plan: ColumnPlan, batches: Iterator[pa.RecordBatch], *,
                    cache: ProducerCache | None = None) -> SparkafkaCommitMessage:
    """Send every row of one task's batches, flush, and report; raises if any record failed."""
    partition_id, attempt, batch_id = _task_identity()
    fail_after = options.fail_first_attempt_after if attempt == 0 else None
    cache = cache if cache is not None else shared_cache()
    started = time.monotonic()
    report = DeliveryReport()
    pending: deque[ArrowSendResult] = deque()
    rows = 0
    key, producer = cache.acquire(options.producer_config, options.idle_timeout_ms)
    try:
        for batch in batches:
            n = batch.num_rows
            if fail_after is not None and rows + n >= fail_after:
                pending.append(send_planned(producer, plan, batch.slice(0, fail_after - rows)))
                producer.flush()
                for result in pending:
                    result.wait()
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
    except (InvalidRecordInputError, InjectedTaskFailure):
        raise
    except KafkaError:
        cache.evict(key, producer)
        raise
    finally:
        cache.release(key, producer)
    if report.failed:
        cache.evict(key, producer)
        kinds = ", ".join(f"{n} {name}" for name, n in sorted(report.errors.items()))
        raise KafkaError(
            f"task {partition_id} (attempt {attempt}): {report.failed} of {report.records} records "
            f"failed ({kinds}); failing the task so Spark retries it. First error: {report.first_error}"
        ) from report.first_error
    offsets = tuple((t, p, r.first, r.last, r.count) for (t, p), r in report.offset_ranges().items())
    return SparkafkaCommitMessage(
        partition_id=partition_id, attempt=attempt, rows=rows, acknowledged=report.acknowledged,
        bytes=report.bytes, seconds=round(time.monotonic() - started, 3), offsets=offsets,
        batch_id=batch_id, pid=os.getpid())


def _commit(options: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    summary = WriteSummary.from_messages(messages, "committed", batch_id)
    log.info("%s", summary.describe())
    if options.summary_path:
        summary.append_to(options.summary_path)


def _abort(options: SinkOptions, messages: list[WriterCommitMessage | None], batch_id: int | None) -> None:
    summary = WriteSummary.from_messages(messages, "aborted", batch_id)
    log.warning(
        "sparkafka write aborted%s: %d of %d tasks failed; the %d tasks that completed left %d records "
        "in Kafka (%s). Kafka writes cannot be undone: re-running the write duplicates them "
        "(at-least-once).",
        f" (micro-batch {batch_id})" if batch_id is not None else "", summary.failed_tasks, summary.tasks,
        summary.tasks - summary.failed_tasks, summary.acknowledged,
        ", ".join(f"{tp}=[{r[0]}..{r[1]}]" for tp, r in summary.partitions.items()) or "no offsets")
    if options.summary_path:
        summary.append_to(options.summary_path)


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
