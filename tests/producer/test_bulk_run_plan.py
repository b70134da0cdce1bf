"""``RecordAccumulator.append_tails`` without the accelerator: new batches laid out ahead
(``tails_vector.encode_run``, a window at a time) give the batches the batch-by-batch path gives.

How it works: the Python ``append_tails`` is forced (``_c_append_tails`` patched away), and the same rows go
through two accumulators, one free to plan and one whose ``numpy_module`` is None; the drained batches are
compared byte for byte, and so are the segments the calls return and their errors. A spy counts the batches
that took planned rows, so a plan that was never used cannot pass for one that works, and each case says how
many it expects. The cases: calls that start in an open batch, exactly ``RUN_MIN_ROWS`` rows (or one fewer)
left after it, runs longer than one plan's window, another thread's record between the call's lock sections,
a refused planned batch, a row larger than ``batch.size``, batches of more than 8,192 records, and memory
running out halfway.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

import sparkafka.producer.accumulator as accumulator_module
import sparkafka.record.builder as builder_module
import sparkafka.record.tails_vector as vector_module
from producer.fakes import FakeCluster
from sparkafka._clock import ManualClock
from sparkafka.errors import BufferExhaustedError
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.arrow.tails import encode_tails, tail_buffers
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.record import decode_batch
from sparkafka.record.tails_vector import RUN_MIN_ROWS, numpy_module

T = "t"
TS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def python_append(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if numpy_module() is None:
        pytest.skip("numpy is not installed (it is in the dev group)")
    monkeypatch.setattr(builder_module, "_c_append_tails", None)
    yield


def _random_values(count: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    return [bytes(rng.randrange(256) for _ in range(rng.randrange(40, 160))) for _ in range(count)]


def _tails(values: list[bytes]) -> tuple[memoryview, memoryview, int]:
    keys = [b"k%d" % (i % 1000) for i in range(len(values))]
    return tail_buffers(encode_tails(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), None))


class _Run:
    """The batches, segments, errors and planned batches of one way of sending."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, plan: bool, values: list[bytes], calls: list[int], *,
                 batch_size: int = 16384, buffer_memory: int = 1 << 24, refuse_at: int = -1,
                 between: Callable[[RecordAccumulator, int], None] | None = None) -> None:
        with monkeypatch.context() as patch:
            if not plan:
                patch.setattr(accumulator_module, "numpy_module", lambda: None)
            self.planned = 0
            real = ProducerBatch.append_encoded
            run = self

            def spy(batch: ProducerBatch, *args: Any) -> bool:
                if run.planned == refuse_at:
                    run.planned += 1
                    return False
                ok = real(batch, *args)
                run.planned += ok
                return ok

            patch.setattr(ProducerBatch, "append_encoded", spy)
            clock = ManualClock()
            acc = RecordAccumulator(batch_size=batch_size, buffer_memory=buffer_memory, linger_ms=10, clock=clock)
            wakeups = [0]

            def wakeup() -> None:  # runs between the call's lock sections
                wakeups[0] += 1
                if between is not None:
                    between(acc, wakeups[0])

            offsets, data, first = _tails(values)
            self.segments: list[list[tuple[int, int]]] = []
            self.errors: list[type[BaseException] | None] = []
            at = first
            for rows in calls:
                done, error = acc.append_tails(T, 0, offsets, data, at, at + rows, TS, clock.monotonic_ms(), wakeup)
                self.segments.append([(index, count) for _, index, count in done])
                self.errors.append(None if error is None else type(error))
                at += rows
            batches: list[ProducerBatch] = []
            while more := acc.drain(FakeCluster.single_node(), {1}, 1 << 30, 0.0)[1]:
                batches += more
            self.batches = [bytes(batch.close()) for batch in batches]

    def records(self) -> int:
        return sum(len(decode_batch(batch).records) for batch in self.batches)


def _both(monkeypatch: pytest.MonkeyPatch, values: list[bytes], calls: list[int], **options: Any) -> _Run:
    """Send both ways; assert the same outcome; the planned run."""
    planned = _Run(monkeypatch, True, values, calls, **options)
    expected = _Run(monkeypatch, False, values, calls, **options)
    assert expected.planned == 0
    assert planned.batches == expected.batches
    assert planned.segments == expected.segments and planned.errors == expected.errors
    return planned


def _per_batch(value_size: int = 100, batch_size: int = 16384) -> int:
    """How many records of ``value_size``-byte values (keys as ``_tails``'s) one new batch takes."""
    offsets, data, first = _tails([b"v" * value_size] * 10_000)
    batch = builder_module.RecordBatchBuilder(bytearray(batch_size), batch_size)
    return batch.append_tails(offsets, data, first, first + 10_000, TS)


def test_random_rows_in_calls_that_start_in_an_open_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = [50, 2000, 300, 1000, 255]
    run = _both(monkeypatch, _random_values(sum(calls), seed=1), calls)
    assert run.records() == sum(calls)
    # every new batch of each call that leaves at least RUN_MIN_ROWS rows for new batches is planned
    expected = 0
    for rows, segments in zip(calls, run.segments, strict=True):
        into_open = segments[0][0] > 0  # its first rows went on in the batch the previous call left open
        left = rows - segments[0][1] if into_open else rows
        if left >= RUN_MIN_ROWS:
            expected += len(segments) - into_open
    assert 10 < expected == run.planned


def test_exactly_run_min_rows_left_after_the_open_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    per_batch = _per_batch()
    rest = per_batch - 50  # what the open batch still takes after a first call of 50 rows
    for left, planned in ((RUN_MIN_ROWS, -(-RUN_MIN_ROWS // per_batch)), (RUN_MIN_ROWS - 1, 0)):
        calls = [50, rest + left]
        run = _both(monkeypatch, [b"v" * 100] * sum(calls), calls)
        assert run.planned == planned, left


def test_a_run_longer_than_a_plan_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """~2.6 MB of tails: three windows of about 1 MiB, so a plan's arrays stay small; a batch cut by a
    window's end is planned again with the next window."""
    values = [b"v" * 100] * 24_000
    windows: list[int] = []
    real = vector_module.encode_run

    def spy(np: Any, offsets: memoryview, data: memoryview, start: int, stop: int, limit: int) -> Any:
        windows.append(int(offsets[stop]) - int(offsets[start]))
        return real(np, offsets, data, start, stop, limit)

    monkeypatch.setattr(accumulator_module, "encode_run", spy)
    run = _both(monkeypatch, values, [len(values)])
    assert run.records() == len(values) and run.planned == len(run.batches)
    assert len(windows) == 3 and max(windows) <= 1 << 20


def test_another_threads_record_between_lock_sections_ends_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """At the third wake-up another sender's record takes the partition's new batch; the call then appends
    into that one and goes on batch by batch."""
    def other_thread(acc: RecordAccumulator, wakeup: int) -> None:
        if wakeup == 3:
            dq = acc._queue(acc._topic_info(T), T, 0).deque
            dq[-1].builder.seal()  # the call's batch is full by then; make sure the record opens a new one
            acc.append(T, 0, TS, b"x", b"y" * 100, None, None, 0, 0.0, FakeCluster.single_node())

    run = _both(monkeypatch, [b"v" * 100] * 2000, [2000], between=other_thread)
    assert 1 <= run.planned < len(run.batches) - 1
    assert run.records() == 2001


def test_a_refused_planned_batch_ends_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    run = _both(monkeypatch, _random_values(3000, seed=7), [3000], refuse_at=3)
    assert run.planned == 4  # three planned batches, then the refusal; no plan after it


def test_a_row_larger_than_batch_size_means_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    values = [b"v" * 100] * 1000 + [b"w" * 20_000] + [b"v" * 100] * 1000
    run = _both(monkeypatch, values, [len(values)])
    assert run.planned == 0 and run.records() == len(values)


def test_batches_of_more_than_8192_records_mean_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    values = [b""] * 30_000  # ~9-byte records into 256 KB batches: offset deltas past 8,191
    run = _both(monkeypatch, values, [len(values)], batch_size=262_144)
    assert run.planned == 0 and run.records() == len(values)


def test_memory_running_out_halfway_ends_both_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """64 KB of buffer.memory and no time to wait: the call stops after four batches with the error."""
    run = _both(monkeypatch, [b"v" * 100] * 2000, [2000], buffer_memory=65_536)
    assert run.errors == [BufferExhaustedError]
    assert run.planned == len(run.batches) == 4 and 4 * 140 < run.records() < 4 * 150
