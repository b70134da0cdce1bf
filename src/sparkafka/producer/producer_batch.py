"""One batch of records for one partition, from first append to final completion (Java's ``ProducerBatch``).

How it works: the batch wraps a ``RecordBatchBuilder`` (which keeps the appended records and encodes them
once, at ``close``) and a ``ProduceRequestResult`` shared by the futures of its records. ``try_append``
returns a ``FutureRecordMetadata`` (or None when the batch has no room); records that have a callback are
remembered in one flat list, five slots each: ``callback, index, timestamp_delta, key_size, value_size``
(``try_append``, and ``try_append_open``, the producer's fast path: the open-batch append rule of
``RecordBatchBuilder.try_append_open``, then the record's index and callback entry; no headers, refuses the
record that would fill the batch, does not touch ``last_append_ms``; with the accelerator it is
``sparkafka._accel.BatchState.try_append_open``, the same in C, whose attributes are this class's base,
``_c/_append.h``; ``try_append`` of a record without headers is ``BatchState.try_append_general``,
``try_append``'s rule in C); only the batches a split makes hold ``callback, future, 0, 0, 0`` entries
(futures of the batch they came from). So a batch keeps no object per record alive besides plain ints (the
record itself is already encoded by the builder, and the future is freed as soon as the caller drops it), and
a callback's metadata is built from those ints at completion without a type check per record. With the
accelerator that list is one the cyclic garbage collector does not track (it would walk every slot of every
batch in the accumulator on each collection); completion drops it. The Sender drives the rest of the life
cycle: ``close`` when drained (idempotent), ``set_producer_state`` for idempotence (before close it is passed
to the builder, after close the header is patched and the CRC redone), ``reenqueued`` for retries, and
``done``/``abort`` exactly once (``succeed`` is ``done`` without an error, in fewer steps: the Sender's usual
answer) — the first completion wins, the result is published, then callbacks run in append order (each
guarded, so one raising callback does not stop the others; a successful batch builds each ``RecordMetadata``
straight from the batch result), then waiters are released. A batch the broker rejects as too large is
``split`` into new batches built outside the buffer pool from the same records; the old result redirects every
record to its new batch, so user futures and callbacks complete from there.
"""

from __future__ import annotations

import bisect
import enum
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from sparkafka._types import Headers, TopicPartition
from sparkafka.accel import ACCEL
from sparkafka.errors import IllegalStateError, RecordTooLargeError
from sparkafka.producer.future import (
    NO_OFFSET,
    NO_TIMESTAMP,
    FutureRecordMetadata,
    ProduceRequestResult,
    RecordCallback,
    RecordMetadata,
)
from sparkafka.record.builder import RecordBatchBuilder, estimate_batch_size_upper_bound, set_producer_state
from sparkafka.record.layout import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE, increment_sequence

__all__ = ["BuilderFactory", "FinalState", "ProducerBatch", "remove_in_flight"]

log = logging.getLogger("sparkafka.producer")

_FINAL_STATE_LOCK = threading.Lock()
"""Makes the first-completion-wins transition atomic (taken once per batch completion)."""

_new_callback_list: Callable[[], list[object]] = getattr(ACCEL, "untracked_list", list)
"""An empty list for a batch's callback entries; with the accelerator, one the cyclic GC does not track
(walking them was about 5% of the producer's CPU: see ``_accel.c``). ``_complete`` replaces it."""
_c_run_success_callbacks: Callable[..., None] | None = getattr(ACCEL, "run_success_callbacks", None)
"""The C loop of ``_run_success_callbacks`` (same calls and metadata; a raising callback goes to
``_report_callback_error``)."""
_c_try_append: Callable[..., int] | None = getattr(getattr(ACCEL, "BatchState", None), "try_append_general", None)
"""``try_append``'s rule in C for a record without headers (``_c/_append.c``), the unbound method; None
without the accelerator. ``tests/producer/test_fast_path.py`` checks it against the Python rule."""


def remove_in_flight(in_flight: list[ProducerBatch], batch: ProducerBatch) -> bool:
    """Take ``batch`` out of a partition's in-flight list (the Sender's and the idempotence manager's);
    False if it was not there. Answers come in send order, so it is nearly always the head."""
    if in_flight and in_flight[0] is batch:
        del in_flight[0]
        return True
    try:
        in_flight.remove(batch)
    except ValueError:
        return False
    return True


def _report_callback_error(topic: str, partition: int, error: BaseException) -> None:
    log.error("Error executing user-provided callback on message for topic-partition %s-%d", topic, partition,
              exc_info=error)


BuilderFactory = Callable[[int], RecordBatchBuilder]
"""Makes an empty builder with the given write limit (used by ``split``)."""


class FinalState(enum.Enum):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    ABORTED = "ABORTED"


# Module constants for the completion of every batch (docs/DESIGN.md, Performance notes).
_SUCCEEDED = FinalState.SUCCEEDED
_FAILED = FinalState.FAILED
_ABORTED = FinalState.ABORTED


class _BatchStatePy:
    """The batch's part of the open-batch append, for builds without the accelerator: the attributes of
    ``sparkafka._accel.BatchState`` (``_c/_append.h`` documents each)."""

    __slots__ = ("_callbacks", "appended_bytes", "builder", "record_count", "result")

    _callbacks: list[object]
    appended_bytes: int
    builder: RecordBatchBuilder
    record_count: int
    result: ProduceRequestResult


if TYPE_CHECKING:
    _BatchState = _BatchStatePy
else:
    _BatchState = _BatchStatePy if ACCEL is None else ACCEL.BatchState


class ProducerBatch(_BatchState):
    """Records bound for one partition, sent together in one Produce request."""

    __slots__ = (
        "_wire",
        "attempts",
        "attempts_when_leader_last_changed",
        "base_sequence",
        "buffer",
        "capacity",
        "created_ms",
        "current_leader_epoch",
        "drained_ms",
        "final_state",
        "in_request",
        "initial_capacity",
        "is_split_batch",
        "is_transactional",
        "last_append_ms",
        "last_attempt_ms",
        "last_error",
        "pooled",
        "producer_epoch",
        "producer_id",
        "reopened",
        "retry",
        "retry_backoff_ms",
        "tp",
    )

    def __init__(
        self,
        tp: TopicPartition,
        builder: RecordBatchBuilder,
        created_ms: float,
        buffer: bytearray | None = None,
        pooled: bool = False,
    ) -> None:
        self.tp = tp
        self.builder = builder
        self.created_ms = created_ms
        self.buffer = buffer
        """The bytearray the batch was given, or the longer one it moved to (``replace_buffer``); returned
        to the pool by ``RecordAccumulator.deallocate``."""
        self.pooled = pooled and buffer is not None
        self.capacity = self.initial_capacity = len(buffer) if buffer is not None else 0
        """``capacity``: the pool memory the batch holds now (``initial_capacity``: when it was made)."""
        self.result = ProduceRequestResult(tp[0], tp[1])
        self._callbacks: list[object] = _new_callback_list()
        """Five slots per record with a callback, in append order: ``callback, future, 0, 0, 0`` or
        ``callback, index, timestamp - base_timestamp, key_size, value_size``."""
        self.record_count = 0
        self.appended_bytes = 0
        """Growth of the size estimate caused by the last successful ``try_append``."""
        self.attempts = 0
        self.last_attempt_ms = created_ms
        self.last_error: str | None = None
        """The name of the broker error the last attempt was retried after (for the expiry message)."""
        self.last_append_ms = created_ms
        self.drained_ms = 0.0
        self.retry = False
        self.retry_backoff_ms = -1.0
        """Backoff drawn for the current retry attempt (set by the accumulator on re-enqueue)."""
        self.final_state: FinalState | None = None
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.base_sequence = NO_SEQUENCE
        self.is_transactional = False
        self.reopened = False
        self.current_leader_epoch = -1
        self.attempts_when_leader_last_changed = 0
        self.is_split_batch = False
        self.in_request = False
        """Free for the Sender's use: set while the batch is part of an outstanding request."""
        self._wire: memoryview | None = None

    # -- appending -------------------------------------------------------------------------------
    def try_append(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Headers | None,
        callback: RecordCallback | None,
        now: float,
    ) -> FutureRecordMetadata | None:
        """Append a record; None if the batch has no room (or is closed for appends)."""
        if headers is None and _c_try_append is not None:
            # the rule in C for a record without headers (BatchState.try_append_general); -2: Python decides
            key_size = -1 if key is None else len(key)
            value_size = -1 if value is None else len(value)
            index = _c_try_append(self, timestamp, key, value, callback, key_size, value_size)
            if index >= 0:
                self.last_append_ms = now
                return FutureRecordMetadata(self.result, index, timestamp, key_size, value_size)
            if index == -1:
                self.builder.wanted_capacity = 0
                return None
        grown = self.builder.try_append(timestamp, key, value, headers)
        if grown < 0:
            return None
        self.appended_bytes = grown
        index = self.record_count
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if callback is not None:
            self._callbacks += (callback, index, timestamp - self.builder.base_timestamp, key_size, value_size)
        self.record_count = index + 1
        self.last_append_ms = now
        return FutureRecordMetadata(self.result, index, timestamp, key_size, value_size)

    def replace_buffer(self, buffer: bytearray) -> bytearray:
        """Move the records from the batch's short pooled buffer into ``buffer``, a longer one from the
        pool (``RecordBatchBuilder.replace_buffer``); returns the old buffer for the caller to give back
        to the pool. Under the queue lock (``RecordAccumulator``)."""
        old = self.builder.replace_buffer(buffer)
        self.buffer = buffer
        self.capacity = len(buffer)
        return old

    def _try_append_open_py(
        self,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        callback: RecordCallback | None,
        key_size: int,
        value_size: int,
    ) -> int:
        """The fast path (``RecordBatchBuilder.try_append_open``): append a record without headers
        that leaves the batch open (not full) and return its index, or -1 if it does not fit that way.
        Makes no future (the caller makes it, outside its lock: ``FutureRecordMetadata(batch.result,
        index, timestamp, key_size, value_size)``). ``appended_bytes`` is set."""
        builder = self.builder
        grown = builder.try_append_open(timestamp, key, value)
        if grown < 0:
            return -1
        self.appended_bytes = grown
        index = self.record_count
        self.record_count = index + 1
        if callback is not None:
            self._callbacks += (callback, index, timestamp - builder._base_timestamp, key_size, value_size)
        return index

    if ACCEL is None:
        try_append_open = _try_append_open_py
    # else BatchState.try_append_open: the same in C (tests/producer/test_fast_path.py compares them)

    @property
    def callbacks(self) -> list[tuple[RecordCallback, FutureRecordMetadata]] | None:
        """``(callback, future)`` of the records that have a callback, in append order (None if none).
        Each future is a new one, equivalent to the one the append returned (except in a batch made
        by a split, which keeps the futures of the batch it came from)."""
        flat = self._callbacks
        if not flat:
            return None
        return [(flat[i], self._future_at(i)) for i in range(0, len(flat), 5)]  # type: ignore[misc]

    def _future_at(self, i: int) -> FutureRecordMetadata:
        """The future of the callback entry at flat position ``i``."""
        ref = self._callbacks[i + 1]
        if isinstance(ref, FutureRecordMetadata):
            return ref
        ts_delta, key_size, value_size = self._callbacks[i + 2:i + 5]
        return FutureRecordMetadata(self.result, ref, self.builder.base_timestamp + ts_delta,  # type: ignore[arg-type, operator]
                                    key_size, value_size)  # type: ignore[arg-type]

    def is_full(self) -> bool:
        return self.builder.is_full()

    @property
    def estimated_size_in_bytes(self) -> int:
        return self.builder.estimated_size_in_bytes

    @property
    def compression_ratio(self) -> float:
        """Compressed / uncompressed size of the records (1.0 until closed or without compression)."""
        return self.builder.actual_compression_ratio

    def close_for_appends(self) -> None:
        """Refuse further appends (Java ``closeForRecordAppends``)."""
        self.builder.close_for_appends()

    abort_record_appends = close_for_appends

    # -- wire bytes ------------------------------------------------------------------------------
    def close(self) -> memoryview:
        """Encode the batch (once) with the current producer state; returns its wire bytes."""
        self.reopened = False
        wire = self._wire
        if wire is None:
            wire = self._wire = self.builder.close(
                self.producer_id, self.producer_epoch, self.base_sequence, self.is_transactional
            )
        return wire

    @property
    def records_bytes(self) -> memoryview:
        """The encoded batch (closes it if needed)."""
        return self._wire if self._wire is not None else self.close()

    def is_closed(self) -> bool:
        return self._wire is not None

    # -- producer state (idempotence) ------------------------------------------------------------
    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Set PID, epoch, base sequence and the transactional flag (patches the bytes if closed)."""
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.base_sequence = base_sequence
        self.is_transactional = is_transactional
        wire = self._wire
        if wire is not None and len(wire):
            set_producer_state(wire, producer_id, producer_epoch, base_sequence, is_transactional)

    def reset_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """Renumber an in-flight batch after an epoch bump (Java ``resetProducerState``)."""
        self.reopened = True
        self.set_producer_state(producer_id, producer_epoch, base_sequence, self.is_transactional)

    def has_sequence(self) -> bool:
        return self.base_sequence != NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        """Base sequence of the last record (Java ``lastSequence``: no wrap-around)."""
        return self.base_sequence + self.record_count - 1

    def sequence_has_been_reset(self) -> bool:
        return self.reopened

    # -- retries and timing ----------------------------------------------------------------------
    def in_retry(self) -> bool:
        return self.retry

    def reenqueued(self, now: float) -> None:
        """Count a retry attempt; the retry backoff runs from ``now``."""
        self.attempts += 1
        last = self.last_append_ms if self.last_append_ms > now else now
        self.last_attempt_ms = last
        self.last_append_ms = last
        self.retry = True

    def drained(self, now: float) -> None:
        if now > self.drained_ms:
            self.drained_ms = now

    def waited_time_ms(self, now: float) -> float:
        waited = now - self.last_attempt_ms
        return waited if waited > 0 else 0.0

    def queue_time_ms(self) -> float:
        return self.drained_ms - self.created_ms

    def has_reached_delivery_timeout(self, delivery_timeout_ms: float, now: float) -> bool:
        """True once ``delivery.timeout.ms`` has passed since the batch was created."""
        return delivery_timeout_ms <= now - self.created_ms

    def maybe_update_leader_epoch(self, leader_epoch: int) -> None:
        """Note a newer leader epoch (-1 = unknown); remembers at which attempt it changed (KIP-951)."""
        if leader_epoch >= 0 and (self.current_leader_epoch < 0 or self.current_leader_epoch < leader_epoch):
            self.attempts_when_leader_last_changed = self.attempts
            self.current_leader_epoch = leader_epoch

    def has_leader_changed_for_the_ongoing_retry(self) -> bool:
        """True if this retry goes to a newer leader than the previous attempt (skip the backoff)."""
        attempts = self.attempts
        return attempts >= 1 and attempts == self.attempts_when_leader_last_changed

    # -- completion ------------------------------------------------------------------------------
    def is_done(self) -> bool:
        return self.final_state is not None

    def done(
        self,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None = None,
        record_errors: dict[int, BaseException] | None = None,
    ) -> bool:
        """Complete the batch: success if ``error`` is None (and no ``record_errors``), else failure.

        ``record_errors`` maps a record index to its own error; the others get ``error``. The first
        completion wins; later calls return False (a late success after a failure is logged).
        """
        failed = error is not None or bool(record_errors)
        state = _FAILED if failed else _SUCCEEDED
        return self._complete(state, base_offset, log_append_time, error, record_errors)

    def succeed(self, base_offset: int, log_append_time: int) -> bool:
        """``done(base_offset, log_append_time)``: every record succeeded (the Sender's usual answer), in
        fewer steps. A batch without callback entries (every batch of the bulk Arrow path) publishes and
        finishes its result in one call."""
        with _FINAL_STATE_LOCK:
            previous = self.final_state
            if previous is None:
                self.final_state = _SUCCEEDED
        if previous is not None:
            return self._complete(_SUCCEEDED, base_offset, log_append_time, None, None)  # logs, returns False
        if not self._callbacks:
            self.result.succeed(base_offset, log_append_time)
            return True
        self._publish(base_offset, log_append_time, None, None)
        return True

    def abort(self, error: BaseException) -> bool:
        """Fail the batch with ``error`` without it having been answered (final state ABORTED)."""
        return self._complete(_ABORTED, NO_OFFSET, NO_TIMESTAMP, error, None)

    def _complete(
        self,
        state: FinalState,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None,
        record_errors: dict[int, BaseException] | None,
    ) -> bool:
        with _FINAL_STATE_LOCK:
            previous = self.final_state
            if previous is None:
                self.final_state = state
        if previous is not None:
            if previous is _SUCCEEDED:
                log.warning("Ignored %s for batch %s that had already SUCCEEDED", state.value, self)
            elif state is _SUCCEEDED:
                log.debug("Batch %s succeeded (base offset %d) after it had already %s",
                          self, base_offset, previous.value)
            return False
        if state is _SUCCEEDED and record_errors is None:
            error = None
        if error is None and record_errors:
            error = next(iter(record_errors.values()))
        self._publish(base_offset, log_append_time, error, record_errors)
        return True

    def _publish(self, base_offset: int, log_append_time: int, error: BaseException | None,
                 record_errors: dict[int, BaseException] | None) -> None:
        """Set the result, run the callbacks, wake the waiters (the final state is already taken)."""
        result = self.result
        result.set(base_offset, log_append_time, error, record_errors)
        callbacks = self._callbacks
        if callbacks:
            try:
                if error is None and not self.is_split_batch:
                    self._run_success_callbacks(callbacks)
                else:
                    self._run_callbacks(callbacks)
            finally:
                self._callbacks = []  # the entries are not kept after completion (see _new_callback_list)
        result.finish()

    def _run_success_callbacks(self, callbacks: list[object]) -> None:
        """Every record succeeded and the batch was not made by a split, so every entry is
        ``callback, index, timestamp_delta, key_size, value_size``: build the metadata directly."""
        topic, partition = self.tp
        result = self.result
        base = result.base_offset
        log_append_time = result.log_append_time
        base_timestamp = self.builder.base_timestamp
        if _c_run_success_callbacks is not None:
            _c_run_success_callbacks(callbacks, RecordMetadata, topic, partition, base, base_timestamp,
                                     log_append_time, _report_callback_error)
            return
        new = tuple.__new__
        it = iter(callbacks)
        if base != -1 and log_append_time == -1:  # the usual case, with less work per record
            for callback, index, ts_delta, key_size, value_size in zip(it, it, it, it, it):
                try:
                    callback(new(RecordMetadata, (topic, partition, base + index,  # type: ignore[operator]
                                                  base_timestamp + ts_delta,  # type: ignore[operator]
                                                  key_size, value_size)), None)
                except KeyboardInterrupt:
                    raise
                except BaseException:  # future.py: everything but KeyboardInterrupt
                    log.exception("Error executing user-provided callback on message for topic-partition %s-%d",
                                  topic, partition)
            return
        for callback, index, ts_delta, key_size, value_size in zip(it, it, it, it, it):
            try:
                metadata = new(RecordMetadata, (
                    topic, partition, -1 if base == -1 else base + index,  # type: ignore[operator]
                    base_timestamp + ts_delta if log_append_time == -1 else log_append_time,  # type: ignore[operator]
                    key_size, value_size))
                callback(metadata, None)  # type: ignore[operator]
            except KeyboardInterrupt:
                raise
            except BaseException:  # future.py: everything but KeyboardInterrupt
                log.exception("Error executing user-provided callback on message for topic-partition %s-%d",
                              topic, partition)

    def _run_callbacks(self, callbacks: list[object]) -> None:
        for i in range(0, len(callbacks), 5):
            callback = callbacks[i]
            try:
                # A future may come from a batch this one was split from: resolve its index here.
                future = self._future_at(i)
                result, index = future._resolve()
                error = result.error_for(index)
                if error is None:
                    callback(future._metadata(result, index), None)  # type: ignore[operator]
                else:  # as Java: the partition is known, every other field is -1
                    callback(RecordMetadata(self.tp[0], self.tp[1], -1, -1, -1, -1), error)  # type: ignore[operator]
            except KeyboardInterrupt:
                raise
            except BaseException:  # future.py: everything but KeyboardInterrupt
                log.exception("Error executing user-provided callback on message for topic-partition %s-%d",
                              self.tp[0], self.tp[1])

    # -- splitting (MESSAGE_TOO_LARGE) -----------------------------------------------------------
    def split(self, split_batch_size: int, new_builder: BuilderFactory | None = None) -> list[ProducerBatch]:
        """Rebuild this batch's records into batches of about ``split_batch_size`` bytes.

        The new batches are not pooled, keep ``created_ms``, get consecutive sequences if this batch had
        one, and take over the callbacks; this batch's result then redirects every record to its new
        batch and completes (its own final state is FAILED).
        """
        if self.final_state is not None:
            raise IllegalStateError(f"Cannot split a batch that is already {self.final_state.value}")
        records = self.builder.records
        if not records:
            raise IllegalStateError(f"Cannot split an empty producer batch for {self.tp[0]}-{self.tp[1]}")
        make = new_builder or self._default_builder_factory()
        batches: list[ProducerBatch] = []
        starts: list[int] = []
        batch: ProducerBatch | None = None
        for index, (timestamp, key, value, headers) in enumerate(records):
            if batch is not None and batch.builder.try_append(timestamp, key, value, headers) >= 0:
                batch.record_count += 1
                continue
            if batch is not None:
                batch.builder.close_for_appends()
            limit = max(split_batch_size, estimate_batch_size_upper_bound(key, value, headers))
            batch = ProducerBatch(self.tp, make(limit), self.created_ms)
            batch.is_split_batch = True
            batch.builder.try_append(timestamp, key, value, headers)  # a new batch always takes one record
            batch.record_count = 1
            batches.append(batch)
            starts.append(index)
        assert batch is not None
        batch.builder.close_for_appends()

        # Move the callbacks (in append order) to the batch now holding their record.
        flat = self._callbacks
        for i in range(0, len(flat), 5):
            future = self._future_at(i)  # futures of fast-path records are made here, pointing at this batch
            _, index = future._resolve()
            batches[bisect.bisect_right(starts, index) - 1]._callbacks += (flat[i], future, 0, 0, 0)
        self._callbacks = []

        if self.has_sequence():
            sequence = self.base_sequence
            for new in batches:
                new.set_producer_state(self.producer_id, self.producer_epoch, sequence, self.is_transactional)
                sequence = increment_sequence(sequence, new.record_count)

        self.result.set_redirect(starts, [new.result for new in batches])
        with _FINAL_STATE_LOCK:
            if self.final_state is None:
                self.final_state = FinalState.FAILED
        self.result.done(
            NO_OFFSET, NO_TIMESTAMP, RecordTooLargeError(f"batch for {self.tp[0]}-{self.tp[1]} was split")
        )
        return batches

    def _default_builder_factory(self) -> BuilderFactory:
        """New builders with this batch's codec, level and ratio estimate (Java's split reuses the
        builder's ``Compression``)."""
        builder = self.builder
        compression, level, ratio = builder.compression, builder.compression_level, builder.compression_ratio_estimate

        def make(limit: int) -> RecordBatchBuilder:
            return RecordBatchBuilder(None, limit, compression, level, ratio)

        return make

    def append_tails(self, offsets: memoryview, data: memoryview, start: int, stop: int, timestamp: int,
                     now: float) -> int:
        """The bulk path: append records from pre-encoded tails (``RecordBatchBuilder.append_tails``)
        while they fit; returns how many. They have no callbacks (the caller tracks them by index
        range: the first is at ``record_count`` before the call)."""
        count = self.builder.append_tails(offsets, data, start, stop, timestamp)
        if count:
            self.record_count += count
            self.last_append_ms = now
        return count

    def append_encoded(self, records: memoryview, count: int, timestamp: int, limit: int, now: float) -> bool:
        """The bulk path: ``count`` records encoded ahead for this empty batch with write limit ``limit``
        (``RecordBatchBuilder.append_encoded``); False when the batch cannot take them as they are."""
        if not self.builder.append_encoded(records, count, timestamp, limit):
            return False
        self.record_count = count
        self.last_append_ms = now
        return True

    def __repr__(self) -> str:
        return f"ProducerBatch({self.tp[0]}-{self.tp[1]}, records={self.record_count})"
