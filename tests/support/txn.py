"""A ``TransactionManager`` driven by hand: its requests taken with ``next_request`` and answered through
their handlers as the coordinator would, with no broker and no Sender.

How it works: ``ready`` builds a manager and answers FindCoordinator (node 1) and InitProducerId (producer id
7, epoch 2), so it is READY; ``answer_find_coordinator`` and ``answer_add_partitions`` answer one request each
for the tests that stop in between or need an error code.
"""

from __future__ import annotations

from sparkafka.producer.transactions import TransactionManager, TxnRequest

PRODUCER_ID, EPOCH = 7, 2


def answer_find_coordinator(tm: TransactionManager) -> None:
    """Answer the manager's next request, a FindCoordinator, with node 1."""
    find = tm.next_request(False)
    assert find is not None and find.is_find_coordinator
    find.handler({"error_code": 0, "node_id": 1, "host": "h", "port": 9092}, None)


def ready(transactional_id: str = "tx", *, transaction_version: int | None = None) -> TransactionManager:
    """A manager past ``initialize_transactions`` (producer id 7, epoch 2); ``transaction_version``: the
    cluster's finalized transaction.version (default: none advertised, transactions V1)."""
    tm = TransactionManager(transactional_id, 60_000)
    if transaction_version is not None:
        tm.finalized_features = lambda: {"transaction.version": transaction_version}
    result = tm.initialize_transactions()
    answer_find_coordinator(tm)
    init = tm.next_request(False)
    assert init is not None and init.name == "InitProducerId"
    init.handler({"error_code": 0, "producer_id": PRODUCER_ID, "producer_epoch": EPOCH}, None)
    assert result.is_done() and result.error is None
    return tm


def answer_add_partitions(req: TxnRequest, tp: tuple[str, int], code: int = 0) -> None:
    """Answer an AddPartitionsToTxn (transactions V1) for one partition with ``code``."""
    assert req.name == "AddPartitionsToTxn"
    req.handler({"results_by_topic_v3_and_below": [
        {"name": tp[0], "results_by_partition": [{"partition_index": tp[1], "partition_error_code": code}]}]}, None)
