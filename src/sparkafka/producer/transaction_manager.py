"""TransactionManager: producer id, epoch and per-partition sequence numbers (idempotence), and the
transaction state machine (the Java client's TransactionManager, facts §7).

How it works.

Idempotence. The producer id and epoch come from InitProducerId. Each successful InitProducerId starts a
new *generation*. Every partition keeps its own sequence space (``_PartitionEntry``): the generation it
belongs to, the next sequence, the last acknowledged sequence and the batches that have a sequence but
are not complete yet (``in_flight``: on the wire, waiting for a retry, or expired while on the wire),
in sequence order. ``assign_sequence`` gives a batch the next sequence (advanced by its record count,
wrapping at 2**31-1); a retried batch keeps its sequence, and only the lowest in-flight batch of a
partition may be resent (``should_stop_drain``), so a retry never overtakes.

When a partition's sequence space is broken (OUT_OF_ORDER_SEQUENCE_NUMBER with a real gap,
UNKNOWN_PRODUCER_ID, a batch that failed with a non-retriable error, a batch that expired after being
sent and whose fate stays unknown once nothing else is in flight) the partition is marked for a
*rewrite*. The Sender then asks for a brand-new producer id (never a KIP-360 bump of the old one: Tansu
rejects those) and, once that id is known and none of the partition's batches is on the wire, the
partition's remaining batches are renumbered from 0 under the new id. Other partitions keep their old
id for the batches they have in flight (so a retry of a batch that may already be written is still
deduplicated by the broker) and switch to the new generation when they have nothing in flight.

Transactions. ``TxnState`` with Java's legal transitions; illegal calls raise ``IllegalStateError``,
calls after a fatal error re-raise that error (``ProducerFencedError`` when fenced). User calls enqueue
transactional requests (InitProducerId, AddPartitionsToTxn, EndTxn; FindCoordinator when the
coordinator is unknown); the Sender sends them one at a time, lowest priority value first, before any
produce data, and hands the responses to the request's handler here. EndTxn waits until every batch is
complete. Each user call waits on a ``TransactionalRequestResult``; a call repeated after its wait timed
out gets the same result back (as Java). A transaction whose batch failed, or whose EndTxn got
UNKNOWN_PRODUCER_ID / INVALID_PRODUCER_ID_MAPPING, is re-initialized after its abort (a new epoch, sequences
from 0). Transactions follow protocol v1 (EndTxn up to v4, ``protocol.messages``).

Locking: the Sender thread and user threads share ``self.lock`` (re-entrant); every public method
takes it.
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
from ..record.layout import NO_SEQUENCE, increment_sequence

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch

log = logging.getLogger("sparkafka.producer")

NO_PRODUCER_ID = -1
NO_EPOCH = -1
_SEQUENCE_SPACE = 1 << 31

API_FIND_COORDINATOR = 10
API_INIT_PRODUCER_ID = 22
API_ADD_PARTITIONS_TO_TXN = 24
API_END_TXN = 26

# Error codes handled by name in the transactional handlers.
_COORDINATOR_LOAD_IN_PROGRESS = 14
_COORDINATOR_NOT_AVAILABLE = 15
_NOT_COORDINATOR = 16
_CONCURRENT_TRANSACTIONS = 51
_OPERATION_NOT_ATTEMPTED = 55
_INVALID_PRODUCER_ID_MAPPING = 49
_TRANSACTION_ABORTABLE = 120
_FIND_AGAIN = frozenset({_COORDINATOR_NOT_AVAILABLE, _NOT_COORDINATOR})
_FENCED = frozenset({errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH})
_FATAL_FOR_BATCHES = frozenset({errors.CLUSTER_AUTHORIZATION_FAILED,
                                errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})

# Priorities (lower first), as Java's TxnRequestHandler.Priority.
_PRI_FIND_COORDINATOR = 0
_PRI_INIT_PRODUCER_ID = 1
_PRI_ADD_PARTITIONS = 2
_PRI_END_TXN = 4


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


# The states the per-batch predicates compare with, as module constants (docs/DESIGN.md, Performance notes).
_FATAL_ERROR = TxnState.FATAL_ERROR
_ABORTABLE_ERROR = TxnState.ABORTABLE_ERROR
_ABORTING = TxnState.ABORTING_TRANSACTION
_COMPLETING = (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)
_NO_PRODUCER_ID_YET = (TxnState.UNINITIALIZED, TxnState.INITIALIZING)


_S = TxnState
# target -> the states it may be entered from (Java TransactionManager.State.isTransitionValid)
_VALID_SOURCES: dict[TxnState, frozenset[TxnState]] = {
    _S.UNINITIALIZED: frozenset({_S.INITIALIZING}),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR,
                                   _S.INITIALIZING}),
    _S.FATAL_ERROR: frozenset(TxnState),
}

_FENCED_MESSAGE = ("this producer has been fenced: another producer with the same transactional.id "
                   "initialized transactions after it; close this producer")


def fenced_error(detail: str = "") -> errors.ProducerFencedError:
    return errors.ProducerFencedError(_FENCED_MESSAGE + (f" ({detail})" if detail else ""))


class TransactionalRequestResult:
    """What a user call (init/commit/abort) waits on. After a ``wait`` timed out, a repeated call of the
    same operation gets this result back until a ``wait`` sees it complete (``acked``, Java ``isAcked``)."""

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._event = threading.Event()
        self.error: BaseException | None = None
        self.acked = False
        self.timed_out = False

    def done(self, error: BaseException | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    def is_done(self) -> bool:
        return self._event.is_set()

    def awaits_retry(self) -> bool:
        """Not complete yet, or completed after the caller's wait timed out and not waited on since."""
        return not self._event.is_set() or (self.timed_out and not self.acked)

    def wait(self, timeout_s: float | None) -> None:
        if not self._event.wait(timeout_s):
            self.timed_out = True
            raise errors.KafkaTimeoutError(
                f"{self.operation}() did not complete within {timeout_s} s; call it again to keep waiting")
        self.acked = True
        if self.error is not None:
            raise self.error.with_traceback(None)


@dataclass
class TxnRequest:
    """One transactional request for the Sender: sent to the coordinator (``needs_coordinator``) or to
    any broker; ``handler(body, error)`` gets the response."""

    api_key: int
    body: dict[str, Any]
    priority: int
    needs_coordinator: bool
    handler: Callable[[dict[str, Any] | None, BaseException | None], None]
    result: TransactionalRequestResult | None = None
    is_find_coordinator: bool = False
    retry_at_ms: float = 0.0
    attempts: int = 0

    @property
    def name(self) -> str:
        return {API_FIND_COORDINATOR: "FindCoordinator", API_INIT_PRODUCER_ID: "InitProducerId",
                API_ADD_PARTITIONS_TO_TXN: "AddPartitionsToTxn", API_END_TXN: "EndTxn"}.get(
            self.api_key, str(self.api_key))


class _PartitionEntry:
    """One partition's sequence space."""

    __slots__ = ("generation", "in_flight", "last_acked_offset", "last_acked_sequence", "next_sequence",
                 "producer_epoch", "producer_id")

    def __init__(self, generation: int, producer_id: int, producer_epoch: int) -> None:
        self.generation = generation
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.last_acked_offset = -1
        self.in_flight: list[ProducerBatch] = []

    def restart(self, generation: int, producer_id: int, producer_epoch: int) -> None:
        self.generation = generation
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.next_sequence = 0
        self.last_acked_sequence = -1
        self.last_acked_offset = -1

    def on_wire(self) -> bool:
        return any(b.in_request for b in self.in_flight)


def _seq_after(a: int, b: int) -> bool:
    """Sequence ``a`` comes after ``b`` (modular, for sequences less than 2**30 apart)."""
    return 0 < (a - b) % _SEQUENCE_SPACE < _SEQUENCE_SPACE // 2


class TransactionManager:
    """Idempotence bookkeeping and (when ``transactional_id`` is set) the transaction state machine."""

    def __init__(self, transactional_id: str | None, transaction_timeout_ms: int,
                 retry_backoff_ms: int = 100) -> None:
        self.transactional_id = transactional_id
        self.is_transactional = transactional_id is not None
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.lock = threading.RLock()
        self.producer_id = NO_PRODUCER_ID
        self.epoch = NO_EPOCH
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self._generation = 0
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._unresolved: dict[TopicPartition, int] = {}  # tp -> the sequence after the failed batch
        self._rewrite: set[TopicPartition] = set()
        self._init_in_flight = False
        self._split_slot: tuple[TopicPartition, int] | None = None
        # transactions
        self._pending: list[TxnRequest] = []
        self.in_flight_request: TxnRequest | None = None
        self.coordinator: int | None = None
        self.coordinator_address: tuple[str, int] | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._txn_partitions: set[TopicPartition] = set()
        self._pending_result: TransactionalRequestResult | None = None
        self._bump_required = False  # transactional: re-initialize after the abort

    # ================================================================== basics
    @property
    def generation(self) -> int:
        """Incremented by every successful InitProducerId."""
        return self._generation

    def has_producer_id(self) -> bool:
        if self.producer_id == NO_PRODUCER_ID:
            return False
        if self.is_transactional:
            return self.state not in _NO_PRODUCER_ID_YET
        return True

    def has_fatal_error(self) -> bool:
        return self.state is _FATAL_ERROR

    def has_abortable_error(self) -> bool:
        return self.state is _ABORTABLE_ERROR

    def is_completing(self) -> bool:
        return self.state in _COMPLETING

    def is_aborting(self) -> bool:
        return self.state is _ABORTING

    def _entry(self, tp: TopicPartition) -> _PartitionEntry:
        e = self._partitions.get(tp)
        if e is None:
            e = self._partitions[tp] = _PartitionEntry(self._generation, self.producer_id, self.epoch)
        return e

    def _transition(self, target: TxnState, error: BaseException | None = None) -> None:
        if self.state is TxnState.FATAL_ERROR and target is not TxnState.FATAL_ERROR:
            return
        if self.state not in _VALID_SOURCES[target]:
            raise errors.IllegalStateError(
                f"invalid transaction state transition from {self.state.value} to {target.value}")
        if error is not None:
            self.last_error = error
        elif target not in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR):
            self.last_error = None
        log.debug("transaction state %s -> %s", self.state.value, target.value)
        self.state = target

    def transition_to_fatal(self, error: BaseException) -> None:
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                return
            log.error("the producer hit a fatal error: %r", error)
            self.last_error = error
            self.state = TxnState.FATAL_ERROR
            self._fail_pending(error)

    def transition_to_abortable(self, error: BaseException) -> None:
        with self.lock:
            if self.state in (TxnState.ABORTING_TRANSACTION, TxnState.FATAL_ERROR):
                return
            if self.state in (TxnState.UNINITIALIZED, TxnState.READY):
                return  # no transaction to abort (a late answer after the transaction ended)
            log.info("the transaction must be aborted: %r", error)
            self.last_error = error
            self.state = TxnState.ABORTABLE_ERROR

    def _fail_pending(self, error: BaseException) -> None:
        reqs = self._pending + ([self.in_flight_request] if self.in_flight_request else [])
        for req in reqs:
            if req.result is not None:
                req.result.done(error)
        self._pending.clear()
        if self._pending_result is not None:
            self._pending_result.done(error)

    def fatal_error(self) -> BaseException:
        """The error every record fails with after a fatal error."""
        return self.last_error or errors.TransactionError("the producer is in a fatal error state")

    # ======================================================= accumulator hooks
    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        if not self.is_transactional:
            return True
        return self.state is not _FATAL_ERROR and tp in self._txn_partitions

    def take_for_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """The accumulator's drain may take ``first`` (not ``should_stop_drain``); a never-sent batch
        then gets its sequence (``assign_sequence``), under one acquisition of the lock (once per batch)."""
        with self.lock:
            if self._should_stop_drain(tp, first):
                return False
            if first.base_sequence == NO_SEQUENCE:
                self._assign_sequence(first)
            return True

    def should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """Java ``shouldStopDrainBatchesForPartition`` (plus: never while the partition waits for a
        rewrite under a new producer id)."""
        with self.lock:
            return self._should_stop_drain(tp, first)

    def _should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        state = self.state
        # not has_producer_id(), has_fatal_error(), not is_send_to_partition_allowed(tp)
        if self.producer_id == NO_PRODUCER_ID or state is _FATAL_ERROR:
            return True
        if self.is_transactional and (state in _NO_PRODUCER_ID_YET or tp not in self._txn_partitions):
            return True
        e = self._partitions.get(tp)
        if e is None:
            return False
        if tp in self._rewrite:
            return True
        if first.base_sequence == NO_SEQUENCE:
            if e.in_flight and e.generation != self._generation:
                return True  # batches of an older producer id still in flight here
            if e.in_flight and e.last_acked_sequence == -1:
                # The partition's first batch under this producer id is not acknowledged yet: a broker
                # with no state for the producer on that partition appends a first batch with ANY
                # sequence (ProducerAppendInfo.checkSequence), so a second batch must not overtake it: if
                # the first failed retriably (NOT_LEADER_OR_FOLLOWER on a topic just created), the
                # second would be appended and the first could never be (OUT_OF_ORDER_SEQUENCE_NUMBER
                # until delivery.timeout.ms). One batch in flight until the first acknowledgement.
                return True
            return tp in self._unresolved
        # a retry goes only when it is the lowest sequence still in flight
        return bool(e.in_flight) and e.in_flight[0] is not first and first in e.in_flight

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a never-sent batch the partition's next sequence and track it as in flight."""
        with self.lock:
            self._assign_sequence(batch)

    def _assign_sequence(self, batch: ProducerBatch) -> None:
        e = self._entry(batch.tp)
        if e.generation != self._generation and not e.in_flight:
            e.restart(self._generation, self.producer_id, self.epoch)
            self._unresolved.pop(batch.tp, None)
        sequence = e.next_sequence
        batch.set_producer_state(e.producer_id, e.producer_epoch, sequence, self.is_transactional)
        e.next_sequence = increment_sequence(sequence, batch.record_count)
        e.in_flight.append(batch)

    def begin_split(self, batch: ProducerBatch) -> None:
        """The Sender is about to split ``batch``: its parts (``add_in_flight_batch``) take its place."""
        with self.lock:
            e = self._partitions.get(batch.tp)
            if e is None or batch not in e.in_flight:
                self._split_slot = None
                return
            index = e.in_flight.index(batch)
            e.in_flight.pop(index)
            self._split_slot = (batch.tp, index)

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        """Track a part of a split batch (it kept a slice of the original's sequence range). Called by the
        accumulator for each part, last part first."""
        with self.lock:
            lst = self._entry(batch.tp).in_flight
            slot = self._split_slot
            if slot is not None and slot[0] == batch.tp:
                lst.insert(slot[1], batch)
            else:
                lst.append(batch)
                lst.sort(key=lambda b: b.base_sequence)

    def end_split(self) -> None:
        with self.lock:
            self._split_slot = None

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        with self.lock:
            self._remove_in_flight(batch)

    def _remove_in_flight(self, batch: ProducerBatch) -> bool:
        e = self._partitions.get(batch.tp)
        if e is None:
            return False
        try:
            e.in_flight.remove(batch)
            return True
        except ValueError:
            return False

    def in_flight_batches(self, tp: TopicPartition) -> list[ProducerBatch]:
        with self.lock:
            e = self._partitions.get(tp)
            return [] if e is None else list(e.in_flight)

    def next_sequence(self, tp: TopicPartition) -> int:
        with self.lock:
            e = self._partitions.get(tp)
            return 0 if e is None else e.next_sequence

    # ====================================================== idempotent producer id
    def needs_producer_id(self) -> bool:
        """Idempotent (non-transactional) producer: whether the Sender should send InitProducerId now."""
        with self.lock:
            if self.is_transactional or self._init_in_flight or self.has_fatal_error():
                return False
            if self.producer_id == NO_PRODUCER_ID:
                return True
            return any(self._entry(tp).generation >= self._generation for tp in self._rewrite)

    def init_producer_id_request(self) -> dict[str, Any]:
        """The body of InitProducerId for the idempotent producer (marks it in flight)."""
        with self.lock:
            self._init_in_flight = True
            return {"transactional_id": None, "transaction_timeout_ms": 2147483647,
                    "producer_id": NO_PRODUCER_ID, "producer_epoch": NO_EPOCH}

    def handle_idempotent_init_response(self, body: dict[str, Any] | None, error: BaseException | None) -> bool:
        """Apply the InitProducerId answer; returns True if it succeeded (else the Sender retries later)."""
        with self.lock:
            self._init_in_flight = False
            if isinstance(error, errors.UnsupportedVersionError):
                self.transition_to_fatal(error)  # the broker is too old for idempotence
                return False
            if error is not None:
                log.debug("InitProducerId failed: %r", error)
                return False
            assert body is not None
            code = int(body.get("error_code", 0))
            if code != 0:
                exc = errors.error_for_code(code, "InitProducerId for the idempotent producer")
                if not exc.retriable:
                    self.transition_to_fatal(exc)
                else:
                    log.debug("InitProducerId answered %s; retrying", exc.name)
                return False
            self._new_producer_id(int(body["producer_id"]), int(body["producer_epoch"]))
            return True

    def _new_producer_id(self, pid: int, epoch: int) -> None:
        self.producer_id, self.epoch = pid, epoch
        self._generation += 1
        log.info("producer id %d, epoch %d (generation %d)", pid, epoch, self._generation)
        self.maybe_resolve_sequences()

    # ================================================================ sequences
    def _request_rewrite(self, tp: TopicPartition, why: str) -> None:
        if self.is_transactional:
            return
        if tp not in self._rewrite:
            log.info("%s-%d: %s; restarting its sequences under a new producer id", tp[0], tp[1], why)
            self._rewrite.add(tp)

    def request_epoch_bump(self, tp: TopicPartition) -> None:
        with self.lock:
            self._request_rewrite(tp, "epoch bump requested")

    def _mark_unresolved(self, batch: ProducerBatch) -> None:
        after = increment_sequence(batch.base_sequence, batch.record_count)
        current = self._unresolved.get(batch.tp)
        if current is None or _seq_after(after, current):
            self._unresolved[batch.tp] = after

    def mark_sequence_unresolved(self, batch: ProducerBatch) -> None:
        with self.lock:
            self._mark_unresolved(batch)

    def maybe_resolve_sequences(self) -> None:
        """Each Sender loop: settle partitions whose fate was unknown, and renumber partitions waiting for
        a rewrite once the new producer id is there and none of their batches is on the wire."""
        with self.lock:
            for tp in list(self._unresolved):
                e = self._entry(tp)
                if e.in_flight:
                    continue
                del self._unresolved[tp]
                if increment_sequence(e.last_acked_sequence, 1) == e.next_sequence:
                    continue  # a later batch was acknowledged: nothing is missing
                if self.is_transactional:
                    self._bump_required = True
                    self.transition_to_abortable(errors.KafkaError(
                        f"the outcome of an expired batch for {tp[0]}-{tp[1]} is unknown; "
                        "the transaction must be aborted"))
                else:
                    self._request_rewrite(tp, "a batch failed or expired after it was sent")
            if not self._rewrite or self.producer_id == NO_PRODUCER_ID or self._init_in_flight:
                return
            for tp in list(self._rewrite):
                e = self._entry(tp)
                if e.generation >= self._generation or e.on_wire():
                    continue
                self._renumber(tp, e)
                self._rewrite.discard(tp)

    def _renumber(self, tp: TopicPartition, e: _PartitionEntry) -> None:
        e.restart(self._generation, self.producer_id, self.epoch)
        seq = 0
        for b in e.in_flight:
            b.reset_producer_state(self.producer_id, self.epoch, seq)
            seq = increment_sequence(seq, b.record_count)
        e.next_sequence = seq
        self._unresolved.pop(tp, None)
        log.info("%s-%d: %d batch(es) renumbered from sequence 0 under producer id %d",
                 tp[0], tp[1], len(e.in_flight), self.producer_id)

    def can_retry(self, code: int, batch: ProducerBatch, log_start_offset: int) -> bool:
        """Java ``TransactionManager.canRetry`` for a batch with a sequence that got error ``code``."""
        with self.lock:
            tp = batch.tp
            e = self._entry(tp)
            if code == errors.UNKNOWN_PRODUCER_ID:
                if not self.is_transactional:
                    # the broker lost our producer state (restart, retention): new id, renumber, retry
                    self._request_rewrite(tp, "the broker does not know our producer id")
                    return True
                if log_start_offset == -1:
                    return True
                if e.last_acked_offset < log_start_offset:
                    # retention removed our state; the broker accepts sequence 0 again
                    self._renumber_same_id(tp, e)
                    return True
                return False
            if code == errors.OUT_OF_ORDER_SEQUENCE_NUMBER:
                unresolved = self._unresolved.get(tp)
                is_next = batch.base_sequence == increment_sequence(e.last_acked_sequence, 1)
                reset = self.is_transactional and batch.sequence_has_been_reset()
                if unresolved is None and (reset or not is_next):
                    # collateral damage of an earlier batch that failed (or, transactional, a request that
                    # went out before a failed batch's gap was closed: it carried the old sequence)
                    return True
                if not self.is_transactional:
                    if unresolved is None or unresolved == batch.base_sequence:
                        self._request_rewrite(tp, "the broker saw a gap in our sequences")
                    return True
                return False
            if code in _FENCED and not self.is_transactional:
                self._request_rewrite(tp, f"the broker answered {errors.error_name(code)}")
                return True
            return errors.error_class_for_code(code).retriable

    def _renumber_same_id(self, tp: TopicPartition, e: _PartitionEntry) -> None:
        """Transactional producer after UNKNOWN_PRODUCER_ID past the log start: restart at 0, same id."""
        seq = 0
        for b in e.in_flight:
            b.reset_producer_state(self.producer_id, self.epoch, seq)
            seq = increment_sequence(seq, b.record_count)
        e.next_sequence = seq
        e.last_acked_sequence = -1

    def handle_completed_batch(self, batch: ProducerBatch, base_offset: int) -> None:
        with self.lock:
            e = self._partitions.get(batch.tp)
            if e is None or not self._remove_in_flight(batch):
                return
            if (batch.producer_id, batch.producer_epoch) != (e.producer_id, e.producer_epoch):
                return
            last = increment_sequence(batch.base_sequence, batch.record_count - 1)
            if e.last_acked_sequence == -1 or _seq_after(last, e.last_acked_sequence):
                e.last_acked_sequence = last
            if base_offset >= 0:
                last_offset = base_offset + batch.record_count - 1
                if last_offset > e.last_acked_offset:
                    e.last_acked_offset = last_offset

    def handle_failed_batch(self, batch: ProducerBatch, exc: BaseException, adjust_sequences: bool) -> None:
        """A batch failed for good (Java ``handleFailedBatch``)."""
        with self.lock:
            code = getattr(exc, "code", None)
            if code in _FATAL_FOR_BATCHES or isinstance(exc, errors.UnsupportedVersionError) \
                    or (self.is_transactional
                        and (code == errors.PRODUCER_FENCED or isinstance(exc, errors.ProducerFencedError))):
                fatal: BaseException = exc
                if code == errors.PRODUCER_FENCED:
                    fatal = fenced_error(f"the broker answered {errors.error_name(code)} to a produce request")
                self.transition_to_fatal(fatal)
            elif self.is_transactional:
                # INVALID_PRODUCER_EPOCH on a Produce is abortable, as in Java (KIP-588: e.g. the coordinator
                # aborted the transaction on its timeout); the abort then re-initializes (a new epoch).
                # Any other batch that had a sequence and failed leaves a gap in its partition's sequences:
                # Java requires an epoch bump for it too (maybeTransitionToErrorState), else the partition's
                # next batch would be refused as OUT_OF_ORDER_SEQUENCE_NUMBER.
                if code in (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, errors.UNKNOWN_PRODUCER_ID,
                            errors.INVALID_PRODUCER_EPOCH) or isinstance(exc, errors.DeliveryTimeoutError) \
                        or batch.has_sequence():
                    self._bump_required = True
                self.transition_to_abortable(exc)
            was_in_flight = self._remove_in_flight(batch)
            if self.has_fatal_error() or not was_in_flight or not batch.has_sequence():
                return
            if self.is_transactional:
                if code == errors.UNKNOWN_PRODUCER_ID:
                    self._renumber_same_id(batch.tp, self._entry(batch.tp))
                elif adjust_sequences:
                    self._close_gap(batch)
                return
            if code in (errors.OUT_OF_ORDER_SEQUENCE_NUMBER, errors.UNKNOWN_PRODUCER_ID) or adjust_sequences:
                # the batch was not written: later sequences would leave a gap
                self._request_rewrite(batch.tp, f"a batch failed ({type(exc).__name__})")

    def _close_gap(self, failed: ProducerBatch) -> None:
        """Transactional: ``failed`` was not written, so the partition's later batches move down by its record
        count (Java ``adjustSequencesDueToFailedBatch``). Without it the broker answers every later batch
        OUT_OF_ORDER_SEQUENCE_NUMBER, retried as collateral damage until delivery.timeout.ms, and EndTxn
        (commit or abort) waits for them all that time."""
        e = self._partitions.get(failed.tp)
        if e is None or (failed.producer_id, failed.producer_epoch) != (e.producer_id, e.producer_epoch):
            return
        count = failed.record_count
        for b in e.in_flight:
            if (b.producer_id, b.producer_epoch) == (e.producer_id, e.producer_epoch) \
                    and _seq_after(b.base_sequence, failed.base_sequence):
                b.reset_producer_state(b.producer_id, b.producer_epoch,
                                       (b.base_sequence - count) % _SEQUENCE_SPACE)
        e.next_sequence = (e.next_sequence - count) % _SEQUENCE_SPACE

    def handle_expired_batch(self, batch: ProducerBatch, exc: BaseException) -> None:
        """A batch hit delivery.timeout.ms. If it was ever sent, its fate is unknown: new batches for the
        partition wait until everything in flight there has completed (``maybe_resolve_sequences``).
        A batch still on the wire stays tracked until its answer (or time-out) arrives."""
        with self.lock:
            if self.is_transactional:
                if batch.has_sequence():
                    self._bump_required = True
                self.transition_to_abortable(exc)
            if not batch.has_sequence():
                return
            self._mark_unresolved(batch)
            if not batch.in_request:
                self._remove_in_flight(batch)

    def handle_late_response(self, batch: ProducerBatch, code: int, base_offset: int) -> None:
        """The answer for a batch that was already failed (expired on the wire, or aborted)."""
        with self.lock:
            if code in (0, errors.DUPLICATE_SEQUENCE_NUMBER):
                self.handle_completed_batch(batch, base_offset if code == 0 else -1)
            else:
                self._remove_in_flight(batch)

    # ============================================================ transactions
    def _require_transactional(self, op: str) -> None:
        if not self.is_transactional:
            raise errors.IllegalStateError(f"cannot {op}(): no transactional.id is configured")

    def _raise_if_timed_out_call_pending(self, op: str) -> None:
        """Java's "Cannot attempt operation X because the previous call to Y timed out and must be
        retried": raised where ``op`` is not legal now because a timed-out call is still unresolved."""
        pending = self._pending_result
        if pending is not None and pending.timed_out and pending.awaits_retry() and pending.operation != op:
            raise errors.IllegalStateError(
                f"cannot {op}(): the previous call to {pending.operation}() timed out and its outcome is not "
                f"known yet; call {pending.operation}() again (it returns the same result)")

    def _raise_if_fatal(self) -> None:
        if self.state is TxnState.FATAL_ERROR:
            raise self.fatal_error().with_traceback(None)

    def initialize_transactions(self) -> TransactionalRequestResult:
        with self.lock:
            self._require_transactional("init_transactions")
            pending = self._pending_result
            if pending is not None and pending.operation == "init_transactions" and pending.awaits_retry():
                return pending  # called again after a time-out: the same result, done or not (as Java)
            self._raise_if_fatal()
            if self.state is not TxnState.UNINITIALIZED:
                raise errors.IllegalStateError(
                    f"init_transactions() called in state {self.state.value}; it may be called only once")
            self._transition(TxnState.INITIALIZING)
            result = TransactionalRequestResult("init_transactions")
            self._enqueue(self._init_txn_request(result))
            self._pending_result = result
            return result

    def _init_txn_request(self, result: TransactionalRequestResult | None) -> TxnRequest:
        body = {"transactional_id": self.transactional_id, "transaction_timeout_ms": self.transaction_timeout_ms,
                "producer_id": NO_PRODUCER_ID, "producer_epoch": NO_EPOCH}
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            if err is not None or resp is None:
                self._lookup_coordinator_and_retry(req)
                return
            code = int(resp.get("error_code", 0))
            if code == 0:
                self._new_producer_id(int(resp["producer_id"]), int(resp["producer_epoch"]))
                self._partitions.clear()
                self._unresolved.clear()
                self._bump_required = False
                if self.state is TxnState.ABORTING_TRANSACTION:
                    self._transition(TxnState.INITIALIZING)
                self._transition(TxnState.READY)
                if result is not None:
                    result.done()
            elif code in _FIND_AGAIN:
                self._lookup_coordinator_and_retry(req)
            elif code in (_COORDINATOR_LOAD_IN_PROGRESS, _CONCURRENT_TRANSACTIONS) \
                    or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in _FENCED:
                self.transition_to_fatal(fenced_error("InitProducerId"))
            else:
                self.transition_to_fatal(errors.error_for_code(code, "InitProducerId"))

        req = TxnRequest(API_INIT_PRODUCER_ID, body, _PRI_INIT_PRODUCER_ID, True, on_response, result)
        return req

    def begin_transaction(self) -> None:
        with self.lock:
            self._require_transactional("begin_transaction")
            self._raise_if_fatal()
            if self.state is TxnState.ABORTABLE_ERROR:
                raise errors.IllegalStateError(
                    f"begin_transaction() called while the current transaction must be aborted "
                    f"({self.last_error!r}); call abort_transaction() first")
            if self.state is not TxnState.READY:
                self._raise_if_timed_out_call_pending("begin_transaction")
                raise errors.IllegalStateError(
                    f"begin_transaction() called in state {self.state.value}; it needs state READY "
                    "(after init_transactions(), and after the previous transaction ended)")
            self._transition(TxnState.IN_TRANSACTION)
            self._pending_result = None  # a timed-out call that completed meanwhile is not returned again

    def check_send_allowed(self) -> None:
        """Raise if a send is not legal now (outside a transaction, after an error)."""
        with self.lock:
            st = self.state
            if st is TxnState.FATAL_ERROR:
                raise self.fatal_error().with_traceback(None)
            if not self.is_transactional or st is TxnState.IN_TRANSACTION:
                return
            if st is TxnState.ABORTABLE_ERROR:
                raise errors.IllegalStateError(
                    f"cannot send: a previous request of this transaction failed ({self.last_error!r}); "
                    "call abort_transaction()")
            raise errors.IllegalStateError(
                f"cannot send outside a transaction (state {st.value}); call begin_transaction() first")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A record went to ``tp`` in this transaction: add it with AddPartitionsToTxn (once)."""
        if tp in self._txn_partitions or tp in self._new_partitions or tp in self._pending_partitions:
            return
        with self.lock:
            if self.state is TxnState.IN_TRANSACTION:
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
            pending = self._pending_result
            if pending is not None and pending.operation == op and pending.awaits_retry():
                return pending  # called again after a time-out: the same result, done or not (as Java)
            self._raise_if_fatal()
            pid_unknown = getattr(self.last_error, "code", None) == _INVALID_PRODUCER_ID_MAPPING
            if commit:
                if self.state is TxnState.ABORTABLE_ERROR:
                    raise errors.TransactionError(
                        f"cannot commit: the transaction hit an error and must be aborted ({self.last_error!r})"
                    ) from self.last_error
                if self.state is not TxnState.IN_TRANSACTION:
                    self._raise_if_timed_out_call_pending(op)
                    raise errors.IllegalStateError(
                        f"commit_transaction() called in state {self.state.value}: no transaction in progress "
                        "(call begin_transaction() first)")
                self._transition(TxnState.COMMITTING_TRANSACTION)
            else:
                if self.state not in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR):
                    self._raise_if_timed_out_call_pending(op)
                    raise errors.IllegalStateError(
                        f"abort_transaction() called in state {self.state.value}: no transaction in progress")
                self._transition(TxnState.ABORTING_TRANSACTION)
                self._new_partitions.clear()
                self._drop_queued_commit()
            result = TransactionalRequestResult(op)
            self._pending_result = result
            if not commit and pid_unknown:
                # as Java: the coordinator no longer knows our producer id and would refuse EndTxn; a new
                # InitProducerId aborts the transaction on the coordinator and gives a new epoch
                self._bump_required = True
                self._txn_partitions.clear()
                self._pending_partitions.clear()
                self._enqueue(self._init_txn_request(result))
                return result
            self._enqueue(self._end_txn_request(commit, result))
            return result

    def _drop_queued_commit(self) -> None:
        """An abort replaces a commit still queued (it timed out for the user, then the transaction failed):
        that EndTxn(commit) must never go out, and the commit's result fails."""
        for req in [r for r in self._pending if r.api_key == API_END_TXN and r.body.get("committed")]:
            self._pending.remove(req)
            if req.result is not None:
                req.result.done(errors.TransactionError(
                    f"the transaction was aborted instead of committed ({self.last_error!r})"))

    def _transaction_started(self) -> bool:
        """A partition was added on the coordinator (Java ``transactionStarted``). When EndTxn is next, the
        new and pending partitions are only those of AddPartitionsToTxn requests dropped after an abortable
        error (never added): an EndTxn for them would be answered INVALID_TXN_STATE."""
        return bool(self._txn_partitions)

    def _complete_transaction(self, result: TransactionalRequestResult) -> None:
        self._txn_partitions.clear()
        self._pending_partitions.clear()
        self._new_partitions.clear()
        if self.state is TxnState.ABORTING_TRANSACTION and self._bump_required:
            # sequences are broken: re-initialize (a new epoch; all sequences restart at 0)
            self._enqueue(self._init_txn_request(result))
            return
        self._transition(TxnState.READY)
        result.done()

    def _end_txn_request(self, commit: bool, result: TransactionalRequestResult) -> TxnRequest:
        body = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.epoch, "committed": commit}
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            if err is not None or resp is None:
                self._lookup_coordinator_and_retry(req)
                return
            code = int(resp.get("error_code", 0))
            if code == 0:
                self._complete_transaction(result)
            elif code in _FIND_AGAIN:
                self._lookup_coordinator_and_retry(req)
            elif code in (_COORDINATOR_LOAD_IN_PROGRESS, _CONCURRENT_TRANSACTIONS) \
                    or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in _FENCED:
                self.transition_to_fatal(fenced_error("EndTxn"))
            elif code in (errors.UNKNOWN_PRODUCER_ID, _INVALID_PRODUCER_ID_MAPPING, _TRANSACTION_ABORTABLE):
                # abortable, as Java's EndTxnHandler (the first two with a new epoch after the abort)
                failure = errors.error_for_code(code, "EndTxn")
                if code != _TRANSACTION_ABORTABLE:
                    self._bump_required = True
                if self.state is TxnState.ABORTING_TRANSACTION:
                    # the abort itself: InitProducerId aborts whatever the coordinator still holds
                    self._bump_required = True
                    self._complete_transaction(result)
                else:
                    self.transition_to_abortable(failure)
                    result.done(failure)
            else:
                self.transition_to_fatal(errors.error_for_code(code, "EndTxn"))

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
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            if err is not None or resp is None:
                self._lookup_coordinator_and_retry(req)
                return
            retry = find_again = False
            failure: BaseException | None = None
            fatal: BaseException | None = None
            for t in resp.get("results_by_topic_v3_and_below") or ():
                for p in t.get("results_by_partition") or ():
                    code = int(p.get("partition_error_code", 0))
                    tp = (str(t["name"]), int(p["partition_index"]))
                    if code == 0:
                        self._txn_partitions.add(tp)
                        self._pending_partitions.discard(tp)
                    elif code in _FIND_AGAIN:
                        find_again = True
                    elif code in (_COORDINATOR_LOAD_IN_PROGRESS, _CONCURRENT_TRANSACTIONS, _OPERATION_NOT_ATTEMPTED) \
                            or errors.error_class_for_code(code).retriable:
                        retry = True
                    elif code in _FENCED:
                        fatal = fenced_error("AddPartitionsToTxn")
                    elif code in (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, 48):  # 48: INVALID_TXN_STATE
                        fatal = errors.error_for_code(code, "AddPartitionsToTxn")
                    elif code in (errors.UNKNOWN_PRODUCER_ID, _INVALID_PRODUCER_ID_MAPPING):
                        self._bump_required = True
                        failure = errors.error_for_code(code, f"AddPartitionsToTxn for {tp[0]}-{tp[1]}")
                    else:
                        failure = errors.error_for_code(code, f"AddPartitionsToTxn for {tp[0]}-{tp[1]}")
            if fatal is not None:
                self.transition_to_fatal(fatal)
            elif failure is not None:
                self._pending_partitions.clear()
                self.transition_to_abortable(failure)
            elif find_again:
                self._lookup_coordinator_and_retry(req)
            elif retry:
                self._retry(req)

        req = TxnRequest(API_ADD_PARTITIONS_TO_TXN, body, _PRI_ADD_PARTITIONS, True, on_response)
        return req

    def _find_coordinator_request(self) -> TxnRequest:
        body = {"key": self.transactional_id, "key_type": 1, "coordinator_keys": [self.transactional_id]}
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            if err is not None or resp is None:
                self._retry(req)
                return
            coords = resp.get("coordinators")
            if coords:
                c = coords[0]
                code, node, host, port = int(c.get("error_code", 0)), c.get("node_id"), c.get("host"), c.get("port")
            else:
                code, node, host, port = (int(resp.get("error_code", 0)), resp.get("node_id"),
                                          resp.get("host"), resp.get("port"))
            if code == 0 and node is not None and int(node) >= 0:
                self.coordinator = int(node)
                self.coordinator_address = (str(host), int(port or 0))
                log.debug("transaction coordinator: node %s at %s:%s", node, host, port)
            elif code == 0 or errors.error_class_for_code(code).retriable:
                self._retry(req)
            else:
                self.transition_to_fatal(errors.error_for_code(code, "FindCoordinator"))

        req = TxnRequest(API_FIND_COORDINATOR, body, _PRI_FIND_COORDINATOR, False, on_response,
                         is_find_coordinator=True)
        return req

    def _enqueue(self, req: TxnRequest) -> None:
        self._pending.append(req)
        self._pending.sort(key=lambda r: r.priority)

    def _retry(self, req: TxnRequest) -> None:
        req.attempts += 1
        req.retry_at_ms = -1.0  # the Sender stamps the backoff deadline
        self._enqueue(req)

    def _lookup_coordinator_and_retry(self, req: TxnRequest) -> None:
        if req.needs_coordinator:
            self.coordinator = None
        self._retry(req)

    def lookup_coordinator(self, req: TxnRequest) -> None:
        """The Sender could not reach the coordinator: find it again, then send ``req``."""
        with self.lock:
            self._lookup_coordinator_and_retry(req)

    def next_request(self, has_incomplete_batches: bool) -> TxnRequest | None:
        """The next transactional request to send, or None (Java ``nextRequest``)."""
        with self.lock:
            if self.state is TxnState.FATAL_ERROR:
                return None
            if self._new_partitions and self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION):
                self._enqueue(self._add_partitions_request())
            while self._pending:
                req = self._pending[0]
                if req.api_key == API_END_TXN and (has_incomplete_batches or self._any_on_wire()):
                    # EndTxn waits until every batch is complete, and until no Produce of ours is unanswered:
                    # a batch that expired on the wire left the accumulator but may still be appended, and
                    # after the marker it would open a transaction nobody ends (stricter than Java)
                    return None
                if self.state is TxnState.ABORTABLE_ERROR and not req.is_find_coordinator:
                    # the transaction is doomed: fail what was asked (a commit) until the user aborts
                    self._pending.pop(0)
                    if req.result is not None:
                        req.result.done(errors.TransactionError(
                            f"the transaction must be aborted: {self.last_error!r}"))
                    continue
                if req.api_key == API_END_TXN and not self._transaction_started():
                    self._pending.pop(0)  # nothing was added: nothing to end on the broker
                    assert req.result is not None
                    self._complete_transaction(req.result)
                    continue
                if req.needs_coordinator and self.coordinator is None:
                    if not any(r.is_find_coordinator for r in self._pending):
                        self._enqueue(self._find_coordinator_request())
                    req = self._pending[0]
                self._pending.remove(req)
                if req.api_key == API_END_TXN or req.api_key == API_INIT_PRODUCER_ID:
                    self._refresh_ids(req)
                return req
            return None

    def _any_on_wire(self) -> bool:
        """A batch with a sequence is part of a Produce request still waiting for its answer."""
        return any(e.on_wire() for e in self._partitions.values())

    def _refresh_ids(self, req: TxnRequest) -> None:
        """EndTxn carries the producer id/epoch current when it is sent (the epoch may have moved)."""
        if req.api_key == API_END_TXN:
            req.body["producer_id"] = self.producer_id
            req.body["producer_epoch"] = self.epoch

    def requeue(self, req: TxnRequest) -> None:
        with self.lock:
            self._enqueue(req)

    def has_pending_requests(self) -> bool:
        return bool(self._pending) or self.in_flight_request is not None or bool(self._new_partitions)

    def close(self, error: BaseException) -> None:
        with self.lock:
            self._fail_pending(error)
