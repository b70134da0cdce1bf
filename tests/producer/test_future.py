"""Record futures: metadata from the batch result, errors, timeouts, callbacks and asyncio."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from sparkafka.errors import KafkaTimeoutError, NotLeaderOrFollowerError
from sparkafka.producer.future import FailedFuture, FutureRecordMetadata, ProduceRequestResult, RecordMetadata


def _future(result: ProduceRequestResult, index: int, ts: int = 111) -> FutureRecordMetadata:
    return FutureRecordMetadata(result, index, ts, 3, 5)


def test_metadata_offsets_and_create_time() -> None:
    result = ProduceRequestResult("t", 2)
    futures = [_future(result, i) for i in range(3)]
    assert not futures[0].done()
    result.done(100, -1)
    assert [f.result().offset for f in futures] == [100, 101, 102]
    assert futures[1].result() == RecordMetadata("t", 2, 101, 111, 3, 5)
    assert futures[0].exception() is None
    assert futures[0].done() and not futures[0].cancel() and not futures[0].cancelled()


def test_log_append_time_wins_and_unknown_offset_stays_minus_one() -> None:
    result = ProduceRequestResult("t", 0)
    future = _future(result, 4)
    result.done(-1, 999)
    assert future.result().offset == -1
    assert future.result().timestamp == 999


def test_batch_error_and_per_record_errors() -> None:
    result = ProduceRequestResult("t", 0)
    futures = [_future(result, i) for i in range(3)]
    generic = RuntimeError("batch had invalid records")
    specific = ValueError("record 1 is bad")
    result.done(-1, -1, generic, {1: specific})
    assert futures[0].exception() is generic
    assert futures[1].exception() is specific
    with pytest.raises(ValueError, match="record 1"):
        futures[1].result()
    with pytest.raises(NotLeaderOrFollowerError):
        other = ProduceRequestResult("t", 1)
        f = _future(other, 0)
        other.done(-1, -1, NotLeaderOrFollowerError("moved"))
        f.result()


def test_result_timeout() -> None:
    future = _future(ProduceRequestResult("t", 0), 0)
    with pytest.raises(KafkaTimeoutError):
        future.result(timeout=0.01)
    with pytest.raises(KafkaTimeoutError):
        future.exception(timeout=0)


def test_blocking_result_is_released_by_another_thread() -> None:
    result = ProduceRequestResult("t", 0)
    future = _future(result, 1)
    got: list[RecordMetadata] = []
    t = threading.Thread(target=lambda: got.append(future.result(timeout=10)))
    t.start()
    deadline = time.monotonic() + 10
    while result._event is None:  # the waiter creates the batch's event when it blocks on it
        assert time.monotonic() < deadline, "result() never waited"
        time.sleep(0.001)
    result.done(7, -1)
    t.join()
    assert got[0].offset == 8


def test_values_visible_before_finish_and_wait_waits_for_finish() -> None:
    result = ProduceRequestResult("t", 0)
    future = _future(result, 0)
    result.set(5, -1)
    assert future.done() and future.result(timeout=0).offset == 5  # a callback may read its own future
    assert not result.wait(0)
    result.finish()
    assert result.wait(0)


def test_other_threads_see_a_future_done_only_after_the_batch_callbacks_ran() -> None:
    """While the thread completing a batch runs its callbacks (between ``set`` and ``finish``), that thread
    may read the batch's futures (a callback calling ``result()`` on its own), but any other thread's
    ``get()`` waits and its ``done()`` is False: Java's ``get()``/``isDone()`` wait for the batch latch,
    counted down after every callback. Another thread's ``get()`` used to return while an earlier
    record's callback was still running."""
    result = ProduceRequestResult("t", 0)
    a, b = _future(result, 0), _future(result, 1)
    in_callback, release = threading.Event(), threading.Event()
    seen_in_callback: list[object] = []

    def complete() -> None:  # the Sender's part: set, callbacks, finish
        result.set(7, -1)
        seen_in_callback.append((a.done(), a.result(0).offset))
        in_callback.set()
        release.wait(10)
        result.finish()

    sender = threading.Thread(target=complete)
    sender.start()
    try:
        assert in_callback.wait(10)
        assert seen_in_callback == [(True, 7)]
        assert not b.done() and not a.done()
        with pytest.raises(KafkaTimeoutError):
            b.result(timeout=0.05)
        release.set()
        assert b.result(timeout=10).offset == 8 and b.done()
    finally:
        release.set()
        sender.join(10)


def test_done_callbacks_run_once_before_and_after_completion() -> None:
    result = ProduceRequestResult("t", 0)
    future = _future(result, 0)
    seen: list[str] = []
    future.add_done_callback(lambda f: seen.append("early"))
    future.add_done_callback(lambda f: 1 / 0)  # logged, does not stop the others
    future.add_done_callback(lambda f: seen.append(f"offset {f.result().offset}"))
    assert seen == []
    result.done(10, -1)
    assert seen == ["early", "offset 10"]
    future.add_done_callback(lambda f: seen.append("late"))
    assert seen == ["early", "offset 10", "late"]


def test_await_from_asyncio_completed_by_another_thread() -> None:
    result = ProduceRequestResult("t", 0)
    future = _future(result, 2)

    async def main() -> RecordMetadata:
        threading.Timer(0.02, lambda: result.done(40, -1)).start()
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.001)

        task = asyncio.ensure_future(ticker())
        metadata = await future
        task.cancel()
        assert ticks > 1  # the loop kept running while we waited
        return metadata

    assert asyncio.run(main()).offset == 42


def test_await_raises_the_record_error() -> None:
    result = ProduceRequestResult("t", 0)
    future = _future(result, 0)

    async def main() -> None:
        threading.Timer(0.01, lambda: result.done(-1, -1, RuntimeError("boom"))).start()
        await future

    with pytest.raises(RuntimeError, match="boom"):
        asyncio.run(main())


def test_failed_future() -> None:
    error = ValueError("bad topic")
    future = FailedFuture(error)
    assert future.done() and future.exception() is error
    with pytest.raises(ValueError):
        future.result()
    seen: list[object] = []
    future.add_done_callback(seen.append)
    assert seen == [future]

    async def main() -> None:
        await future

    with pytest.raises(ValueError):
        asyncio.run(main())


def test_redirect_follows_split_results() -> None:
    old = ProduceRequestResult("t", 0)
    futures = [_future(old, i) for i in range(5)]
    first, second = ProduceRequestResult("t", 0), ProduceRequestResult("t", 0)
    old.set_redirect([0, 3], [first, second])
    seen: list[int] = []
    futures[4].add_done_callback(lambda f: seen.append(f.result().offset))
    old.done(-1, -1, RuntimeError("split"))
    assert not futures[0].done()
    assert not old.wait(0)  # waits for the batches it was split into
    first.done(100, -1)
    second.done(200, -1)
    assert old.wait(0)
    assert [f.result().offset for f in futures] == [100, 101, 102, 200, 201]
    assert seen == [201]
