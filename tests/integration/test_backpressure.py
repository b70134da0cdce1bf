"""A small buffer.memory and a slow broker: send() blocks, gives up after max.block.ms with
BufferExhaustedError (in the returned future and the callback, as Java's send()), and the pool never
hands out more than buffer.memory (nor leaks any)."""

from __future__ import annotations

import threading
import time

import pytest

from sparkafka import errors
from sparkafka.producer.future import FailedFuture, RecordFuture, RecordMetadata
from sparkafka.producer.producer import KafkaProducer
from sparkafka.record.builder import estimate_batch_size_upper_bound

from .conftest import Target

pytestmark = pytest.mark.broker

MEMORY = 64 * 1024
BATCH = 16 * 1024
VALUE = b"x" * 1000


class PoolWatcher:
    """Samples the producer's pool accounting from another thread while the test runs."""

    def __init__(self, producer: KafkaProducer) -> None:
        self.producer = producer
        self.samples: list[tuple[float, float]] = []  # (available bytes, waiting threads)
        self.pool_views: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        pool = self.producer._accumulator.pool
        while not self._stop.is_set():
            m = self.producer.metrics()
            self.samples.append((m["buffer-available-bytes"], m["waiting-threads"]))
            self.pool_views.append(pool.available_memory())
            time.sleep(0.005)

    def __enter__(self) -> PoolWatcher:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def check_bounded(self) -> None:
        assert self.samples
        for available, _ in self.samples:
            assert 0 <= available <= MEMORY, available
        for available in self.pool_views:
            assert 0 <= available <= MEMORY, available


def _slow_producer(target: Target, max_block_ms: int, rtt_ms: int) -> tuple[KafkaProducer, str]:
    assert target.mock is not None
    topic = target.topic(1)
    producer = target.producer({"buffer.memory": MEMORY, "batch.size": BATCH, "linger.ms": 0,
                                "max.block.ms": max_block_ms})
    producer.send(topic, value=b"warm-up").result(10)  # connections and versions first
    target.mock.broker_set_rtt(-1, rtt_ms)
    return producer, topic


def test_send_blocks_then_fails_with_buffer_exhausted(mock_target: Target) -> None:
    producer, topic = _slow_producer(mock_target, max_block_ms=300, rtt_ms=2500)
    futures: list[RecordFuture] = []
    blocked_for = 0.0
    failed: list[tuple[RecordMetadata, BaseException | None]] = []

    def on_done(metadata: RecordMetadata, exc: BaseException | None) -> None:
        if exc is not None:
            failed.append((metadata, exc))

    with PoolWatcher(producer) as watcher:
        for _ in range(10 * MEMORY // len(VALUE)):
            started = time.monotonic()
            future = producer.send(topic, value=VALUE, callback=on_done)
            blocked_for = time.monotonic() - started
            if isinstance(future, FailedFuture):
                break
            futures.append(future)
        else:
            pytest.fail("no send() failed although buffer.memory stayed exhausted")
        assert blocked_for >= 0.25, f"the failing send returned after {blocked_for:.3f}s, before max.block.ms"
        assert blocked_for < 0.3 + 3.0
        # the error is in the future and was handed to the callback before send() returned
        assert isinstance(future.error, errors.BufferExhaustedError)
        # the metadata names the partition the record was placed in (the sticky one: Java's AppendCallbacks
        # .setPartition comes before the wait for memory) and -1 elsewhere
        [(metadata, error)] = failed
        assert error is future.error and metadata.partition >= 0
        assert metadata._replace(partition=-1) == RecordMetadata(topic, -1, -1, -1, -1, -1)
        message = str(future.error)
        assert "300" in message and str(MEMORY) in message
        exhausted = producer.metrics()
        assert exhausted["buffer-exhausted-total"] == 1 and exhausted["buffer-exhausted-rate"] > 0
        assert exhausted["record-error-total"] == 1
        # no more records than buffer.memory could possibly hold were accepted, and at least one per batch
        # buffer the pool had (with linger.ms 0 the Sender may take each record away in a batch of its own,
        # which keeps its batch.size buffer until the slow answer: 4 records were seen under load)
        assert MEMORY // BATCH <= len(futures) <= MEMORY // len(VALUE)
        producer.flush(15)
    watcher.check_bounded()
    assert any(waiting >= 1 for _, waiting in watcher.samples)
    assert all(f.exception(0) is None for f in futures)
    assert producer._accumulator.pool.available_memory() == MEMORY  # nothing leaked
    metrics = producer.metrics()
    assert metrics["buffer-available-bytes"] == MEMORY
    assert metrics["bufferpool-wait-ratio"] > 0
    assert metrics["waiting-threads"] == 0


def test_blocked_send_resumes_when_memory_frees(mock_target: Target) -> None:
    producer, topic = _slow_producer(mock_target, max_block_ms=10_000, rtt_ms=400)
    count = 2 * MEMORY // len(VALUE)  # twice what fits: sends must wait for acknowledgements
    with PoolWatcher(producer) as watcher:
        started = time.monotonic()
        futures = [producer.send(topic, value=VALUE) for _ in range(count)]
        producer.flush(20)
        elapsed = time.monotonic() - started
    watcher.check_bounded()
    assert [f.result(0).offset for f in futures] == list(range(1, count + 1))
    assert elapsed >= 0.4  # at least one broker round trip was waited for
    assert any(waiting >= 1 for _, waiting in watcher.samples)
    assert producer._accumulator.pool.available_memory() == MEMORY


def test_close_wakes_a_send_blocked_on_memory(mock_target: Target) -> None:
    producer, topic = _slow_producer(mock_target, max_block_ms=60_000, rtt_ms=5000)
    outcome: list[BaseException] = []
    accepted: list[object] = []

    def fill() -> None:
        try:
            while True:
                accepted.append(producer.send(topic, value=VALUE))
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=fill)
    thread.start()
    deadline = time.monotonic() + 5
    while producer.metrics()["waiting-threads"] < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert producer.metrics()["waiting-threads"] == 1
    started = time.monotonic()
    producer.close(0)
    thread.join(3.0)
    assert not thread.is_alive(), "send() stayed blocked on memory after close()"
    assert time.monotonic() - started < 3.0
    assert isinstance(outcome[0], errors.ProducerClosedError)
    for f in accepted:
        assert isinstance(f.exception(0), errors.ProducerClosedError)  # type: ignore[attr-defined]


def test_max_block_ms_bounds_metadata_and_memory_waits_together(mock_target: Target) -> None:
    """send() may block at most max.block.ms in total, split between metadata and buffer memory."""
    mock = mock_target.mock
    assert mock is not None
    stuck = mock_target.topic(1, prefix="stuck")
    mock.partition_set_leader(stuck, 0, 1)
    late = mock_target._unique_topic("late")
    mock.topic_set_error(late, 3)  # metadata for ``late`` arrives only when the error is cleared
    producer = mock_target.producer({"buffer.memory": 2 * BATCH, "batch.size": BATCH, "linger.ms": 0,
                                     "max.block.ms": 1000})
    producer.send(stuck, value=b"warm-up").result(10)
    mock.broker_set_down(1)  # the leader of ``stuck`` is gone: its batches hold every byte of memory
    # records that need a whole batch.size buffer each (smaller ones get short buffers under pressure)
    whole = next(b"x" * n for n in range(BATCH) if estimate_batch_size_upper_bound(None, b"x" * n, None) == BATCH)
    for _ in range(2):
        producer.send(stuck, value=whole)
    assert producer.metrics()["buffer-available-bytes"] == 0
    timer = threading.Timer(0.6, mock.topic_set_error, (late, 0))
    timer.start()
    started = time.monotonic()
    try:
        error = producer.send(late, value=b"y").exception(0)
        elapsed = time.monotonic() - started
        assert isinstance(error, errors.BufferExhaustedError)
    finally:
        timer.cancel()
        producer.close(0)
    assert elapsed < 1.0 + 0.35, f"send() blocked {elapsed:.2f}s with max.block.ms=1000"
