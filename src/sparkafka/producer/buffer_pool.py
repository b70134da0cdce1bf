"""The producer's memory budget (Kafka's ``BufferPool``).

How it works: ``buffer.memory`` bytes are split between a free list of ``batch.size`` buffers that are
reused (so the common case allocates nothing) and a counter of not-yet-allocated ("non-pooled")
bytes. ``allocate(size)`` hands out a pooled buffer when ``size == batch.size`` and one is free;
otherwise it takes ``size`` bytes from the counter, first releasing free-list buffers into the counter
if needed, and builds the new ``bytearray`` outside the lock (giving the bytes back if that fails).
When there is not enough memory the caller queues a ``threading.Condition`` (all on the one pool
lock) at the tail of a FIFO and waits up to ``max.block.ms``; memory released by ``deallocate`` is
given to the head waiter, which keeps collecting partial amounts until it has ``size`` bytes, so the
longest waiter is served first. A waiter that times out returns what it collected and raises
``BufferExhaustedError``; ``close()`` wakes every waiter with ``ProducerClosedError``. Bytes handed
out never exceed ``buffer.memory``.

Short buffers under memory pressure (a departure from Java's ``BufferPool``/``RecordAccumulator``,
where every new batch takes ``batch.size`` whatever it will hold): ``allocate(batch.size, ...,
least=n)`` (a new batch whose first record needs ``n`` bytes) returns a ``batch.size`` buffer while
memory is plentiful, but a short one, ``batch.size / SHORT_BUFFER_DIVISOR`` and at least ``n`` bytes,
when callers are waiting for memory or taking ``batch.size`` would leave less than half of
``buffer.memory`` available (the accumulator asks for that only with many partition queues:
``RecordAccumulator._count_queues``). The batch then takes more as it fills: ``try_allocate(size)`` never
blocks and returns None when the memory is not there right now or callers are already queued (it
never jumps the FIFO); the accumulator copies the records into the larger buffer and gives the short
one back (``RecordAccumulator`` "growth"). With thousands of partitions, ``batch.size`` buffers for
each would use up ``buffer.memory`` with batches holding one record or two (32 MiB / 16 KiB = 2,048
batches for 6,000 partitions), and once callers wait for memory the Sender sends everything at once:
batches of about one record.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from sparkafka._clock import Clock, wait_seconds
from sparkafka.errors import BufferExhaustedError, ConfigError, ProducerClosedError, RecordTooLargeError

__all__ = ["SHORT_BUFFER_DIVISOR", "BufferPool"]

SHORT_BUFFER_DIVISOR = 8
"""Under memory pressure a new batch's buffer is ``batch.size // SHORT_BUFFER_DIVISOR`` bytes (at least
what its first record needs); 2 KiB for the default 16 KiB, about 16 records of 100 bytes. It doubles
as the batch fills, while memory allows."""


class BufferPool:
    """A bounded pool of ``bytearray`` buffers with FIFO waiting when memory runs out."""

    __slots__ = (
        "_clock",
        "_closed",
        "_free",
        "_lock",
        "_metrics_hook",
        "_non_pooled",
        "_ratio_marks",
        "_waiters",
        "exhausted_count",
        "poolable_size",
        "total_memory",
        "wait_time_ms_total",
    )

    def __init__(
        self,
        total_memory: int,
        poolable_size: int,
        clock: Clock,
        metrics_hook: Callable[[float], None] | None = None,
    ) -> None:
        if total_memory < 0:
            raise ConfigError(f"buffer.memory must be >= 0, got {total_memory}", "buffer.memory")
        if poolable_size < 1:
            raise ConfigError(f"batch.size must be >= 1 for the buffer pool, got {poolable_size}",
                              "batch.size")
        self.total_memory = total_memory
        self.poolable_size = poolable_size
        self._clock = clock
        self._metrics_hook = metrics_hook
        self._lock = threading.Lock()
        self._free: deque[bytearray] = deque()
        self._waiters: deque[threading.Condition] = deque()
        self._non_pooled = total_memory
        self._closed = False
        self.wait_time_ms_total = 0.0
        """Total time callers spent blocked in ``allocate`` (for ``bufferpool-wait-ratio``)."""
        self.exhausted_count = 0
        """How many allocations failed with ``BufferExhaustedError``."""
        now = clock.monotonic_ms()
        self._ratio_marks = [(now, 0.0), (now, 0.0)]  # (time, wait total) at the last two window starts

    # -- allocation ----------------------------------------------------------------------------
    def allocate(self, size: int, max_block_ms: float, least: int = 0) -> bytearray:
        """A buffer of ``size`` bytes, blocking up to ``max_block_ms`` for memory to be released.

        ``least`` (a new batch's first record, ``0 < least < size``): under memory pressure (callers
        waiting, or ``size`` would leave less than half of ``buffer.memory`` available) the buffer is
        shorter: ``size // SHORT_BUFFER_DIVISOR``, at least ``least`` bytes (see the module docstring)."""
        if size > self.total_memory:
            raise RecordTooLargeError(
                f"Attempt to allocate {size} bytes, but there is a hard limit of {self.total_memory} bytes "
                f"on memory allocations (buffer.memory={self.total_memory})"
            )
        if size < 0:
            raise ValueError(f"size must be >= 0, got {size}")
        buffer: bytearray | None = None
        lock = self._lock
        lock.acquire()
        try:
            if self._closed:
                raise ProducerClosedError("Producer closed while allocating memory")
            free = self._free
            poolable = self.poolable_size
            if 0 < least < size and (
                    self._waiters or 2 * (self._non_pooled + len(free) * poolable - size) < self.total_memory):
                short = size // SHORT_BUFFER_DIVISOR
                size = least if least > short else short
            if size == poolable and free:
                return free.popleft()
            if self._non_pooled + len(free) * poolable >= size:
                # Enough memory right now: take it from the non-pooled budget (freeing pooled buffers
                # into it first if necessary); the bytearray itself is built outside the lock.
                self._free_up(size)
                self._non_pooled -= size
            else:
                buffer = self._wait_for_memory(size, max_block_ms)
        finally:
            try:
                if self._waiters and (self._non_pooled > 0 or self._free):
                    self._waiters[0].notify()
            finally:
                lock.release()
        return self._new_buffer(size) if buffer is None else buffer

    def try_allocate(self, size: int) -> bytearray | None:
        """A buffer of ``size`` bytes if the memory is available right now and nobody is waiting for
        memory (it never jumps the FIFO), else None; never blocks (closed: None). For a batch that grows
        (see the module docstring)."""
        if size < 0 or size > self.total_memory:
            return None
        with self._lock:
            if self._closed or self._waiters:
                return None
            free = self._free
            poolable = self.poolable_size
            if size == poolable and free:
                return free.popleft()
            if self._non_pooled + len(free) * poolable < size:
                return None
            self._free_up(size)
            self._non_pooled -= size
        return self._new_buffer(size)

    def _new_buffer(self, size: int) -> bytearray:
        """Build a buffer for bytes already taken from the budget; if that fails (MemoryError) the bytes
        go back and the next waiter is woken (Java's ``safeAllocateByteBuffer``)."""
        try:
            return bytearray(size)
        except BaseException:
            with self._lock:
                self._non_pooled += size
                if self._waiters:
                    self._waiters[0].notify()
            raise

    def _wait_for_memory(self, size: int, max_block_ms: float) -> bytearray | None:
        """Queue as a waiter until ``size`` bytes are collected. Called with the lock held."""
        clock = self._clock
        more_memory = threading.Condition(self._lock)
        self._waiters.append(more_memory)
        accumulated = 0
        buffer: bytearray | None = None
        remaining_ms = float(max_block_ms)
        try:
            while accumulated < size:
                start = clock.monotonic_ms()
                try:
                    signalled = more_memory.wait(wait_seconds(remaining_ms / 1000.0)) if remaining_ms > 0 else False
                finally:
                    waited = max(0.0, clock.monotonic_ms() - start)
                    self._record_wait(waited)
                if self._closed:
                    raise ProducerClosedError("Producer closed while allocating memory")
                if not signalled:
                    self.exhausted_count += 1
                    raise BufferExhaustedError(
                        f"Failed to allocate {size} bytes within the configured max blocking time "
                        f"{max_block_ms:g} ms (buffer.memory={self.total_memory}, "
                        f"available={self._non_pooled + len(self._free) * self.poolable_size}, "
                        f"batch.size={self.poolable_size})"
                    )
                remaining_ms -= waited
                if accumulated == 0 and size == self.poolable_size and self._free:
                    # A whole pooled buffer came back: take it as is.
                    buffer = self._free.popleft()
                    accumulated = size
                else:
                    # Take what we can; we keep our claim on it while waiting for the rest.
                    self._free_up(size - accumulated)
                    got = min(size - accumulated, self._non_pooled)
                    self._non_pooled -= got
                    accumulated += got
            accumulated = 0  # success: the memory now belongs to the caller
        finally:
            # On failure give back whatever was collected.
            self._non_pooled += accumulated
            self._waiters.remove(more_memory)
        return buffer

    def _free_up(self, size: int) -> None:
        """Move pooled buffers (from the tail) into the non-pooled budget until it covers ``size``."""
        free = self._free
        poolable = self.poolable_size
        while free and self._non_pooled < size:
            free.pop()
            self._non_pooled += poolable

    def _record_wait(self, waited_ms: float) -> None:
        self.wait_time_ms_total += waited_ms
        hook = self._metrics_hook
        if hook is not None:
            hook(waited_ms)

    def deallocate(self, buffer: bytearray | None, size: int | None = None) -> None:
        """Return memory to the pool. ``size`` is what was allocated (defaults to ``len(buffer)``);
        only an untouched ``batch.size`` buffer goes back on the free list."""
        if buffer is None:
            return
        if size is None:
            size = len(buffer)
        with self._lock:
            if size == self.poolable_size and len(buffer) == size:
                self._free.append(buffer)
            else:
                self._non_pooled += size
            if self._waiters:
                self._waiters[0].notify()

    def wait_ratio(self, window_ms: float = 30000.0) -> float:
        """Fraction of time callers spent blocked in ``allocate`` over the last one to two windows
        (``bufferpool-wait-ratio``; with several blocked threads it can exceed 1, as in Java)."""
        now = self._clock.monotonic_ms()
        total = self.wait_time_ms_total
        marks = self._ratio_marks
        if now - marks[1][0] >= window_ms:
            marks[0] = marks[1]
            marks[1] = (now, total)
        start, start_total = marks[0]
        elapsed = now - start
        return (total - start_total) / elapsed if elapsed > 0 else 0.0

    # -- state ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Refuse new allocations and wake every waiter (they raise ``ProducerClosedError``)."""
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.notify()

    @property
    def closed(self) -> bool:
        return self._closed

    def queued(self) -> int:
        """How many callers are blocked waiting for memory (lock-free read)."""
        return len(self._waiters)

    def available_memory(self) -> int:
        """Unallocated bytes plus the bytes in the free list."""
        with self._lock:
            return self._non_pooled + len(self._free) * self.poolable_size

    def unallocated_memory(self) -> int:
        """Bytes not allocated at all (excludes the free list)."""
        with self._lock:
            return self._non_pooled

    def free_size(self) -> int:
        """Number of pooled buffers on the free list."""
        return len(self._free)

    def __repr__(self) -> str:
        return (
            f"BufferPool(total_memory={self.total_memory}, poolable_size={self.poolable_size}, "
            f"non_pooled={self._non_pooled}, free={len(self._free)}, waiters={len(self._waiters)})"
        )
