"""``send_offsets_to_transaction`` in the transaction manager without a broker (Java's
``TransactionManager.sendOffsetsToTransaction`` in Kafka 4.x): the requests, their order and targets under
both transaction protocols, the group coordinator lookup, and what each error answer does. The same flows
run against Apache Kafka in ``tests/apache_kafka/test_consume_transform_produce.py``; group metadata and
offsets in their accepted forms are checked at the end."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from sparkafka import errors
from sparkafka.producer.group_metadata import CommittedOffset, ConsumerGroupMetadata, group_metadata_of, offsets_of
from sparkafka.producer.transactions import TransactionManager, TxnRequest, TxnState
from support.txn import ready

GROUP = ConsumerGroupMetadata("orders", 4, "member-1", None)
OFFSETS = {("in", 1): CommittedOffset(10), ("in", 0): CommittedOffset(7, "m", 3)}


def _in_transaction(transaction_version: int) -> TransactionManager:
    tm = ready(transaction_version=transaction_version)
    tm.begin_transaction()
    return tm


def _next(tm: TransactionManager) -> TxnRequest:
    req = tm.next_request(False)
    assert req is not None
    return req


def _find_group(tm: TransactionManager, node: int = 5) -> None:
    find = _next(tm)
    assert find.is_find_coordinator and find.group_id == "orders" and not find.needs_coordinator
    assert find.body["key_type"] == 0 and find.body["key"] == "orders" and find.body["coordinator_keys"] == ["orders"]
    find.handler({"coordinators": [{"key": "orders", "node_id": node, "host": "g", "port": 9093, "error_code": 0}]},
                 None)


def _ok(request: TxnRequest) -> dict[str, Any]:
    return {"topics": [{"name": t["name"], "partitions": [{"partition_index": p["partition_index"], "error_code": 0}
                                                          for p in t["partitions"]]} for t in request.body["topics"]]}


def _with_code(request: TxnRequest, code: int) -> dict[str, Any]:
    answer = _ok(request)
    answer["topics"][0]["partitions"][0]["error_code"] = code
    return answer


def test_transactions_v2_sends_txn_offset_commit_alone_to_the_group_coordinator() -> None:
    tm = _in_transaction(2)
    result = tm.send_offsets_to_transaction(OFFSETS, GROUP)
    _find_group(tm)
    commit = _next(tm)
    assert commit.name == "TxnOffsetCommit" and commit.needs_coordinator and commit.group_id == "orders"
    assert tm.coordinator_for(commit) == (5, ("g", 9093))  # the group's coordinator, not the transaction's
    assert commit.max_version is None  # v5: the highest both sides have (the client's is 5)
    assert commit.body == {
        "transactional_id": "tx", "group_id": "orders", "producer_id": 7, "producer_epoch": 2, "generation_id": 4,
        "member_id": "member-1", "group_instance_id": None,
        "topics": [{"name": "in", "partitions": [
            {"partition_index": 0, "committed_offset": 7, "committed_leader_epoch": 3, "committed_metadata": "m"},
            {"partition_index": 1, "committed_offset": 10, "committed_leader_epoch": -1, "committed_metadata": ""}]}]}
    commit.handler(_ok(commit), None)
    assert result.is_done() and result.error is None
    committing = tm.begin_commit()
    end = _next(tm)  # the offsets alone started the transaction: EndTxn goes out
    assert end.name == "EndTxn" and end.body["committed"] is True
    end.handler({"error_code": 0, "producer_id": 7, "producer_epoch": 3}, None)
    assert committing.is_done() and tm.state is TxnState.READY


def test_transactions_v1_adds_the_offsets_first_then_commits_them_at_v4() -> None:
    tm = _in_transaction(1)
    result = tm.send_offsets_to_transaction(OFFSETS, GROUP)
    add = _next(tm)
    assert add.name == "AddOffsetsToTxn" and add.group_id is None  # to the transaction coordinator
    assert add.body == {"transactional_id": "tx", "producer_id": 7, "producer_epoch": 2, "group_id": "orders"}
    add.handler({"error_code": 0}, None)
    assert not result.is_done()  # not until the TxnOffsetCommit is answered
    _find_group(tm)
    commit = _next(tm)
    assert commit.name == "TxnOffsetCommit" and commit.max_version == 4
    commit.handler(_ok(commit), None)
    assert result.is_done() and result.error is None
    tm.begin_commit()
    assert _next(tm).name == "EndTxn"


def test_coordinator_moves_and_retriable_errors_resend_the_commit() -> None:
    tm = _in_transaction(2)
    result = tm.send_offsets_to_transaction(OFFSETS, GROUP)
    _find_group(tm)
    commit = _next(tm)
    commit.handler(_with_code(commit, errors.NOT_COORDINATOR), None)
    assert tm.coordinator_for(commit) == (None, None)
    _find_group(tm, node=6)  # looked up again
    again = _next(tm)
    assert again is commit and tm.coordinator_for(again)[0] == 6
    again.handler(_with_code(again, errors.COORDINATOR_LOAD_IN_PROGRESS), None)
    assert not result.is_done()
    last = _next(tm)
    assert last is commit
    last.handler(_ok(last), None)
    assert result.is_done() and result.error is None


@pytest.mark.parametrize(("code", "expected", "state"), [
    (errors.ILLEGAL_GENERATION, errors.CommitFailedError, TxnState.ABORTABLE_ERROR),
    (errors.UNKNOWN_MEMBER_ID, errors.CommitFailedError, TxnState.ABORTABLE_ERROR),
    (errors.FENCED_INSTANCE_ID, errors.FencedInstanceIdError, TxnState.ABORTABLE_ERROR),
    (errors.GROUP_AUTHORIZATION_FAILED, errors.GroupAuthorizationFailedError, TxnState.ABORTABLE_ERROR),
    (errors.TRANSACTION_ABORTABLE, errors.TransactionAbortableError, TxnState.ABORTABLE_ERROR),
    (errors.PRODUCER_FENCED, errors.ProducerFencedError, TxnState.FATAL_ERROR),
    (errors.INVALID_PRODUCER_EPOCH, errors.ProducerFencedError, TxnState.FATAL_ERROR),
    (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, errors.TransactionalIdAuthorizationFailedError,
     TxnState.FATAL_ERROR),
])
def test_txn_offset_commit_errors(code: int, expected: type[BaseException], state: TxnState) -> None:
    tm = _in_transaction(2)
    result = tm.send_offsets_to_transaction(OFFSETS, GROUP)
    _find_group(tm)
    commit = _next(tm)
    commit.handler(_with_code(commit, code), None)
    assert tm.state is state
    with pytest.raises(expected):
        result.wait(0)
    if expected is errors.CommitFailedError:
        assert result.error is not None and "member-1" in str(result.error)
        assert isinstance(result.error.__cause__, errors.BrokerError)
    if state is TxnState.ABORTABLE_ERROR:
        with pytest.raises(errors.TransactionError):
            tm.begin_commit()
        tm.begin_abort()  # the producer goes on after the abort


def test_add_offsets_errors_under_transactions_v1() -> None:
    tm = _in_transaction(1)
    result = tm.send_offsets_to_transaction(OFFSETS, GROUP)
    add = _next(tm)
    add.handler({"error_code": errors.GROUP_AUTHORIZATION_FAILED}, None)
    assert tm.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(errors.GroupAuthorizationFailedError, match="READ on that Group"):
        result.wait(0)


def test_send_offsets_is_illegal_outside_a_transaction_and_after_an_error() -> None:
    tm = _in_transaction(2)
    tm.begin_abort()
    with pytest.raises(errors.IllegalStateError):
        tm.send_offsets_to_transaction(OFFSETS, GROUP)
    plain = TransactionManager(None, 60_000)
    with pytest.raises(errors.IllegalStateError, match="transactional"):
        plain.send_offsets_to_transaction(OFFSETS, GROUP)
    doomed = _in_transaction(2)
    doomed.transition_to_abortable(errors.KafkaError("a batch failed"))
    with pytest.raises(errors.TransactionError, match="must be aborted"):
        doomed.send_offsets_to_transaction(OFFSETS, GROUP)


def test_group_metadata_forms() -> None:
    assert group_metadata_of("g") == ConsumerGroupMetadata("g")
    librdkafka = b"CGMDv2:" + struct.pack("=i", 9) + b"grp\x00member-x\x00\x00inst\x00"
    assert group_metadata_of(librdkafka) == ConsumerGroupMetadata("grp", 9, "member-x", "inst")
    no_instance = b"CGMDv2:" + struct.pack("=i", -1) + b"grp\x00\x00\x01"
    assert group_metadata_of(no_instance) == ConsumerGroupMetadata("grp", -1, "", None)

    class KafkaPythonLike:
        group_id, generation_id, member_id, group_instance_id = "kp", 3, "m", None

    assert group_metadata_of(KafkaPythonLike()) == ConsumerGroupMetadata("kp", 3, "m", None)
    for bad in (None, 5, b"not-metadata", ConsumerGroupMetadata("g", 2, ""), "", librdkafka + b"x"):
        with pytest.raises(errors.InvalidRecordInputError):
            group_metadata_of(bad)


def test_offset_forms() -> None:
    class OffsetAndMetadata:
        offset, metadata, leader_epoch = 5, "meta", 2

    class TP:
        topic, partition = "t", 3

    assert offsets_of({("t", 0): 4, TP(): OffsetAndMetadata()}) == {
        ("t", 0): CommittedOffset(4), ("t", 3): CommittedOffset(5, "meta", 2)}
    for bad in ([("t", 0)], {("t", -1): 1}, {("t", 0): -1}, {("t", 0): "5"}, {"t": 1}):
        with pytest.raises(errors.InvalidRecordInputError):
            offsets_of(bad)
