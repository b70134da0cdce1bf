"""The transaction state machine without a broker: legal and illegal calls, errors, fencing."""

from __future__ import annotations

import pytest

from sparkafka import errors
from sparkafka.producer.transactions import TransactionManager, TxnState, fenced_error


def _ready() -> TransactionManager:
    """A transactional manager that finished init_transactions()."""
    tm = TransactionManager("tx", 60_000)
    result = tm.initialize_transactions()
    req = tm.next_request(False)
    assert req is not None and req.is_find_coordinator  # the coordinator comes first
    req.handler({"error_code": 0, "node_id": 1, "host": "h", "port": 9092}, None)
    init = tm.next_request(False)
    assert init is not None and init.name == "InitProducerId"
    assert init.body["transactional_id"] == "tx" and init.body["transaction_timeout_ms"] == 60_000
    init.handler({"error_code": 0, "producer_id": 7, "producer_epoch": 2}, None)
    assert result.is_done() and result.error is None
    assert tm.state is TxnState.READY and (tm.producer_id, tm.epoch) == (7, 2)
    return tm


def test_calls_before_init_transactions_are_illegal() -> None:
    tm = TransactionManager("tx", 60_000)
    with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
        tm.begin_transaction()
    with pytest.raises(errors.IllegalStateError, match="commit_transaction"):
        tm.begin_commit()
    with pytest.raises(errors.IllegalStateError, match="abort_transaction"):
        tm.begin_abort()
    with pytest.raises(errors.IllegalStateError, match="outside a transaction"):
        tm.check_send_allowed()


def test_commit_without_begin_and_send_outside_a_transaction_raise() -> None:
    tm = _ready()
    with pytest.raises(errors.IllegalStateError, match="no transaction in progress"):
        tm.begin_commit()
    with pytest.raises(errors.IllegalStateError, match="no transaction in progress"):
        tm.begin_abort()
    with pytest.raises(errors.IllegalStateError, match="begin_transaction"):
        tm.check_send_allowed()
    with pytest.raises(errors.IllegalStateError, match="only once"):
        tm.initialize_transactions()


def test_begin_twice_raises_and_an_empty_transaction_completes_locally() -> None:
    tm = _ready()
    tm.begin_transaction()
    tm.check_send_allowed()
    with pytest.raises(errors.IllegalStateError, match="IN_TRANSACTION"):
        tm.begin_transaction()
    result = tm.begin_commit()
    assert tm.next_request(False) is None  # nothing was added: no EndTxn goes to the broker
    assert result.is_done() and result.error is None and tm.state is TxnState.READY


def test_partitions_are_added_before_sending_and_end_txn_waits_for_batches() -> None:
    tm = _ready()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    assert not tm.is_send_to_partition_allowed(("t", 0))
    add = tm.next_request(False)
    assert add is not None and add.name == "AddPartitionsToTxn"
    assert add.body["v3_and_below_topics"] == [{"name": "t", "partitions": [0]}]
    add.handler({"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}]}, None)
    assert tm.is_send_to_partition_allowed(("t", 0))
    result = tm.begin_commit()
    assert tm.next_request(True) is None  # a batch is still incomplete
    end = tm.next_request(False)
    assert end is not None and end.name == "EndTxn" and end.body["committed"] is True
    end.handler({"error_code": 0}, None)
    assert result.is_done() and tm.state is TxnState.READY
    assert not tm.is_send_to_partition_allowed(("t", 0))  # the next transaction adds it again


@pytest.mark.parametrize("code", [14, 15, 16, 51])
def test_coordinator_errors_on_end_txn_are_retried(code: int) -> None:
    tm = _ready()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 0))
    add = tm.next_request(False)
    assert add is not None
    add.handler({"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}]}, None)
    result = tm.begin_commit()
    end = tm.next_request(False)
    assert end is not None
    end.handler({"error_code": code}, None)
    assert not result.is_done()
    again = tm.next_request(False)
    if code in (15, 16):  # the coordinator moved: find it again first
        assert again is not None and again.is_find_coordinator
        again.handler({"error_code": 0, "node_id": 2, "host": "h", "port": 1}, None)
        again = tm.next_request(False)
    assert again is not None and again.name == "EndTxn"
    again.handler({"error_code": 0}, None)
    assert result.is_done() and result.error is None


def test_an_abortable_error_allows_only_abort() -> None:
    tm = _ready()
    tm.begin_transaction()
    tm.transition_to_abortable(errors.error_for_code(87, "bad record"))
    with pytest.raises(errors.TransactionError):
        tm.begin_commit()
    with pytest.raises(errors.IllegalStateError, match="abort_transaction"):
        tm.check_send_allowed()
    with pytest.raises(errors.IllegalStateError, match="abort"):
        tm.begin_transaction()
    result = tm.begin_abort()
    assert tm.next_request(False) is None  # nothing was added: completed without a request
    assert result.is_done() and tm.state is TxnState.READY


def test_after_fencing_every_call_raises_producer_fenced() -> None:
    tm = _ready()
    tm.begin_transaction()
    tm.transition_to_fatal(fenced_error("test"))
    for call in (tm.begin_transaction, tm.begin_commit, tm.begin_abort, tm.check_send_allowed):
        with pytest.raises(errors.ProducerFencedError):
            call()
    assert tm.next_request(False) is None


def test_end_txn_answered_producer_fenced_is_fatal() -> None:
    tm = _ready()
    tm.begin_transaction()
    tm.maybe_add_partition(("t", 1))
    add = tm.next_request(False)
    assert add is not None
    add.handler({"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 1, "partition_error_code": 0}]}]}, None)
    result = tm.begin_commit()
    end = tm.next_request(False)
    assert end is not None
    end.handler({"error_code": errors.INVALID_PRODUCER_EPOCH}, None)
    assert tm.has_fatal_error()
    with pytest.raises(errors.ProducerFencedError):
        result.wait(0)


def test_a_non_transactional_manager_refuses_transactional_calls() -> None:
    tm = TransactionManager(None, 60_000)
    with pytest.raises(errors.IllegalStateError, match=r"transactional\.id"):
        tm.initialize_transactions()
    with pytest.raises(errors.IllegalStateError, match=r"transactional\.id"):
        tm.begin_transaction()
    tm.check_send_allowed()  # an idempotent producer may always send
