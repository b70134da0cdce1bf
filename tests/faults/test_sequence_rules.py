"""The idempotent producer's sequence rules, stepped by hand (no broker): the Sender and a real
TransactionManager around the fake network client of ``producer.test_sender_steps``.

Each test scripts the broker's answers (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, a non-retriable
error, an expiry on the wire...) and checks, on the decoded Produce requests, which batch is resent with
which producer id and sequence.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from producer.test_sender_steps import PRODUCE_VERSION, FakeRequest, Rig
from sparkafka import errors
from sparkafka.producer.idempotence import IdempotenceManager
from sparkafka.protocol.messages import ApiKey

T = "t"
P0, P1 = (T, 0), (T, 1)


def _init_requests(rig: Rig) -> list[FakeRequest]:
    return [r for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID]


def _answer_init(rig: Rig, pid: int, epoch: int = 0) -> None:
    pending = [r for r in _init_requests(rig) if not r.answered]
    if not pending:
        rig.step()  # the request goes out in the loop after the answer that asked for it
        pending = [r for r in _init_requests(rig) if not r.answered]
    assert len(pending) == 1, f"expected one InitProducerId in flight, got {len(pending)}"
    rig.client.respond(pending[0], {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid,
                                    "producer_epoch": epoch})
    rig.step()


def _rig(**kwargs: object) -> Rig:
    rig = Rig(idempotent=True, retry_backoff_ms=10, **kwargs)  # type: ignore[arg-type]
    rig.step()
    _answer_init(rig, 1000)
    return rig


def _prime(rig: Rig) -> None:
    """One batch of P0 sent and acknowledged: from then on several batches of P0 may be in flight
    (until the partition's first batch is acknowledged, it goes alone: see the first-batch test)."""
    rig.send(b"prime")
    rig.client.respond_produce(rig.step_one())
    rig.step()


def _ids(req: FakeRequest, tp: tuple[str, int] = P0) -> tuple[int, int, int]:
    batch = req.batches()[tp]
    return batch.producer_id, batch.base_sequence, len(batch.records)


def test_up_to_five_batches_of_a_partition_are_in_flight_with_consecutive_sequences() -> None:
    rig = _rig()
    _prime(rig)
    reqs = []
    for i in range(5):
        rig.send(b"%d" % i)
        reqs.append(rig.step_one())
    assert [_ids(r) for r in reqs] == [(1000, i + 1, 1) for i in range(5)]
    assert PRODUCE_VERSION >= 3


def test_a_partitions_first_batch_goes_alone_until_it_is_acknowledged() -> None:
    """A broker with no state for the producer on a partition appends a first batch with any sequence
    (Kafka's ProducerAppendInfo.checkSequence): had "b" (sequence 1) gone out while "a" (sequence 0) was
    answered NOT_LEADER_OR_FOLLOWER (a topic just created), "b" would be written and "a" refused with
    OUT_OF_ORDER_SEQUENCE_NUMBER until delivery.timeout.ms (seen on Apache Kafka 4.4)."""
    rig = _rig()
    f_a = rig.send(b"a")
    req_a = rig.step_one()
    f_b = rig.send(b"b")
    assert rig.step(10) == []  # "b" waits for the first acknowledgement
    rig.client.respond_produce(req_a, codes={P0: 6})  # NOT_LEADER_OR_FOLLOWER: retriable
    rig.step()
    retry_a = rig.step_one(10)
    assert _ids(retry_a) == (1000, 0, 1)
    assert rig.step(10) == []
    rig.client.respond_produce(retry_a, offsets={P0: 0})
    rig.step()
    req_b = rig.step_one(10)
    assert _ids(req_b) == (1000, 1, 1)
    rig.client.respond_produce(req_b, offsets={P0: 1})
    rig.step()
    assert (f_a.result(0).offset, f_b.result(0).offset) == (0, 1)


def test_a_retry_goes_alone_and_before_later_batches() -> None:
    rig = _rig()
    _prime(rig)
    f_a = rig.send(b"a")
    req_a = rig.step_one()
    f_b = rig.send(b"b")
    req_b = rig.step_one()
    rig.client.respond_produce(req_a, codes={P0: 19})  # NOT_ENOUGH_REPLICAS: retriable
    rig.client.respond_produce(req_b, codes={P0: errors.OUT_OF_ORDER_SEQUENCE_NUMBER})  # collateral
    rig.step()
    retry_a = rig.step_one(10)
    assert _ids(retry_a) == (1000, 1, 1)
    assert rig.step(10) == []  # "b" waits: it is not the lowest sequence in flight
    rig.client.respond_produce(retry_a, offsets={P0: 1})
    rig.step()
    retry_b = rig.step_one(10)
    assert _ids(retry_b) == (1000, 2, 1)
    rig.client.respond_produce(retry_b, offsets={P0: 2})
    rig.step()
    assert (f_a.result(0).offset, f_b.result(0).offset) == (1, 2)
    assert len(_init_requests(rig)) == 1  # no new producer id was needed


def test_a_real_sequence_gap_restarts_the_partition_under_a_new_epoch() -> None:
    """KIP-360: the idempotent producer asks for the next epoch of its id (InitProducerId with the current
    id and epoch), as Java's bumpIdempotentEpochAndResetIdIfNeeded, and renumbers the partition from 0."""
    rig = _rig()
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={P0: errors.OUT_OF_ORDER_SEQUENCE_NUMBER})
    rig.step()
    rig.step()
    assert len(_init_requests(rig)) == 2
    bump = _init_requests(rig)[1].body
    assert (bump["producer_id"], bump["producer_epoch"]) == (1000, 0)
    assert rig.step(10) == []  # nothing for the partition until the new epoch is there
    _answer_init(rig, 1000, epoch=1)
    resent = rig.step_one(10)
    assert _ids(resent) == (1000, 0, 1) and resent.batches()[P0].producer_epoch == 1
    rig.client.respond_produce(resent, offsets={P0: 4})
    rig.step()
    assert future.result(0).offset == 4


def test_a_broker_that_refuses_the_epoch_bump_gives_a_new_producer_id() -> None:
    """Tansu answers a bump with an error: the producer then asks for a brand-new id (and keeps doing so)."""
    rig = _rig()
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={P0: errors.OUT_OF_ORDER_SEQUENCE_NUMBER})
    rig.step()
    rig.step()
    bump = next(r for r in _init_requests(rig) if not r.answered)
    rig.client.respond(bump, {"throttle_time_ms": 0, "error_code": errors.INVALID_PRODUCER_EPOCH,
                              "producer_id": -1, "producer_epoch": -1})
    for _ in range(5):
        rig.step(200)
        if any(not r.answered for r in _init_requests(rig)):
            break
    fresh = [r for r in _init_requests(rig) if not r.answered]
    assert len(fresh) == 1 and (fresh[0].body["producer_id"], fresh[0].body["producer_epoch"]) == (-1, -1)
    _answer_init(rig, 2000)
    resent = rig.step_one(10)
    assert _ids(resent) == (2000, 0, 1)
    rig.client.respond_produce(resent, offsets={P0: 0})
    rig.step()
    assert future.result(0).offset == 0


def test_unknown_producer_id_renumbers_even_when_the_same_id_comes_back() -> None:
    """Tansu forgets producers on restart and may hand out the same id again: sequences still restart."""
    rig = _rig()
    _prime(rig)
    rig.send(b"a")
    first = rig.step_one()
    rig.send(b"b")
    second = rig.step_one()
    assert (_ids(first)[1], _ids(second)[1]) == (1, 2)
    rig.client.respond_produce(first, codes={P0: errors.UNKNOWN_PRODUCER_ID})
    rig.client.respond_produce(second, codes={P0: errors.UNKNOWN_PRODUCER_ID})
    rig.step()
    _answer_init(rig, 1000)  # same id and epoch as before
    resent = rig.step_one(10)
    assert _ids(resent) == (1000, 0, 1)
    rig.client.respond_produce(resent, offsets={P0: 0})
    rig.step()
    assert _ids(rig.step_one(10)) == (1000, 1, 1)


def test_a_non_retriable_error_fails_only_its_batch_and_later_batches_move_to_a_new_id() -> None:
    rig = _rig()
    _prime(rig)
    f_a = rig.send(b"a")
    req_a = rig.step_one()
    f_b = rig.send(b"b")
    req_b = rig.step_one()
    rig.client.respond_produce(req_a, codes={P0: 87})  # INVALID_RECORD: "a" is not written
    rig.client.respond_produce(req_b, codes={P0: errors.OUT_OF_ORDER_SEQUENCE_NUMBER})
    rig.step()
    assert isinstance(f_a.exception(0), errors.error_class_for_code(87))
    assert not f_b.done()
    _answer_init(rig, 3000)
    resent = rig.step_one(10)
    assert _ids(resent) == (3000, 0, 1) and resent.values(P0) == [b"b"]
    rig.client.respond_produce(resent, offsets={P0: 9})
    rig.step()
    assert f_b.result(0).offset == 9


def test_other_partitions_keep_their_old_id_until_their_batches_complete() -> None:
    rig = _rig()
    rig.send(b"a", partition=0)
    rig.send(b"x", partition=1)
    req = rig.step_one()
    rig.client.respond_produce(req, codes={P0: errors.OUT_OF_ORDER_SEQUENCE_NUMBER, P1: 19})
    rig.step()
    _answer_init(rig, 4000)
    rig.send(b"y", partition=1)
    resent = rig.step_one(10)
    # p0 restarts under the new id; p1 resends "x" under the old id (it may already be written)
    assert _ids(resent, P0) == (4000, 0, 1)
    assert _ids(resent, P1) == (1000, 0, 1)
    assert rig.step(10) == []  # "y" waits until the old-id batch of p1 is done
    rig.client.respond_produce(resent)
    rig.step()
    assert _ids(rig.step_one(10), P1) == (4000, 0, 1)


def test_an_expired_batch_on_the_wire_holds_new_batches_until_its_fate_is_known() -> None:
    rig = _rig(delivery_timeout_ms=1000)
    f_a = rig.send(b"a")
    req_a = rig.step_one()
    rig.step(1000)
    assert isinstance(f_a.exception(0), errors.DeliveryTimeoutError)
    f_b = rig.send(b"b")
    assert rig.step(10) == []  # unresolved: "a" may or may not be written
    rig.client.respond_produce(req_a, offsets={P0: 0})  # late: "a" was written after all
    rig.step()
    nxt = rig.step_one(10)
    assert _ids(nxt) == (1000, 1, 1)  # resolved: the sequence simply continues
    rig.client.respond_produce(nxt, offsets={P0: 1})
    rig.step()
    assert f_b.result(0).offset == 1
    assert isinstance(f_a.exception(0), errors.DeliveryTimeoutError)  # the caller was told already


def test_a_late_duplicate_for_an_expired_batch_counts_as_written() -> None:
    """DUPLICATE_SEQUENCE_NUMBER for a batch that expired on the wire: the broker has it (Java's
    ``canRetry``/``handleCompletedBatch`` treat a duplicate as success), so its sequence is acknowledged
    and the partition goes on under the same producer id; were it taken for a failure, the partition's
    fate would stay unknown and it would move to a new producer id."""
    rig = _rig(delivery_timeout_ms=1000)
    f_a = rig.send(b"a")
    req_a = rig.step_one()
    rig.step(1000)
    assert isinstance(f_a.exception(0), errors.DeliveryTimeoutError)
    f_b = rig.send(b"b")
    assert rig.step(10) == []  # unresolved: "a" may or may not be written
    rig.client.respond_produce(req_a, codes={P0: errors.DUPLICATE_SEQUENCE_NUMBER})  # late: written before
    rig.step()
    nxt = rig.step_one(10)
    assert _ids(nxt) == (1000, 1, 1)  # resolved: the sequence simply continues
    rig.client.respond_produce(nxt, offsets={P0: 1})
    rig.step()
    assert f_b.result(0).offset == 1
    assert len(_init_requests(rig)) == 1  # no new producer id


def test_an_expired_batch_that_was_not_written_moves_the_partition_to_a_new_id() -> None:
    rig = _rig(delivery_timeout_ms=1000)
    rig.send(b"a")
    req_a = rig.step_one()
    rig.step(1000)
    rig.send(b"b")
    rig.client.respond(req_a, error=errors.error_for_code(errors.REQUEST_TIMED_OUT, "no answer"))
    rig.step()
    _answer_init(rig, 5000)
    assert _ids(rig.step_one(10)) == (5000, 0, 1)


def test_sequences_wrap_after_int32_max() -> None:
    rig = _rig()
    assert rig.tm is not None
    rig.tm._entry(P0).next_sequence = 2**31 - 2
    for v in (b"a", b"b", b"c"):
        rig.send(v)
    first = rig.step_one()
    assert _ids(first) == (1000, 2**31 - 2, 3)
    rig.client.respond_produce(first)
    rig.step()
    rig.send(b"d")
    assert _ids(rig.step_one()) == (1000, 1, 1)


def test_retries_straddling_the_sequence_wrap_go_in_sequence_order() -> None:
    """Three batches with sequences 2**31-2, 2**31-1 and 0, all answered NOT_LEADER_OR_FOLLOWER: they are
    queued again in that order (not 0 first, as Java's plain comparison would) and resent one by one,
    lowest in flight first; all three succeed instead of stalling until delivery.timeout.ms."""
    rig = _rig()
    assert rig.tm is not None
    entry = rig.tm._entry(P0)
    entry.next_sequence, entry.last_acked_sequence = 2**31 - 2, 2**31 - 3  # the batch before was acknowledged
    rig.tm._acked_producer_id[P0] = 1000
    futures, requests = [], []
    for v in (b"a", b"b", b"c"):
        futures.append(rig.send(v * 20_000))  # one batch each
        requests.append(rig.step_one())
    assert [_ids(r) for r in requests] == [(1000, 2**31 - 2, 1), (1000, 2**31 - 1, 1), (1000, 0, 1)]
    for r in requests:
        rig.client.respond_produce(r, codes={P0: errors.NOT_LEADER_OR_FOLLOWER})
    rig.step()
    queued = rig.accumulator.get_deque(P0)
    assert queued is not None and [b.base_sequence for b in queued] == [2**31 - 2, 2**31 - 1, 0]
    resent = []
    for _ in range(20):
        for r in rig.step(100):
            resent.append(_ids(r))
            rig.client.respond_produce(r)
    assert resent == [(1000, 2**31 - 2, 1), (1000, 2**31 - 1, 1), (1000, 0, 1)]
    assert all(f.done() and f.exception(0) is None for f in futures)


def test_split_parts_are_tracked_in_sequence_order_across_the_wrap() -> None:
    """The in-flight list of a partition stays in sequence order when parts of a split batch are added
    to it (outside ``begin_split``) across 2**31-1 -> 0: the lowest in flight is the next to resend."""
    tm = IdempotenceManager(is_transactional=False)
    entry = tm._entry(P0)
    entry.last_acked_sequence = 2**31 - 3
    earlier, later = SimpleNamespace(tp=P0, base_sequence=2**31 - 2), SimpleNamespace(tp=P0, base_sequence=0)
    tm.add_in_flight_batch(later)  # type: ignore[arg-type]
    tm.add_in_flight_batch(earlier)  # type: ignore[arg-type]
    assert [b.base_sequence for b in entry.in_flight] == [2**31 - 2, 0]


@pytest.mark.parametrize("code", [errors.CLUSTER_AUTHORIZATION_FAILED, 35])
def test_init_producer_id_failures_that_cannot_be_retried_fail_every_record(code: int) -> None:
    rig = Rig(idempotent=True, retry_backoff_ms=10)
    future = rig.send(b"a")
    rig.step()
    init = _init_requests(rig)[0]
    rig.client.respond(init, {"throttle_time_ms": 0, "error_code": code, "producer_id": -1,
                              "producer_epoch": -1})
    rig.step()
    rig.step()
    assert isinstance(future.exception(0), errors.error_class_for_code(code))
    assert rig.tm is not None and rig.tm.has_fatal_error()
    with pytest.raises(errors.error_class_for_code(code)):
        rig.tm.check_send_allowed()


def test_init_producer_id_retriable_errors_are_retried() -> None:
    rig = Rig(idempotent=True, retry_backoff_ms=10)
    future = rig.send(b"a")
    rig.step()
    rig.client.respond(_init_requests(rig)[0], error=errors.KafkaConnectionError("lost"))
    rig.step()
    rig.step(20)
    _answer_init(rig, 42)
    req = rig.step_one(10)
    assert _ids(req) == (42, 0, 1)
    rig.client.respond_produce(req)
    rig.step()
    assert future.exception(0) is None


def test_a_split_batch_keeps_its_sequence_range_and_its_place() -> None:
    rig = _rig(batch_size=1000)
    _prime(rig)
    futures = [rig.send(b"x" * 60) for _ in range(3)]  # one batch of 3 records
    big = rig.step_one()
    rig.accumulator._batch_size = 100  # split into single-record batches (as after a bad size estimate)
    assert _ids(big) == (1000, 1, 3)
    rig.send(b"after")
    later = rig.step_one()
    assert _ids(later) == (1000, 4, 1)
    rig.client.respond_produce(big, codes={P0: errors.MESSAGE_TOO_LARGE})
    rig.client.respond_produce(later, codes={P0: errors.OUT_OF_ORDER_SEQUENCE_NUMBER})
    rig.step()
    sent = []
    for _ in range(8):
        for req in rig.step(10):
            sent.append(_ids(req))
            rig.client.respond_produce(req, offsets={P0: len(sent) - 1})
    assert sent == [(1000, 1, 1), (1000, 2, 1), (1000, 3, 1), (1000, 4, 1)]
    assert all(f.exception(0) is None for f in futures)


def test_a_broker_without_init_producer_id_is_fatal_for_idempotence() -> None:
    rig = Rig(idempotent=True, retry_backoff_ms=10)
    future = rig.send(b"a")
    rig.step()
    rig.client.respond(_init_requests(rig)[0], error=errors.UnsupportedVersionError("no InitProducerId"))
    rig.step()
    rig.step()
    assert isinstance(future.exception(0), errors.UnsupportedVersionError)
    assert len(_init_requests(rig)) == 1  # not retried forever
