"""The transactional state machine and sequence handling against Java's ``TransactionManager``.

How it works: the unit tests drive a ``TransactionManager`` by hand (its requests taken with
``next_request`` and answered through their handlers); the others run a transactional ``KafkaProducer``
against the librdkafka mock cluster with injected errors and read the partition log back (``raw_log``).
Covered: the sequences of a partition after a batch failed in an aborted transaction, EndTxn answers
that only make the transaction abortable, a commit or init called again after its wait timed out, an
abort after a timed-out commit, an abort when no partition was ever added, an abort not held up by the
batches behind a failed one, an abort that waits for the answer to a batch that expired on the wire,
and EndTxn capped at v4.
"""

from __future__ import annotations

import time

import pytest

from sparkafka import errors
from sparkafka.producer.producer import KafkaProducer
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.producer.transactions import (
    ADD_PARTITIONS_RETRY_BACKOFF_MS,
    TransactionalRequestResult,
    TransactionManager,
    TxnState,
)
from sparkafka.protocol.messages import ApiKey as Api
from sparkafka.protocol.versions import ApiVersionsTable
from sparkafka.record import RecordBatchBuilder
from support.mock_cluster import ApiKey, MockCluster
from support.txn import answer_add_partitions, answer_find_coordinator, ready
from transactions.raw_log import committed_view, control_markers, read_log

pytestmark = [pytest.mark.timeout(120)]


# ----------------------------------------------------------------------------- helpers (no broker)
def _add(tm: TransactionManager, tp: tuple[str, int]) -> None:
    tm.maybe_add_partition(tp)
    add = tm.next_request(False)
    assert add is not None
    answer_add_partitions(add, tp)
    assert tm.is_partition_added(tp)


def _timed_out_commit() -> tuple[TransactionManager, TransactionalRequestResult]:
    """A transaction with one partition whose commit_transaction() wait timed out (EndTxn not answered)."""
    tm = ready()
    tm.begin_transaction()
    _add(tm, ("t", 0))
    commit = tm.begin_commit()
    with pytest.raises(errors.KafkaTimeoutError):
        commit.wait(0)
    return tm, commit


def _batch(tp: tuple[str, int]) -> ProducerBatch:
    b = ProducerBatch(tp, RecordBatchBuilder(bytearray(1024), 1024), 1000.0, bytearray(0), False)
    assert b.try_append(1, b"k", b"v", None, None, 1000.0) is not None
    b.close()
    return b


# ----------------------------------------------------------------------------- without a broker
def test_the_new_epoch_after_an_abort_names_the_current_producer_id_and_epoch() -> None:
    """Java ``initializeTransactions(producerIdAndEpoch)`` (KIP-360): the InitProducerId that bumps the epoch
    after an abort carries the current id and epoch, so the coordinator fences this producer if another one
    took the transactional id meanwhile (instead of fencing that one and aborting its transaction). The
    first InitProducerId carries -1 / -1."""
    tm = TransactionManager("tx", 60_000)
    tm.initialize_transactions()
    answer_find_coordinator(tm)
    first = tm.next_request(False)
    assert first is not None and (first.body["producer_id"], first.body["producer_epoch"]) == (-1, -1)
    first.handler({"error_code": 0, "producer_id": 7, "producer_epoch": 2}, None)
    # a batch failed in a way that breaks its partition's sequences: the abort ends with a new epoch
    tm.begin_transaction()
    _add(tm, ("t", 0))
    tm.handle_failed_batch(_batch(("t", 0)), errors.error_for_code(errors.OUT_OF_ORDER_SEQUENCE_NUMBER, "x"), True)
    assert tm.has_abortable_error()
    aborted = tm.begin_abort()
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn"
    end.handler({"error_code": 0}, None)
    bump = tm.next_request(False)
    assert bump is not None and bump.name == "InitProducerId"
    assert (bump.body["producer_id"], bump.body["producer_epoch"]) == (7, 2)
    bump.handler({"error_code": errors.PRODUCER_FENCED}, None)  # another producer holds the id now
    assert aborted.is_done() and tm.has_fatal_error()


def test_an_abort_after_an_unknown_producer_id_mapping_forgets_the_offsets_sent() -> None:
    """INVALID_PRODUCER_ID_MAPPING: the abort skips EndTxn and re-initializes with the current id and epoch;
    like Java's completeTransaction it forgets what the transaction had added, offsets included, so the
    next transaction, if it adds nothing, ends without an EndTxn (which the coordinator, holding no
    transaction, would refuse with INVALID_TXN_STATE)."""
    tm = ready()
    tm.begin_transaction()
    tm._offsets_added = True  # what a completed send_offsets_to_transaction leaves
    commit = tm.begin_commit()
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn"
    end.handler({"error_code": errors.INVALID_PRODUCER_ID_MAPPING}, None)
    assert commit.is_done() and commit.error is not None and tm.has_abortable_error()
    aborted = tm.begin_abort()
    init = tm.next_request(False)
    assert init is not None and init.name == "InitProducerId"
    assert (init.body["producer_id"], init.body["producer_epoch"]) == (7, 2)
    init.handler({"error_code": 0, "producer_id": 8, "producer_epoch": 0}, None)
    assert aborted.is_done() and aborted.error is None and tm.state is TxnState.READY
    tm.begin_transaction()
    empty = tm.begin_commit()
    assert tm.next_request(False) is None and empty.is_done() and empty.error is None


def test_the_first_add_partitions_refused_as_concurrent_is_retried_after_20_ms() -> None:
    """Java's ``AddPartitionsToTxnHandler``: CONCURRENT_TRANSACTIONS for a transaction's first partitions (the
    previous transaction's markers are still being written) retries after ``ADD_PARTITIONS_RETRY_BACKOFF_MS``;
    once a partition is in the transaction, after ``retry.backoff.ms``."""
    tm = ready()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    first = tm.next_request(False)
    assert first is not None and first.name == "AddPartitionsToTxn" and first.retry_backoff_ms is None
    answer_add_partitions(first, ("t", 0), errors.CONCURRENT_TRANSACTIONS)
    again = tm.next_request(False)
    assert again is first and again.retry_at_ms < 0 and again.retry_backoff_ms == ADD_PARTITIONS_RETRY_BACKOFF_MS == 20
    answer_add_partitions(again, ("t", 0), 0)
    assert tm.is_partition_added(("t", 0))
    tm.maybe_add_partition(("t", 1))
    later = tm.next_request(False)
    assert later is not None and later is not first
    answer_add_partitions(later, ("t", 1), errors.CONCURRENT_TRANSACTIONS)
    retried = tm.next_request(False)
    assert retried is later and retried.retry_backoff_ms is None  # retry.backoff.ms
    answer_add_partitions(retried, ("t", 1), errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert tm.next_request(False) is later and later.retry_backoff_ms is None


def test_abort_after_a_timed_out_commit_never_sends_the_commit() -> None:
    """commit_transaction() timed out while a batch was in flight, the batch then failed (abortable) and
    the user called abort_transaction(). Java refuses that abort until the commit is retried, and the
    retried commit fails; it never commits. The queued EndTxn(commit) must not go out before the abort's."""
    tm, commit = _timed_out_commit()
    assert tm.next_request(True) is None  # EndTxn waits for the batch in flight
    tm.transition_to_abortable(errors.error_for_code(87, "the batch failed"))  # the in-flight batch failed
    abort = tm.begin_abort()
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn"
    assert end.body["committed"] is False
    end.handler({"error_code": 0}, None)
    assert abort.is_done() and abort.error is None and tm.state is TxnState.READY
    assert commit.is_done() and commit.error is not None  # the commit the user gave up on failed


def test_commit_called_again_after_its_timeout_returns_once_the_commit_completed() -> None:
    """Java: a commitTransaction() that timed out may be called again; if the commit finished meanwhile
    the cached result is returned (success), not an IllegalStateException."""
    tm, _ = _timed_out_commit()
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn"
    end.handler({"error_code": 0}, None)  # completes in the background
    again = tm.begin_commit()
    again.wait(0)  # no error: the transaction was committed
    tm.begin_transaction()  # and the next one can begin


def test_other_calls_after_a_timed_out_commit_say_the_commit_must_be_called_again() -> None:
    """Java: "Cannot attempt operation `abortTransaction` because the previous call to `commitTransaction`
    timed out and must be retried" (the commit may already be on its way). The message said "no
    transaction in progress" / "it needs state READY", which sent users to the wrong fix."""
    tm, _ = _timed_out_commit()
    for call in (tm.begin_abort, tm.begin_transaction):
        with pytest.raises(errors.IllegalStateError,
                           match=r"previous call to commit_transaction\(\) timed out .* call commit_transaction"):
            call()
    end = tm.next_request(False)
    assert end is not None and end.body["committed"] is True
    end.handler({"error_code": 0}, None)
    tm.begin_commit().wait(0)  # called again as told: the same, now completed, result
    tm.begin_transaction()


def test_init_transactions_called_again_after_its_timeout_returns_once_it_completed() -> None:
    tm = TransactionManager("tx", 60_000)
    first = tm.initialize_transactions()
    with pytest.raises(errors.KafkaTimeoutError):
        first.wait(0)
    answer_find_coordinator(tm)
    init = tm.next_request(False)
    assert init is not None
    init.handler({"error_code": 0, "producer_id": 7, "producer_epoch": 2}, None)
    tm.initialize_transactions().wait(0)  # Java returns the completed result
    with pytest.raises(errors.IllegalStateError):  # but a third, fresh call is illegal
        tm.initialize_transactions()


def test_transactions_v1_use_add_partitions_and_end_txn_up_to_v4() -> None:
    """A cluster whose finalized transaction.version is 1 (or that has no such feature): the classic flow,
    as Java's LAST_STABLE_VERSION_BEFORE_TRANSACTION_V2 (EndTxn v5 would ask the coordinator for KIP-890)."""
    table = ApiVersionsTable({Api.END_TXN: (0, 5), Api.PRODUCE: (3, 13)})
    for features in ({}, {"transaction.version": 1}):
        tm = ready()
        tm.finalized_features = lambda features=features: features  # type: ignore[misc]
        tm.begin_transaction()
        assert (tm.transaction_v2, tm.transaction_version) == (False, 1)
        _add(tm, ("t", 0))  # AddPartitionsToTxn is sent
        tm.begin_commit()
        end = tm.next_request(False)
        assert end is not None and end.name == "EndTxn" and end.max_version == 4
        assert table.pick_version(Api.END_TXN, 0, end.max_version) == 4


def test_transactions_v2_add_partitions_by_produce_and_take_the_epoch_from_end_txn() -> None:
    """transaction.version 2 (KIP-890): no AddPartitionsToTxn, EndTxn v5, and the epoch the coordinator
    bumped to (carried by the EndTxn answer) restarts every partition's sequences."""
    tm = ready()
    tm.finalized_features = lambda: {"transaction.version": 2}
    tm.begin_transaction()
    assert (tm.transaction_v2, tm.transaction_version) == (True, 2)
    tm.maybe_add_partition(("t", 0))
    assert tm.is_partition_added(("t", 0)) and tm.is_send_to_partition_allowed(("t", 0))
    batch = ProducerBatch(("t", 0), RecordBatchBuilder(bytearray(1024), 1024), 1000.0, bytearray(0), False)
    assert batch.try_append(1, b"k", b"v", None, None, 1000.0) is not None
    batch.close()
    assert tm.take_for_drain(("t", 0), batch)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 2, 0)
    tm.handle_completed_batch(batch, 0)
    commit = tm.begin_commit()
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn" and end.max_version is None  # v5, the broker's highest
    assert (end.body["producer_id"], end.body["producer_epoch"], end.body["committed"]) == (7, 2, True)
    end.handler({"error_code": 0, "producer_id": 7, "producer_epoch": 3}, None)
    assert commit.is_done() and commit.error is None
    assert tm.state is TxnState.READY and (tm.producer_id, tm.epoch) == (7, 3)
    assert tm.next_sequence(("t", 0)) == 0
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    abort = tm.begin_abort()
    end = tm.next_request(False)
    assert end is not None and end.body["producer_epoch"] == 3 and end.body["committed"] is False
    end.handler({"error_code": 0, "producer_id": 8, "producer_epoch": 0}, None)  # epoch ran out: a new id
    assert abort.is_done() and abort.error is None and (tm.producer_id, tm.epoch) == (8, 0)
    assert tm.next_request(False) is None  # no InitProducerId: the abort itself gave a fresh epoch


# 49: INVALID_PRODUCER_ID_MAPPING, 120: TRANSACTION_ABORTABLE
@pytest.mark.parametrize("code", [errors.UNKNOWN_PRODUCER_ID, 49, 120])
def test_end_txn_errors_that_java_treats_as_abortable(code: int) -> None:
    tm = ready()
    tm.begin_transaction()
    _add(tm, ("t", 0))
    commit = tm.begin_commit()
    end = tm.next_request(False)
    assert end is not None
    end.handler({"error_code": code}, None)
    assert tm.has_abortable_error() and not tm.has_fatal_error()
    with pytest.raises(errors.KafkaError):
        commit.wait(0)
    abort = tm.begin_abort()
    req = tm.next_request(False)
    if code == 49:
        # Java: the coordinator no longer knows the id: skip EndTxn, go straight to InitProducerId
        assert req is not None and req.name == "InitProducerId"
    else:
        assert req is not None and req.name == "EndTxn" and req.body["committed"] is False
        req.handler({"error_code": 0}, None)
        req = tm.next_request(False)
        if code == errors.UNKNOWN_PRODUCER_ID:  # Java: epoch bump after the abort
            assert req is not None and req.name == "InitProducerId"
    if req is not None:
        req.handler({"error_code": 0, "producer_id": 9, "producer_epoch": 0}, None)
    assert abort.is_done() and abort.error is None and tm.state is TxnState.READY


def test_abort_sends_no_end_txn_when_no_partition_was_added() -> None:
    """AddPartitionsToTxn kept being retried (coordinator loading) until the waiting batch expired: the
    transaction is abortable and nothing was added on the coordinator. Java skips EndTxn then (its
    ``transactionStarted`` is false); an EndTxn(abort) for an empty transaction is answered
    INVALID_TXN_STATE, which is fatal."""
    tm = ready()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    add = tm.next_request(False)
    assert add is not None and add.name == "AddPartitionsToTxn"
    add.handler({"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 14}]}]}, None)
    tm.transition_to_abortable(errors.DeliveryTimeoutError("the batch waiting for the partition expired"))
    assert tm.next_request(True) is None  # the retry is dropped: the transaction is doomed
    abort = tm.begin_abort()
    assert tm.next_request(False) is None  # nothing to end on the coordinator
    assert abort.is_done() and abort.error is None and tm.state is TxnState.READY


def test_abort_waits_for_the_answer_to_a_batch_that_expired_on_the_wire() -> None:
    """A batch of the transaction expired at delivery.timeout.ms while its Produce was unanswered: it left
    the accumulator, but the broker may still append it. EndTxn(abort) waits for the answer (or the
    request's time-out, which closes the connection): sent before it, the late append would follow the
    ABORT marker and open a transaction on the partition that nobody ends. Java sends EndTxn at once."""
    tm = ready()
    tm.begin_transaction()
    _add(tm, ("t", 0))
    batch = _batch(("t", 0))
    assert tm.take_for_drain(("t", 0), batch) and batch.has_sequence()
    batch.in_request = True  # the Sender sent it
    tm.handle_expired_batch(batch, errors.DeliveryTimeoutError("expired while its request was unanswered"))
    abort = tm.begin_abort()
    assert tm.next_request(False) is None  # nothing incomplete in the accumulator, but the request is open
    assert tm.next_request(False) is None
    batch.in_request = False  # the Sender clears it when the answer or the request's time-out arrives
    tm.handle_late_response(batch, errors.REQUEST_TIMED_OUT, -1)
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn" and end.body["committed"] is False
    end.handler({"error_code": 0}, None)
    init = tm.next_request(False)  # the batch had a sequence: the abort re-initializes (a new epoch)
    assert init is not None and init.name == "InitProducerId"
    init.handler({"error_code": 0, "producer_id": 7, "producer_epoch": 3}, None)
    assert abort.is_done() and abort.error is None and tm.state is TxnState.READY


# ----------------------------------------------------------------------------- mock cluster
def _values(mock_cluster: MockCluster, topic: str) -> list[bytes]:
    return sorted(r.value or b"" for r in committed_view(read_log(mock_cluster.bootstrap_servers, topic)))


def _next_transaction_commits(producer: KafkaProducer, mock_cluster: MockCluster, topic: str, value: bytes,
                              partition: int) -> None:
    """The producer goes on: a new transaction with one record commits, and only that record is committed."""
    producer.begin_transaction()
    producer.send(topic, value, partition=partition).get(10)
    producer.commit_transaction()
    assert _values(mock_cluster, topic) == [value]


def test_a_partition_whose_batch_failed_works_in_the_next_transaction(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """Java: a failed batch makes the transaction abortable and requires an epoch bump (or adjusts the
    sequences), so after the abort the partition's next batch is accepted. Without that its sequence
    leaves a gap where the failed batch was and the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER."""
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"a", partition=0).get(10)
    mock_cluster.push_partition_request_errors(topic, 0, ApiKey.PRODUCE, [87])  # INVALID_RECORD
    failed = producer.send(topic, b"b", partition=0)
    assert isinstance(failed.exception(10), errors.error_class_for_code(87))
    producer.abort_transaction()
    _next_transaction_commits(producer, mock_cluster, topic, b"c", 0)


def test_end_txn_unknown_producer_id_is_abortable_and_the_producer_goes_on(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """Java EndTxnHandler: UNKNOWN_PRODUCER_ID makes the transaction abortable (epoch bump), not fatal."""
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"a", partition=0).get(10)
    mock_cluster.push_request_errors(ApiKey.END_TXN, [errors.UNKNOWN_PRODUCER_ID])
    with pytest.raises(errors.KafkaError) as failed:
        producer.commit_transaction()
    assert not isinstance(failed.value, errors.ProducerFencedError)
    producer.abort_transaction()
    _next_transaction_commits(producer, mock_cluster, topic, b"b", 1)
    assert [k for _, _, k in control_markers(read_log(mock_cluster.bootstrap_servers, topic))].count("ABORT") >= 1


def test_abort_after_a_timed_out_commit_aborts_on_the_broker(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """End to end: commit_transaction() times out while batches are on the wire, one of them fails (the
    transaction must be aborted) while another is still in flight, and the user calls abort_transaction().
    The records written must never be committed."""
    topic = topic + "-pinned"  # a topic the producer has no metadata for yet: it sees the leaders set here
    mock_cluster.create_topic(topic, partitions=3, replication=3)
    mock_cluster.partition_set_leader(topic, 0, 1)
    mock_cluster.partition_set_leader(topic, 1, 2)
    mock_cluster.partition_set_leader(topic, 2, 3)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"written", partition=1).get(10)
    mock_cluster.push_broker_request_errors(3, ApiKey.PRODUCE, [(0, 3000)])  # accepted, answered after 3 s
    mock_cluster.push_broker_request_errors(1, ApiKey.PRODUCE, [(87, 600)])  # INVALID_RECORD after 0.6 s
    slow = producer.send(topic, b"slow", partition=2)
    failed = producer.send(topic, b"refused", partition=0)
    with pytest.raises(errors.KafkaTimeoutError):
        producer.commit_transaction(timeout=0.2)
    assert isinstance(failed.exception(10), errors.error_class_for_code(87))
    assert not slow.done()
    producer.abort_transaction(timeout=10)
    kinds = [k for _, _, k in control_markers(read_log(mock_cluster.bootstrap_servers, topic))]
    assert "COMMIT" not in kinds and "ABORT" in kinds
    assert _values(mock_cluster, topic) == []
    _next_transaction_commits(producer, mock_cluster, topic, b"next", 1)


def test_commit_retried_after_a_timeout_succeeds_once_the_commit_completed(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"a", partition=0).get(10)
    mock_cluster.broker_set_rtt(-1, 300)
    with pytest.raises(errors.KafkaTimeoutError):
        producer.commit_transaction(timeout=0.01)
    tm = producer._tm
    assert tm is not None
    deadline = time.monotonic() + 10
    while tm.state is not TxnState.READY and time.monotonic() < deadline:  # the commit completes meanwhile
        time.sleep(0.02)
    mock_cluster.broker_set_rtt(-1, 0)
    producer.commit_transaction()  # Java: returns the completed commit's result
    assert _values(mock_cluster, topic) == [b"a"]


def test_abort_is_not_held_up_by_the_batches_behind_a_failed_one(
        mock_cluster: MockCluster, topic: str) -> None:
    """Several batches of one partition on the wire, the first refused for good (INVALID_RECORD): the
    broker answers the later ones OUT_OF_ORDER_SEQUENCE_NUMBER, and they must be renumbered and resent
    (Java's adjustSequencesDueToFailedBatch) rather than retried until delivery.timeout.ms (120 s here,
    the default), which would hold abort_transaction() up as long."""
    topic = topic + "-gap"
    mock_cluster.create_topic(topic, partitions=1, replication=1)
    mock_cluster.partition_set_leader(topic, 0, 1)
    p = KafkaProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-id",
                       "linger.ms": 0, "batch.size": 200, "retry.backoff.ms": 20})
    try:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"first", partition=0).get(10)
        mock_cluster.push_broker_request_errors(1, ApiKey.PRODUCE, [(87, 300)])  # INVALID_RECORD after 0.3 s
        futures = [p.send(topic, b"%d" % i * 150, partition=0) for i in range(5)]  # a batch each
        assert isinstance(futures[0].exception(10), errors.error_class_for_code(87))
        started = time.monotonic()
        p.abort_transaction(timeout=15)
        assert time.monotonic() - started < 15
        assert all(f.done() for f in futures)
        _next_transaction_commits(p, mock_cluster, topic, b"next", 0)
    finally:
        p.close(timeout=5)
