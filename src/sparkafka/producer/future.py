"""Futures for sent records: one shared ``ProduceRequestResult`` per batch, one small future per record.

How it works: a batch owns a ``ProduceRequestResult`` that receives the broker's answer once (base
offset, log-append time, a batch-level error and optional per-record errors). Each ``send()`` returns
a ``FutureRecordMetadata`` holding only a reference to that result, the record's index in the batch
and what ``RecordMetadata`` needs (create timestamp, key/value sizes), so a record costs one small
slotted object and no lock. Completion has two phases: ``set`` publishes the values (``done()`` is
true from then on in the thread that runs the callbacks, so a callback may call ``result()`` on its own
future), then — after the batch has run the record callbacks in append order — ``finish`` wakes waiters
(other threads' ``get()`` returns only then, as Java's, whose batch latch counts down after the
callbacks) and runs listeners (``add_done_callback``, asyncio); ``succeed`` does both for a successful
batch with no callbacks. The ``threading.Event`` that blocking waiters sleep on is created
only if somebody actually blocks.

When the broker rejects a batch as too large it is split (``ProducerBatch.split``): the old result gets
a ``redirect`` table (record index -> new batch's result and index) before it completes, and every
future follows it, so user futures and callbacks complete from the new batches.
"""

from __future__ import annotations

import asyncio
import bisect
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any, NamedTuple

from sparkafka._clock import timeout_seconds, wait_seconds
from sparkafka.accel import ACCEL
from sparkafka.errors import KafkaTimeoutError

__all__ = [
    "FailedFuture",
    "FutureRecordMetadata",
    "ProduceRequestResult",
    "RecordCallback",
    "RecordFuture",
    "RecordMetadata",
]

log = logging.getLogger("sparkafka.producer")

_STATE_LOCK = threading.Lock()
"""Guards lazy Event creation and listener registration against ``finish`` (rare paths only)."""

NO_OFFSET = -1
NO_TIMESTAMP = -1


class RecordMetadata(NamedTuple):
    """Where a record was written. ``offset`` is -1 when unknown (acks=0, duplicate sequence)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int


RecordCallback = Callable[["RecordMetadata", "BaseException | None"], object]
"""A send callback: ``callback(metadata, None)`` on success; ``callback(metadata, error)`` on failure,
where, as in Java, ``metadata`` has the topic and partition and -1 in every other field."""


class ProduceRequestResult:
    """The outcome of one batch, shared by the futures of all its records."""

    __slots__ = (
        "_event",
        "_listeners",
        "_publisher",
        "base_offset",
        "completed",
        "error",
        "finished",
        "log_append_time",
        "partition",
        "record_errors",
        "redirect",
        "topic",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.base_offset = NO_OFFSET
        self.log_append_time = NO_TIMESTAMP
        self.error: BaseException | None = None
        self.record_errors: dict[int, BaseException] | None = None
        self.completed = False
        """Values are set (``set`` was called)."""
        self.finished = False
        """Callbacks have run and waiters were released (``finish`` was called)."""
        self.redirect: tuple[list[int], list[ProduceRequestResult]] | None = None
        """After a split: (first record index of each new batch, its result)."""
        self._event: threading.Event | None = None
        self._listeners: list[Callable[[], None]] | None = None
        self._publisher = 0
        """The thread that called ``set`` and runs the callbacks until ``finish`` (``done_for_caller``)."""

    # -- completion ----------------------------------------------------------------------------
    def set(
        self,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None = None,
        record_errors: dict[int, BaseException] | None = None,
    ) -> None:
        """Publish the outcome. ``record_errors`` maps record index to its own error; records not in
        it get ``error``."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = error
        self.record_errors = record_errors or None
        self._publisher = threading.get_ident()
        self.completed = True

    def done_for_caller(self) -> bool:
        """Whether a future of this batch counts as done for the calling thread: once the callbacks have run
        (``finished``: Java's ``get()`` and ``isDone()`` wait for the batch's latch, counted down after its
        callbacks), or at once (``completed``) in the thread running them, so that a callback may call
        ``result()`` on its own future (which would deadlock in Java)."""
        return self.finished or (self.completed and self._publisher == threading.get_ident())

    def finish(self) -> None:
        """Release waiters and run listeners (after ``set`` and the record callbacks)."""
        if not self.completed:
            raise RuntimeError("ProduceRequestResult.set must be called before finish")
        self._release()

    def succeed(self, base_offset: int, log_append_time: int) -> None:
        """``set(base_offset, log_append_time)`` then ``finish()``, in one call: a batch whose records all
        succeeded and that has no callbacks to run in between (``ProducerBatch.succeed``)."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self.error = None
        self.record_errors = None
        self.completed = True
        self._release()

    def _release(self) -> None:
        self.finished = True
        with _STATE_LOCK:
            event = self._event
            listeners = self._listeners
            self._listeners = None
        if event is not None:
            event.set()
        if listeners:
            for listener in listeners:
                try:
                    listener()
                except KeyboardInterrupt:
                    raise
                except BaseException:
                    log.exception("Error in a done-callback of a record future for %s-%d",
                                  self.topic, self.partition)

    def done(
        self,
        base_offset: int,
        log_append_time: int,
        error: BaseException | None = None,
        record_errors: dict[int, BaseException] | None = None,
    ) -> None:
        """``set`` then ``finish``."""
        self.set(base_offset, log_append_time, error, record_errors)
        self.finish()

    def error_for(self, index: int) -> BaseException | None:
        """The error of record ``index`` (None if it succeeded)."""
        record_errors = self.record_errors
        if record_errors is not None:
            return record_errors.get(index, self.error)
        return self.error

    # -- waiting -------------------------------------------------------------------------------
    def wait(self, timeout: float | None = None) -> bool:
        """Block until this batch — and, if it was split, every batch it was split into, and theirs — is
        finished. ``timeout`` in seconds bounds the whole wait; returns False if it ran out. The split
        batches are followed with a list, not by recursion, however often a batch was split."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pending: list[ProduceRequestResult] = [self]
        while pending:
            result = pending.pop()
            if not result.finished:
                event = result._event_to_wait()
                if event is not None and not event.wait(
                        None if deadline is None else wait_seconds(max(0.0, deadline - time.monotonic()))):
                    return False
            redirect = result.redirect
            if redirect is not None:
                pending.extend(redirect[1])
        return True

    def _event_to_wait(self) -> threading.Event | None:
        """The (lazily created) event to block on, or None if already finished."""
        with _STATE_LOCK:
            if self.finished:
                return None
            event = self._event
            if event is None:
                event = self._event = threading.Event()
            return event

    def add_listener(self, listener: Callable[[], None]) -> bool:
        """Run ``listener()`` at ``finish``. Returns False (and does not keep it) if already finished."""
        with _STATE_LOCK:
            if self.finished:
                return False
            if self._listeners is None:
                self._listeners = [listener]
            else:
                self._listeners.append(listener)
            return True

    # -- split ---------------------------------------------------------------------------------
    def set_redirect(self, starts: list[int], targets: list[ProduceRequestResult]) -> None:
        """After a split: record ``i`` now lives in ``targets[k]`` at index ``i - starts[k]`` where
        ``starts[k] <= i < starts[k + 1]``. Must be called before this result completes."""
        self.redirect = (starts, targets)

    def resolve(self, index: int) -> tuple[ProduceRequestResult, int]:
        """The result and index that finally hold record ``index`` (following splits)."""
        result = self
        redirect = result.redirect
        while redirect is not None:
            starts, targets = redirect
            k = bisect.bisect_right(starts, index) - 1
            index -= starts[k]
            result = targets[k]
            redirect = result.redirect
        return result, index

    def __repr__(self) -> str:
        state = "finished" if self.finished else "completed" if self.completed else "pending"
        return f"ProduceRequestResult({self.topic}-{self.partition}, {state}, base_offset={self.base_offset})"


# What a user's callback may raise without stopping the producer, logged before the next callback runs:
# everything but KeyboardInterrupt (``except KeyboardInterrupt: raise`` then ``except BaseException``, here,
# in ProducerBatch and in the C loop of _c/_accel.c). A callback calling ``sys.exit()``, or raising a
# BaseException of its own (pytest's ``Failed``, gevent's ``Timeout``), on the I/O thread would otherwise end
# that thread (``threading`` drops SystemExit silently), leaving its batch and every later record pending.


def _call_done_callback(fn: Callable[[Any], object], future: object) -> None:
    try:
        fn(future)
    except KeyboardInterrupt:
        raise
    except BaseException:
        log.exception("Error in a done-callback of a record future")


class _FutureStatePy:
    """A record future's fields, for builds without the accelerator: the attributes (and constructor)
    of ``sparkafka._accel.FutureState``, which the C send lane fills (``_c/_append.h``)."""

    __slots__ = ("_produce_result", "create_timestamp", "relative_offset", "serialized_key_size",
                 "serialized_value_size")

    def __init__(
        self,
        produce_result: ProduceRequestResult,
        relative_offset: int,
        create_timestamp: int,
        serialized_key_size: int,
        serialized_value_size: int,
    ) -> None:
        self._produce_result = produce_result
        self.relative_offset = relative_offset
        self.create_timestamp = create_timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size


if TYPE_CHECKING:
    _FutureState = _FutureStatePy
else:
    _FutureState = _FutureStatePy if ACCEL is None else ACCEL.FutureState


class FutureRecordMetadata(_FutureState):
    """The future ``send()`` returns (``concurrent.futures.Future``-like, and awaitable); made with
    ``(produce_result, relative_offset, create_timestamp, serialized_key_size, serialized_value_size)``."""

    __slots__ = ()

    def _resolve(self) -> tuple[ProduceRequestResult, int]:
        result = self._produce_result
        if result.redirect is None:
            return result, self.relative_offset
        return result.resolve(self.relative_offset)

    def _metadata(self, result: ProduceRequestResult, index: int) -> RecordMetadata:
        base = result.base_offset
        log_append_time = result.log_append_time
        return RecordMetadata(
            result.topic,
            result.partition,
            base if base == NO_OFFSET else base + index,
            self.create_timestamp if log_append_time == NO_TIMESTAMP else log_append_time,
            self.serialized_key_size,
            self.serialized_value_size,
        )

    def value(self) -> RecordMetadata:
        """The metadata, assuming the record succeeded (used to build callback arguments)."""
        result, index = self._resolve()
        return self._metadata(result, index)

    def _wait(self, timeout: float | None) -> tuple[ProduceRequestResult, int]:
        result, index = self._resolve()
        if result.finished or result.done_for_caller():
            return result, index
        timeout = timeout_seconds(timeout, "result()/exception()", negative_ok=True)
        if timeout is None:
            while True:
                result.wait(None)
                result, index = self._resolve()
                if result.done_for_caller():
                    return result, index
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not result.wait(remaining):
                raise KafkaTimeoutError(
                    f"Timeout after waiting for {timeout * 1000:g} ms for the record metadata")
            result, index = self._resolve()
            if result.done_for_caller():
                return result, index

    # -- concurrent.futures.Future-like API ------------------------------------------------------
    def done(self) -> bool:
        return self._resolve()[0].done_for_caller()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the record's error, or ``KafkaTimeoutError`` if not done
        within ``timeout`` seconds."""
        result, index = self._wait(timeout)
        error = result.error_for(index)
        if error is not None:
            raise error.with_traceback(None)
        return self._metadata(result, index)

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        result, index = self._wait(timeout)
        return result.error_for(index)

    def add_done_callback(self, fn: Callable[[FutureRecordMetadata], object]) -> None:
        """Call ``fn(self)`` once when the record is final (at once if it already is)."""
        result, _ = self._resolve()
        if result.add_listener(lambda: self.add_done_callback(fn)):
            return
        # finished: either final, or it was split and we must follow the redirect
        if result.redirect is not None:
            self.add_done_callback(fn)
            return
        _call_done_callback(fn, self)

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()

            def wake(_: FutureRecordMetadata) -> None:
                try:
                    loop.call_soon_threadsafe(_set_if_pending, waiter)
                except RuntimeError:  # the loop is closed
                    pass

            self.add_done_callback(wake)
            yield from waiter.__await__()
        return self.result()

    def __repr__(self) -> str:
        result, index = self._resolve()
        state = "done" if result.completed else "pending"
        return f"FutureRecordMetadata({result.topic}-{result.partition}#{index}, {state})"


def _set_if_pending(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


class FailedFuture:
    """A future that failed before the record reached the accumulator (Java's ``FutureFailure``)."""

    __slots__ = ("_error",)

    def __init__(self, error: BaseException) -> None:
        self._error = error

    @property
    def error(self) -> BaseException:
        """The error the record failed with."""
        return self._error

    def done(self) -> bool:
        return True

    def result(self, timeout: float | None = None) -> RecordMetadata:
        raise self._error.with_traceback(None)

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        return self._error

    def add_done_callback(self, fn: Callable[[Any], object]) -> None:
        """Call ``fn(self)`` at once (typed loosely, so that a callback written for ``send()``'s futures
        type-checks for both kinds)."""
        _call_done_callback(fn, self)

    def cancel(self) -> bool:
        return False

    def cancelled(self) -> bool:
        return False

    def running(self) -> bool:
        return False

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        yield from ()  # makes this a generator; never suspends
        return self.result()

    def __repr__(self) -> str:
        return f"FailedFuture({self._error!r})"


RecordFuture = FutureRecordMetadata | FailedFuture
"""What ``KafkaProducer.send`` returns: the record's future, or one that failed in ``send()`` itself."""
