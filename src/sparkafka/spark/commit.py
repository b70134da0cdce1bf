"""What a sink task reports to the driver, and the driver's summary of a whole write.

How it works: each successful task returns a ``SparkafkaCommitMessage`` (picklable): its partition
and attempt number, rows received, records acknowledged, payload bytes and, per Kafka
topic-partition, the first and last acknowledged offset and the record count. On the driver,
``WriteSummary.from_messages`` adds them up (``None`` entries are tasks that failed); the writer's
``commit`` logs it and ``abort`` logs what completed tasks left in Kafka. Under exactly-once a message
also carries the task's open ``SinkTransaction`` (and the streaming query id), which the driver commits
(``spark.exactly_once``); the summary says which guarantee was used and how many transactions the
driver committed (status ``skipped``: an earlier run had committed the write). With the
``sparkafka.summary.path`` option the summary is also appended to that file as one JSON line, which
is how the ``sparkafka pipeline`` command reads its numbers back.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from sparkafka.errors import ConfigError
from sparkafka.spark.decision_log import SinkTransaction
from sparkafka.spark.options import SUMMARY_PATH_OPTION

__all__ = ["PartitionOffsets", "SparkafkaCommitMessage", "WriteSummary", "read_summaries"]

PartitionOffsets = tuple[str, int, int, int, int]
"""``(topic, partition, first_offset, last_offset, count)``."""


@dataclass(frozen=True)
class SparkafkaCommitMessage(WriterCommitMessage):
    """One task's result."""

    partition_id: int
    attempt: int
    rows: int
    acknowledged: int
    bytes: int
    seconds: float
    offsets: tuple[PartitionOffsets, ...] = ()
    batch_id: int | None = None
    pid: int = 0
    transaction: SinkTransaction | None = None
    """Exactly-once: the task's open transaction (None: at-least-once, or the task had no rows)."""
    query_id: str | None = None
    """The streaming query's id (``sql.streaming.queryId``), None for a batch write."""


@dataclass(frozen=True)
class WriteSummary:
    """Totals of one write (a batch job, or one micro-batch of a streaming query)."""

    status: str
    """``committed``, ``aborted`` or ``skipped`` (exactly-once: committed by an earlier run)."""
    batch_id: int | None
    tasks: int
    failed_tasks: int
    rows: int
    acknowledged: int
    bytes: int
    task_seconds: float
    """Sum of the tasks' wall times."""
    retried_tasks: int
    """Successful tasks that were not their partition's first attempt."""
    partitions: dict[str, list[int]] = field(default_factory=dict)
    """``"topic:partition" -> [first_offset, last_offset, count]``."""
    guarantee: str = "at_least_once"
    transactions: int = 0
    """Exactly-once: transactions the driver committed (or, when aborted, aborted)."""

    @classmethod
    def from_messages(cls, messages: Sequence[Any], status: str, batch_id: int | None = None, *,
                      guarantee: str = "at_least_once", transactions: int = 0) -> WriteSummary:
        done = [m for m in messages if isinstance(m, SparkafkaCommitMessage)]
        partitions: dict[str, list[int]] = {}
        for m in done:
            for topic, partition, first, last, count in m.offsets:
                name = f"{topic}:{partition}"
                r = partitions.get(name)
                if r is None:
                    partitions[name] = [first, last, count]
                else:
                    r[0], r[1], r[2] = min(r[0], first), max(r[1], last), r[2] + count
        return cls(
            status=status,
            batch_id=batch_id,
            tasks=len(messages),
            failed_tasks=len(messages) - len(done),
            rows=sum(m.rows for m in done),
            acknowledged=sum(m.acknowledged for m in done),
            bytes=sum(m.bytes for m in done),
            task_seconds=round(sum(m.seconds for m in done), 3),
            retried_tasks=sum(1 for m in done if m.attempt > 0),
            partitions=dict(sorted(partitions.items(), key=lambda kv: _tp_sort_key(kv[0]))),
            guarantee=guarantee,
            transactions=transactions,
        )

    def describe(self) -> str:
        where = f" (micro-batch {self.batch_id})" if self.batch_id is not None else ""
        text = (f"sparkafka write {self.status}{where}: {self.acknowledged} records acknowledged "
                f"({self.bytes} bytes) from {self.rows} rows in {self.tasks} tasks")
        if self.failed_tasks:
            text += f", {self.failed_tasks} tasks failed"
        if self.retried_tasks:
            text += f", {self.retried_tasks} tasks succeeded on a retry"
        if self.guarantee == "exactly_once":
            text += ("; exactly-once: already committed by an earlier run, nothing written again"
                     if self.status == "skipped" else f"; exactly-once, {self.transactions} transactions {self.status}")
        if self.partitions:
            text += "; offsets " + ", ".join(f"{tp}=[{r[0]}..{r[1]}]x{r[2]}"
                                              for tp, r in self.partitions.items())
        return text

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> WriteSummary:
        data = json.loads(text)
        return cls(**data)

    @staticmethod
    def check_path(path: str) -> None:
        """A ConfigError now (on the driver, before any task runs) if ``path`` cannot be appended to: found at
        commit time, the error failed a write whose records were already in Kafka, and a re-run sent them
        again. Creates the file, empty, if it is missing (the summary would create it)."""
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
        except OSError as exc:
            raise ConfigError(f"{SUMMARY_PATH_OPTION} {path!r} cannot be appended to: {exc}",
                              SUMMARY_PATH_OPTION) from exc

    def append_to(self, path: str) -> None:
        """Append this summary as one JSON line (one ``write`` call, safe for concurrent appenders)."""
        line = (self.to_json() + "\n").encode()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)


def _tp_sort_key(name: str) -> tuple[str, int]:
    topic, _, partition = name.rpartition(":")
    return topic, int(partition)


def read_summaries(path: str) -> list[WriteSummary]:
    """Every summary appended to ``path`` (oldest first); empty if the file does not exist."""
    try:
        with open(path, encoding="utf-8") as f:
            return [WriteSummary.from_json(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []
