"""TransactionManager: producer id, epoch and per-partition sequence numbers (idempotence), and the
transaction state machine.

How it works (the Java client's TransactionManager, facts §7):
- Idempotence: the Sender asks ``needs_producer_id()`` each loop and sends InitProducerId; every batch
  drained gets ``assign_sequence`` (producer id, epoch, the partition's next sequence, advanced by the
  record count and wrapping at 2**31-1). Batches stay "in flight" here until they complete, also while
  they wait for a retry, so ``should_stop_drain`` can keep a retried batch from overtaking the lowest
  in-flight sequence. OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID and batches that expired after
  being sent make the partition "unresolved"; once nothing is in flight for it the epoch is bumped (a new
  InitProducerId), and its sequences restart at 0 under the new epoch.
- Transactions: a state machine (``TxnState``) with Java's legal transitions. User calls enqueue
  transactional requests (InitProducerId, AddPartitionsToTxn, EndTxn, plus FindCoordinator when the
  coordinator is unknown); the Sender sends them one at a time, in priority order, before any produce
  data, and hands responses back here. Each user call waits on a ``TransactionalRequestResult``.

All methods are called with ``self.lock`` held internally; the Sender thread and user threads share it.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import errors
from .._types import TopicPartition
from ..record.builder import increment_sequence

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch

log = logging.getLogger("sparkafka.producer")

NO_PRODUCER_ID = -1
NO_EPOCH = -1
MAX_EPOCH = 32767


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


_S = TxnState
_VALID_SOURCES: dict[TxnState, frozenset[TxnState]] = {
    _S.UNINITIALIZED: frozenset({_S.READY, _S.INITIALIZING}),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.INITIALIZING, _S.ABORTING_TRANSACTION,
                                _S.ABORTABLE_ERROR}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR,
                                   _S.INITIALIZING}),
    _S.FATAL_ERROR: frozenset(TxnState),
}


class TransactionalRequestResult:
    """What a user call (init/commit/abort) waits on."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._event = threading.Event()
        self.error: BaseException | None = None

    def done(self, error: BaseException | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def is_done(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout_s: float | None) -> None:
        if not self._event.wait(timeout_s):
            raise errors.KafkaTimeoutError(
                f"timeout expired after {timeout_s}s while awaiting {self.operation}")
        if self.error is not None:
            raise self.error


@dataclass
class TxnRequest:
    """One transactional request the Sender should send (to the coordinator, or any node if
    ``needs_coordinator`` is False)."""

    api_key: int
    body: dict[str, Any]
    priority: int
    needs_coordinator: bool
    handler: Callable[[dict[str, Any] | None, BaseException | None], None]
    result: TransactionalRequestResult | None = None
    is_find_coordinator: bool = False
    retry_at_ms: float = 0.0
    attempts: int = 0


class _PartitionEntry:
    __slots__ = ("in_flight", "last_acked_offset", "last_acked_sequence", "next_sequence", "reset_seq")

    def __init__(self) -> None:
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.last_acked_offset = -1
        self.in_flight: list[ProducerBatch] = []
        self.reset_seq = False


# Priorities (lower first), as Java's TxnRequestHandler.Priority.
_PRI_FIND_COORDINATOR = 0
_PRI_INIT_PRODUCER_ID = 1
_PRI_ADD_PARTITIONS = 2
_PRI_END_TXN = 4

API_FIND_COORDINATOR = 10
API_INIT_PRODUCER_ID = 22
API_ADD_PARTITIONS_TO_TXN = 24
API_END_TXN = 26

_RETRIABLE_COORD = {14, 15, 16, 51}  # load in progress, not available, not coordinator, concurrent txns


class TransactionManager:
    """Idempotence bookkeeping and (when ``transactional_id`` is set) the transaction state machine."""

    def __init__(self, transactional_id: str | None, transaction_timeout_ms: int,
                 retry_backoff_ms: int = 100) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.lock = threading.RLock()
        self.producer_id = NO_PRODUCER_ID
        self.epoch = NO_EPOCH
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._unresolved: set[TopicPartition] = set()
        self._rewrite: set[TopicPartition] = set()
        self._epoch_bump_required = False
        self._init_in_flight = False
        # transactions
        self._pending: list[TxnRequest] = []
        self.in_flight_request: TxnRequest | None = None
        self.coordinator: int | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._txn_partitions: set[TopicPartition] = set()
        self._pending_result: TransactionalRequestResult | None = None

    # ------------------------------------------------------------------ basics
    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID and self.state not in (
            TxnState.INITIALIZING, TxnState.UNINITIALIZED) if self.is_transactional \
            else self.producer_id != NO_PRODUCER_ID and not self._init_in_flight

    def has_fatal_error(self) -> bool:
        return self.state is TxnState.FATAL_ERROR

    def has_abortable_error(self) -> bool:
        return self.state is TxnState.ABORTABLE_ERROR

    def _entry(self, tp: TopicPartition) -> _PartitionEntry:
        e = self._partitions.get(tp)
        if e is None:
            e = self._partitions[tp] = _PartitionEntry()
        return e

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        if self.state is TxnState.FATAL_ERROR and target is not TxnState.FATAL_ERROR:
            return
        if self.state not in _VALID_SOURCES[target] and self.state is not target:
            raise errors.IllegalStateError(
                f"invalid transition attempted from state {self.state.value} to state {target.value}")
        if error is not None:
            self.last_error = error
        elif target not in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            self.last_error = None
        self.state = target

    def transition_to_fatal(self, error: BaseException) -> None:
        with self.lock:
            self.last_error = error
            self.state = TxnState.FATAL_ERROR
            for req in self._pending + ([self.in_flight_request] if self.in_flight_request else []):
                if req.result is not None:
                    req.result.done(error)
            self._pending.clear()

    def transition_to_abortable(self, error: BaseException) -> None:
        with self.lock:
            if self.state in (TxnState.ABORTING_TRANSACTION, TxnState.FATAL_ERROR):
                return
            self.last_error = error
            self.state = TxnState.ABORTABLE_ERROR

    # ------------------------------------------------------- accumulator hooks
    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        if not self.is_transactional:
            return True
        return self.state is not TxnState.FATAL_ERROR and tp in self._txn_partitions

    def should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        with self.lock:
            if not self.has_producer_id() or self._epoch_bump_required:
                return True
            if not self.is_send_to_partition_allowed(tp):
                return True
            if tp in self._unresolved or tp in self._rewrite:
                return True
            e = self._partitions.get(tp)
            if e is None:
                return False
            if not first.has_sequence():
                # a new batch must not go out while older batches of an older epoch are in flight
                return any(b.producer_id != self.producer_id or b.producer_epoch != self.epoch
                           for b in e.in_flight)
            # a retry may only go out if it is the lowest in-flight sequence
            if first.producer_id != self.producer_id or first.producer_epoch != self.epoch:
                return True
            return bool(e.in_flight) and e.in_flight[0] is not first

    def assign_sequence(self, batch: ProducerBatch) -> None:
        with self.lock:
            e = self._entry(batch.tp)
            batch.set_producer_state(self.producer_id, self.epoch, e.next_sequence, self.is_transactional)
            e.next_sequence = increment_sequence(e.next_sequence, batch.record_count)
            e.in_flight.append(batch)

    # ------------------------------------------------------------ sender hooks
    def needs_producer_id(self) -> bool:
        """For an idempotent (non-transactional) producer: whether to send InitProducerId now."""
        with self.lock:
            if self.is_transactional or self._init_in_flight:
                return False
            self.maybe_resolve_sequences()
            if self._epoch_bump_required:
                # A new producer id renumbers every partition: wait until no batch is on the wire, so
                # a late answer for an old sequence cannot race with the renumbered retries.
                return not any(b.in_request for e in self._partitions.values() for b in e.in_flight)
            return self.producer_id == NO_PRODUCER_ID

    def init_producer_id_request(self) -> dict[str, Any]:
        with self.lock:
            self._init_in_flight = True
            # An epoch bump asks for a brand-new producer id: every broker supports that, and
            # sequences restart at 0 under it (Tansu rejects KIP-360 bumps of an existing id).
            return {
                "transactional_id": self.transactional_id,
                "transaction_timeout_ms": self.transaction_timeout_ms if self.is_transactional else 2147483647,
                "producer_id": -1,
                "producer_epoch": -1,
            }

    def handle_idempotent_init_response(self, body: dict[str, Any] | None, error: BaseException | None) -> None:
        with self.lock:
            self._init_in_flight = False
            if error is not None:
                return  # the Sender retries next loop after backoff
            assert body is not None
            code = int(body.get("error_code", 0))
            if code != 0:
                exc = errors.error_for_code(code, body.get("error_message"))
                if code in (errors.CLUSTER_AUTHORIZATION_FAILED, errors.PRODUCER_FENCED,
                            errors.INVALID_PRODUCER_EPOCH):
                    self.transition_to_fatal(exc)
                return
            self._set_producer_id_and_epoch(int(body["producer_id"]), int(body["producer_epoch"]))

    def _set_producer_id_and_epoch(self, pid: int, epoch: int) -> None:
        old = (self.producer_id, self.epoch)
        self.producer_id, self.epoch = pid, epoch
        self._epoch_bump_required = False
        if old != (pid, epoch):
            # every partition restarts its sequences under the new producer id/epoch;
            # batches still waiting (in flight here, i.e. awaiting retry) are renumbered from 0.
            for tp, e in self._partitions.items():
                seq = 0
                for b in e.in_flight:
                    b.set_producer_state(pid, epoch, seq, self.is_transactional)
                    seq = increment_sequence(seq, b.record_count)
                e.next_sequence = seq
                e.last_acked_sequence = -1
                e.reset_seq = True
                self._unresolved.discard(tp)
            self._rewrite.clear()
        log.debug("producer id %d epoch %d", pid, epoch)

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        with self.lock:
            self._epoch_bump_required = True
            self._rewrite.add(tp)

    def maybe_resolve_sequences(self) -> None:
        for tp in list(self._unresolved):
            e = self._entry(tp)
            if any(b.in_request for b in e.in_flight):
                continue
            if not e.in_flight and increment_sequence(e.last_acked_sequence, 1) == e.next_sequence:
                self._unresolved.discard(tp)
                continue
            if self.is_transactional:
                self.transition_to_abortable(errors.KafkaError(
                    f"unresolved sequence for {tp[0]}-{tp[1]}; the transaction must be aborted"))
            else:
                self._epoch_bump_required = True
                self._rewrite.add(tp)
            self._unresolved.discard(tp)

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        with self.lock:
            self._unresolved.add(batch.tp)

    def can_retry(self, code: int, batch: ProducerBatch, log_start_offset: int) -> bool:
        """Java TransactionManager.canRetry for the sequence errors; other codes: the class's retriable flag."""
        with self.lock:
            tp = batch.tp
            e = self._entry(tp)
            if code == errors.UNKNOWN_PRODUCER_ID:
                if not self.is_transactional:
                    # the broker lost our producer state (restart, retention): new id, renumber, retry
                    self._epoch_bump_required = True
                    self._rewrite.add(tp)
                    return True
                if log_start_offset == -1 or e.reset_seq:
                    return True
                if e.last_acked_offset < log_start_offset:
                    self._epoch_bump_required = True
                    self._rewrite.add(tp)
                    return True
                return False
            if code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
                if tp not in self._unresolved and (
                        e.reset_seq or batch.base_sequence != increment_sequence(e.last_acked_sequence, 1)):
                    return True  # collateral damage from an earlier failed batch
                if not self.is_transactional:
                    self._epoch_bump_required = True
                    self._rewrite.add(tp)
                    return True
                return False
            return errors.error_class_for_code(code).retriable

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        with self.lock:
            e = self._entry(batch.tp)
            if batch.producer_id == self.producer_id and batch.producer_epoch == self.epoch:
                last = increment_sequence(batch.base_sequence, batch.record_count - 1)
                if e.last_acked_sequence < last or e.last_acked_sequence == -1:
                    e.last_acked_sequence = last
                e.reset_seq = False
                if base_offset >= 0:
                    e.last_acked_offset = max(e.last_acked_offset, base_offset + batch.record_count - 1)
            self._remove_in_flight(batch)

    def handle_failed_batch(self, batch: ProducerBatch, exc: BaseException, adjust_sequences: bool) -> None:
        with self.lock:
            code = getattr(exc, "code", None)
            if code in (errors.CLUSTER_AUTHORIZATION_FAILED, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                        errors.PRODUCER_FENCED, errors.UNSUPPORTED_VERSION, errors.INVALID_PRODUCER_EPOCH):
                if self.is_transactional or code != errors.UNSUPPORTED_VERSION:
                    fatal: BaseException = exc
                    if code in (errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH):
                        fatal = errors.ProducerFencedError(
                            "there is a newer producer with the same transactional.id; this producer is fenced")
                    self.transition_to_fatal(fatal)
            elif self.is_transactional:
                self.transition_to_abortable(exc)
            was_in_flight = batch in self._entry(batch.tp).in_flight
            self._remove_in_flight(batch)
            if not was_in_flight or not batch.has_sequence():
                return
            if code in (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, errors.UNKNOWN_PRODUCER_ID) \
                    and not self.is_transactional:
                self._epoch_bump_required = True
                self._rewrite.add(batch.tp)
            elif adjust_sequences or isinstance(exc, errors.DeliveryTimeoutError):
                # the batch's sequence numbers were never written: later sequences must be renumbered
                if self.is_transactional:
                    self.transition_to_abortable(exc)
                else:
                    self._epoch_bump_required = True
                    self._rewrite.add(batch.tp)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        e = self._partitions.get(batch.tp)
        if e is not None:
            try:
                e.in_flight.remove(batch)
            except ValueError:
                pass

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        """Track a batch that already has a sequence (the parts of a split batch), in sequence order."""
        with self.lock:
            lst = self._entry(batch.tp).in_flight
            lst.append(batch)
            lst.sort(key=lambda b: b.base_sequence)

    def in_flight_batches(self, tp: TopicPartition) -> list[ProducerBatch]:
        with self.lock:
            return list(self._entry(tp).in_flight)

    # ------------------------------------------------------------ transactions
    def _require_transactional(self, op: str) -> None:
        if not self.is_transactional:
            raise errors.IllegalStateError(f"cannot {op}: no transactional.id is configured")

    def _check_not_fatal(self, op: str) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise errors.IllegalStateError(
                f"cannot {op}: the producer is in a fatal error state ({self.last_error!r}); close it")

    def initialize_transactions(self) -> TransactionalRequestResult:
        with self.lock:
            self._require_transactional("init_transactions")
            self._check_not_fatal("init_transactions")
            if self._pending_result is not None and self._pending_result.operation == "init_transactions" \
                    and not self._pending_result.is_done():
                return self._pending_result
            if self.state is not TxnState.UNINITIALIZED:
                raise errors.IllegalStateError(
                    f"init_transactions() called in state {self.state.value}; it may be called only once")
            self._transition(TxnState.INITIALIZING)
            result = TransactionalRequestResult("init_transactions")
            self._enqueue(self._init_txn_request(result))
            self._pending_result = result
            return result

    def _init_txn_request(self, result: TransactionalRequestResult | None) -> TxnRequest:
        body = {"transactional_id": self.transactional_id,
                "transaction_timeout_ms": self.transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            assert req is not None
            if err is not None:
                self._retry(req)
                return
            assert resp is not None
            code = int(resp.get("error_code", 0))
            if code == 0:
                self.producer_id = int(resp["producer_id"])
                self.epoch = int(resp["producer_epoch"])
                self._partitions.clear()
                self._transition(TxnState.READY)
                if result is not None:
                    result.done()
            elif code in (15, 16):
                self.coordinator = None
                self._retry(req)
            elif code in _RETRIABLE_COORD or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in (errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH):
                self.transition_to_fatal(errors.ProducerFencedError(
                    "there is a newer producer with the same transactional.id; this producer is fenced"))
            else:
                exc = errors.error_for_code(code, resp.get("error_message"))
                self.transition_to_fatal(exc)
                if result is not None:
                    result.done(exc)

        req = TxnRequest(API_INIT_PRODUCER_ID, body, _PRI_INIT_PRODUCER_ID, True, on_response, result)
        return req

    def begin_transaction(self) -> None:
        with self.lock:
            self._require_transactional("begin_transaction")
            self._check_not_fatal("begin_transaction")
            if self.state is not TxnState.READY:
                raise errors.IllegalStateError(
                    f"begin_transaction() called in state {self.state.value}; "
                    "call init_transactions() first, and end the previous transaction")
            self._transition(TxnState.IN_TRANSACTION)

    def check_send_allowed(self) -> None:
        """Raise if a send is not legal now (transactional producer outside a transaction, fatal error)."""
        if not self.is_transactional:
            if self.state is TxnState.FATAL_ERROR and self.last_error is not None:
                raise errors.IllegalStateError(f"the producer has a fatal error: {self.last_error!r}")
            return
        st = self.state
        if st is TxnState.IN_TRANSACTION:
            return
        if st is TxnState.FATAL_ERROR:
            raise errors.IllegalStateError(
                f"cannot send: the producer is in a fatal error state ({self.last_error!r})")
        if st is TxnState.ABORTABLE_ERROR:
            raise errors.IllegalStateError(
                f"cannot send: the transaction must be aborted after an error ({self.last_error!r})")
        raise errors.IllegalStateError(
            f"cannot send outside a transaction (state {st.value}); call begin_transaction() first")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        if tp in self._txn_partitions or tp in self._new_partitions or tp in self._pending_partitions:
            return
        with self.lock:
            self._new_partitions.add(tp)

    def is_partition_added(self, tp: TopicPartition) -> bool:
        return tp in self._txn_partitions

    def begin_commit(self) -> TransactionalRequestResult:
        return self._begin_completion(commit=True)

    def begin_abort(self) -> TransactionalRequestResult:
        return self._begin_completion(commit=False)

    def _begin_completion(self, commit: bool) -> TransactionalRequestResult:
        op = "commit_transaction" if commit else "abort_transaction"
        with self.lock:
            self._require_transactional(op)
            self._check_not_fatal(op)
            if self._pending_result is not None and self._pending_result.operation == op \
                    and not self._pending_result.is_done():
                return self._pending_result
            if commit:
                if self.state is TxnState.ABORTABLE_ERROR:
                    raise errors.IllegalStateError(
                        f"cannot commit: the transaction hit an error and must be aborted ({self.last_error!r})")
                if self.state is not TxnState.IN_TRANSACTION:
                    raise errors.IllegalStateError(
                        f"commit_transaction() called in state {self.state.value}; no transaction in progress")
                self._transition(TxnState.COMMITTING_TRANSACTION)
            else:
                if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
                    raise errors.IllegalStateError(
                        f"abort_transaction() called in state {self.state.value}; no transaction in progress")
                self._transition(TxnState.ABORTING_TRANSACTION)
                self._new_partitions.clear()
            result = TransactionalRequestResult(op)
            self._pending_result = result
            if not self._txn_partitions and not self._pending_partitions:
                # nothing was sent in this transaction: complete locally
                self._transition(TxnState.READY)
                result.done()
                return result
            self._enqueue(self._end_txn_request(commit, result))
            return result

    def is_completing(self) -> bool:
        return self.state in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)

    def is_aborting(self) -> bool:
        return self.state is TxnState.ABORTING_TRANSACTION

    def _end_txn_request(self, commit: bool, result: TransactionalRequestResult) -> TxnRequest:
        body = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.epoch, "committed": commit}
        req: TxnRequest | None = None

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            assert req is not None
            if err is not None:
                self._retry(req)
                return
            assert resp is not None
            code = int(resp.get("error_code", 0))
            if code == 0:
                self._txn_partitions.clear()
                self._pending_partitions.clear()
                self._new_partitions.clear()
                if int(resp.get("producer_epoch", -1)) >= 0:
                    self.epoch = int(resp["producer_epoch"])
                self._transition(TxnState.READY)
                result.done()
            elif code in (15, 16):
                self.coordinator = None
                self._retry(req)
            elif code in _RETRIABLE_COORD or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in (errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH):
                self.transition_to_fatal(errors.ProducerFencedError(
                    "there is a newer producer with the same transactional.id; this producer is fenced"))
            else:
                exc = errors.error_for_code(code, resp.get("error_message"))
                self.transition_to_fatal(exc)
                result.done(exc)

        req = TxnRequest(API_END_TXN, body, _PRI_END_TXN, True, on_response, result)
        return req

    def _add_partitions_request(self) -> TxnRequest:
        parts = sorted(self._new_partitions)
        self._pending_partitions.update(parts)
        self._new_partitions.clear()
        topics: dict[str, list[int]] = {}
        for t, p in parts:
            topics.setdefault(t, []).append(p)
        body = {"v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self.producer_id,
                "v3_and_below_producer_epoch": self.epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        req: TxnRequest | None = None

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            assert req is not None
            if err is not None:
                self._retry(req)
                return
            assert resp is not None
            retry = False
            failure: BaseException | None = None
            for t in resp.get("results_by_topic_v3_and_below", []):
                for p in t.get("results_by_partition", []):
                    code = int(p.get("partition_error_code", 0))
                    tp = (t["name"], int(p["partition_index"]))
                    if code == 0:
                        self._txn_partitions.add(tp)
                        self._pending_partitions.discard(tp)
                    elif code in (15, 16):
                        self.coordinator = None
                        retry = True
                    elif code in _RETRIABLE_COORD or errors.error_class_for_code(code).retriable:
                        retry = True
                    elif code == 55:  # OPERATION_NOT_ATTEMPTED
                        continue
                    elif code in (errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH):
                        failure = errors.ProducerFencedError(
                            "there is a newer producer with the same transactional.id; this producer is fenced")
                    else:
                        failure = errors.error_for_code(code, f"AddPartitionsToTxn for {tp[0]}-{tp[1]}")
            if failure is not None:
                if isinstance(failure, errors.ProducerFencedError):
                    self.transition_to_fatal(failure)
                else:
                    self.transition_to_abortable(failure)
                self._pending_partitions.clear()
            elif retry:
                self._retry(req)

        req = TxnRequest(API_ADD_PARTITIONS_TO_TXN, body, _PRI_ADD_PARTITIONS, True, on_response)
        return req

    def find_coordinator_request(self) -> TxnRequest:
        body = {"key": self.transactional_id, "key_type": 1, "coordinator_keys": [self.transactional_id]}
        req: TxnRequest | None = None

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            assert req is not None
            if err is not None or resp is None:
                self._retry(req)
                return
            coords = resp.get("coordinators")
            if coords:
                c = coords[0]
                code, node, host, port = int(c.get("error_code", 0)), c["node_id"], c["host"], c["port"]
            else:
                code, node, host, port = (int(resp.get("error_code", 0)), resp.get("node_id"),
                                          resp.get("host"), resp.get("port"))
            if code == 0:
                self.coordinator = int(node)
                self.coordinator_address = (str(host), int(port))
            elif errors.error_class_for_code(code).retriable:
                self._retry(req)
            else:
                exc = errors.error_for_code(code, "FindCoordinator")
                self.transition_to_fatal(exc)

        req = TxnRequest(API_FIND_COORDINATOR, body, _PRI_FIND_COORDINATOR, False, on_response,
                         is_find_coordinator=True)
        return req

    coordinator_address: tuple[str, int] | None = None

    def _enqueue(self, req: TxnRequest) -> None:
        self._pending.append(req)
        self._pending.sort(key=lambda r: r.priority)

    def _retry(self, req: TxnRequest) -> None:
        req.attempts += 1
        req.retry_at_ms = -1.0  # the Sender stamps the backoff deadline
        self._enqueue(req)

    def next_request(self, has_incomplete_batches: bool) -> TxnRequest | None:
        """The next transactional request to send, or None. EndTxn waits until all batches completed."""
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                return None
            if self._new_partitions and self.state in (TxnState.IN_TRANSACTION,
                                                       TxnState.COMMITTING_TRANSACTION):
                self._enqueue(self._add_partitions_request())
            if not self._pending:
                return None
            req = self._pending[0]
            if req.api_key == API_END_TXN and (has_incomplete_batches or (self._pending_partitions
                                                                          and req.body["committed"])):
                if not any(r.api_key == API_ADD_PARTITIONS_TO_TXN for r in self._pending):
                    return None
            if req.needs_coordinator and self.coordinator is None:
                if not any(r.is_find_coordinator for r in self._pending):
                    self._enqueue(self.find_coordinator_request())
                req = self._pending[0]
            self._pending.remove(req)
            return req

    def requeue(self, req: TxnRequest) -> None:
        with self.lock:
            self._enqueue(req)

    def has_pending_requests(self) -> bool:
        return bool(self._pending) or self.in_flight_request is not None or bool(self._new_partitions)

    def close(self, error: BaseException) -> None:
        with self.lock:
            for req in self._pending + ([self.in_flight_request] if self.in_flight_request else []):
                if req.result is not None:
                    req.result.done(error)
            self._pending.clear()
            if self._pending_result is not None:
                self._pending_result.done(error)
