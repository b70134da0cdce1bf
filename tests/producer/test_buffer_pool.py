"""BufferPool: pooling, accounting, FIFO waiters, timeouts, close, and the total never exceeded."""

from __future__ import annotations

import random
import threading
import time

import pytest

from sparkafka._clock import ManualClock
from sparkafka.errors import BufferExhaustedError, ProducerClosedError, RecordTooLargeError
from sparkafka.producer.buffer_pool import SHORT_BUFFER_DIVISOR, BufferPool


class SteppingClock(ManualClock):
    """Every reading moves time forward by ``step`` ms (so each wait measures exactly ``step``)."""

    def __init__(self, step: float) -> None:
        super().__init__()
        self.step = step

    def monotonic_ms(self) -> float:
        self.advance(self.step)
        return super().monotonic_ms()


def _wait_until(predicate: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        time.sleep(0.001)


def test_poolable_buffers_are_reused() -> None:
    pool = BufferPool(1000, 100, ManualClock())
    first = pool.allocate(100, 0)
    assert len(first) == 100
    pool.deallocate(first)
    assert pool.free_size() == 1
    assert pool.allocate(100, 0) is first
    assert pool.free_size() == 0


def test_non_pooled_sizes_go_back_to_the_counter() -> None:
    pool = BufferPool(1000, 100, ManualClock())
    big = pool.allocate(250, 0)
    assert len(big) == 250
    assert pool.unallocated_memory() == 750
    pool.deallocate(big)
    assert pool.free_size() == 0
    assert pool.unallocated_memory() == 1000


def test_accounting_and_free_up_from_the_free_list() -> None:
    pool = BufferPool(300, 100, ManualClock())
    buffers = [pool.allocate(100, 0) for _ in range(3)]
    assert pool.available_memory() == 0
    for buffer in buffers:
        pool.deallocate(buffer)
    assert (pool.free_size(), pool.unallocated_memory(), pool.available_memory()) == (3, 0, 300)
    odd = pool.allocate(250, 0)  # needs three pooled buffers released into the counter
    assert pool.free_size() == 0
    assert pool.available_memory() == 50
    pool.deallocate(odd, 250)
    assert pool.available_memory() == 300


def test_deallocate_with_explicit_size_of_a_resized_buffer() -> None:
    pool = BufferPool(300, 100, ManualClock())
    buffer = pool.allocate(100, 0)
    buffer.extend(b"x" * 10)  # no longer poolable-shaped: its memory returns to the counter
    pool.deallocate(buffer, 100)
    assert (pool.free_size(), pool.unallocated_memory()) == (0, 300)


def test_larger_than_total_is_a_record_too_large_error() -> None:
    pool = BufferPool(1000, 100, ManualClock())
    with pytest.raises(RecordTooLargeError, match=r"buffer\.memory=1000"):
        pool.allocate(1001, 0)


def test_timeout_message_and_memory_returned() -> None:
    pool = BufferPool(100, 100, ManualClock())
    held = pool.allocate(60, 0)
    with pytest.raises(BufferExhaustedError) as info:
        pool.allocate(50, 30)
    text = str(info.value)
    assert "Failed to allocate 50 bytes within the configured max blocking time 30 ms" in text
    assert "buffer.memory=100" in text and "available=40" in text
    assert pool.exhausted_count == 1
    assert pool.queued() == 0
    assert pool.available_memory() == 40
    pool.deallocate(held)
    assert pool.available_memory() == 100


def test_partial_memory_taken_while_waiting_is_returned_on_timeout() -> None:
    pool = BufferPool(100, 100, ManualClock())
    a = pool.allocate(50, 0)
    b = pool.allocate(50, 0)
    failures: list[BaseException] = []

    def want_80() -> None:
        try:
            pool.allocate(80, 300)
        except BufferExhaustedError as exc:
            failures.append(exc)

    t = threading.Thread(target=want_80)
    t.start()
    _wait_until(lambda: pool.queued() == 1)
    pool.deallocate(a)  # the waiter takes these 50 bytes as a partial claim
    t.join()
    assert failures, "the waiter should have timed out"
    assert pool.available_memory() == 50  # its partial claim came back
    pool.deallocate(b)
    assert pool.available_memory() == 100


def test_waiters_are_served_first_in_first_out() -> None:
    pool = BufferPool(100, 100, ManualClock())
    first_half = pool.allocate(50, 0)
    second_half = pool.allocate(50, 0)
    finished: list[str] = []

    def want(name: str, size: int) -> None:
        pool.allocate(size, 10_000)
        finished.append(name)

    a = threading.Thread(target=want, args=("A", 80))
    a.start()
    _wait_until(lambda: pool.queued() == 1)
    b = threading.Thread(target=want, args=("B", 20))
    b.start()
    _wait_until(lambda: pool.queued() == 2)

    pool.deallocate(first_half)  # 50 bytes: all go to A (the head), none to the later, smaller B
    a.join(0.2)
    b.join(0.2)
    assert finished == []
    assert pool.queued() == 2
    assert pool.available_memory() == 0

    pool.deallocate(second_half)  # A completes with 80, then hands the remaining 20 to B
    a.join()
    b.join()
    assert finished == ["A", "B"]
    assert pool.available_memory() == 0


def test_close_wakes_waiters_and_refuses_new_allocations() -> None:
    pool = BufferPool(100, 100, ManualClock())
    pool.allocate(100, 0)
    outcome: list[BaseException] = []

    def waiter() -> None:
        try:
            pool.allocate(10, 60_000)
        except BaseException as exc:
            outcome.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    _wait_until(lambda: pool.queued() == 1)
    pool.close()
    t.join(5)
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], ProducerClosedError)
    assert pool.queued() == 0
    with pytest.raises(ProducerClosedError):
        pool.allocate(10, 0)


def test_wait_time_is_recorded_for_the_wait_ratio() -> None:
    waits: list[float] = []
    clock = SteppingClock(step=5.0)
    pool = BufferPool(10, 10, clock, metrics_hook=waits.append)
    pool.allocate(10, 0)
    with pytest.raises(BufferExhaustedError):
        pool.allocate(10, 1)
    assert waits == [5.0]
    assert pool.wait_time_ms_total == 5.0
    assert pool.wait_ratio() > 0


def test_threads_never_exceed_total_memory() -> None:
    total, poolable = 1000, 100
    pool = BufferPool(total, poolable, ManualClock())
    lock = threading.Lock()
    outstanding = [0]
    peak = [0]
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(300):
                size = poolable if rng.random() < 0.6 else rng.randint(1, 400)
                buffer = pool.allocate(size, 10_000)
                with lock:
                    outstanding[0] += size
                    peak[0] = max(peak[0], outstanding[0])
                    assert outstanding[0] <= total
                with lock:
                    outstanding[0] -= size
                pool.deallocate(buffer, size)
        except BaseException as exc:  # pragma: no cover - the failure path
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert 0 < peak[0] <= total
    assert pool.available_memory() == total
    assert pool.queued() == 0


def test_a_failed_buffer_allocation_gives_its_memory_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Java's ``safeAllocateByteBuffer``: if building the buffer itself fails (MemoryError), the bytes
    reserved for it go back to the pool and the next waiter is woken."""
    from sparkafka.producer import buffer_pool

    pool = BufferPool(1000, 100, ManualClock())

    def no_memory(size: int) -> bytearray:
        raise MemoryError(f"cannot build {size} bytes")

    monkeypatch.setattr(buffer_pool, "bytearray", no_memory, raising=False)
    with pytest.raises(MemoryError):
        pool.allocate(250, 0)
    monkeypatch.undo()
    assert pool.unallocated_memory() == 1000
    assert len(pool.allocate(1000, 0)) == 1000


# ------------------------------------------------------------------ short buffers and growth (try_allocate)

def test_try_allocate_takes_what_is_free_and_never_blocks() -> None:
    pool = BufferPool(1000, 100, ManualClock())
    pooled = pool.allocate(100, 0)
    pool.deallocate(pooled)
    assert pool.try_allocate(100) is pooled  # a free batch.size buffer is reused
    odd = pool.try_allocate(300)
    assert odd is not None and len(odd) == 300
    assert pool.available_memory() == 600
    assert pool.try_allocate(601) is None  # not there right now: None at once, nothing taken
    assert pool.available_memory() == 600
    assert pool.try_allocate(2000) is None  # above buffer.memory
    pool.deallocate(odd)
    pool.close()
    assert pool.try_allocate(10) is None


def test_try_allocate_does_not_jump_the_queue_of_waiters() -> None:
    pool = BufferPool(100, 100, ManualClock())
    held = pool.allocate(60, 0)
    got: list[bytearray] = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(80, 10_000)))
    waiter.start()
    _wait_until(lambda: pool.queued() == 1)
    assert pool.unallocated_memory() == 40  # free memory, but somebody waits for it
    assert pool.try_allocate(10) is None
    pool.deallocate(held)
    waiter.join(5)
    assert len(got[0]) == 80
    assert pool.try_allocate(10) is not None  # no waiter any more


def test_allocate_gives_batch_size_while_memory_is_plentiful_then_short_buffers() -> None:
    pool = BufferPool(8000, 1000, ManualClock())
    taken = [pool.allocate(1000, 0, 150) for _ in range(3)]  # 8000 -> 5000 available: plenty
    assert [len(b) for b in taken] == [1000, 1000, 1000]
    assert len(pool.allocate(1000, 0, 150)) == 1000  # leaves 4000, half of buffer.memory: still plenty
    short = pool.allocate(1000, 0, 150)  # would leave 3000: below half
    assert len(short) == 150  # at least what the record needs
    assert len(pool.allocate(1000, 0, 90)) == 1000 // SHORT_BUFFER_DIVISOR
    assert len(pool.allocate(1000, 0)) == 1000  # without ``least``: always what was asked
    assert pool.available_memory() == 8000 - 5000 - 150 - 125


def test_allocate_gives_short_buffers_while_callers_wait() -> None:
    pool = BufferPool(10_000, 1000, ManualClock())
    held = pool.allocate(9500, 0)
    waiter = threading.Thread(target=lambda: pool.allocate(1000, 10_000))
    waiter.start()
    _wait_until(lambda: pool.queued() == 1)
    assert len(pool.allocate(1000, 0, 200)) == 200  # 500 available but a caller waits: short
    pool.deallocate(held, 9500)
    waiter.join(5)
    assert pool.queued() == 0
