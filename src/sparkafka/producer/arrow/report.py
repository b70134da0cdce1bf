"""The completion handle and delivery report of ``send_arrow``: per-batch segments folded into counts.

How it works: the bulk path (``bulk.append_arrow``) returns one ``(batch result, first index, count)``
segment per batch a call's rows went to, instead of a future per record. ``ArrowSendResult`` keeps
those segments; ``poll()`` folds the finished ones, in order, into a ``DeliveryReport`` (counts, bytes,
first error and per-partition ``OffsetRange``s) and releases them, following a batch that was split
(MESSAGE_TOO_LARGE) record by record; ``wait()`` blocks on the oldest unfinished batch until every
record is acknowledged or failed. Rows that were never appended (memory not available in time, the
producer closed part way) are counted as failed with that error. Needs no ``pyarrow``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sparkafka._clock import timeout_seconds
from sparkafka._types import TopicPartition
from sparkafka.errors import KafkaTimeoutError

if TYPE_CHECKING:
    from sparkafka.producer.accumulator import BulkSegment
    from sparkafka.producer.arrow.bulk import BulkAppend
    from sparkafka.producer.future import ProduceRequestResult

__all__ = ["ArrowSendResult", "DeliveryReport", "OffsetRange"]


@dataclass(frozen=True)
class OffsetRange:
    """The offsets acknowledged for one topic-partition."""

    first: int
    last: int
    count: int


class DeliveryReport:
    """What happened to a set of records: counts, bytes, offset ranges and the first error."""

    __slots__ = ("_ranges", "acknowledged", "bytes", "errors", "failed", "first_error", "records", "without_offsets")

    def __init__(self) -> None:
        self.records = 0
        """Records submitted."""
        self.acknowledged = 0
        self.without_offsets = 0
        """Acknowledged records the broker gave no offset for (acks=0, or a resend it answered
        DUPLICATE_SEQUENCE_NUMBER: written before, offset unknown); not in ``offset_ranges()``."""
        self.failed = 0
        self.bytes = 0
        """Key, value and header bytes submitted."""
        self.first_error: BaseException | None = None
        self.errors: dict[str, int] = {}
        """Failed records by exception class name."""
        self._ranges: dict[TopicPartition, list[int]] = {}

    @property
    def complete(self) -> bool:
        return self.acknowledged + self.failed == self.records

    def offset_ranges(self) -> dict[TopicPartition, OffsetRange]:
        return {tp: OffsetRange(r[0], r[1], r[2]) for tp, r in sorted(self._ranges.items())}

    def add_acks(self, topic: str, partition: int, first_offset: int, count: int) -> None:
        """``count`` records acknowledged at consecutive offsets from ``first_offset`` (-1: unknown)."""
        self.acknowledged += count
        if first_offset < 0:  # acks=0 or a duplicate: the broker does not say where the records went
            self.without_offsets += count
            return
        last = first_offset + count - 1
        r = self._ranges.get((topic, partition))
        if r is None:
            self._ranges[(topic, partition)] = [first_offset, last, count]
            return
        if first_offset < r[0]:
            r[0] = first_offset
        if last > r[1]:
            r[1] = last
        r[2] += count

    def add_error(self, exc: BaseException) -> None:
        self.add_errors(exc, 1)

    def add_errors(self, exc: BaseException, count: int) -> None:
        """``count`` records failed with ``exc``."""
        self.failed += count
        if self.first_error is None:
            self.first_error = exc
        name = type(exc).__name__
        self.errors[name] = self.errors.get(name, 0) + count

    def merge(self, other: DeliveryReport) -> None:
        self.records += other.records
        self.acknowledged += other.acknowledged
        self.without_offsets += other.without_offsets
        self.failed += other.failed
        self.bytes += other.bytes
        if self.first_error is None:
            self.first_error = other.first_error
        for name, n in other.errors.items():
            self.errors[name] = self.errors.get(name, 0) + n
        for tp, (lo, hi, n) in other._ranges.items():
            r = self._ranges.get(tp)
            if r is None:
                self._ranges[tp] = [lo, hi, n]
            else:
                r[0] = min(r[0], lo)
                r[1] = max(r[1], hi)
                r[2] += n

    def __repr__(self) -> str:
        return (f"DeliveryReport(records={self.records}, acknowledged={self.acknowledged}, "
                f"failed={self.failed}, bytes={self.bytes}, partitions={len(self._ranges)})")


class ArrowSendResult:
    """Completion handle for the records of one ``send_arrow`` call: the segments of batches its rows
    went to (``(batch result, first index, count)``), folded into a ``DeliveryReport`` as they finish."""

    __slots__ = ("_next", "_report", "_segments")

    def __init__(self, payload_bytes: int = 0) -> None:
        self._segments: list[BulkSegment] = []
        self._next = 0
        self._report = DeliveryReport()
        self._report.bytes = payload_bytes

    def _add(self, rows: int, appended: BulkAppend | None, error: BaseException | None = None) -> None:
        """Count ``rows`` submitted: those in ``appended``'s segments are pending, the rest failed with
        ``appended.error`` (or ``error``)."""
        report = self._report
        report.records += rows
        if appended is not None:
            self._segments += appended.segments
            error = appended.error
            unsent = appended.unsent
        else:
            unsent = rows
        if unsent:
            assert error is not None
            report.add_errors(error, unsent)

    @property
    def records(self) -> int:
        return self._report.records

    @property
    def report(self) -> DeliveryReport:
        """The report so far (complete once ``done()`` is true)."""
        return self._report

    def _fold(self, segment: BulkSegment) -> bool:
        """Add a finished segment to the report; False (nothing added) if it is not finished."""
        result, first, count = segment
        report = self._report
        if result.redirect is not None:  # its batch was split (MESSAGE_TOO_LARGE): follow each record
            resolved = [result.resolve(first + j) for j in range(count)]
            if not all(r.completed for r, _ in resolved):
                return False
            for r, j in resolved:
                _fold_one(report, r, j)
            return True
        if not result.completed:
            return False
        if result.error is None and result.record_errors is None:
            base = result.base_offset
            report.add_acks(result.topic, result.partition, base + first if base >= 0 else -1, count)
        else:
            for j in range(first, first + count):
                _fold_one(report, result, j)
        return True

    def poll(self) -> bool:
        """Fold finished segments (in order) into the report; True once all are finished."""
        segments = self._segments
        i, n = self._next, len(segments)
        while i < n and self._fold(segments[i]):
            i += 1
        self._next = i
        if i == n:
            self._segments = []
            self._next = 0
            return True
        return False

    def done(self) -> bool:
        return self.poll()

    def wait(self, timeout: float | None = None) -> DeliveryReport:
        """Block until every record is acknowledged or failed; never raises for delivery errors
        (read ``report.failed`` / ``first_error``). Raises ``KafkaTimeoutError`` after ``timeout`` s."""
        timeout = timeout_seconds(timeout, "wait()", negative_ok=True)
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.poll():
            result = self._segments[self._next][0]
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not result.wait(remaining) and not self.poll():
                report = self._report
                raise KafkaTimeoutError(
                    f"{report.records - report.acknowledged - report.failed} records "
                    f"still not acknowledged after {timeout}s")
        return self._report


def _fold_one(report: DeliveryReport, result: ProduceRequestResult, index: int) -> None:
    error = result.error_for(index)
    if error is None:
        base = result.base_offset
        report.add_acks(result.topic, result.partition, base + index if base >= 0 else -1, 1)
    else:
        report.add_error(error)
