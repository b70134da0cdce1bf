"""The idempotence bookkeeping (``producer/idempotence.py``) on its own: sequence numbers per partition.

How it works: a ``TransactionManager`` without a transactional.id (the idempotent producer's) gets its
producer id from an InitProducerId answer; real ``ProducerBatch``es of several records are given their
sequences as the accumulator's drain does once a batch may go (``assign_sequence``), and the closed
batches are decoded, so the checks are on the bytes a broker would receive.
"""

from __future__ import annotations

from sparkafka.producer.producer_batch import ProducerBatch
from sparkafka.producer.transactions import TransactionManager
from sparkafka.record import CompressionType, RecordBatchBuilder, decode_batch

P0, P1 = ("t", 0), ("t", 1)


def _manager(pid: int = 1000, epoch: int = 3) -> TransactionManager:
    tm = TransactionManager(None, 60_000)
    assert tm.needs_producer_id()
    tm.init_producer_id_request()
    assert tm.handle_idempotent_init_response({"error_code": 0, "producer_id": pid, "producer_epoch": epoch}, None)
    return tm


def _batch(tp: tuple[str, int], records: int) -> ProducerBatch:
    batch = ProducerBatch(tp, RecordBatchBuilder(bytearray(16384), 16384, CompressionType.NONE), 1000.0,
                          bytearray(0), False)
    for i in range(records):
        assert batch.try_append(1_700_000_000_000 + i, None, b"v%d" % i, None, None, 1000.0) is not None
    return batch


def test_each_batch_starts_where_the_previous_one_ended_by_record_count() -> None:
    tm = _manager()
    batches = [_batch(P0, n) for n in (3, 1, 5)] + [_batch(P1, 2)]
    for b in batches:
        tm.assign_sequence(b)
    decoded = [decode_batch(bytes(b.close())) for b in batches]
    assert [(d.producer_id, d.producer_epoch, d.base_sequence, len(d.records)) for d in decoded] == [
        (1000, 3, 0, 3), (1000, 3, 3, 1), (1000, 3, 4, 5), (1000, 3, 0, 2)]
    assert (tm.next_sequence(P0), tm.next_sequence(P1)) == (9, 2)
