"""A transactional batch that fails for good closes its sequence gap (Java ``adjustSequencesDueToFailedBatch``).

How it works: a ``TransactionManager`` driven by hand (as in ``test_txn_java_rules``) gets three batches of
one partition in flight; the first fails with a non-retriable error. The later batches must move down by
its record count, so the broker (which never wrote the failed batch) accepts them, and a request that
went out with the old sequence and comes back OUT_OF_ORDER_SEQUENCE_NUMBER is retried, not failed. Before
the fix they kept their sequences and were answered OUT_OF_ORDER_SEQUENCE_NUMBER on every retry until
delivery.timeout.ms, which held EndTxn (commit and abort) back all that time.
"""

from __future__ import annotations

from typing import Any

from sparkafka import errors
from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.producer.transactions import TxnState
from sparkafka.record import RecordBatchBuilder
from support.txn import ready
from transactions.test_txn_java_rules import _add

TP = ("t", 0)


def _batch(records: int) -> ProducerBatch:
    b = ProducerBatch(TP, RecordBatchBuilder(bytearray(1024), 1024), 1000.0, bytearray(0), False)
    for i in range(records):
        assert b.try_append(1, b"k", b"v%d" % i, None, None, 1000.0) is not None
    b.close()
    return b


def _prime(tm: Any) -> None:
    """The partition's first batch acknowledged (until then a second batch may not be drained)."""
    primer = _batch(1)
    assert tm.take_for_drain(TP, primer)
    tm.handle_completed_batch(primer, 0)


def test_a_failed_batch_moves_the_later_batches_of_its_partition_down() -> None:
    tm = ready()
    tm.begin_transaction()
    _add(tm, TP)
    _prime(tm)
    first, second, third = _batch(3), _batch(2), _batch(1)
    for b in (first, second, third):
        assert tm.take_for_drain(TP, b)
    assert [b.base_sequence for b in (first, second, third)] == [1, 4, 6]
    assert tm.next_sequence(TP) == 7

    error = errors.error_for_code(87, "for t-0")  # INVALID_RECORD: not written
    tm.handle_failed_batch(first, error, adjust_sequences=True)

    assert tm.state is TxnState.ABORTABLE_ERROR
    assert [second.base_sequence, third.base_sequence] == [1, 3]
    assert (second.producer_id, second.producer_epoch) == (7, 2)
    assert tm.next_sequence(TP) == 4
    # the request that carried sequence 4 comes back OUT_OF_ORDER_SEQUENCE_NUMBER: resent with sequence 1
    assert tm.can_retry(errors.OUT_OF_ORDER_SEQUENCE_NUMBER, second, -1)
    assert tm.should_stop_drain(TP, second) is False
    tm.handle_completed_batch(second, 10)
    tm.handle_completed_batch(third, 12)
    assert tm.in_flight_batches(TP) == []


def test_a_batch_whose_fate_is_unknown_leaves_the_sequences_alone() -> None:
    """Retries exhausted (Java: ``attempts < retries`` is false): it may have been written, so no shift."""
    tm = ready()
    tm.begin_transaction()
    _add(tm, TP)
    _prime(tm)
    first, second = _batch(2), _batch(1)
    for b in (first, second):
        assert tm.take_for_drain(TP, b)
    tm.handle_failed_batch(first, errors.error_for_code(7, "for t-0"), adjust_sequences=False)
    assert second.base_sequence == 3 and tm.next_sequence(TP) == 4
