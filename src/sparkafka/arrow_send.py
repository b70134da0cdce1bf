"""Send the rows of an Arrow record batch as Kafka records (the bulk path used by the Spark sink).

How it works: ``plan_columns`` is the single place that checks column types; it takes an Arrow schema
(the Spark sink converts its Spark schema to Arrow and calls it on the driver) and returns a
``ColumnPlan`` naming the columns to read, with the same contract as Spark's Kafka sink:

- ``value``: required, string or binary (a null value is a tombstone);
- ``key``: optional, string or binary;
- ``topic``: optional string column, used when no fixed topic is given (a fixed topic overrides it,
  as Spark's ``topic`` option does); one of the two must exist;
- ``partition``: optional integer column (null = let the producer's partitioner choose);
- ``headers``: optional ``list<struct<key: string, value: binary>>`` (string header values are accepted).

``send_arrow`` then checks the batch's values (no null topic, legal topic names, no negative or
out-of-range partition, no null header key) before it submits anything, so a bad batch sends
nothing. It converts column-wise (strings become bytes by a zero-copy cast to binary, then one
``to_pylist()`` per column) and calls ``producer.send`` once per row. The returned
``ArrowSendResult`` is a completion handle: ``poll()`` folds finished futures into a
``DeliveryReport`` (counts, bytes, first error and per-partition offset ranges) and releases them;
``wait()`` blocks until every record is acknowledged or failed. Only ``send``, ``flush`` and
``partitions_for`` of the producer are used, so the implementation can later move into the
producer without changing this interface.
"""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka._types import TopicPartition
from sparkafka.errors import InvalidRecordInputError, InvalidTopicNameError, KafkaTimeoutError

__all__ = [
    "ArrowSendResult",
    "ColumnPlan",
    "DeliveryReport",
    "OffsetRange",
    "ProducerLike",
    "check_rows",
    "plan_columns",
    "send_arrow",
]

_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
_HeaderList = list[tuple[str, "bytes | None"]]


class RecordMetadataLike(Protocol):
    """What ``send_arrow`` reads from an acknowledged record's metadata."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...


class SendFuture(Protocol):
    """The future returned by ``producer.send``."""

    def done(self) -> bool: ...

    def result(self, timeout: float | None = None) -> Any: ...


class ProducerLike(Protocol):
    """The part of ``KafkaProducer`` that ``send_arrow`` uses."""

    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp: int | None = None, headers: Sequence[tuple[str, bytes | None]] | None = None,
             callback: Any = None) -> Any: ...

    def flush(self, timeout: float | None = None) -> None: ...

    def partitions_for(self, topic: str) -> list[int]: ...


# ------------------------------------------------------------------------------------------ schema


@dataclass(frozen=True)
class ColumnPlan:
    """Which columns of a batch feed which part of a record (``None`` = not used)."""

    value: str
    key: str | None = None
    topic: str | None = None
    """The fixed topic; when set, ``topic_column`` is ignored."""
    topic_column: str | None = None
    partition: str | None = None
    headers: str | None = None


def _is_text(t: pa.DataType) -> bool:
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _is_bytes(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t))


def _unwrap(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _text_or_bytes(t: pa.DataType) -> bool:
    t = _unwrap(t)
    return _is_text(t) or _is_bytes(t)


def _headers_ok(t: pa.DataType) -> bool:
    if not (pa.types.is_list(t) or pa.types.is_large_list(t)):
        return False
    item = t.value_type
    if not pa.types.is_struct(item) or item.num_fields != 2:
        return False
    k = item.get_field_index("key")
    v = item.get_field_index("value")
    if k < 0 or v < 0:
        return False
    return _is_text(_unwrap(item.field(k).type)) and _text_or_bytes(item.field(v).type)


_HEADERS_TYPE = "array<struct<key: string, value: binary>>"


def _wrong_type(column: str, t: pa.DataType, wanted: str) -> InvalidRecordInputError:
    return InvalidRecordInputError(f"column {column!r} has type {t}; the Kafka sink needs {wanted}")


def plan_columns(
    schema: pa.Schema,
    *,
    topic: str | None = None,
    value_column: str = "value",
    key_column: str | None = "key",
    topic_column: str | None = "topic",
    partition_column: str | None = "partition",
    headers_column: str | None = "headers",
) -> ColumnPlan:
    """Check column types against the Kafka sink's contract and name the columns to read.

    Optional columns that are absent are simply not used; other columns are ignored.
    Raises ``InvalidRecordInputError`` naming the column and the type it needs, or
    ``InvalidTopicNameError`` for a bad fixed topic.
    """
    names = set(schema.names)

    def field_type(name: str | None) -> pa.DataType | None:
        if name is None or name not in names:
            return None
        return schema.field(name).type

    vt = field_type(value_column)
    if vt is None:
        raise InvalidRecordInputError(
            f"the input has no {value_column!r} column (columns: {', '.join(schema.names) or 'none'}); "
            "the Kafka sink needs a string or binary value column")
    if not _text_or_bytes(vt):
        raise _wrong_type(value_column, vt, "string or binary")
    kt = field_type(key_column)
    if kt is not None and not _text_or_bytes(kt):
        raise _wrong_type(str(key_column), kt, "string or binary")
    tt = field_type(topic_column)
    if tt is not None and not _is_text(_unwrap(tt)):
        raise _wrong_type(str(topic_column), tt, "string")
    pt = field_type(partition_column)
    if pt is not None and not pa.types.is_integer(pt):
        raise _wrong_type(str(partition_column), pt, "int")
    ht = field_type(headers_column)
    if ht is not None and not _headers_ok(ht):
        raise _wrong_type(str(headers_column), ht, _HEADERS_TYPE)
    if topic is not None:
        check_topic_name(topic, "the topic option")
    elif tt is None:
        raise InvalidRecordInputError(
            "no topic: set the 'topic' option or add a string "
            f"{topic_column or 'topic'!r} column")
    return ColumnPlan(
        value=value_column,
        key=key_column if kt is not None else None,
        topic=topic,
        topic_column=topic_column if topic is None else None,
        partition=partition_column if pt is not None else None,
        headers=headers_column if ht is not None else None,
    )


def check_topic_name(topic: object, where: str) -> str:
    """Kafka's topic-name rule: 1-249 of ``[a-zA-Z0-9._-]``, not ``.`` or ``..``."""
    if not isinstance(topic, str) or topic in (".", "..") or not _LEGAL_TOPIC.match(topic):
        raise InvalidTopicNameError(
            f"invalid topic name {topic!r} in {where}: it must be 1 to 249 characters of ASCII "
            "letters, digits, '.', '_' or '-', and not '.' or '..'")
    return topic


# ------------------------------------------------------------------------------------------ values


def _plain(arr: pa.Array) -> pa.Array:
    return arr.dictionary_decode() if pa.types.is_dictionary(arr.type) else arr


def _as_binary(arr: pa.Array) -> pa.Array:
    """The same bytes as a binary array (zero-copy for string and large_string)."""
    arr = _plain(arr)
    t = arr.type
    if pa.types.is_string(t):
        return arr.cast(pa.binary())
    if pa.types.is_large_string(t):
        return arr.cast(pa.large_binary())
    if pa.types.is_string_view(t) or pa.types.is_binary_view(t):
        return arr.cast(pa.large_binary())
    return arr


def _first_null(arr: pa.Array) -> int:
    valid = arr.is_valid().to_pylist()
    return int(valid.index(False))


def _topics(plan: ColumnPlan, batch: pa.RecordBatch) -> tuple[str | None, list[str] | None]:
    """``(single_topic, None)`` when every row goes to one topic, else ``(None, per_row_topics)``."""
    if plan.topic is not None:
        return plan.topic, None
    assert plan.topic_column is not None
    col = _plain(batch.column(plan.topic_column))
    if col.null_count:
        raise InvalidRecordInputError(
            f"row {_first_null(col)} of the batch has a null {plan.topic_column!r} and no 'topic' option "
            "is set")
    unique = pc.unique(col).to_pylist()
    for name in unique:
        check_topic_name(name, f"column {plan.topic_column!r}")
    if len(unique) == 1:
        return str(unique[0]), None
    return None, col.to_pylist()


def check_rows(producer: ProducerLike | None, plan: ColumnPlan, batch: pa.RecordBatch) -> None:
    """Check the values of a batch (everything ``send_arrow`` checks before sending).

    Raises ``InvalidRecordInputError`` / ``InvalidTopicNameError`` naming the column and row. With a
    producer, explicit partitions are also checked against each topic's partition count.
    """
    _check_rows(producer, plan, batch)


def _check_rows(producer: ProducerLike | None, plan: ColumnPlan,
                batch: pa.RecordBatch) -> tuple[str | None, list[str] | None]:
    single, per_row = _topics(plan, batch)
    if plan.partition is not None:
        _check_partitions(producer, plan.partition, batch.column(plan.partition), single, per_row)
    if plan.headers is not None:
        col = batch.column(plan.headers)
        flat = col.flatten()
        keys = flat.field(flat.type.get_field_index("key"))
        if len(flat) and (flat.null_count or keys.null_count):
            raise InvalidRecordInputError(
                f"column {plan.headers!r} has a header with a null key; header keys must be strings")
    return single, per_row


def _check_partitions(producer: ProducerLike | None, column: str, col: pa.Array, single: str | None,
                      per_row: list[str] | None) -> None:
    if col.null_count == len(col):
        return
    low = pc.min(col).as_py()
    if low < 0:
        raise InvalidRecordInputError(
            f"column {column!r} has partition {low} at row {col.to_pylist().index(low)}; "
            "partitions are >= 0 (or null to let the partitioner choose)")
    if producer is None:
        return
    if single is not None:
        highs = {single: pc.max(col).as_py()}
    else:
        assert per_row is not None
        highs = {}
        for t, p in zip(per_row, col.to_pylist()):
            if p is not None and p > highs.get(t, -1):
                highs[t] = p
    for t, high in highs.items():
        if high is None:
            continue
        count = len(producer.partitions_for(t))
        if high >= count:
            raise InvalidRecordInputError(
                f"column {column!r} has partition {high} for topic {t!r}, which has {count} partitions "
                f"(0..{count - 1})")


def _bytes_list(arr: pa.Array) -> list[bytes | None]:
    out: list[bytes | None] = _as_binary(arr).to_pylist()
    return out


def _headers_list(col: pa.Array) -> list[_HeaderList | None]:
    flat = col.flatten()  # struct array of every header, in row order (sliced to this array)
    st = flat.type
    keys = flat.field(st.get_field_index("key"))
    values = flat.field(st.get_field_index("value"))
    pairs = list(zip(_plain(keys).to_pylist(), _bytes_list(values)))
    lengths = pc.list_value_length(col).to_pylist()
    out: list[_HeaderList | None] = []
    append = out.append
    start = 0
    for n in lengths:
        if n is None:
            append(None)
        elif n == 0:
            append([])
        else:
            end = start + n
            append(pairs[start:end])
            start = end
    return out


def _payload_bytes(arr: pa.Array) -> int:
    total = pc.sum(pc.binary_length(_as_binary(arr))).as_py()
    return int(total or 0)


# ------------------------------------------------------------------------------------------ results


@dataclass(frozen=True)
class OffsetRange:
    """The offsets acknowledged for one topic-partition."""

    first: int
    last: int
    count: int


class DeliveryReport:
    """What happened to a set of records: counts, bytes, offset ranges and the first error."""

    __slots__ = ("_ranges", "acknowledged", "bytes", "errors", "failed", "first_error", "records")

    def __init__(self) -> None:
        self.records = 0
        """Records submitted."""
        self.acknowledged = 0
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

    def add_ack(self, topic: str, partition: int, offset: int) -> None:
        self.acknowledged += 1
        if offset < 0:  # acks=0: the broker does not say where the record went
            return
        r = self._ranges.get((topic, partition))
        if r is None:
            self._ranges[(topic, partition)] = [offset, offset, 1]
            return
        if offset < r[0]:
            r[0] = offset
        elif offset > r[1]:
            r[1] = offset
        r[2] += 1

    def add_error(self, exc: BaseException) -> None:
        self.failed += 1
        if self.first_error is None:
            self.first_error = exc
        name = type(exc).__name__
        self.errors[name] = self.errors.get(name, 0) + 1

    def merge(self, other: DeliveryReport) -> None:
        self.records += other.records
        self.acknowledged += other.acknowledged
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
    """Completion handle for the records of one ``send_arrow`` call."""

    __slots__ = ("_futures", "_next", "_report")

    def __init__(self, futures: list[SendFuture], payload_bytes: int) -> None:
        self._futures: list[SendFuture] | None = futures
        self._next = 0
        self._report = DeliveryReport()
        self._report.records = len(futures)
        self._report.bytes = payload_bytes

    @property
    def records(self) -> int:
        return self._report.records

    @property
    def report(self) -> DeliveryReport:
        """The report so far (complete once ``done()`` is true)."""
        return self._report

    def _consume(self, future: SendFuture) -> None:
        try:
            md = future.result(0)
        except BaseException as exc:  # the future's own error (a delivery failure)
            self._report.add_error(exc)
        else:
            self._report.add_ack(md.topic, md.partition, md.offset)

    def poll(self) -> bool:
        """Fold finished futures (in send order) into the report; True once all are finished."""
        futures = self._futures
        if futures is None:
            return True
        i, n = self._next, len(futures)
        while i < n:
            f = futures[i]
            if not f.done():
                break
            self._consume(f)
            i += 1
        self._next = i
        if i == n:
            self._futures = None
            return True
        return False

    def done(self) -> bool:
        return self.poll()

    def wait(self, timeout: float | None = None) -> DeliveryReport:
        """Block until every record is acknowledged or failed; never raises for delivery errors
        (read ``report.failed`` / ``first_error``). Raises ``KafkaTimeoutError`` after ``timeout`` s."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.poll():
            assert self._futures is not None
            f = self._futures[self._next]
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                f.result(remaining)
            except BaseException:  # delivery errors are collected by poll(); timeouts checked below
                pass
            if not f.done():
                raise KafkaTimeoutError(
                    f"{self._report.records - self._report.acknowledged - self._report.failed} records "
                    f"still not acknowledged after {timeout}s")
        return self._report


# ------------------------------------------------------------------------------------------ send


def send_arrow(
    producer: ProducerLike,
    topic: str | None,
    batch: pa.RecordBatch,
    *,
    value_column: str = "value",
    key_column: str | None = "key",
    topic_column: str | None = "topic",
    partition_column: str | None = "partition",
    headers_column: str | None = "headers",
) -> ArrowSendResult:
    """Send every row of ``batch`` through ``producer.send`` and return a completion handle.

    ``topic`` (if not None) overrides the topic column. Column types and then the batch's values
    are checked before the first record is submitted. Exceptions raised by ``producer.send`` itself
    (closed producer, memory not available within ``max.block.ms``) propagate; records submitted
    before them stay in flight.
    """
    plan = plan_columns(batch.schema, topic=topic, value_column=value_column, key_column=key_column,
                        topic_column=topic_column, partition_column=partition_column,
                        headers_column=headers_column)
    return send_planned(producer, plan, batch)


def send_planned(producer: ProducerLike, plan: ColumnPlan, batch: pa.RecordBatch) -> ArrowSendResult:
    """``send_arrow`` with a plan already made by ``plan_columns`` (for many batches of one schema)."""
    n = batch.num_rows
    if n == 0:
        return ArrowSendResult([], 0)
    single, per_row = _check_rows(producer, plan, batch)
    value_col = batch.column(plan.value)
    values = _bytes_list(value_col)
    size = _payload_bytes(value_col)
    keys: Iterable[bytes | None]
    if plan.key is not None:
        key_col = batch.column(plan.key)
        keys = _bytes_list(key_col)
        size += _payload_bytes(key_col)
    else:
        keys = itertools.repeat(None, n)
    send = producer.send
    futures: list[SendFuture]
    if plan.partition is None and plan.headers is None and single is not None:
        futures = [send(single, value=v, key=k) for v, k in zip(values, keys)]
        return ArrowSendResult(futures, size)
    topics: Iterable[str] = per_row if per_row is not None else itertools.repeat(str(single), n)
    parts: Iterable[int | None] = (batch.column(plan.partition).to_pylist() if plan.partition
                                   else itertools.repeat(None, n))
    headers: Iterable[_HeaderList | None]
    if plan.headers is not None:
        hcol = batch.column(plan.headers)
        headers = _headers_list(hcol)
        flat = hcol.flatten()
        st = flat.type
        size += _payload_bytes(flat.field(st.get_field_index("key")))
        size += _payload_bytes(flat.field(st.get_field_index("value")))
    else:
        headers = itertools.repeat(None, n)
    futures = [send(t, value=v, key=k, partition=p, headers=h)
               for t, v, k, p, h in zip(topics, values, keys, parts, headers)]
    return ArrowSendResult(futures, size)


def iter_slices(batch: pa.RecordBatch, rows: int) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into zero-copy slices of at most ``rows`` rows."""
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)
