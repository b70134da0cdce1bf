"""``RecordAccumulator.append_tails`` without the accelerator: a run of new batches laid out at once
(``tails_vector.encode_run``) gives the batches the batch-by-batch path gives.

How it works: the Python ``append_tails`` is forced (``_c_append_tails`` patched away), and the same rows go
through two accumulators, one free to plan and one whose ``numpy_module`` is None; the drained batches are
compared byte for byte, and so are the segments the calls return. A spy counts the batches that took their
planned rows, so a plan that was never used cannot pass for one that works. One more case refuses a planned
batch halfway: the rest of the call goes batch by batch, with the same bytes.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest

import sparkafka.producer.accumulator as accumulator_module
import sparkafka.record.builder as builder_module
from producer.fakes import FakeCluster
from sparkafka._clock import ManualClock
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.arrow.tails import encode_tails, tail_buffers
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.record import decode_batch
from sparkafka.record.tails_vector import numpy_module

T = "t"
TS = 1_700_000_000_000


@pytest.fixture(autouse=True)
def python_append(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    if numpy_module() is None:
        pytest.skip("numpy is not installed (it is in the dev group)")
    monkeypatch.setattr(builder_module, "_c_append_tails", None)
    yield


def _rows(count: int, seed: int) -> tuple[memoryview, memoryview, int]:
    rng = random.Random(seed)
    keys = [b"k%d" % rng.randrange(1000) for _ in range(count)]
    values = [bytes(rng.randrange(256) for _ in range(rng.randrange(40, 160))) for _ in range(count)]
    return tail_buffers(encode_tails(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), None))


def _send(monkeypatch: pytest.MonkeyPatch, plan: bool, calls: list[int], seed: int,
          refuse_at: int = -1) -> tuple[list[bytes], list[list[tuple[int, int]]], int]:
    """The rows, in calls of ``calls`` rows, to partition 0; the drained batches, each call's segments
    (index of the first row in its batch, count) and how many batches took planned rows."""
    if not plan:
        monkeypatch.setattr(accumulator_module, "numpy_module", lambda: None)
    taken = [0]
    real = ProducerBatch.append_encoded

    def spy(self: ProducerBatch, *args: Any) -> bool:
        if taken[0] == refuse_at:
            taken[0] += 1
            return False
        ok = real(self, *args)
        taken[0] += ok
        return ok

    monkeypatch.setattr(ProducerBatch, "append_encoded", spy)
    acc = RecordAccumulator(batch_size=16384, buffer_memory=1 << 24, linger_ms=10, clock=ManualClock())
    offsets, data, first = _rows(sum(calls), seed)
    segments = []
    at = first
    for rows in calls:
        done, error = acc.append_tails(T, 0, offsets, data, at, at + rows, TS, 1e12, lambda: None)
        assert error is None
        segments.append([(index, count) for _, index, count in done])
        at += rows
    batches = acc.drain(FakeCluster.single_node(), {1}, 1 << 30, 0.0)[1]
    while True:  # one drain takes what fits max_size; the rest follows
        more = acc.drain(FakeCluster.single_node(), {1}, 1 << 30, 0.0)[1]
        if not more:
            break
        batches += more
    monkeypatch.undo()
    monkeypatch.setattr(builder_module, "_c_append_tails", None)
    return [bytes(batch.close()) for batch in batches], segments, taken[0]


@pytest.mark.parametrize("calls", [[2000], [50, 2000, 300, 1000], [300, 255, 256]])
def test_planned_batches_equal_the_batch_by_batch_ones(monkeypatch: pytest.MonkeyPatch, calls: list[int]) -> None:
    planned, planned_segments, used = _send(monkeypatch, True, calls, seed=len(calls))
    expected, expected_segments, unused = _send(monkeypatch, False, calls, seed=len(calls))
    assert unused == 0
    assert used >= sum(rows // 150 for rows in calls if rows >= 256) - len(calls)  # every full new batch
    assert planned == expected and planned_segments == expected_segments
    assert sum(len(decode_batch(b).records) for b in planned) == sum(calls)


def test_a_refused_planned_batch_ends_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    expected, expected_segments, _ = _send(monkeypatch, False, [3000], seed=7)
    got, segments, taken = _send(monkeypatch, True, [3000], seed=7, refuse_at=3)
    assert taken == 4  # three planned batches, then the refusal; no plan after it
    assert got == expected and segments == expected_segments
