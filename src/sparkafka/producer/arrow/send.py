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
nothing, and hands the columns of each topic to ``producer.send_columns``: the producer's bulk
path (``bulk.py``), which partitions and encodes whole columns and appends them to the accumulator
without a Python object per row. The returned ``ArrowSendResult`` (``report.py``) is a completion
handle over the batches the rows went to.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka._topic import validate_topic_name
from sparkafka.errors import InvalidRecordInputError, InvalidTopicNameError
from sparkafka.producer.arrow.bulk import check_record_sizes
from sparkafka.producer.arrow.report import ArrowSendResult
from sparkafka.producer.arrow.tails import as_large_binary, column_buffers, decode_dictionary, encode_tails

if TYPE_CHECKING:
    from sparkafka.producer.arrow.bulk import BulkAppend

__all__ = [
    "ColumnPlan",
    "ProducerLike",
    "check_rows",
    "iter_slices",
    "plan_columns",
    "send_arrow",
    "send_planned",
]



class ProducerLike(Protocol):
    """The part of ``KafkaProducer`` that ``send_arrow`` uses."""

    def send_columns(self, topic: str, values: pa.Array, keys: pa.Array | None = None,
                     headers: pa.Array | None = None, partitions: pa.Array | None = None) -> BulkAppend: ...

    def flush(self, timeout: float | None = None) -> None: ...

    def partitions_for(self, topic: str) -> list[int]: ...

    @property
    def record_limit(self) -> int:
        """The largest record batch accepted: ``min(max.request.size, buffer.memory)``."""
        ...


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
    for column in (value_column, key_column, topic_column, partition_column, headers_column):
        count = schema.names.count(column) if column is not None else 0
        if count > 1:
            raise InvalidRecordInputError(
                f"the input has {count} columns named {column!r}; the Kafka sink reads each of its columns "
                "from exactly one (rename or drop the others)")

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
    tt = field_type(topic_column) if topic is None else None  # a fixed topic overrides the column, unread
    if tt is not None and not _is_text(_unwrap(tt)):
        raise _wrong_type(str(topic_column), tt, "string")
    pt = field_type(partition_column)
    if pt is not None and not pa.types.is_integer(pt):
        raise _wrong_type(str(partition_column), pt, "int")
    ht = field_type(headers_column)
    if ht is not None and not _headers_ok(ht):
        raise _wrong_type(str(headers_column), ht, _HEADERS_TYPE)
    if topic is not None:
        validate_topic_name(topic, "the topic option")
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


# ------------------------------------------------------------------------------------------ values


def _plain(arr: pa.Array) -> pa.Array:
    return decode_dictionary(arr)


def _large(t: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    return t


def _without_views(arr: pa.Array) -> pa.Array:
    """``arr`` with string/binary views (also inside headers) cast to large types: Arrow has no
    ``take``/``filter``/``equal`` kernels for views."""
    t = arr.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_type
        fields = [pa.field(f.name, _large(f.type)) for f in item]
        if all(f.type == g.type for f, g in zip(item, fields)):
            return arr
        struct = pa.struct(fields)
        return arr.cast(pa.list_(struct) if pa.types.is_list(t) else pa.large_list(struct))
    large = _large(t)
    return arr if large == t else arr.cast(large)


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
        try:
            validate_topic_name(name)
        except InvalidTopicNameError:  # again, saying where: the column and the first row with that name
            row = col.to_pylist().index(name)
            validate_topic_name(name, f"column {plan.topic_column!r} at row {row}")
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
        # decoded: a dictionary's null_count misses null entries of its dictionary
        keys = _plain(flat.field(flat.type.get_field_index("key")))
        if len(flat) and (flat.null_count or keys.null_count):
            item = pc.and_(flat.is_valid(), keys.is_valid()).to_pylist().index(False)  # first null header/key
            row = bisect.bisect_right(col.offsets.to_pylist(), item + col.offsets[0].as_py()) - 1
            raise InvalidRecordInputError(
                f"column {plan.headers!r} has a header with a null key at row {row}; header keys must be "
                "strings")
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
            values = col.to_pylist()
            row = next(i for i, p in enumerate(values) if p == high and (per_row is None or per_row[i] == t))
            raise InvalidRecordInputError(
                f"column {column!r} has partition {high} for topic {t!r} at row {row}, which has {count} "
                f"partitions (0..{count - 1})")


def _payload_bytes(arr: pa.Array) -> int:
    """The bytes of the non-null items (from the offsets alone when there are no nulls)."""
    col = column_buffers(arr) if not arr.null_count and len(arr) else None
    if col is not None:
        offsets, _, _, first, wide = col
        view = memoryview(offsets).cast("B").cast("q" if wide else "i")
        return int(view[first + len(arr)] - view[first])
    total = pc.sum(pc.binary_length(as_large_binary(arr))).as_py()
    return int(total or 0)


# ------------------------------------------------------------------------------------------ send


def send_arrow(
    producer: ProducerLike,
    topic: str | None,
    batch: pa.RecordBatch | pa.Table,
    *,
    value_column: str = "value",
    key_column: str | None = "key",
    topic_column: str | None = "topic",
    partition_column: str | None = "partition",
    headers_column: str | None = "headers",
) -> ArrowSendResult:
    """Send every row of ``batch`` (a record batch, or a table: its chunks are joined) through the
    producer's bulk path and return a completion handle.

    ``topic`` (if not None) overrides the topic column. Column types and then the batch's values
    are checked before the first record is submitted. Errors before any row was appended (closed
    producer, metadata not available within ``max.block.ms``, a record too large) are raised; once
    rows were appended, rows that could not be (memory not available within ``max.block.ms``, the
    producer closed meanwhile, a ``partitioner.class`` that raised for a later topic of the topic column)
    are counted as failed in the report with that error.
    """
    batch = _one_batch(batch)
    plan = plan_columns(batch.schema, topic=topic, value_column=value_column, key_column=key_column,
                        topic_column=topic_column, partition_column=partition_column,
                        headers_column=headers_column)
    return send_planned(producer, plan, batch)


def _one_batch(batch: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    """A ``pa.Table`` (chunked columns) as one record batch; a record batch as it is."""
    if isinstance(batch, pa.RecordBatch):
        return batch
    if isinstance(batch, pa.Table):
        return pa.RecordBatch.from_arrays(
            [c.chunk(0) if c.num_chunks == 1 else pa.concat_arrays(c.chunks) if c.num_chunks
             else pa.nulls(0, c.type) for c in batch.columns], schema=batch.schema)
    raise InvalidRecordInputError(f"send_arrow needs a pyarrow RecordBatch or Table, got {type(batch).__name__}")


def send_planned(producer: ProducerLike, plan: ColumnPlan, batch: pa.RecordBatch | pa.Table) -> ArrowSendResult:
    """``send_arrow`` with a plan already made by ``plan_columns`` (for many batches of one schema)."""
    batch = _one_batch(batch)
    if batch.num_rows == 0:
        return ArrowSendResult()
    single, per_row = _check_rows(producer, plan, batch)
    size = _payload_bytes(batch.column(plan.value))
    if plan.key is not None:
        size += _payload_bytes(batch.column(plan.key))
    if plan.headers is not None:
        flat = batch.column(plan.headers).flatten()
        st = flat.type
        size += _payload_bytes(flat.field(st.get_field_index("key")))
        size += _payload_bytes(flat.field(st.get_field_index("value")))
    result = ArrowSendResult(size)
    groups: list[tuple[str, pa.RecordBatch]]
    if single is not None:
        groups = [(single, batch)]
    else:
        assert per_row is not None and plan.topic_column is not None
        column = _without_views(_plain(batch.column(plan.topic_column)))
        # one name once (the key and the value may be the same column)
        used = list(dict.fromkeys(name for name in (plan.value, plan.key, plan.headers, plan.partition)
                                  if name is not None))
        rows = pa.RecordBatch.from_arrays([_without_views(batch.column(name)) for name in used], names=used)
        # Size limits are checked for every row before the first topic's rows are sent.
        check_record_sizes(
            encode_tails(rows.column(plan.key) if plan.key is not None else None, rows.column(plan.value),
                         rows.column(plan.headers) if plan.headers is not None else None),
            f"topic column {plan.topic_column!r}", producer.record_limit)
        # Arrow's unique keeps the order of first appearance; its scalars (not Python strings) go to
        # equal, which would otherwise make pyarrow import pandas (buffers.py)
        groups = [(name.as_py(), rows.filter(pc.equal(column, name))) for name in pc.unique(column)]
    for index, (topic, rows) in enumerate(groups):
        try:
            appended = producer.send_columns(
                topic, rows.column(plan.value),
                keys=rows.column(plan.key) if plan.key is not None else None,
                headers=rows.column(plan.headers) if plan.headers is not None else None,
                partitions=rows.column(plan.partition) if plan.partition is not None else None)
        except Exception as exc:  # a KafkaError, or anything a partitioner.class raises
            if index == 0:
                raise  # nothing was submitted: the caller gets the error itself
            # an earlier topic's rows were appended and will be delivered: raising would lose the handle
            # on them (and a caller retrying the whole batch would send them twice)
            for _, rest in groups[index:]:
                result._add(rest.num_rows, None, exc)
            break
        result._add(rows.num_rows, appended)
        if appended.error is not None:
            for _, rest in groups[index + 1:]:
                result._add(rest.num_rows, None, appended.error)
            break
    return result


def iter_slices(batch: pa.RecordBatch, rows: int) -> Iterator[pa.RecordBatch]:
    """``batch`` cut into zero-copy slices of at most ``rows`` rows."""
    for start in range(0, batch.num_rows, rows):
        yield batch.slice(start, rows)
