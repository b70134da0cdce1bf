"""The bulk path: the rows of Arrow columns appended to the accumulator without a Python object per row.

How it works (``append_arrow``, for the rows of one topic; ``KafkaProducer.send_arrow`` is the caller):

1. **Encode.** ``tails.encode_tails`` turns key, value and headers columns into one
   ``large_binary`` array of record *tails* (everything after a record's offset delta) with Arrow kernels.
2. **Partition, column-wise** (``choose_partitions``): an explicit partition column wins; else, as in
   ``send()``, a custom partitioner is asked per row, or a key is hashed with murmur2 (in C straight
   from the Arrow buffers, or by Arrow kernels over the whole key column, ``key_hash``), identical to
   Java; rows left (no key, or ``partitioner.ignore.keys``) go to the KIP-794 sticky partitioner, which
   here switches partition every ``batch.size`` bytes of rows: each row's chunk number comes from the
   cumulative sum of the record sizes, and the topic's ``BuiltInPartitioner`` draws one partition per
   chunk (so adaptive load stats and unavailable partitions count as they do for ``send()``); as in
   ``send()``, its byte count and each switch happen under the queue lock of the partition being left,
   and a switch another thread made meanwhile is kept.
3. **Group.** A stable sort by partition puts each partition's rows next to each other in their original
   order: with the accelerator one counting sort that copies the tails (``_accel.group_tails``), else
   Arrow's ``value_counts``, ``sort_indices`` and one ``take`` of the tails; a batch that goes to one
   partition is not copied.
4. **Append.** ``RecordAccumulator.append_tails`` copies each partition's run into its batches (the
   open last batch, then new ones from the buffer pool, blocking up to ``max.block.ms`` in all); the Sender
   then sends them like any others: same idempotence, ordering, retries, timeouts and transactions.

The result is a ``BulkAppend``: one ``(batch result, first index, count)`` segment per batch touched
instead of a future per record, plus, if memory ran out or the producer closed part way, the error and
the number of rows not appended. Everything that can be checked is checked before the first append.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka._types import ClusterView
from sparkafka.accel import ACCEL
from sparkafka.errors import InvalidRecordInputError, KafkaError, RecordTooLargeError
from sparkafka.producer.accumulator import BulkSegment, RecordAccumulator
from sparkafka.producer.arrow.buffers import full, int32_array, int_scalar
from sparkafka.producer.arrow.key_hash import arrow_key_partitions
from sparkafka.producer.arrow.tails import as_large_binary, column_buffers, encode_tails, tail_buffers
from sparkafka.producer.partitioner import BuiltInPartitioner, Partitioner, StickyPartitionInfo
from sparkafka.record.layout import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD
from sparkafka.record.tails_vector import numpy_module

__all__ = ["BulkAppend", "append_arrow", "check_record_sizes", "choose_partitions", "key_partitions"]

QueueLock = Callable[[int], threading.Lock]
"""The lock of one of the topic's partition queues (``RecordAccumulator.queue_lock`` for the topic)."""
_c_partitions: Callable[..., bytearray] | None = getattr(ACCEL, "partitions_for_offsets", None)
_c_group_tails: Callable[..., tuple[bytes | None, bytearray | None, list[tuple[int, int, int]]] | None] | None = \
    getattr(ACCEL, "group_tails", None)
if getattr(ACCEL, "append_tails", None) is None:
    # the builder's pure-Python append_tails may hand large batches to numpy (record/tails_vector.py):
    # import it now, not under a partition queue's lock the first time a batch is large enough
    numpy_module()
_RECORD_PREFIX = 4
"""Typical bytes of a record before its tail (length, attributes, timestamp and offset deltas), for
the sticky partitioner's byte count."""
_INT32 = pa.int32()
_NO_PARTITION = int_scalar(-1, _INT32)
"""-1 as an int32 scalar (a Python -1 given to a kernel would make pyarrow import pandas: ``buffers``)."""


class BulkAppend(NamedTuple):
    segments: list[BulkSegment]
    """The rows appended, batch by batch (per partition in row order)."""
    unsent: int
    """Rows not appended because of ``error``."""
    error: KafkaError | None


def _has_nulls(arr: pa.Array) -> bool:
    """Whether some row may be null: a dictionary's ``null_count`` misses the null entries of its dictionary
    (an unused one only costs the sticky pass a look at every row)."""
    return bool(arr.null_count) or (pa.types.is_dictionary(arr.type) and bool(arr.dictionary.null_count))


def key_partitions(keys: pa.Array, num_partitions: int) -> pa.Array:
    """murmur2 partition of each key as an int32 array, -1 where the key is null."""
    if num_partitions < 1:
        raise InvalidRecordInputError(f"num_partitions must be >= 1, got {num_partitions}")
    if _c_partitions is not None:
        col = column_buffers(keys)
        if col is None:
            keys = as_large_binary(keys)
            col = column_buffers(keys)
            assert col is not None
        offsets, data, _, first, wide = col
        raw = _c_partitions(offsets, data, first, len(keys), num_partitions, wide)
        parts = pa.Array.from_buffers(pa.int32(), len(keys), [None, pa.py_buffer(raw)])
        if keys.null_count:
            parts = pc.if_else(keys.is_valid(), parts, _NO_PARTITION)
        return parts
    return arrow_key_partitions(as_large_binary(keys), num_partitions)


def _advance_sticky(partitioner: BuiltInPartitioner, info: StickyPartitionInfo, appended_bytes: int,
                    cluster: ClusterView, enable_switch: bool, queue_lock: QueueLock) -> StickyPartitionInfo:
    """Count ``appended_bytes`` on ``info``'s partition (switching if due) under that partition's queue
    lock, as ``send()`` does, unless another thread switched meanwhile; returns the current partition."""
    with queue_lock(info.partition):
        if not partitioner.is_partition_changed(info):
            partitioner.update_partition_info(info, appended_bytes, cluster, enable_switch)
    return partitioner.peek_current_partition_info(cluster)


def _sticky_partitions(parts: pa.Array, tails: pa.Array, partitioner: BuiltInPartitioner,
                       cluster: ClusterView, queue_lock: QueueLock) -> pa.Array:
    """``parts`` with every -1 replaced by the sticky partitioner's choice (see the module docstring)."""
    mask = pc.equal(parts, _NO_PARTITION)
    count = pc.sum(mask).as_py() or 0
    if not count:
        return parts
    lengths = pc.binary_length(tails)
    sizes = pc.add(lengths, int_scalar(_RECORD_PREFIX, lengths.type))
    every = count == len(parts)
    row_sizes = sizes if every else pc.filter(sizes, mask)
    ends = pc.cumulative_sum(row_sizes)
    starts = pc.subtract(ends, row_sizes)
    chunk_bytes = partitioner.sticky_batch_size
    info = partitioner.peek_current_partition_info(cluster)
    chunks = pc.divide(pc.add(starts, int_scalar(info.produced_bytes, starts.type)),
                       int_scalar(chunk_bytes, starts.type))
    last_chunk = int(chunks[-1].as_py())
    chosen = [info.partition]
    for _ in range(last_chunk):
        info = _advance_sticky(partitioner, info, max(0, chunk_bytes - info.produced_bytes), cluster, True,
                               queue_lock)
        chosen.append(info.partition)
    tail_bytes = int(ends[-1].as_py())
    if last_chunk:  # only the last chunk's bytes
        tail_bytes -= int(starts[pc.index(chunks, int_scalar(last_chunk, chunks.type)).as_py()].as_py())
    # The last chunk's bytes count towards the next switch (deferred until its batch is full, as in send()).
    _advance_sticky(partitioner, info, tail_bytes, cluster, False, queue_lock)
    sticky = pc.take(int32_array(chosen), chunks)
    return sticky if every else pc.replace_with_mask(parts, mask, sticky)


def choose_partitions(
    topic: str,
    num_partitions: int,
    tails: pa.Array,
    keys: pa.Array | None,
    values: pa.Array,
    partitions: pa.Array | None,
    *,
    custom: Partitioner | None,
    ignore_keys: bool,
    sticky: BuiltInPartitioner,
    cluster: ClusterView,
    queue_lock: QueueLock,
) -> pa.Array:
    """The partition of every row (int32, no nulls); the sticky partitioner advances as it is used,
    under the queue lock of its current partition (``queue_lock(partition)``), as in ``send()``."""
    n = len(tails)
    explicit = None
    if partitions is not None and partitions.null_count < n:
        low, high = pc.min_max(partitions).values()  # checked before the cast: it could overflow int32
        if low.as_py() < 0 or high.as_py() >= num_partitions:
            raise InvalidRecordInputError(
                f"partition column values must be in 0..{num_partitions - 1} for topic {topic!r} "
                f"(found {low.as_py()}..{high.as_py()})")
        explicit = pc.cast(partitions, pa.int32())
        if not explicit.null_count:
            return explicit
    if custom is not None:
        key_list = [None] * n if keys is None else as_large_binary(keys).to_pylist()
        value_list = as_large_binary(values).to_pylist()
        asked = explicit.is_null().to_pylist() if explicit is not None else None
        chosen: list[int] = []
        for i, (key, value) in enumerate(zip(key_list, value_list)):
            if asked is not None and not asked[i]:
                chosen.append(-1)  # an explicit partition: as in send(), the partitioner is not asked
                continue
            p = custom.partition(topic, key, key, value, value, cluster)  # rows are bytes: objects = bytes
            if type(p) is not int or not 0 <= p < num_partitions:
                raise InvalidRecordInputError(
                    f"the partitioner returned partition {p!r} for topic {topic!r}, which has "
                    f"{num_partitions} partitions")
            chosen.append(p)
        parts = int32_array(chosen)
    elif keys is not None and not ignore_keys:
        parts = key_partitions(keys, num_partitions)
        if explicit is None and not _has_nulls(keys):
            return parts  # every row has a key: the sticky partitioner has nothing to place
    else:
        parts = full(n, -1, _INT32)
    if explicit is not None:
        parts = pc.if_else(explicit.is_valid(), explicit, parts)
    return _sticky_partitions(parts, tails, sticky, cluster, queue_lock)


def check_record_sizes(tails: pa.Array, where: str, record_limit: int) -> None:
    """Raise ``RecordTooLargeError`` naming the first row whose record (tail plus the most a record and
    its batch can add) is larger than ``record_limit`` = ``min(max.request.size, buffer.memory)``."""
    if not len(tails):
        return
    lengths = pc.binary_length(tails)
    longest = int(pc.max(lengths).as_py())
    size = RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + longest
    if size > record_limit:
        row = pc.index(lengths, int_scalar(longest, lengths.type)).as_py()
        raise RecordTooLargeError(
            f"row {row} to {where} is about {size} bytes as a record batch, which is larger than the "
            f"limit of {record_limit} bytes (min of max.request.size and buffer.memory)")


def _groups(parts: pa.Array) -> tuple[pa.Array | None, list[tuple[int, int, int]]]:
    """``(stable order or None if one partition, [(partition, start, stop)] in that order)``."""
    low, high = pc.min_max(parts).values()
    if low.as_py() == high.as_py():
        return None, [(int(low.as_py()), 0, len(parts))]
    counts = pc.value_counts(parts)
    runs = sorted(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    groups = []
    start = 0
    for partition, count in runs:
        groups.append((int(partition), start, start + int(count)))
        start += int(count)
    return pc.sort_indices(parts), groups


def _int32_buffer(parts: pa.Array) -> memoryview:
    """The values of an int32 array without nulls, as bytes from its first row."""
    values = parts.buffers()[1]
    assert values is not None
    return memoryview(values)[parts.offset * 4:(parts.offset + len(parts)) * 4]


def append_arrow(
    accumulator: RecordAccumulator,
    topic: str,
    num_partitions: int,
    keys: pa.Array | None,
    values: pa.Array,
    headers: pa.Array | None,
    partitions: pa.Array | None,
    *,
    timestamp: int,
    deadline_ms: float,
    record_limit: int,
    custom: Partitioner | None,
    ignore_keys: bool,
    cluster: ClusterView,
    wakeup: Callable[[], None],
    partition_added: Callable[[int], None] | None = None,
) -> BulkAppend:
    """Append the rows (all for ``topic``) to the accumulator; see the module docstring.

    Waiting for memory ends at ``deadline_ms`` (the accumulator's clock): ``max.block.ms`` bounds the
    whole call, as it bounds one ``send()``. ``record_limit`` is ``min(max.request.size,
    buffer.memory)``: a row whose record could be larger raises ``RecordTooLargeError`` (naming the
    row) before anything is appended. ``partition_added`` is called with each partition before its
    first append (transactions add the partition)."""
    n = len(values)
    if not n:
        return BulkAppend([], 0, None)
    tails = encode_tails(keys, values, headers)
    check_record_sizes(tails, f"topic {topic!r}", record_limit)
    parts = choose_partitions(topic, num_partitions, tails, keys, values, partitions, custom=custom,
                              ignore_keys=ignore_keys, sticky=accumulator.built_in_partitioner(topic),
                              cluster=cluster, queue_lock=functools.partial(accumulator.queue_lock, topic))
    offsets, data, first = tail_buffers(tails)
    grouped = None
    if _c_group_tails is not None and parts.type == pa.int32() and not parts.null_count:
        # one counting sort in C (its docstring); None for a partition out of range: the general path
        grouped = _c_group_tails(offsets, data, first, n, _int32_buffer(parts), num_partitions)
    if grouped is not None:
        sorted_offsets, sorted_data, groups = grouped
        if sorted_offsets is not None and sorted_data is not None:
            offsets, data, first = memoryview(sorted_offsets).cast("q"), memoryview(sorted_data), 0
    else:
        order, groups = _groups(parts)
        if order is not None:
            offsets, data, first = tail_buffers(pc.take(tails, order))
    segments: list[BulkSegment] = []
    for partition, start, stop in groups:
        if partition_added is not None:
            partition_added(partition)
        done, error = accumulator.append_tails(topic, partition, offsets, data, first + start, first + stop,
                                               timestamp, deadline_ms, wakeup)
        segments += done
        if error is not None:
            appended = sum(count for _, _, count in done)
            return BulkAppend(segments, n - start - appended, error)
    return BulkAppend(segments, 0, None)
