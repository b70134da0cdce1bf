"""Transactions end to end on the librdkafka mock cluster (3 brokers, a real transaction coordinator).

Checked: committed records are visible to read_committed readers and aborted ones never are (applied to
the raw log with its COMMIT/ABORT markers, see ``transactions.raw_log``: the mock's Fetch does not filter
for ordinary consumers), ``with producer.transaction()`` commits or aborts, AddPartitionsToTxn reaches the
coordinator before the first Produce, coordinator errors are retried, a failed batch makes the
transaction abortable, and a fenced producer gets ``ProducerFencedError`` from every later call (in the
future ``send()`` returns, as Java's).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import pytest

from faults.ledger import Ledger, decode_value
from sparkafka import errors
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all
from support.mock_cluster import ApiKey, MockCluster
from transactions.raw_log import LogBatch, LogRecord, committed_view, control_markers, mock_reappends, read_log

pytestmark = [pytest.mark.timeout(120)]


class _HasValue(Protocol):
    @property
    def value(self) -> bytes | None: ...


def _indexes(records: Sequence[_HasValue]) -> list[int]:
    return sorted(decode_value(r.value)[2] for r in records)


def test_committed_records_are_visible_and_aborted_ones_never(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    ledger = Ledger(keys=50)
    producer.init_transactions()
    producer.begin_transaction()
    ledger.send(producer, topic, 1000)  # 0..999: committed
    producer.commit_transaction()
    producer.begin_transaction()
    ledger.send(producer, topic, 1000)  # 1000..1999: written, then aborted
    producer.flush()
    producer.abort_transaction()
    with producer.transaction():
        ledger.send(producer, topic, 1000)  # 2000..2999: committed by the context manager
    with pytest.raises(RuntimeError), producer.transaction():
        ledger.send(producer, topic, 1000)  # 3000..3999: aborted by the context manager
        producer.flush()
        raise RuntimeError("boom")
    assert all(f.exception(0) is None for f in ledger.futures[:3000])

    log = read_log(mock_cluster.bootstrap_servers, topic)
    visible = _indexes(committed_view(log))
    assert visible == list(range(1000)) + list(range(2000, 3000))
    kinds = [kind for _, _, kind in control_markers(log)]
    assert kinds.count("ABORT") >= 2 and kinds.count("COMMIT") >= 2
    raw = {decode_value(r.value)[2] for batches in log.values() for b in batches for r in b.records}
    assert set(range(1000, 2000)) <= raw  # the aborted records were written: only the markers hide them
    # an independent read_committed consumer sees every committed record (the mock cannot hide aborts)
    seen = set(_indexes(consume_all(mock_cluster.bootstrap_servers, topic, isolation_level="read_committed")))
    assert set(visible) <= seen


def test_records_of_a_transaction_take_the_open_batch_path_and_all_commit(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transaction's records append to their partition's open batch like any others (``append_open``):
    only the ones that open or fill a batch take ``RecordAccumulator.append``, every partition written is
    added to the transaction, and a read_committed view of the log has every record once."""
    general = RecordAccumulator.append
    calls = [0]

    def counting(self: RecordAccumulator, *args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return general(self, *args, **kwargs)

    monkeypatch.setattr(RecordAccumulator, "append", counting)
    ledger = Ledger(keys=50)
    producer.init_transactions()
    producer.begin_transaction()
    ledger.send(producer, topic, 2000)
    producer.commit_transaction()
    assert 0 < calls[0] < 2000 // 4, calls
    assert all(f.exception(0) is None for f in ledger.futures)
    assert _indexes(committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == list(range(2000))


def test_add_partitions_reaches_the_coordinator_before_the_first_produce(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    producer.init_transactions()
    mock_cluster.start_request_tracking()
    producer.begin_transaction()
    producer.send(topic, b"0:0:0", key=b"k", partition=1)
    producer.commit_transaction()
    keys = [r.api_key for r in mock_cluster.requests() if r.api_key != ApiKey.METADATA]
    assert ApiKey.ADD_PARTITIONS_TO_TXN in keys and ApiKey.PRODUCE in keys
    assert keys.index(ApiKey.ADD_PARTITIONS_TO_TXN) < keys.index(ApiKey.PRODUCE) < keys.index(ApiKey.END_TXN)


def test_coordinator_errors_are_retried(mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    load, not_available, not_coordinator, concurrent = 14, 15, 16, 51
    mock_cluster.push_request_errors(ApiKey.FIND_COORDINATOR, [not_available])
    mock_cluster.push_request_errors(ApiKey.INIT_PRODUCER_ID, [load, concurrent, not_coordinator])
    mock_cluster.push_request_errors(ApiKey.ADD_PARTITIONS_TO_TXN, [concurrent, load, not_coordinator])
    mock_cluster.push_request_errors(ApiKey.END_TXN, [not_coordinator, load, concurrent])
    ledger = Ledger(keys=20)
    producer.init_transactions()
    producer.begin_transaction()
    ledger.send(producer, topic, 500)
    producer.commit_transaction()
    assert all(f.exception(0) is None for f in ledger.futures)
    assert _indexes(committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == list(range(500))


def test_a_failed_batch_makes_the_transaction_abortable(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    mock_cluster.push_partition_request_errors(topic, 0, ApiKey.PRODUCE, [87])  # INVALID_RECORD
    failed = producer.send(topic, b"0:0:0", partition=0)
    assert isinstance(failed.exception(10), errors.error_class_for_code(87))
    with pytest.raises(errors.IllegalStateError, match="abort_transaction"):
        producer.send(topic, b"0:1:1", partition=1)
    with pytest.raises(errors.TransactionError):
        producer.commit_transaction()
    producer.abort_transaction()
    producer.begin_transaction()  # the producer is usable again
    producer.send(topic, b"0:2:2", partition=1)
    producer.commit_transaction()
    assert _indexes(committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == [2]


def test_a_record_that_fails_in_send_makes_the_transaction_abortable(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """Java's doSend hands the error to the future and calls ``maybeTransitionToErrorState``: the record is
    not in the transaction, so the transaction must not commit; after the abort the producer goes on."""
    producer.init_transactions()
    producer.begin_transaction()
    assert producer.send(topic, b"0:0:0", partition=0).get(10).offset >= 0
    too_large = producer.send(topic, b"x" * (producer.record_limit + 1), partition=0)
    assert isinstance(too_large.exception(0), errors.RecordTooLargeError)
    with pytest.raises(errors.TransactionError, match="RecordTooLargeError"):
        producer.commit_transaction()
    producer.abort_transaction()
    with producer.transaction():
        producer.send(topic, b"0:1:1", partition=0)
    assert _indexes(committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == [1]


def test_invalid_producer_epoch_on_produce_is_abortable_and_the_abort_takes_a_new_epoch(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """As in Java (KIP-588): INVALID_PRODUCER_EPOCH answered to a transactional Produce (the coordinator
    may have aborted the transaction on its timeout) fails the batch and makes the transaction
    abortable, not the producer fenced; abort_transaction re-initializes it with a new epoch."""
    producer.init_transactions()
    tm = producer._tm
    assert tm is not None
    first = (tm.producer_id, tm.epoch)
    producer.begin_transaction()
    mock_cluster.push_partition_request_errors(topic, 0, ApiKey.PRODUCE, [errors.INVALID_PRODUCER_EPOCH])
    failed = producer.send(topic, b"0:0:0", partition=0)
    error = failed.exception(10)
    assert isinstance(error, errors.error_class_for_code(errors.INVALID_PRODUCER_EPOCH))
    assert not isinstance(error, errors.ProducerFencedError)
    with pytest.raises(errors.TransactionError) as refused:
        producer.commit_transaction()
    assert not isinstance(refused.value, errors.ProducerFencedError)
    producer.abort_transaction()
    assert (tm.producer_id, tm.epoch) != first  # InitProducerId again (the mock hands out a new id)
    producer.begin_transaction()
    producer.send(topic, b"0:1:1", partition=0).get(10)
    producer.commit_transaction()
    assert _indexes(committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == [1]


def test_the_transaction_block_aborts_when_its_commit_fails_abortably(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """``with producer.transaction()``: a commit refused because a batch failed raises, and the block has
    already aborted, so the next transaction can begin without an explicit abort_transaction()."""
    producer.init_transactions()
    mock_cluster.push_partition_request_errors(topic, 0, ApiKey.PRODUCE, [87])  # INVALID_RECORD
    with pytest.raises(errors.TransactionError), producer.transaction():
        failed = producer.send(topic, b"0:0:0", partition=0)
        assert isinstance(failed.exception(10), errors.error_class_for_code(87))
    with producer.transaction():  # no abort_transaction() needed
        producer.send(topic, b"0:1:1", partition=1)
    assert _indexes(committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == [1]


@pytest.mark.parametrize("api", [ApiKey.END_TXN, ApiKey.PRODUCE, ApiKey.ADD_PARTITIONS_TO_TXN])
def test_a_fenced_producer_fails_every_later_call(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer, api: int) -> None:
    producer.init_transactions()
    producer.begin_transaction()
    if api == ApiKey.PRODUCE:
        mock_cluster.push_partition_request_errors(topic, 0, ApiKey.PRODUCE, [errors.PRODUCER_FENCED])
    else:
        mock_cluster.push_request_errors(api, [errors.PRODUCER_FENCED])
    future = producer.send(topic, b"0:0:0", partition=0)
    with pytest.raises(errors.ProducerFencedError):
        producer.commit_transaction()
    outcome = future.exception(10)  # done either way; written only if the fence came at EndTxn
    assert (outcome is None) if api == ApiKey.END_TXN else isinstance(outcome, errors.KafkaError)
    with pytest.raises(errors.ProducerFencedError):
        producer.begin_transaction()
    # Java's send() hands a fenced producer's ProducerFencedException (an ApiException) to the future
    seen: list[BaseException | None] = []
    late = producer.send(topic, b"late", callback=lambda md, exc: seen.append(exc))
    assert isinstance(late.exception(0), errors.ProducerFencedError) and seen == [late.exception(0)]
    with pytest.raises(errors.ProducerFencedError):
        producer.abort_transaction()


def test_rows_send_arrow_could_not_append_make_the_transaction_abortable(mock_cluster: MockCluster, topic: str) -> None:
    """Rows of ``send_arrow`` that fail for want of memory within max.block.ms are reported in its result,
    not raised; like a record ``send()`` fails in its future (Java's doSend), they make the transaction
    abortable, so a commit cannot leave them out."""
    import pyarrow as pa

    producer = KafkaProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-a",
                              "buffer.memory": 65536, "batch.size": 16384, "max.block.ms": 500, "linger.ms": 0})
    try:
        producer.init_transactions()
        producer.begin_transaction()
        assert producer.send(topic, b"first", partition=0).get(10).offset >= 0
        for broker in (1, 2, 3):
            mock_cluster.broker_set_rtt(broker, 3000)  # answers too slow to free memory within max.block.ms
        rows = pa.RecordBatch.from_arrays([pa.array([b"x" * 1000] * 200, pa.binary()), pa.array([0] * 200, pa.int32())],
                                          names=["value", "partition"])
        result = producer.send_arrow(topic, rows)
        assert result.report.failed > 0 and isinstance(result.report.first_error, errors.BufferExhaustedError)
        for broker in (1, 2, 3):
            mock_cluster.broker_set_rtt(broker, 0)
        with pytest.raises(errors.TransactionError, match="BufferExhaustedError"):
            producer.commit_transaction()
        producer.abort_transaction()
        with producer.transaction():
            producer.send(topic, b"second", partition=0)
    finally:
        producer.close(timeout=5)
    assert [r.value for r in committed_view(read_log(mock_cluster.bootstrap_servers, topic))] == [b"second"]


def test_a_coordinator_sharing_no_end_txn_version_fails_the_commit_instead_of_hanging() -> None:
    """A coordinator that advertises only versions of EndTxn this producer cannot speak (5-5 against 0-4
    under transaction protocol 1): the commit raises UnsupportedVersionError at once and the producer is
    fatal, as when a broker answers a request it cannot parse. The version used to be looked up after the
    request was marked in flight, so the error left it there: every later loop waited for an answer that
    never came (commit_transaction timed out, close() without a timeout never returned)."""
    with MockCluster(num_brokers=1) as mc:
        mc.create_topic("t", partitions=1, replication=1)
        mc.set_apiversion(ApiKey.END_TXN, 5, 5)
        producer = KafkaProducer({"bootstrap.servers": mc.bootstrap_servers, "transactional.id": "no-end-txn",
                                  "linger.ms": 5, "retry.backoff.ms": 20, "max.block.ms": 10_000})
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send("t", b"v").get(10)
            with pytest.raises(errors.UnsupportedVersionError, match="EndTxn"):
                producer.commit_transaction(10)
            with pytest.raises(errors.UnsupportedVersionError):
                producer.begin_transaction()
        finally:
            producer.close(timeout=10)
        assert not producer._io_thread.is_alive()


@pytest.mark.parametrize("path", ["append", "append_open"])  # where the commit begins
def test_a_send_racing_commit_for_a_new_partition_fails_at_once_and_the_commit_completes(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer, monkeypatch: pytest.MonkeyPatch,
        path: str) -> None:
    """Another thread's commit_transaction() began between a send()'s state check and its append, for a
    partition not yet in the transaction (a race review: 8 of 60 commits with two sending threads on
    1,000 partitions). The partition could no longer join, so the drain held the batch back: the commit
    waited delivery.timeout.ms for it, then failed (the record with DeliveryTimeoutError), or a later
    transaction took it in. Now the record fails at once with IllegalStateError (Java's send() throws it
    there) and the commit completes with the records that were in the transaction."""
    producer.init_transactions()
    producer.begin_transaction()
    assert producer.send(topic, b"in", partition=0).result(10).partition == 0
    commits = []
    name = path
    original = getattr(producer._accumulator, name)

    def racing(*args: Any, **kwargs: Any) -> Any:
        tm = producer._tm
        assert tm is not None
        commits.append(tm.begin_commit())  # what commit_transaction() in another thread does first
        return original(*args, **kwargs)

    monkeypatch.setattr(producer._accumulator, name, racing)
    future = producer.send(topic, b"raced", partition=1)
    monkeypatch.undo()
    with pytest.raises(errors.IllegalStateError, match="could not join the transaction"):
        future.result(5)
    commits[0].wait(10)  # completes: nothing of the transaction is held back
    log = read_log(mock_cluster.bootstrap_servers, topic)
    assert [r.value for r in committed_view(log)] == [b"in"]
    producer.begin_transaction()  # the next transaction does not take the raced record in
    producer.send(topic, b"next", partition=1).result(10)
    producer.commit_transaction()
    assert sorted(r.value or b"" for r in committed_view(read_log(mock_cluster.bootstrap_servers, topic))) == [
        b"in", b"next"]


def test_the_mock_appends_a_resent_batch_again_after_an_older_duplicate(
        mock_cluster: MockCluster, topic: str, producer: KafkaProducer) -> None:
    """Two Produce requests of a partition are appended, their answers lost (the broker goes down); the
    producer resends both with the same producer id, epoch and sequences. The mock acknowledges the first
    resend as a duplicate, which moves its expected sequence back, and appends the second again: a copy no
    broker would write (it keeps the last 5 batches per producer and answers with the first copy's offset).
    ``mock_reappends`` lists exactly that copy, with the offset the producer was told (the chaos test
    leaves such copies out of the committed view). If this fails because the mock no longer appends the
    copy, the exclusion in ``faults/test_idempotent_chaos.py`` can go."""
    mock_cluster.partition_set_leader(topic, 0, 1)
    producer.init_transactions()
    producer.begin_transaction()
    producer.send(topic, b"r0", partition=0).get(10)  # the partition's first batch, acknowledged
    try:
        mock_cluster.broker_set_rtt(1, 2000)  # the mock appends at once and answers 2 s later
        first = producer.send(topic, b"r1", partition=0)
        time.sleep(0.2)
        second = producer.send(topic, b"r2", partition=0)  # a second request of the partition
        time.sleep(0.2)
        mock_cluster.broker_set_down(1)  # both answers lost
        time.sleep(0.3)
    finally:
        mock_cluster.broker_set_rtt(1, 0)
        mock_cluster.broker_set_up(1)
    first.get(10)
    told = second.get(10).offset
    producer.commit_transaction()

    log = read_log(mock_cluster.bootstrap_servers, topic)
    data = [b for b in log[0] if not b.is_control]
    assert [(b.base_sequence, [r.value for r in b.records]) for b in data] == [
        (0, [b"r0"]), (1, [b"r1"]), (2, [b"r2"]), (2, [b"r2"])]  # r2 appended twice, one identity
    assert told == data[3].base_offset
    assert mock_reappends(log) == {(0, data[3].base_offset): (0, data[2].base_offset)}
    assert [r.value for r in committed_view(log) if (r.partition, r.offset) not in mock_reappends(log)] == [
        b"r0", b"r1", b"r2"]


def _batch(offset: int, sequence: int, values: list[bytes], producer_id: int = 7, epoch: int = 0) -> LogBatch:
    records = [LogRecord(0, offset + i, v) for i, v in enumerate(values)]
    return LogBatch(offset, offset + len(values) - 1, producer_id, epoch, sequence, True, False, -1, records)


def test_mock_reappends_lists_only_a_resend_a_broker_deduplicates() -> None:
    """Same producer id, epoch, sequence and records as one of the producer's last 5 batches: a copy. Records
    written again under another sequence or epoch, with other contents, or a resend older than the last
    5 batches are not (a real producer bug, or one a broker would refuse)."""
    a, b = _batch(0, 0, [b"a"]), _batch(1, 1, [b"b", b"c"])
    assert mock_reappends({0: [a, b, _batch(3, 1, [b"b", b"c"])]}) == {(0, 3): (0, 1), (0, 4): (0, 2)}
    assert mock_reappends({0: [a, b, _batch(3, 3, [b"b", b"c"])]}) == {}  # another sequence
    assert mock_reappends({0: [a, b, _batch(3, 1, [b"b", b"c"], epoch=1)]}) == {}  # another epoch
    assert mock_reappends({0: [a, b, _batch(3, 1, [b"b", b"x"])]}) == {}  # other records
    later = [_batch(1 + i, 1 + i, [b"%d" % i]) for i in range(5)]
    assert mock_reappends({0: [a, *later, _batch(6, 0, [b"a"])]}) == {}  # 5 batches since: no longer retained
    assert mock_reappends({0: [a, *later[:4], _batch(5, 0, [b"a"])]}) == {(0, 5): (0, 0)}
