"""ProducerBatch: appends, completion order and rules, producer state, and splitting."""

from __future__ import annotations

import gc
import logging
import weakref

import pytest

from sparkafka.accel import ACCEL
from sparkafka.errors import IllegalStateError
from sparkafka.producer.future import FutureRecordMetadata, ProduceRequestResult, RecordMetadata
from sparkafka.producer.producer_batch import FinalState, ProducerBatch
from sparkafka.record import CompressionType, RecordBatchBuilder, decode_batch, encode_batch

Seen = list[tuple[str, "RecordMetadata | None", "BaseException | None"]]


def make_batch(
    limit: int = 16384, created: float = 1000.0, compression: CompressionType = CompressionType.NONE
) -> ProducerBatch:
    return ProducerBatch(("t", 1), RecordBatchBuilder(bytearray(limit), limit, compression), created,
                         bytearray(0), False)


def recorder(seen: Seen, name: str):  # type: ignore[no-untyped-def]
    def callback(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        seen.append((name, metadata, error))
    return callback


def fill(
    batch: ProducerBatch, n: int, size: int = 10, seen: Seen | None = None
) -> list[FutureRecordMetadata]:
    futures = []
    for i in range(n):
        cb = recorder(seen, f"r{i}") if seen is not None else None
        future = batch.try_append(5000 + i, b"k%d" % i, bytes([i % 256]) * size, None, cb, 1000.0)
        assert future is not None
        futures.append(future)
    return futures


def test_append_indexes_and_callbacks_only_where_given() -> None:
    batch = make_batch()
    f0 = batch.try_append(1, None, b"v", None, None, 1.0)
    f1 = batch.try_append(2, b"key", None, None, lambda m, e: None, 2.0)
    assert f0 is not None and f1 is not None
    assert (f0.relative_offset, f1.relative_offset) == (0, 1)
    assert (f1.serialized_key_size, f1.serialized_value_size) == (3, -1)
    assert batch.record_count == 2
    assert batch.callbacks is not None and len(batch.callbacks) == 1
    kept = batch.callbacks[0][1]  # an equivalent future: the batch keeps ints, not the future itself
    assert kept is not f1 and kept._produce_result is f1._produce_result
    assert (kept.relative_offset, kept.create_timestamp, kept.serialized_key_size, kept.serialized_value_size) \
        == (1, 2, 3, -1)
    assert batch.last_append_ms == 2.0


class _Owner:
    """Holds a batch and gives it a callback bound to itself: a reference cycle through the batch."""

    def __init__(self) -> None:
        self.batch = make_batch()
        self.calls = 0

    def on_ack(self, metadata: RecordMetadata | None, error: BaseException | None) -> None:
        self.calls += 1


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_callback_entries_are_not_gc_tracked_and_are_dropped_at_completion(outcome: str) -> None:
    owner = _Owner()
    batch = owner.batch
    assert batch.try_append(1, b"k", b"v", None, owner.on_ack, 1.0) is not None
    # With the accelerator the cyclic GC does not walk the entries (one slot per record per collection).
    assert gc.is_tracked(batch._callbacks) is (ACCEL is None)
    if outcome == "success":
        batch.done(7, -1)
    else:
        batch.abort(RuntimeError("boom"))
    assert owner.calls == 1 and batch.callbacks is None
    # Completion let go of the entries, so the cycle owner -> batch -> callback -> owner is collectable
    # (it would not be if the untracked list still held the callback).
    ref = weakref.ref(owner)
    del owner, batch
    gc.collect()
    assert ref() is None


def test_no_room_returns_none() -> None:
    batch = make_batch(limit=200)
    assert batch.try_append(1, None, b"x" * 100, None, None, 0) is not None
    assert batch.try_append(1, None, b"x" * 100, None, None, 0) is None
    assert batch.record_count == 1


def test_callbacks_run_in_append_order_and_a_raising_one_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    batch = make_batch()
    seen: Seen = []
    batch.try_append(1, None, b"a", None, recorder(seen, "first"), 0)
    batch.try_append(1, None, b"b", None, lambda m, e: 1 / 0, 0)
    batch.try_append(1, None, b"c", None, None, 0)
    batch.try_append(1, None, b"d", None, recorder(seen, "last"), 0)
    with caplog.at_level(logging.ERROR, logger="sparkafka.producer"):
        assert batch.done(50, -1)
    outcome = [(name, m.offset if m else None, e) for name, m, e in seen]
    assert outcome == [("first", 50, None), ("last", 53, None)]
    assert "callback" in caplog.text and "ZeroDivisionError" in caplog.text
    assert batch.final_state is FinalState.SUCCEEDED
    assert batch.result.wait(0)


def test_first_completion_wins() -> None:
    batch = make_batch()
    seen: Seen = []
    futures = fill(batch, 2, seen=seen)
    error = RuntimeError("expired")
    assert batch.done(-1, -1, error)
    assert batch.final_state is FinalState.FAILED
    assert not batch.done(10, -1)  # a late success is ignored
    assert not batch.abort(RuntimeError("again"))
    assert [e for _, _, e in seen] == [error, error]
    assert futures[1].exception() is error


@pytest.mark.parametrize("with_callbacks", [True, False])
def test_succeed_is_done_without_an_error(with_callbacks: bool, caplog: pytest.LogCaptureFixture) -> None:
    """``succeed`` (the Sender's usual answer) completes a batch exactly as ``done(base, log_append_time)``:
    the same callbacks, metadata, futures and final state; without callbacks (the bulk Arrow path) the result
    is published and finished in one call."""
    outcomes = []
    for complete in ("done", "succeed"):
        batch = make_batch()
        seen: Seen = []
        futures = fill(batch, 3, seen=seen if with_callbacks else None)
        released: list[bool] = []
        result = batch.result

        def listener(result: ProduceRequestResult = result, released: list[bool] = released) -> None:
            released.append(result.completed)

        assert result.add_listener(listener)
        assert getattr(batch, complete)(40, 123)
        assert batch.final_state is FinalState.SUCCEEDED and batch.result.finished and released == [True]
        assert batch.callbacks is None
        outcomes.append(([(name, m, e) for name, m, e in seen], [f.result(0) for f in futures]))
        with caplog.at_level(logging.WARNING, logger="sparkafka.producer"):
            assert not batch.succeed(41, -1)  # the first completion wins, the second is logged
        assert "already SUCCEEDED" in caplog.text
        caplog.clear()
    assert outcomes[0] == outcomes[1]
    assert [m.offset for m in outcomes[1][1]] == [40, 41, 42]
    assert {m.timestamp for m in outcomes[1][1]} == {123}


def test_succeed_after_a_failure_changes_nothing() -> None:
    batch = make_batch()
    futures = fill(batch, 2)
    error = RuntimeError("expired")
    assert batch.abort(error)
    assert not batch.succeed(10, -1)
    assert batch.final_state is FinalState.ABORTED and futures[0].exception() is error


def test_abort_and_record_errors() -> None:
    batch = make_batch()
    futures = fill(batch, 2)
    assert batch.abort(RuntimeError("closed"))
    assert batch.final_state is FinalState.ABORTED
    with pytest.raises(RuntimeError, match="closed"):
        futures[0].result()

    other = make_batch()
    seen: Seen = []
    futures = fill(other, 3, seen=seen)
    bad = ValueError("record 2 invalid")
    generic = RuntimeError("batch had invalid records")
    other.done(-1, -1, generic, {2: bad})
    assert [e for _, _, e in seen] == [generic, generic, bad]


def test_close_is_idempotent_and_carries_producer_state() -> None:
    batch = make_batch()
    fill(batch, 3)
    batch.set_producer_state(77, 3, 10, True)
    wire = batch.close()
    assert batch.close() is wire and batch.records_bytes is wire and batch.is_closed()
    decoded = decode_batch(bytes(wire))
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (77, 3, 10)
    assert decoded.is_transactional
    assert [r.value for r in decoded.records] == [bytes([i]) * 10 for i in range(3)]
    assert batch.last_sequence == 12


def test_producer_state_patched_after_close() -> None:
    batch = make_batch()
    fill(batch, 2)
    wire = batch.close()
    assert not batch.has_sequence()
    batch.reset_producer_state(5, 1, 40)
    assert batch.sequence_has_been_reset() and batch.has_sequence()
    decoded = decode_batch(bytes(wire))  # the CRC is verified while decoding
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (5, 1, 40)
    batch.close()
    assert not batch.sequence_has_been_reset()


def test_retry_bookkeeping_and_timeouts() -> None:
    batch = make_batch(created=1000.0)
    fill(batch, 1)
    assert not batch.in_retry() and batch.attempts == 0
    batch.reenqueued(1500.0)
    assert batch.in_retry() and batch.attempts == 1 and batch.last_attempt_ms == 1500.0
    assert batch.waited_time_ms(1400.0) == 0.0 and batch.waited_time_ms(1600.0) == 100.0
    assert not batch.has_reached_delivery_timeout(1000, 1999.0)
    assert batch.has_reached_delivery_timeout(1000, 2000.0)
    batch.drained(1700.0)
    batch.drained(1650.0)
    assert batch.drained_ms == 1700.0 and batch.queue_time_ms() == 700.0


def test_leader_change_during_retry_skips_backoff() -> None:
    batch = make_batch()
    batch.maybe_update_leader_epoch(3)
    assert not batch.has_leader_changed_for_the_ongoing_retry()  # not a retry
    batch.reenqueued(0)
    batch.maybe_update_leader_epoch(3)
    assert not batch.has_leader_changed_for_the_ongoing_retry()  # same leader
    batch.maybe_update_leader_epoch(4)
    assert batch.has_leader_changed_for_the_ongoing_retry()
    batch.reenqueued(0)
    assert not batch.has_leader_changed_for_the_ongoing_retry()
    batch.maybe_update_leader_epoch(-1)  # unknown epoch changes nothing
    assert batch.current_leader_epoch == 4


def test_split_moves_records_callbacks_and_sequences() -> None:
    big = make_batch(created=123.0)
    seen: Seen = []
    futures = fill(big, 10, size=100, seen=seen)
    big.set_producer_state(9, 2, 50, False)
    big.close()
    parts = big.split(350)
    assert len(parts) > 1
    assert sum(p.record_count for p in parts) == 10
    assert all(p.created_ms == 123.0 and p.is_split_batch and not p.pooled for p in parts)
    sequences = [p.base_sequence for p in parts]
    expected = [50]
    for p in parts[:-1]:
        expected.append(expected[-1] + p.record_count)
    assert sequences == expected
    assert all(p.producer_id == 9 and p.producer_epoch == 2 for p in parts)
    assert big.callbacks is None and big.final_state is FinalState.FAILED
    assert not futures[0].done()  # the user's futures now follow the new batches

    offset = 1000
    for p in parts:
        decoded = decode_batch(bytes(p.close()))
        assert decoded.base_sequence == p.base_sequence
        p.done(offset, -1)
        offset += 100
    values = [f.result() for f in futures]
    assert [v.timestamp for v in values] == [5000 + i for i in range(10)]
    assert [name for name, _, _ in seen] == [f"r{i}" for i in range(10)]
    assert [m.offset if m is not None else None for _, m, _ in seen] == [f.result().offset for f in futures]
    assert big.result.wait(0)


def test_split_of_a_split_batch_and_failures_reach_original_futures() -> None:
    big = make_batch()
    futures = fill(big, 8, size=100)
    first_round = big.split(500)
    again = first_round[0].split(150)
    assert len(again) == first_round[0].record_count
    error = RuntimeError("no")
    for p in again + first_round[1:]:
        p.done(-1, -1, error)
    assert all(f.exception() is error for f in futures)


def test_split_uses_the_given_builder_factory() -> None:
    big = make_batch(compression=CompressionType.GZIP)
    fill(big, 4, size=50)
    made: list[int] = []

    def factory(limit: int) -> RecordBatchBuilder:
        made.append(limit)
        return RecordBatchBuilder(None, limit, CompressionType.GZIP, 1, 1.0)

    parts = big.split(200, factory)
    assert made and all(limit >= 200 for limit in made)
    assert decode_batch(bytes(parts[0].close())).compression is CompressionType.GZIP


def test_split_of_empty_or_completed_batch_is_an_error() -> None:
    with pytest.raises(IllegalStateError):
        make_batch().split(100)
    done = make_batch()
    fill(done, 2)
    done.done(0, -1)
    with pytest.raises(IllegalStateError, match="SUCCEEDED"):
        done.split(100)


def test_split_without_a_factory_keeps_the_codec_level_and_ratio_estimate() -> None:
    # Java's split builds the new batches with the big batch's Compression (codec and level, KIP-390):
    # a gzip level-1 batch must not be recompressed at gzip's default level when split.
    records = [(5000 + i, b"k%d" % i, b"the value of record %d " % i * 40, None) for i in range(6)]
    big = ProducerBatch(("t", 1), RecordBatchBuilder(bytearray(1 << 16), 1 << 16, CompressionType.GZIP, 1, 0.5),
                        1000.0)
    for ts, key, value, headers in records:
        assert big.try_append(ts, key, value, headers, None, 1000.0) is not None
    big.close()
    parts = big.split(2000)
    assert len(parts) > 1
    assert all(p.builder.compression_ratio_estimate == pytest.approx(0.5) for p in parts)
    first = 0
    for part in parts:
        expected = encode_batch(records[first:first + part.record_count], compression=CompressionType.GZIP,
                                compression_level=1)
        assert bytes(part.close()) == expected
        first += part.record_count
    assert encode_batch(records[:parts[0].record_count], compression=CompressionType.GZIP) != \
        bytes(parts[0].close())  # the level shows in the bytes
