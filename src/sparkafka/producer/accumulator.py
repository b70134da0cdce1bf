"""The record accumulator: per-partition queues of batches between ``send()`` and the Sender (Java's
``RecordAccumulator``).

How it works:

* **Layout.** A ``CopyOnWriteMap`` of topics holds each topic's ``_PartitionQueue``s (a ``deque`` of
  ``ProducerBatch`` plus the lock that guards it) in a ``CopyOnWriteMap`` by partition number, its KIP-794
  ``BuiltInPartitioner`` and its compression-ratio estimate (Java's ``topicInfoMap``). Maps are read
  without locks; they are copied only when a partition is seen first (one ``dict`` copy: a topic of
  6,000 partitions makes its queues in ~0.2 s, where a map kept sorted took seconds). A queue is never
  removed or replaced.
* **append** (user threads, per record): find the queue (lock-free), lock it, append to the last batch.
  If it has no room, release the lock, take memory from the ``BufferPool`` — possibly blocking up to
  ``max.block.ms`` — lock again, re-check (another thread may have made a batch meanwhile; then the
  memory goes back), and start a new batch. ``partition=-1`` lets the built-in sticky partitioner
  choose: the partition is peeked before locking and re-validated under the lock. ``append_open`` is
  the producer's fast path for a record without headers: under the lock, the open-batch append rule
  (``ProducerBatch.try_append_open``, in C with the accelerator) takes the record only if the last
  batch stays open, so no wake-up is due; else ``append``. ``lane_topic`` and ``lane_queue`` answer
  the C send lane, which does the same without the lock (``producer/send_lane.py``).
* **memory that follows the records** (a departure from Java, whose ``RecordAccumulator`` gives every new
  batch ``batch.size`` bytes whatever it will hold): under memory pressure, with more partition queues
  than half of ``buffer.memory`` holds ``batch.size`` batches for, the pool gives a new batch a
  *short* buffer (``batch.size / 8``, at least its first record: ``producer/buffer_pool.py`` has the
  rule), still with ``batch.size`` as its write limit. A record that fits the batch but not its short
  buffer is refused by the append rule (both of them, C and Python); ``append`` then grows the batch
  under the queue lock (``_grow``: twice the length, at least what the record needs, at most the write
  limit) with ``BufferPool.try_allocate``, which never blocks nor jumps the queue of callers waiting for
  memory, moves the records over, gives the short buffer back and appends again. Refused, the batch is
  closed for appends (so it is full and sendable) and the record starts a new batch the usual way, which
  may block. So the bytes the batches hold never exceed ``buffer.memory`` (``deallocate`` returns what a
  batch holds now, ``ProducerBatch.capacity``), and with thousands of partitions memory goes to records
  instead of empty ``batch.size`` buffers (``benchmarks/scale.py``, keyed records over 6,000 partitions in
  32 MiB: 1.2 records per batch before, 4 to 7 after, with no wait for memory left).
  The bulk path (``append_tails``) grows a short last batch to its write limit before appending, and
  starts its own batches with ``batch.size`` buffers. Without the accelerator (and with numpy) the rows of
  a call that go into new batches are laid out ahead, about 1 MiB of them at a time
  (``tails_vector.encode_run``), and each new batch takes its planned bytes.
* **ready / drain** (Sender thread): ``ready`` looks at the head batch of each queue and returns the
  leaders that have something sendable (full, lingered long enough, memory exhausted, closing,
  flushing, transaction completing; not while backing off, not muted) and, per topic, publishes
  queue-length load stats for adaptive partitioning. ``drain`` walks each ready node's partitions
  round-robin from a per-node index and collects head batches up to ``max.request.size`` (the first
  batch always fits), asking the transaction manager for sequences, then closes (encodes) them.
* **completion**: retries are ``reenqueue``-d at the head (in sequence order with idempotence);
  batches rejected as too large are split; expired batches are taken from the head of each queue;
  ``deallocate`` returns a batch's buffer to the pool; ``flush`` waits for the batches that existed
  when it began.

Hot-path counters are plain ints (updated without a lock, so approximate with several sending threads).
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import NamedTuple, Protocol

from sparkafka._clock import Clock
from sparkafka._types import ClusterView, Headers, TopicPartition
from sparkafka.accel import ACCEL
from sparkafka.errors import (
    BufferExhaustedError,
    ConfigError,
    IllegalStateError,
    KafkaError,
    ProducerClosedError,
)
from sparkafka.net.backoff import ExponentialBackoff
from sparkafka.producer.buffer_pool import BufferPool
from sparkafka.producer.cow_map import CopyOnWriteMap
from sparkafka.producer.future import FutureRecordMetadata, ProduceRequestResult, RecordCallback
from sparkafka.producer.partitioner import BuiltInPartitioner, Partitioner, StickyPartitionInfo
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.record.builder import RecordBatchBuilder, append_tails_in_c, estimate_batch_size_upper_bound
from sparkafka.record.compression import NO_COMPRESSION, CompressionType
from sparkafka.record.layout import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD, sequence_after
from sparkafka.record.tails_vector import RUN_MIN_ROWS, encode_run, numpy_module

__all__ = [
    "BulkSegment",
    "NodeLatencyStats",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "TransactionManagerHooks",
]

_PLAN_WINDOW_BYTES = 1 << 20
"""Tails the bulk path lays out ahead at most (or four batches' worth, if more): ``_plan_new_batches``."""

COMPRESSION_RATIO_IMPROVING_STEP = 0.005
COMPRESSION_RATIO_DETERIORATE_STEP = 0.05
RETRY_BACKOFF_EXP_BASE = 2
RETRY_BACKOFF_JITTER = 0.2
_sleep = time.sleep
_HAND_OVER_GIL: Callable[[], None] | None = getattr(ACCEL, "hand_over_gil", None)


BulkSegment = tuple[ProduceRequestResult, int, int]
"""Rows appended by ``append_tails`` to one batch: ``(the batch's result, index of the first, count)``."""


class RecordAppendResult(NamedTuple):
    future: FutureRecordMetadata | None
    """None only when ``abort_for_new_batch`` is set."""
    batch_is_full: bool
    new_batch_created: bool
    partition: int
    """The partition the record went to (the sticky choice when ``partition=-1`` was passed)."""
    abort_for_new_batch: bool = False
    """Set (with no append done) when ``abort_on_new_batch`` was asked and a new batch was needed."""


_new_tuple = tuple.__new__
_object_new = object.__new__


class ReadyCheckResult(NamedTuple):
    ready_nodes: set[int]
    next_ready_check_delay_ms: float
    """``math.inf`` when nothing is waiting on a timer."""
    unknown_leader_topics: set[str]


class TransactionManagerHooks(Protocol):
    """What the accumulator asks of the transaction manager (idempotence / transactions)."""

    def take_for_drain(self, tp: TopicPartition, first_batch: ProducerBatch) -> bool:
        """May the drain take ``first_batch``, the head of its partition's queue? No without a producer id,
        for a partition not yet in the transaction, with a stale producer id's batches in flight or an
        unresolved sequence, or for a retry that is not first in line. When yes, a never-sent batch gets
        its producer state and base sequence and is tracked as in flight (one lock for all of it)."""
        ...

    def is_completing(self) -> bool:
        """A commit or abort is in progress (every batch becomes sendable)."""
        ...


class NodeLatencyStats:
    """When a node last had sendable data (``ready_time_ms``) and when we could last send to it."""

    __slots__ = ("drain_time_ms", "ready_time_ms")

    def __init__(self, now: float) -> None:
        self.ready_time_ms = now
        self.drain_time_ms = now


class _PartitionQueue:
    """A partition's batches and the lock guarding them."""

    __slots__ = ("deque", "lock", "tp")

    def __init__(self, tp: TopicPartition) -> None:
        self.tp = tp
        self.deque: deque[ProducerBatch] = deque()
        self.lock = threading.Lock()


_ReadyEntry = tuple[int, _PartitionQueue, int | None, int]
"""``(partition, queue, leader or None, leader epoch)``."""


class _TopicInfo:
    __slots__ = ("compression_ratio", "partitioner", "queues", "ready_view")

    def __init__(self, partitioner: BuiltInPartitioner) -> None:
        self.partitioner = partitioner
        self.queues: CopyOnWriteMap[int, _PartitionQueue] = CopyOnWriteMap()
        self.compression_ratio = 1.0
        self.ready_view: tuple[ClusterView, dict[int, _PartitionQueue], list[_ReadyEntry]] | None = None
        """``ready``'s per-snapshot work: the queues in partition-id order with their leader and epoch."""


class RecordAccumulator:
    """Batches records per partition for the Sender (see the module docstring)."""

    def __init__(
        self,
        *,
        batch_size: int = 16384,
        buffer_memory: int = 33554432,
        compression: CompressionType = CompressionType.NONE,
        compression_level: int | None = None,
        linger_ms: float = 5,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        delivery_timeout_ms: float = 120000,
        partitioner_ignore_keys: bool = False,
        adaptive_partitioning: bool = True,
        availability_timeout_ms: float = 0,
        partitioner: Partitioner | None = None,
        clock: Clock,
        transaction_manager: TransactionManagerHooks | None = None,
        buffer_pool: BufferPool | None = None,
        random_source: Callable[[], int] | None = None,
    ) -> None:
        if batch_size < 0:
            raise ConfigError(f"batch.size must be >= 0, got {batch_size}", "batch.size")
        if linger_ms < 0:
            raise ConfigError(f"linger.ms must be >= 0, got {linger_ms}", "linger.ms")
        if delivery_timeout_ms < 0:
            raise ConfigError(f"delivery.timeout.ms must be >= 0, got {delivery_timeout_ms}",
                              "delivery.timeout.ms")
        if retry_backoff_ms < 0 or retry_backoff_max_ms < 0:
            raise ConfigError("retry.backoff.ms and retry.backoff.max.ms must be >= 0", "retry.backoff.ms")
        if availability_timeout_ms < 0:
            raise ConfigError(
                f"partitioner.availability.timeout.ms must be >= 0, got {availability_timeout_ms}",
                "partitioner.availability.timeout.ms",
            )
        self._batch_size = batch_size
        self._sticky_batch_size = max(1, batch_size)
        self._compression = CompressionType(compression)
        self._compression_level = compression_level
        self._linger_ms = linger_ms
        self._retry_backoff = ExponentialBackoff(
            retry_backoff_ms, retry_backoff_max_ms,
            multiplier=RETRY_BACKOFF_EXP_BASE, jitter=RETRY_BACKOFF_JITTER,
        )
        self._delivery_timeout_ms = delivery_timeout_ms
        self.partitioner_ignore_keys = partitioner_ignore_keys
        self._custom_partitioner = partitioner
        # As in KafkaProducer: a custom partitioner turns adaptive partitioning (and the availability
        # timeout, which only feeds it) off.
        self._adaptive = adaptive_partitioning and partitioner is None
        self._availability_timeout_ms = availability_timeout_ms if self._adaptive else 0
        self._clock = clock
        self._tm = transaction_manager
        self._random_source = random_source
        if buffer_pool is None:
            buffer_pool = BufferPool(buffer_memory, self._sticky_batch_size, clock)
        self.pool = buffer_pool
        self._short_buffers = False
        """Do new batches ask the pool for short buffers under memory pressure (``_count_queues``)?"""

        self._topics: CopyOnWriteMap[str, _TopicInfo] = CopyOnWriteMap()
        self._incomplete: set[ProducerBatch] = set()
        self._muted: set[TopicPartition] = set()
        self._drain_index: dict[int, int] = {}
        self._drain_views: dict[int, tuple[ClusterView, Sequence[TopicPartition], list[_PartitionQueue | None],
                                           list[int]]] = {}
        """Per node: the metadata snapshot, its list of the node's partitions, their queues (None: none yet)
        and leader epochs."""
        self._drain_backlog: set[int] = set()
        """Nodes whose last drain may have left a full batch at the head of a queue."""
        self._node_stats: dict[int, NodeLatencyStats] = {}
        self._closed = False
        self._flush_lock = threading.Lock()
        self._flushes_in_progress = 0
        self.next_batch_expiry_time_ms = math.inf

        self.records_appended = 0
        """Records appended by this class (the C send lane counts its own: ``SendLane.fast_count``)."""
        self.batches_created = 0
        self.batches_grown = 0
        """Times a batch moved into a longer pooled buffer (``_grow``)."""
        self.growths_refused = 0
        """Times the pool had no memory for a batch to grow: it was closed for appends instead."""

    # ================================================================================ append
    def append(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        callback: RecordCallback | None,
        max_block_ms: float,
        now: float,
        cluster: ClusterView,
        abort_on_new_batch: bool = False,
    ) -> RecordAppendResult:
        """Add a record to its partition's last batch (or a new one); ``partition=-1`` = built-in sticky.

        Blocks up to ``max_block_ms`` if memory is exhausted (``BufferExhaustedError`` after that);
        raises ``ProducerClosedError`` after ``close``.
        """
        # The loop's first pass is the common case: the record fits the partition's last batch. The
        # copy-on-write maps are read directly (a published dict is never changed).
        info = self._topics._map.get(topic)
        if info is None:
            info = self._topic_info(topic)
        buffer: bytearray | None = None
        effective = partition
        try:
            while True:
                if partition < 0:
                    partitioner = info.partitioner
                    sticky = partitioner._info
                    if sticky is None:
                        sticky = partitioner.peek_current_partition_info(cluster)
                    effective = sticky.partition
                else:
                    sticky = None
                    effective = partition
                pq = info.queues._map.get(effective)
                if pq is None:
                    pq = self._queue(info, topic, effective)
                dq = pq.deque
                lock = pq.lock

                if not lock.acquire(False):
                    _acquire_contended(lock)
                try:
                    if self._closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    # _partition_changed only when it has something to do (switched, or the last batch
                    # full): calling it for every keyless record cost 460 instructions, 2% of this method
                    # (callgrind)
                    if sticky is not None and (partitioner._info is not sticky or (
                            (not dq or dq[-1].builder.is_full())
                            and _partition_changed(partitioner, sticky, dq, cluster))):
                        continue
                    if dq:
                        last = dq[-1]
                        future = last.try_append(timestamp, key, value, headers, callback, now)
                        if future is None and last.builder.wanted_capacity and self._grow(
                                last, last.builder.wanted_capacity):
                            future = last.try_append(timestamp, key, value, headers, callback, now)
                        if future is not None:
                            if sticky is None:
                                full = len(dq) > 1 or last.builder.is_full()
                            else:
                                full = last.builder.is_full()
                                partitioner.update_partition_info(sticky, last.appended_bytes, cluster, full)
                                full = full or len(dq) > 1
                            self.records_appended += 1
                            return _new_tuple(RecordAppendResult, (future, full, False, effective, False))
                        last.builder.seal()
                finally:
                    lock.release()

                if abort_on_new_batch:
                    return RecordAppendResult(None, False, False, effective, True)

                if buffer is None:
                    size = estimate_batch_size_upper_bound(key, value, headers)
                    if size < self._batch_size:  # batch.size, or a short buffer under memory pressure
                        buffer = self.pool.allocate(  # may block
                            self._batch_size, max_block_ms, size if self._short_buffers else 0)
                    else:
                        buffer = self.pool.allocate(size, max_block_ms)  # may block; no lock held
                    now = self._clock.monotonic_ms()

                if not lock.acquire(False):
                    _acquire_contended(lock)
                try:
                    if self._closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    if sticky is not None and _partition_changed(partitioner, sticky, dq, cluster):
                        continue
                    result = self._append_new_batch(
                        info, pq, timestamp, key, value, headers, callback, buffer, now
                    )
                    if result.new_batch_created:
                        buffer = None  # now owned by the batch
                    if sticky is not None:
                        last = dq[-1]
                        partitioner.update_partition_info(sticky, last.appended_bytes, cluster, last.builder.is_full())
                    return result
                finally:
                    lock.release()
        except KafkaError as exc:
            exc.send_partition = effective  # the failed record's callback names it (Java's setPartition)
            raise
        finally:
            if buffer is not None:
                self.pool.deallocate(buffer)

    def append_open(
        self,
        topic: str,
        partition: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        callback: RecordCallback | None,
        cluster: ClusterView,
        key_size: int | None = None,
        value_size: int | None = None,
    ) -> FutureRecordMetadata | None:
        """The producer's fast path: append a record without headers to the open last batch of its
        partition (``-1`` = the current sticky partition) if it leaves that batch open (not full).

        Returns None with nothing done otherwise (no batch yet, a new batch or a partition switch
        needed, the batch would be full, closed): the caller then uses ``append``, which also tells
        whether to wake the Sender. A successful fast append never needs a wake-up: its batch did
        not become full and no batch was created. ``last_append_ms`` is not updated here (only a
        retry reads it, and the retry's own time is later)."""
        info = self._topics._map.get(topic)
        if info is None:
            return None
        if key_size is None:  # sizes as the future reports them: -1 for None (the producer passes them)
            key_size = -1 if key is None else len(key)
        if value_size is None:
            value_size = -1 if value is None else len(value)
        if partition >= 0:
            sticky = None
            pq = info.queues._map.get(partition)
        else:
            partitioner = info.partitioner
            sticky = partitioner._info
            if sticky is None:
                return None
            pq = info.queues._map.get(sticky.partition)
        if pq is None:
            return None
        dq = pq.deque
        lock = pq.lock
        # Only the append itself runs under the queue lock (the future is made after it): with several
        # sending threads a thread that loses the GIL while holding the lock stalls the others.
        # acquire/release: half the cost of a with-statement. Not locked() + acquire(): ~30 ns cheaper
        # per record alone, but a thread switch between the two calls sleeps on the lock, and with 4
        # sending threads that cost a fifth of the throughput (2 interleaved runs each: 246k/223k vs
        # 302k/261k records/s)
        if not lock.acquire(False):
            _acquire_contended(lock)
        try:
            if not dq or self._closed or (sticky is not None and partitioner._info is not sticky):
                return None
            batch = dq[-1]
            index = batch.try_append_open(timestamp, key, value, callback, key_size, value_size)
            if index < 0:
                return None
            if sticky is not None:  # update_partition_info(sticky, grown, cluster, False) up to a switch:
                # calling it for every record cost 3.5% of a pure-Python keyless record (callgrind)
                grown = batch.appended_bytes
                produced = sticky.produced_bytes + grown
                if produced < partitioner.double_batch_size:
                    sticky.produced_bytes = produced
                else:  # switch partitions (the batch is not full: only the 2 x batch.size rule applies)
                    partitioner.update_partition_info(sticky, grown, cluster, False)
        finally:
            lock.release()
        self.records_appended += 1
        if ACCEL is not None:  # a C constructor
            return FutureRecordMetadata(batch.result, index, timestamp, key_size, value_size)
        # Without the accelerator, filling the slots of a bare object costs 1,400 instructions and
        # running __init__ 2,200 (callgrind): 3% of a keyless record in pure Python.
        # tests/producer/test_fast_path.py checks the two agree.
        future = _object_new(FutureRecordMetadata)
        future._produce_result = batch.result
        future.relative_offset = index
        future.create_timestamp = timestamp
        future.serialized_key_size = key_size
        future.serialized_value_size = value_size
        return future

    def _append_new_batch(
        self,
        info: _TopicInfo,
        pq: _PartitionQueue,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        callback: RecordCallback | None,
        buffer: bytearray,
        now: float,
    ) -> RecordAppendResult:
        """Under the queue lock: append to a batch another thread created meanwhile, else start one."""
        dq = pq.deque
        if dq:
            last = dq[-1]
            # closed for appends (usually: the caller sealed it), try_append would refuse after sizing the record
            future = None if last.builder._appends_closed else last.try_append(timestamp, key, value, headers,
                                                                                 callback, now)
            if future is not None:
                self.records_appended += 1
                return RecordAppendResult(future, len(dq) > 1 or last.builder.is_full(), False, pq.tp[1])
            last.builder.seal()
        limit = len(buffer)
        if limit < self._batch_size:  # a short buffer (memory pressure): the batch grows into batch.size
            limit = self._batch_size
        builder = RecordBatchBuilder(
            buffer, limit, self._compression, self._compression_level, info.compression_ratio
        )
        batch = ProducerBatch(pq.tp, builder, now, buffer, True)
        future = batch.try_append(timestamp, key, value, headers, callback, now)
        if future is None:  # cannot happen: a new batch always takes its first record
            raise IllegalStateError("a new batch refused its first record")
        dq.append(batch)
        self._incomplete.add(batch)
        self.records_appended += 1
        self.batches_created += 1
        return RecordAppendResult(future, len(dq) > 1 or builder.is_full(), True, pq.tp[1])

    def _grow(self, batch: ProducerBatch, wanted: int) -> bool:
        """Under the queue lock: move ``batch`` from its short pooled buffer into a longer one (twice its
        length, at least ``wanted`` bytes, at most its write limit) if the pool has the memory right now
        and nobody is waiting for memory (``BufferPool.try_allocate``), and give the short one back.
        False when it did not (the caller then closes the batch for appends)."""
        builder = batch.builder
        if not batch.pooled or builder._appends_closed or not builder.is_short():
            return False
        held = batch.capacity
        size = 2 * held
        if size < wanted:
            size = wanted
        limit = builder._write_limit
        if size > limit:
            size = limit
        buffer = self.pool.try_allocate(size)
        if buffer is None:
            self.growths_refused += 1
            return False
        try:
            old = batch.replace_buffer(buffer)
        except BaseException:
            self.pool.deallocate(buffer, size)
            raise
        self.pool.deallocate(old, held)
        self.batches_grown += 1
        return True

    def _topic_info(self, topic: str) -> _TopicInfo:
        info = self._topics.get(topic)
        if info is None:
            info = self._topics.put_if_absent(
                topic, _TopicInfo(BuiltInPartitioner(topic, self._sticky_batch_size, self._random_source))
            )
        return info

    def _queue(self, info: _TopicInfo, topic: str, partition: int) -> _PartitionQueue:
        pq = info.queues.get(partition)
        if pq is None:
            fresh = _PartitionQueue((topic, partition))
            pq = info.queues.put_if_absent(partition, fresh)
            if pq is fresh:
                self._count_queues()
        return pq

    def _count_queues(self) -> None:
        """Short buffers (``BufferPool.allocate(least=...)``) only pay when one open ``batch.size`` batch
        per partition queue would take more than half of ``buffer.memory``: with few partitions the memory
        under pressure is held by full batches waiting for the Sender, and short buffers would only make
        the next batches smaller (keyed records from 8 threads over 6 partitions, the buffer full: 81
        records per batch instead of 137 and 0.62x one thread's rate). Called when a queue is created."""
        queues = sum(len(info.queues._map) for info in self._topics._map.values())
        self._short_buffers = 2 * queues * self._batch_size > self.pool.total_memory

    def _queue_of(self, tp: TopicPartition) -> _PartitionQueue | None:
        """The partition's queue, None if it has none yet (creates nothing)."""
        info = self._topics._map.get(tp[0])
        return None if info is None else info.queues._map.get(tp[1])

    def _all_queues(self) -> Iterator[_PartitionQueue]:
        """Every partition's queue, from the maps' current snapshots (safe while other threads add queues)."""
        for info in self._topics._map.values():
            yield from info.queues._map.values()

    def _get_or_create_queue(self, tp: TopicPartition) -> _PartitionQueue:
        pq = self._queue_of(tp)
        if pq is None:
            pq = self._queue(self._topic_info(tp[0]), tp[0], tp[1])
        return pq

    # ================================================================================ ready
    def _backoff_ms(self, batch: ProducerBatch) -> float:
        """The backoff of the batch's current retry (drawn once per attempt, with jitter)."""
        backoff = batch.retry_backoff_ms
        if backoff < 0:
            backoff = batch.retry_backoff_ms = self._retry_backoff.backoff(max(0, batch.attempts - 1))
        return backoff

    def _should_backoff(self, batch: ProducerBatch, waited_ms: float) -> bool:
        if batch.attempts <= 0 or batch.has_leader_changed_for_the_ongoing_retry():
            return False
        return waited_ms < self._backoff_ms(batch)

    def ready(self, cluster: ClusterView, now: float) -> ReadyCheckResult:
        """Leaders with sendable data, the delay until the next check is worth doing, and topics
        whose partitions with data have no known leader. Also refreshes adaptive-partitioning stats."""
        ready_nodes: set[int] = set()
        unknown_leader_topics: set[str] = set()
        next_delay = math.inf
        exhausted = self.pool.queued() > 0
        tm = self._tm
        completing = tm is not None and tm.is_completing()
        force = exhausted or self._closed or self._flushes_in_progress > 0 or completing
        linger = self._linger_ms
        muted = self._muted
        timeout = self._availability_timeout_ms
        node_stats = self._node_stats
        leader_for = cluster.leader_for
        leader_epoch_of = cluster.leader_epoch

        for topic, info in self._topics.items():
            queues = info.queues._map
            view = info.ready_view
            if view is None or view[0] is not cluster or view[1] is not queues:
                # once per metadata snapshot or new queue: the partitions in id order (Java's HashMap of
                # small Integer keys iterates them that way, and the adaptive partitioner's table follows it)
                entries = [(partition, pq, leader_for(pq.tp), leader_epoch_of(pq.tp))
                           for partition, pq in sorted(queues.items())]
                view = info.ready_view = (cluster, queues, entries)
            queue_sizes: list[int] | None = None
            partition_ids: list[int] = []
            if self._adaptive and len(queues) >= (cluster.partition_count(topic) or 0):
                queue_sizes = [0] * len(queues)
                partition_ids = [0] * len(queues)
            index = -1
            for partition, pq, leader, leader_epoch in view[2]:
                if leader is not None and queue_sizes is not None:
                    index += 1
                    partition_ids[index] = partition
                dq = pq.deque
                if not dq:
                    continue
                if leader is not None and leader in ready_nodes:
                    # Its node is ready already: only the load stats still read this queue (its length;
                    # the drain updates the head's leader epoch before it decides on a backoff). With
                    # thousands of partitions and memory exhausted (every head sendable) this is most
                    # of them.
                    if queue_sizes is not None:
                        queue_sizes[index] = len(dq)
                        if timeout > 0:
                            stats = node_stats.get(leader)
                            if stats is not None and stats.ready_time_ms - stats.drain_time_ms > timeout:
                                index -= 1
                    continue
                tp = pq.tp
                with pq.lock:
                    if not dq:
                        continue
                    batch = dq[0]
                    waited = now - batch.last_attempt_ms
                    if waited < 0:
                        waited = 0.0
                    if leader_epoch > batch.current_leader_epoch:
                        batch.maybe_update_leader_epoch(leader_epoch)
                    backing_off = batch.attempts > 0 and self._should_backoff(batch, waited)
                    size = len(dq)
                    full = size > 1 or batch.builder.is_full()
                if leader is None:
                    unknown_leader_topics.add(topic)
                    continue
                if queue_sizes is not None:
                    queue_sizes[index] = size
                    if timeout > 0:
                        stats = node_stats.get(leader)
                        if stats is not None:
                            ready_time = stats.ready_time_ms
                            if ready_time - stats.drain_time_ms > timeout:
                                index -= 1  # the next partition overwrites this one: excluded
                if leader in ready_nodes or tp in muted:
                    continue
                time_to_wait = self._backoff_ms(batch) if backing_off else linger
                if (full or waited >= time_to_wait or force) and not backing_off:
                    ready_nodes.add(leader)
                else:
                    left = time_to_wait - waited
                    if left < 0:
                        left = 0.0
                    if left < next_delay:
                        next_delay = left
            info.partitioner.update_partition_load_stats(queue_sizes, partition_ids, index + 1)
        return ReadyCheckResult(ready_nodes, next_delay, unknown_leader_topics)

    # ================================================================================ drain
    def drain(
        self, cluster: ClusterView, ready_nodes: Iterable[int], max_size: int, now: float,
        full_only: bool = False,
    ) -> dict[int, list[ProducerBatch]]:
        """Per node, the head batches of its partitions (round-robin from the node's drain index),
        up to ``max_size`` bytes per node (the first batch always goes). Drained batches are closed.
        ``full_only``: only heads that have another batch behind them (closed for appends, so full)."""
        drained: dict[int, list[ProducerBatch]] = {}
        for node in ready_nodes:
            drained[node] = self._drain_node(cluster, node, max_size, now, full_only)
        return drained

    def _drain_node(self, cluster: ClusterView, node: int, max_size: int, now: float,
                    full_only: bool = False) -> list[ProducerBatch]:
        ready: list[ProducerBatch] = []
        parts = cluster.partitions_for_node(node)
        count = len(parts)
        if not count:
            self._drain_backlog.discard(node)
            return ready
        queue_of = self._queue_of
        # The node's queues and leader epochs in the order of its partitions, kept while the snapshot is
        # the same (a Cluster never changes; a queue is never replaced): the loop below reads lists
        # instead of looking each (topic, partition) up, which was a third of the drain at 2,000
        # partitions per node.
        view = self._drain_views.get(node)
        if view is None or view[0] is not cluster or view[1] is not parts:
            leader_epoch = cluster.leader_epoch
            view = self._drain_views[node] = (cluster, parts, [queue_of(tp) for tp in parts],
                                              [leader_epoch(tp) for tp in parts])
        queues = view[2]
        epochs = view[3]
        tm = self._tm
        muted = self._muted
        compressed = self._compression != NO_COMPRESSION
        size = 0
        backlog = False
        after_last_taken = -1
        start = index = self._drain_index.get(node, 0) % count
        while True:  # round-robin from where the last drain of this node stopped (Java's drainIndex)
            stop_at = index
            pq = queues[index]
            index += 1
            if index == count:
                index = 0
            if pq is None:
                pq = queues[stop_at] = queue_of(parts[stop_at])
            if pq is not None:
                dq = pq.deque
                if dq and (not full_only or len(dq) > 1) and not (muted and pq.tp in muted):
                    tp = pq.tp
                    batch: ProducerBatch | None = None
                    epoch = epochs[stop_at]
                    with pq.lock:
                        first = dq[0] if dq else None
                        if first is not None:
                            # maybe_update_leader_epoch and _should_backoff, called only when they can act
                            # (a newer epoch; a retry): never for a batch's first send
                            if epoch > first.current_leader_epoch:
                                first.maybe_update_leader_epoch(epoch)
                            if first.attempts <= 0 or not self._should_backoff(first, first.waited_time_ms(now)):
                                if size + first.builder.estimated_size_in_bytes > max_size and ready:
                                    self._drain_index[node] = stop_at
                                    backlog = True
                                    break  # the rest waits for the next request
                                if tm is not None and not tm.take_for_drain(tp, first):
                                    self._drain_index[node] = stop_at
                                    backlog = True
                                    break
                                batch = dq.popleft()
                                if len(dq) > 1:  # the new head has a batch behind it: full
                                    backlog = True
                    if batch is not None:
                        wire = batch.close()  # encoding happens outside the queue lock
                        if compressed:
                            self._update_compression_ratio(tp[0], batch.compression_ratio)
                        size += wire.nbytes
                        ready.append(batch)
                        if now > batch.drained_ms:  # batch.drained(now)
                            batch.drained_ms = now
                        after_last_taken = index
            if index == start:
                if not full_only:
                    self._drain_index[node] = stop_at
                elif after_last_taken >= 0:
                    # it skipped the partitions whose head is still open: the next drain starts at the
                    # first of them after the last one taken, where a whole drain would have gone on
                    self._drain_index[node] = after_last_taken
                break
        if backlog:
            self._drain_backlog.add(node)
        else:
            self._drain_backlog.discard(node)
        return ready

    def may_have_full_batches(self, node: int) -> bool:
        """Did the last drain of ``node`` leave a queue whose head has another batch behind it (or stop
        before visiting every partition)? If not, a ``drain(full_only=True)`` right after would visit
        every partition of the node to find nothing, unless a sending thread filled a batch meanwhile
        (then the next Sender loop takes it)."""
        return node in self._drain_backlog

    def has_full_backlog(self) -> bool:
        """Did the last drain of some node leave full batches behind (``may_have_full_batches``)? Then the
        Sender is what the sending threads wait for, and it asks them for the GIL as soon as its socket
        wait ends (``NetworkClient.poll(hand_over=...)``, ``_c/_sender_io.c``)."""
        return bool(self._drain_backlog)

    def _update_compression_ratio(self, topic: str, observed: float) -> None:
        """Java's ``CompressionRatioEstimator.updateEstimation``: creep down, jump up."""
        info = self._topics.get(topic)
        if info is None:
            return
        current = info.compression_ratio
        if observed > current:
            info.compression_ratio = max(current + COMPRESSION_RATIO_DETERIORATE_STEP, observed)
        elif observed < current:
            info.compression_ratio = max(current - COMPRESSION_RATIO_IMPROVING_STEP, observed)

    def compression_ratio_estimate(self, topic: str) -> float:
        info = self._topics.get(topic)
        return 1.0 if info is None else info.compression_ratio

    # ================================================================================ muting
    def mute(self, tp: TopicPartition) -> None:
        self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self._muted

    # ================================================================================ retries, splits, expiry
    def reenqueue(self, batch: ProducerBatch, now: float) -> None:
        """Put a batch to retry back at the head of its queue (in base-sequence order if it has a
        sequence); its backoff for this attempt is drawn now."""
        batch.reenqueued(now)
        batch.retry_backoff_ms = self._retry_backoff.backoff(batch.attempts - 1)
        pq = self._get_or_create_queue(batch.tp)
        with pq.lock:
            if batch.has_sequence():
                _insert_in_sequence_order(pq.deque, batch)
            else:
                pq.deque.appendleft(batch)

    def split_and_reenqueue(self, big_batch: ProducerBatch) -> int:
        """Split a batch the broker rejected as too large and queue the parts at the head (not counted as
        retries). Returns the number of new batches. The caller still ``deallocate``s ``big_batch``.

        The parts are ``batch.size`` long (Java's ``split(batchSize)``) when the rejected batch was longer;
        one that was not is split into halves of its size. Java splits it into ``batch.size`` again, which
        gives the same batch back whenever batch.size is at or above the topic's ``max.message.bytes``: it
        was rejected and split again until delivery.timeout.ms, each split one more redirect for the
        records' futures to follow. Halving reaches single records, which fail as too large, in a few
        rounds."""
        size = big_batch.estimated_size_in_bytes
        split_size = self._batch_size if size > self._batch_size else max(1, size // 2)
        topic = big_batch.tp[0]
        info = self._topic_info(topic)
        if self._compression != CompressionType.NONE:
            info.compression_ratio = max(1.0, big_batch.compression_ratio)
        compression, level, ratio = self._compression, self._compression_level, info.compression_ratio

        def make(limit: int) -> RecordBatchBuilder:
            return RecordBatchBuilder(None, limit, compression, level, ratio)

        parts = big_batch.split(split_size, make)
        pq = self._get_or_create_queue(big_batch.tp)
        tm = self._tm
        # Optional hook: the split batches carry sequences and are in flight from the TM's point of view.
        add_in_flight = getattr(tm, "add_in_flight_batch", None) if tm is not None else None
        for batch in reversed(parts):
            self._incomplete.add(batch)
            with pq.lock:
                if batch.has_sequence():
                    if add_in_flight is not None:
                        add_in_flight(batch)
                    _insert_in_sequence_order(pq.deque, batch)
                else:
                    pq.deque.appendleft(batch)
        return len(parts)

    def expired_batches(self, now: float) -> list[ProducerBatch]:
        """Remove and return queued batches created at least ``delivery.timeout.ms`` ago (from each
        queue's head). The caller fails them."""
        expired: list[ProducerBatch] = []
        timeout = self._delivery_timeout_ms
        for pq in self._all_queues():
            dq = pq.deque
            if not dq:
                continue
            with pq.lock:
                while dq:
                    batch = dq[0]
                    if batch.has_reached_delivery_timeout(timeout, now):
                        dq.popleft()
                        batch.abort_record_appends()
                        expired.append(batch)
                    else:
                        expiry = batch.created_ms + timeout
                        if expiry < self.next_batch_expiry_time_ms:
                            self.next_batch_expiry_time_ms = expiry
                        break
        return expired

    def reset_next_batch_expiry_time(self) -> None:
        self.next_batch_expiry_time_ms = math.inf

    @property
    def delivery_timeout_ms(self) -> float:
        return self._delivery_timeout_ms

    # ================================================================================ completion
    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a finished batch and give its buffer back to the pool (split batches have none): the
        memory it holds now (``capacity``: a batch that grew holds more than it was given)."""
        self._incomplete.discard(batch)
        buffer = batch.buffer
        if buffer is not None and batch.pooled:
            batch.buffer = None  # never return the same buffer twice
            self.pool.deallocate(buffer, batch.capacity)

    def begin_flush(self) -> None:
        """Make every batch immediately sendable until the matching ``await_flush_completion``."""
        with self._flush_lock:
            self._flushes_in_progress += 1

    def await_flush_completion(self, timeout: float | None = None) -> bool:
        """Wait (``timeout`` in seconds, None = forever) until every batch that existed at this call is
        complete, including batches they were split into. Ends the flush begun by ``begin_flush``."""
        try:
            results = [batch.result for batch in list(self._incomplete)]
            if timeout is None:
                for result in results:
                    result.wait(None)
                return True
            deadline = time.monotonic() + timeout
            return all(result.wait(max(0.0, deadline - time.monotonic())) for result in results)
        finally:
            with self._flush_lock:
                self._flushes_in_progress -= 1

    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def has_undrained(self) -> bool:
        return any(pq.deque for pq in self._all_queues())

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        return list(self._incomplete)

    # ================================================================================ close and abort
    def close(self) -> None:
        """Refuse new appends (``ProducerClosedError``) and wake threads blocked on memory."""
        self._closed = True
        self.pool.close()

    @property
    def closed(self) -> bool:
        return self._closed

    def abort_incomplete_batches(self, error: BaseException | None = None) -> None:
        """Fail every incomplete batch, sent or not (forced close). After ``close`` this catches
        batches created by appends that were in progress: every queue lock is taken once after the
        closed flag is set, so no append can still be adding a batch."""
        if error is None:
            error = ProducerClosedError("Producer is closed forcefully.")
        self._abort_batches(error)
        if self._closed:
            self.await_appends()
            self._abort_batches(error)

    def await_appends(self) -> None:
        """After ``close``: return once no append that passed the closed check can still be adding a batch
        (each queue's lock taken once; appends check ``closed`` under it), so ``has_undrained`` and
        ``has_incomplete`` are final."""
        for pq in self._all_queues():
            with pq.lock:
                pass

    def _abort_batches(self, error: BaseException) -> None:
        for batch in list(self._incomplete):
            pq = self._queue_of(batch.tp)
            if pq is not None:
                with pq.lock:
                    batch.abort_record_appends()
                    _remove(pq.deque, batch)
            batch.abort(error)
            self.deallocate(batch)

    def abort_undrained_batches(self, error: BaseException) -> None:
        """Fail the batches that were never sent (transaction abort)."""
        tm = self._tm
        for batch in list(self._incomplete):
            pq = self._queue_of(batch.tp)
            aborted = False
            if pq is not None:
                with pq.lock:
                    unsent = not batch.has_sequence() if tm is not None else not batch.is_closed()
                    if unsent:
                        aborted = True
                        batch.abort_record_appends()
                        _remove(pq.deque, batch)
            if aborted:
                batch.abort(error)
                self.deallocate(batch)

    def purge_unsent(self, error: BaseException) -> int:
        """Fail the batches still in their partition queues that were never drained nor given a sequence
        (librdkafka's ``purge`` of queued messages); returns how many records failed. Safe from any
        thread: a batch leaves its queue under the queue lock, as ``drain`` takes it, so each batch is
        either sent or purged; appends after it open a new batch."""
        purged: list[ProducerBatch] = []
        for pq in self._all_queues():
            purged.extend(_take_unsent(pq))
        return self._fail_taken(purged, error)

    def abort_unsent_of(self, tp: TopicPartition, error: BaseException) -> int:
        """Fail ``tp``'s batches never drained nor given a sequence, as ``purge_unsent`` does for every
        partition; returns how many records failed (a transactional partition that can no longer join the
        transaction: ``KafkaProducer._refuse_outside_transaction``)."""
        pq = self._queue_of(tp)
        return self._fail_taken(_take_unsent(pq), error) if pq is not None else 0

    def _fail_taken(self, batches: list[ProducerBatch], error: BaseException) -> int:
        records = 0
        for batch in batches:
            records += batch.record_count
            batch.abort(error)
            self.deallocate(batch)
        return records

    # ================================================================================ stats
    def update_node_latency_stats(self, node_id: int, now: float, can_drain: bool) -> None:
        """Sender: ``node_id`` had data ready at ``now``; ``can_drain`` if we could send to it."""
        if self._availability_timeout_ms <= 0:
            return
        stats = self._node_stats.get(node_id)
        if stats is None:
            stats = self._node_stats[node_id] = NodeLatencyStats(now)
        if can_drain:
            stats.drain_time_ms = now
        stats.ready_time_ms = now

    def node_latency_stats(self, node_id: int) -> NodeLatencyStats | None:
        return self._node_stats.get(node_id)

    def built_in_partitioner(self, topic: str) -> BuiltInPartitioner:
        return self._topic_info(topic).partitioner

    def queue_lock(self, topic: str, partition: int) -> threading.Lock:
        """The lock of a partition's queue (made if needed): the bulk path moves the sticky partitioner
        under the lock of its current partition, as ``append`` does."""
        return self._get_or_create_queue((topic, partition)).lock

    def lane_topic(self, topic: str) -> tuple[BuiltInPartitioner, int] | None:
        """For the C send lane (``producer/send_lane.py``): the topic's built-in partitioner and its
        ``double_batch_size``, or None when the topic has no queues yet. Creates nothing. Both never
        change for a topic, so the lane keeps them."""
        info = self._topics.get(topic)
        return None if info is None else (info.partitioner, info.partitioner.double_batch_size)

    def lane_queue(self, topic: str, partition: int) -> tuple[deque[ProducerBatch], threading.Lock,
                                                              TopicPartition] | None:
        """For the C send lane: the deque, lock and topic-partition of the partition's queue, or None when
        it has none yet. Creates nothing. A queue is never replaced, so the lane keeps them."""
        info = self._topics.get(topic)
        pq = None if info is None else info.queues.get(partition)
        return None if pq is None else (pq.deque, pq.lock, pq.tp)

    def queue_sizes(self) -> dict[TopicPartition, int]:
        """Batches queued per partition (for metrics)."""
        return {pq.tp: len(pq.deque) for pq in self._all_queues()}

    def get_deque(self, tp: TopicPartition) -> deque[ProducerBatch] | None:
        pq = self._queue_of(tp)
        return None if pq is None else pq.deque

    @property
    def free(self) -> BufferPool:
        """The buffer pool (Java's field name)."""
        return self.pool

    def buffer_pool_available_memory(self) -> int:
        return self.pool.available_memory()


    # ================================================================================ bulk append
    def append_tails(
        self,
        topic: str,
        partition: int,
        offsets: memoryview,
        data: memoryview,
        start: int,
        stop: int,
        timestamp: int,
        deadline_ms: float,
        wakeup: Callable[[], None],
    ) -> tuple[list[BulkSegment], KafkaError | None]:
        """The bulk path: append the records whose pre-encoded tails are rows ``[start, stop)`` (see
        ``RecordBatchBuilder.append_tails``) to one partition, in order: into its open last batch, then
        into new batches (memory from the pool; waiting for it ends at ``deadline_ms``, on the
        accumulator's clock: the caller's ``max.block.ms`` budget for the whole bulk call).

        Returns the segments covering the rows appended, in row order, and the error that stopped it
        early (``BufferExhaustedError``, ``ProducerClosedError``), in which case the rows after the
        segments were not appended. ``wakeup`` is called whenever a batch is ready to send."""
        pq = self._queue(self._topic_info(topic), topic, partition)
        dq = pq.deque
        lock = pq.lock
        segments: list[BulkSegment] = []
        buffer: bytearray | None = None
        i = start
        # Pure Python with numpy: the rows for new batches laid out ahead, a window of them at a time
        # (tails_vector.encode_run), used while each new batch takes its planned rows; any other turn (another
        # thread's batch) ends planning for this call.
        plan: list[tuple[int, memoryview]] | None = None
        planned = 0  # the next batch of the plan
        plan_row = -1  # where it starts
        may_plan = stop - start >= RUN_MIN_ROWS and self._compression == NO_COMPRESSION and not append_tails_in_c()
        try:
            while True:
                now = self._clock.monotonic_ms()
                ready = False
                created = False
                if not lock.acquire(False):
                    _acquire_contended(lock)
                try:
                    if self._closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    if buffer is not None and (not dq or dq[-1].builder.is_full()):
                        info = self._topic_info(topic)
                        builder = RecordBatchBuilder(buffer, len(buffer), self._compression,
                                                     self._compression_level, info.compression_ratio)
                        dq.append(ProducerBatch(pq.tp, builder, now, buffer, True))
                        self._incomplete.add(dq[-1])
                        self.batches_created += 1
                        buffer = None
                        ready = True  # a new batch: the Sender may be asleep with nothing to time
                        created = True
                    if dq:
                        last = dq[-1]
                        if last.builder.is_short():  # grow it to its write limit (else it takes no rows)
                            self._grow(last, last.builder._write_limit)
                        first = last.record_count
                        if (plan is not None and created and i == plan_row and planned < len(plan)
                                and last.append_encoded(plan[planned][1], plan[planned][0], timestamp,
                                                        self._batch_size, now)):
                            count = plan[planned][0]
                            planned += 1
                            plan_row += count
                        else:
                            if plan is not None:
                                plan = None
                                may_plan = False
                            count = last.append_tails(offsets, data, i, stop, timestamp, now)
                        if count:
                            segments.append((last.result, first, count))
                            i += count
                        if i < stop:
                            last.builder.seal()
                        ready = ready or len(dq) > 1 or last.builder.is_full()
                finally:
                    lock.release()
                if ready:
                    wakeup()
                if _HAND_OVER_GIL is not None:  # a Sender back from its socket wait runs first (_c/_sender_io.c)
                    _HAND_OVER_GIL()
                if i >= stop:
                    break
                if buffer is None:
                    if may_plan and (plan is None or planned == len(plan)) and stop - i >= RUN_MIN_ROWS:
                        plan = self._plan_new_batches(offsets, data, i, stop)  # outside the queue lock
                        planned, plan_row = 0, i
                        may_plan = plan is not None
                    size = RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + offsets[i + 1] - offsets[i]
                    wait_ms = max(0.0, deadline_ms - self._clock.monotonic_ms())
                    buffer = self.pool.allocate(max(size, self._batch_size), wait_ms)  # may block
        except (BufferExhaustedError, ProducerClosedError) as exc:
            return segments, exc
        finally:
            if buffer is not None:
                self.pool.deallocate(buffer)
            self.records_appended += i - start
        return segments, None

    def _plan_new_batches(self, offsets: memoryview, data: memoryview, start: int,
                          stop: int) -> list[tuple[int, memoryview]] | None:
        """The bulk path without the accelerator: the next new batches' records laid out ahead
        (``tails_vector.encode_run``), for rows from ``start`` up to ``_PLAN_WINDOW_BYTES`` of tails (at
        least four batches' worth), so the plan's arrays stay small beside ``buffer.memory``; a batch cut
        by the window's end is left to the next plan. None without numpy or when the rows need more than
        ``encode_run`` does."""
        np = numpy_module()
        if np is None:
            return None
        window = max(_PLAN_WINDOW_BYTES, 4 * self._batch_size)
        end = bisect.bisect_right(offsets, offsets[start] + window, start + 1, stop + 1) - 1
        if end <= start:  # one row longer than the window: larger than a batch, so no plan anyway
            return None
        plan = encode_run(np, offsets, data, start, end, self._batch_size)
        if plan is not None and end < stop:
            plan.pop()  # its batch might have taken more rows than the window held
        return plan or None


def _partition_changed(
    partitioner: BuiltInPartitioner,
    sticky: StickyPartitionInfo,
    dq: deque[ProducerBatch],
    cluster: ClusterView,
) -> bool:
    """Under the queue lock: did another thread switch the sticky partition? Also completes a
    switch deferred while the last batch was still open."""
    if partitioner.is_partition_changed(sticky):
        return True
    if not dq or dq[-1].builder.is_full():
        partitioner.update_partition_info(sticky, 0, cluster, True)
        return partitioner.is_partition_changed(sticky)
    return False


def _acquire_contended(lock: threading.Lock) -> None:
    """Take a queue lock that another thread holds without ever sleeping on it: yield the GIL and try
    again. A thread that blocks on a ``threading.Lock`` is handed it at release while it does not hold
    the GIL; every other sending thread that needs that partition then blocks too until it gets the
    GIL back (a lock convoy: with 4 threads on keyed records it halved throughput and cost ~16,000
    context switches a second). Yielding instead lets the holder run and release the lock itself."""
    while True:
        _sleep(0)
        if lock.acquire(False):
            return


def _take_unsent(pq: _PartitionQueue) -> list[ProducerBatch]:
    """Take the queue's batches never drained nor given a sequence out of it, under its lock (the drain
    takes a batch out under the same lock, so each batch is either sent or taken); appends after this
    open a new batch."""
    with pq.lock:
        dq = pq.deque
        unsent = [b for b in dq if b.drained_ms == 0.0 and not b.has_sequence()]
        for batch in unsent:
            batch.abort_record_appends()
            _remove(dq, batch)
    return unsent


def _remove(dq: deque[ProducerBatch], batch: ProducerBatch) -> None:
    try:
        dq.remove(batch)
    except ValueError:
        pass


def _insert_in_sequence_order(dq: deque[ProducerBatch], batch: ProducerBatch) -> None:
    """Java ``insertInSequenceOrder``: keep queued batches that have sequences sorted by base sequence, in
    the wrapping sequence space (Java compares plainly, so retries straddling 2**31-1 -> 0 came back in
    the wrong order and the partition's drain, which sends only the lowest in-flight retry, stalled until
    delivery.timeout.ms)."""
    if not batch.has_sequence():
        raise IllegalStateError(
            f"Trying to re-enqueue a batch without a sequence for {batch.tp[0]}-{batch.tp[1]} "
            "although idempotence is enabled"
        )
    ahead: list[ProducerBatch] = []
    while dq and dq[0].has_sequence() and sequence_after(batch.base_sequence, dq[0].base_sequence):
        ahead.append(dq.popleft())
    dq.appendleft(batch)
    for earlier in reversed(ahead):
        dq.appendleft(earlier)
