"""Transactions: the producer's state machine and the transactional requests (the transactional half of
the Java client's ``TransactionManager``).

How it works. ``TransactionManager`` extends ``idempotence.IdempotenceManager`` (producer id, epoch and
sequences) with the state: ``TxnState`` with Java's legal transitions; illegal calls raise
``IllegalStateError``, calls after a fatal error re-raise that error (``ProducerFencedError`` when
fenced). An idempotent producer without a transactional.id uses the same object: it only ever goes from
UNINITIALIZED to FATAL_ERROR. User calls enqueue transactional requests (InitProducerId,
AddPartitionsToTxn, EndTxn; FindCoordinator when the coordinator is unknown); the Sender sends them one
at a time, lowest priority value first, before any produce data, and hands the responses to the
request's handler here. EndTxn waits until every batch is complete.

Transactions V2 (KIP-890). ``begin_transaction`` reads the cluster's finalized ``transaction.version``
(``finalized_features``, the network client's newest ApiVersions answer), as Java's
``maybeUpdateTransactionV2Enabled``; ``transaction_version`` records what the transaction uses. With 2
(the Kafka 4.x default) a partition joins the transaction by its first Produce (v12+, no
AddPartitionsToTxn), EndTxn is v5 and its answer carries the producer id and the epoch the coordinator
bumped to (a new id when the epoch ran out): every partition's sequences restart at 0 under it, and an
abort needs no InitProducerId of its own to get a fresh epoch (Java ``needToTriggerEpochBumpFromClient`` is
false under V2). With 1 (or a broker without the feature) the classic flow: AddPartitionsToTxn, Produce up
to v11, EndTxn up to v4, and an InitProducerId after an abort that broke the sequences. Each user call waits on a
``TransactionalRequestResult``; a call repeated after its wait timed out gets the same result back (as
Java). A transaction whose batch failed, or whose EndTxn got UNKNOWN_PRODUCER_ID /
INVALID_PRODUCER_ID_MAPPING, is re-initialized after its abort (a new epoch, sequences from 0:
``restart_sequences``).

Where things go: a new transactional request is a ``TxnRequest`` built by a ``_..._request`` method here
with its response handler (the priority as Java's ``TxnRequestHandler.Priority``), queued by ``_enqueue``
and picked by ``next_request``; which partitions a Produce may carry is decided by ``_should_stop_drain``
(``is_send_to_partition_allowed``); a new epoch for every partition goes through ``restart_sequences``.

Locking: the Sender thread and user threads share ``self.lock`` (re-entrant); every public method
takes it.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import errors
from .._clock import wait_seconds
from .._types import TopicPartition
from ..protocol.messages import (
    END_TXN_MAX_VERSION_TRANSACTIONS_V1,
    TRANSACTION_VERSION_FEATURE,
    TXN_OFFSET_COMMIT_MAX_VERSION_TRANSACTIONS_V1,
    ApiKey,
    api_name,
)
from .idempotence import NO_EPOCH, NO_PRODUCER_ID, IdempotenceManager

if TYPE_CHECKING:
    from .group_metadata import CommittedOffset, ConsumerGroupMetadata
    from .producer_batch import ProducerBatch

__all__ = ["TransactionInfo", "TransactionManager", "TransactionalRequestResult", "TxnRequest", "TxnState",
           "fenced_error"]

log = logging.getLogger("sparkafka.producer")

# The API keys compared per request, as module constants (docs/DESIGN.md, Performance notes).
API_FIND_COORDINATOR = ApiKey.FIND_COORDINATOR
API_INIT_PRODUCER_ID = ApiKey.INIT_PRODUCER_ID
API_ADD_PARTITIONS_TO_TXN = ApiKey.ADD_PARTITIONS_TO_TXN
API_END_TXN = ApiKey.END_TXN
API_ADD_OFFSETS_TO_TXN = ApiKey.ADD_OFFSETS_TO_TXN
API_TXN_OFFSET_COMMIT = ApiKey.TXN_OFFSET_COMMIT

_FIND_AGAIN = frozenset({errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR})
_BACK_OFF = frozenset({errors.COORDINATOR_LOAD_IN_PROGRESS, errors.CONCURRENT_TRANSACTIONS})
_FENCED = frozenset({errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH})
ADD_PARTITIONS_RETRY_BACKOFF_MS = 20.0
"""Java ``TransactionManager.ADD_PARTITIONS_RETRY_BACKOFF_MS``: the retry of a transaction's first
AddPartitionsToTxn answered CONCURRENT_TRANSACTIONS (the previous transaction's markers are still being
written, which takes a few ms) waits this long instead of ``retry.backoff.ms``."""
_FATAL_FOR_BATCHES = frozenset({errors.CLUSTER_AUTHORIZATION_FAILED,
                                errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})

# Priorities (lower first), as Java's TxnRequestHandler.Priority.
_PRI_FIND_COORDINATOR = 0
_PRI_INIT_PRODUCER_ID = 1
_PRI_ADD_PARTITIONS = 2  # and AddOffsetsToTxn, TxnOffsetCommit (Java's ADD_PARTITIONS_OR_OFFSETS)
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
_IN_TRANSACTION = TxnState.IN_TRANSACTION
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


def _group_refusal(code: int, request: str, group_id: str) -> errors.BrokerError:
    """GROUP_AUTHORIZATION_FAILED for the consumer group whose offsets the transaction commits."""
    return errors.error_for_code(code, f"{request}: not authorized to commit offsets for consumer group {group_id!r}; "
                                       "the principal needs READ on that Group")


def _refusal(code: int, request: str, transactional_id: str | None) -> errors.BrokerError:
    """The error for a transactional request the broker refused; an authorization failure says what is missing."""
    if code == errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
        # Kafka's authorizer: FindCoordinator needs DESCRIBE, InitProducerId, AddPartitionsToTxn and EndTxn
        # WRITE on the TransactionalId resource (WRITE implies DESCRIBE).
        return errors.error_for_code(code, f"{request}: not authorized to use transactional.id "
                                           f"{transactional_id!r}; the principal needs WRITE on that TransactionalId")
    return errors.error_for_code(code, request)


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
        if not self._event.wait(wait_seconds(timeout_s)):
            self.timed_out = True
            raise errors.KafkaTimeoutError(
                f"{self.operation}() did not complete within {timeout_s} s; call it again to keep waiting")
        self.acked = True
        if self.error is not None:
            raise self.error.with_traceback(None)


@dataclass(frozen=True)
class TransactionInfo:
    """What identifies a transactional producer's transactions on the broker (``transaction_info()``)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_version: int
    """2: Transactions V2 (KIP-890); 1: the classic protocol."""


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
    retry_backoff_ms: float | None = None
    """The wait before this request's next retry; None: ``retry.backoff.ms`` (``ADD_PARTITIONS_RETRY_BACKOFF_MS``)."""
    attempts: int = 0
    max_version: int | None = None
    """The highest version to send (EndTxn under transactions v1); None: the highest both sides have."""
    group_id: str | None = None
    """Sent to this consumer group's coordinator (TxnOffsetCommit), not the transaction coordinator; for
    a FindCoordinator, the group it looks for (None: the transaction coordinator)."""

    @property
    def name(self) -> str:
        return api_name(self.api_key)


class TransactionManager(IdempotenceManager):
    """The transaction state machine (when ``transactional_id`` is set) on top of the idempotence
    bookkeeping; the fatal state for every producer with idempotence."""

    def __init__(self, transactional_id: str | None, transaction_timeout_ms: int,
                 retry_backoff_ms: int = 100) -> None:
        super().__init__(transactional_id is not None)
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.state = TxnState.UNINITIALIZED
        self.last_error: BaseException | None = None
        self._pending: list[TxnRequest] = []
        self.in_flight_request: TxnRequest | None = None
        self.coordinator: int | None = None
        self.coordinator_address: tuple[str, int] | None = None
        self._new_partitions: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._txn_partitions: set[TopicPartition] = set()
        self._pending_result: TransactionalRequestResult | None = None
        self._offsets_added = False  # Java's transactionStarted for sendOffsetsToTransaction
        self.group_coordinators: dict[str, tuple[int, tuple[str, int]]] = {}
        """Group id -> (node id, address) of its group coordinator (for TxnOffsetCommit)."""
        self._bump_required = False  # transactional: re-initialize after the abort
        self.finalized_features: Callable[[], Mapping[str, int]] = dict
        """The cluster's finalized features (set by the producer to its network client's)."""
        self.transaction_version = 1
        """The transaction protocol of the current (or last) transaction: 2 = KIP-890, 1 = classic."""
        self.transaction_v2 = False

    # ================================================================== state
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

    def has_ongoing_transaction(self) -> bool:
        """A transaction is open, failed (to be aborted) or being ended (Java ``hasOngoingTransaction``)."""
        return self.state in (TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR) or self.state in _COMPLETING

    def is_completing(self) -> bool:
        return self.state in _COMPLETING

    def is_aborting(self) -> bool:
        return self.state is _ABORTING

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

    def _should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        state = self.state
        # has_fatal_error(), not has_producer_id(), not is_send_to_partition_allowed(tp)
        if state is _FATAL_ERROR:
            return True
        if self.is_transactional and (state in _NO_PRODUCER_ID_YET or tp not in self._txn_partitions):
            return True
        return self._sequence_blocks_drain(tp, first)

    def _sequence_outcome_unknown(self, tp: TopicPartition) -> None:
        if not self.is_transactional:
            super()._sequence_outcome_unknown(tp)
            return
        self._bump_required = True
        self.transition_to_abortable(errors.KafkaError(
            f"the outcome of an expired batch for {tp[0]}-{tp[1]} is unknown; "
            "the transaction must be aborted"))

    # ===================================================== batches that failed
    def maybe_transition_to_error_state(self, exc: BaseException) -> None:
        """A record failed in ``send()`` itself (Java ``maybeTransitionToErrorState``, called by
        ``doSend``): the errors that are fatal for any idempotent producer make it fatal; any other makes a
        transaction abortable (the record is not in it, so it must not commit). No sequence was used, so
        no new epoch is needed."""
        with self.lock:
            code = getattr(exc, "code", None)
            if code in _FATAL_FOR_BATCHES or isinstance(exc, (errors.UnsupportedVersionError,
                                                                errors.ProducerFencedError)):
                self.transition_to_fatal(exc)
            elif self.is_transactional:
                self.transition_to_abortable(exc)

    def handle_failed_batch(self, batch: ProducerBatch, exc: BaseException, adjust_sequences: bool) -> None:
        """A batch failed for good (Java ``handleFailedBatch``): first its effect on the state, then on the
        sequences (``_sequences_after_failed_batch``)."""
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
            self._sequences_after_failed_batch(batch, code, exc, adjust_sequences)

    def handle_expired_batch(self, batch: ProducerBatch, exc: BaseException) -> None:
        """A batch hit delivery.timeout.ms: a transaction becomes abortable (with a new epoch after the
        abort if the batch had a sequence); then ``_sequences_after_expired_batch``."""
        with self.lock:
            if self.is_transactional:
                if batch.has_sequence():
                    self._bump_required = True
                self.transition_to_abortable(exc)
            self._sequences_after_expired_batch(batch)

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

    def _init_txn_request(self, result: TransactionalRequestResult | None, bump: bool = False) -> TxnRequest:
        """InitProducerId for ``init_transactions`` or, with ``bump``, for a new epoch after an abort (Java
        ``initializeTransactions(producerIdAndEpoch)``, KIP-360): the bump names the current producer id and
        epoch, so the coordinator fences this producer (PRODUCER_FENCED) if another one took the
        transactional id meanwhile, instead of fencing that one and aborting its transaction."""
        pid, epoch = (self.producer_id, self.epoch) if bump else (NO_PRODUCER_ID, NO_EPOCH)
        body = {"transactional_id": self.transactional_id, "transaction_timeout_ms": self.transaction_timeout_ms,
                "producer_id": pid, "producer_epoch": epoch}
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            if err is not None or resp is None:
                self._lookup_coordinator_and_retry(req)
                return
            code = int(resp.get("error_code", 0))
            if code == 0:
                self.restart_sequences(int(resp["producer_id"]), int(resp["producer_epoch"]))
                self._bump_required = False
                if self.state is TxnState.ABORTING_TRANSACTION:
                    self._transition(TxnState.INITIALIZING)
                self._transition(TxnState.READY)
                if result is not None:
                    result.done()
            elif code in _FIND_AGAIN:
                self._lookup_coordinator_and_retry(req)
            elif code in _BACK_OFF \
                    or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in _FENCED:
                self.transition_to_fatal(fenced_error("InitProducerId"))
            else:
                self.transition_to_fatal(_refusal(code, "InitProducerId", self.transactional_id))

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
            level = self.finalized_features().get(TRANSACTION_VERSION_FEATURE, 0)
            self.transaction_v2 = level >= 2
            self.transaction_version = 2 if self.transaction_v2 else 1
            self._transition(TxnState.IN_TRANSACTION)
            self._pending_result = None  # a timed-out call that completed meanwhile is not returned again

    def check_send_allowed(self) -> None:
        """Raise if a send is not legal now (outside a transaction, after an error)."""
        if self.state is _IN_TRANSACTION:
            # the common answer, for every record of a transaction, without the lock: one read of the state
            # is what the locked check makes too (the state may change right after either)
            return
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

    def maybe_add_partition(self, tp: TopicPartition) -> bool:
        """A record went to ``tp`` in this transaction: add it with AddPartitionsToTxn (once); under
        transactions v2 its first Produce adds it on the broker, so it is part of the transaction at once.
        False: ``tp`` is not in the transaction and no longer can be (another thread began
        ``commit_transaction()`` / ``abort_transaction()`` after this record's ``send()`` checked the state;
        Java's ``maybeAddPartition`` throws IllegalStateException then): the drain would hold the record
        back for ever (``KafkaProducer`` fails it)."""
        if tp in self._txn_partitions or tp in self._new_partitions or tp in self._pending_partitions:
            return True
        with self.lock:
            if self.state is TxnState.IN_TRANSACTION:
                if self.transaction_v2:
                    self._txn_partitions.add(tp)
                else:
                    self._new_partitions.add(tp)
                return True
            return tp in self._txn_partitions or tp in self._new_partitions or tp in self._pending_partitions

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
            pid_unknown = getattr(self.last_error, "code", None) == errors.INVALID_PRODUCER_ID_MAPPING
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
                self._offsets_added = False
                self._enqueue(self._init_txn_request(result, bump=True))
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
        """A partition or a group's offsets were added on the coordinator (Java ``transactionStarted``). When
        EndTxn is next, the new and pending partitions are only those of AddPartitionsToTxn requests dropped
        after an abortable error (never added): an EndTxn for them would be answered INVALID_TXN_STATE."""
        return bool(self._txn_partitions) or self._offsets_added

    def _complete_transaction(self, result: TransactionalRequestResult) -> None:
        self._offsets_added = False
        self._txn_partitions.clear()
        self._pending_partitions.clear()
        self._new_partitions.clear()
        if self.state is TxnState.ABORTING_TRANSACTION and self._bump_required:
            # sequences are broken: re-initialize (a new epoch; all sequences restart at 0)
            self._enqueue(self._init_txn_request(result, bump=True))
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
                new_pid = int(resp.get("producer_id", NO_PRODUCER_ID))
                if self.transaction_v2 and new_pid != NO_PRODUCER_ID:
                    # KIP-890: the coordinator bumped the epoch (or gave a new id): sequences restart at 0
                    self.restart_sequences(new_pid, int(resp["producer_epoch"]))
                    self._bump_required = False
                self._complete_transaction(result)
            elif code in _FIND_AGAIN:
                self._lookup_coordinator_and_retry(req)
            elif code in _BACK_OFF \
                    or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in _FENCED:
                self.transition_to_fatal(fenced_error(
                    f"EndTxn; or the coordinator aborted the transaction because it outlived "
                    f"transaction.timeout.ms ({self.transaction_timeout_ms} ms)"))
            elif code in (errors.UNKNOWN_PRODUCER_ID, errors.INVALID_PRODUCER_ID_MAPPING, errors.TRANSACTION_ABORTABLE):
                # abortable, as Java's EndTxnHandler (the first two with a new epoch after the abort)
                failure = errors.error_for_code(code, "EndTxn")
                if code != errors.TRANSACTION_ABORTABLE:
                    self._bump_required = True
                if self.state is TxnState.ABORTING_TRANSACTION:
                    # the abort itself: InitProducerId aborts whatever the coordinator still holds
                    self._bump_required = True
                    self._complete_transaction(result)
                else:
                    self.transition_to_abortable(failure)
                    result.done(failure)
            else:
                hint = ""
                if code == errors.INVALID_TXN_STATE:  # under KIP-890, also what a timed-out transaction gets
                    hint = (f"; the coordinator aborts a transaction that outlives transaction.timeout.ms "
                            f"({self.transaction_timeout_ms} ms, capped by the broker's "
                            "transaction.max.timeout.ms): raise it or commit sooner")
                self.transition_to_fatal(_refusal(code, "EndTxn" + hint, self.transactional_id))

        req = TxnRequest(API_END_TXN, body, _PRI_END_TXN, True, on_response, result,
                         max_version=None if self.transaction_v2 else END_TXN_MAX_VERSION_TRANSACTIONS_V1)
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
            retry = find_again = concurrent = False
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
                    elif code in _BACK_OFF or code == errors.OPERATION_NOT_ATTEMPTED \
                            or errors.error_class_for_code(code).retriable:
                        retry = True
                        concurrent = concurrent or code == errors.CONCURRENT_TRANSACTIONS
                    elif code in _FENCED:
                        fatal = fenced_error("AddPartitionsToTxn")
                    elif code in (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, errors.INVALID_TXN_STATE):
                        fatal = _refusal(code, "AddPartitionsToTxn", self.transactional_id)
                    elif code in (errors.UNKNOWN_PRODUCER_ID, errors.INVALID_PRODUCER_ID_MAPPING):
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
                if concurrent and not self._txn_partitions:  # the transaction's first partitions
                    req.retry_backoff_ms = ADD_PARTITIONS_RETRY_BACKOFF_MS
                self._retry(req)

        req = TxnRequest(API_ADD_PARTITIONS_TO_TXN, body, _PRI_ADD_PARTITIONS, True, on_response)
        return req

    # ================================================= offsets (KIP-447)
    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, CommittedOffset],
                                    group: ConsumerGroupMetadata) -> TransactionalRequestResult:
        """Commit a consumer group's offsets with this transaction (Java ``sendOffsetsToTransaction``).
        Transactions V1: AddOffsetsToTxn to the transaction coordinator, then TxnOffsetCommit (up to v4) to
        the group's coordinator. V2 (KIP-890): TxnOffsetCommit v5 alone, which also adds the group to the
        transaction (Java 4.x skips AddOffsetsToTxn there). The result completes when TxnOffsetCommit did."""
        op = "send_offsets_to_transaction"
        with self.lock:
            self._require_transactional(op)
            self._raise_if_timed_out_call_pending(op)
            self._raise_if_fatal()
            if self.state is TxnState.ABORTABLE_ERROR:
                raise errors.TransactionError(
                    f"cannot send offsets: the transaction hit an error and must be aborted ({self.last_error!r})"
                ) from self.last_error
            if self.state is not TxnState.IN_TRANSACTION:
                raise errors.IllegalStateError(
                    f"send_offsets_to_transaction() called in state {self.state.value}: no transaction in progress "
                    "(call begin_transaction() first)")
            result = TransactionalRequestResult(op)
            if self.transaction_v2:
                self._offsets_added = True
                self._enqueue(self._txn_offset_commit_request(offsets, group, result))
            else:
                self._enqueue(self._add_offsets_request(offsets, group, result))
            return result

    def _add_offsets_request(self, offsets: Mapping[TopicPartition, CommittedOffset], group: ConsumerGroupMetadata,
                             result: TransactionalRequestResult) -> TxnRequest:
        body = {"transactional_id": self.transactional_id, "producer_id": self.producer_id,
                "producer_epoch": self.epoch, "group_id": group.group_id}
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            # Java's AddOffsetsToTxnHandler
            if err is not None or resp is None:
                self._lookup_coordinator_and_retry(req)
                return
            code = int(resp.get("error_code", 0))
            if code == 0:
                self._offsets_added = True  # the result completes with the TxnOffsetCommit
                self._enqueue(self._txn_offset_commit_request(offsets, group, result))
            elif code in _FIND_AGAIN:
                self._lookup_coordinator_and_retry(req)
            elif code in _BACK_OFF or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif code in (errors.UNKNOWN_PRODUCER_ID, errors.INVALID_PRODUCER_ID_MAPPING):
                self._bump_required = True
                self._abortable(result, errors.error_for_code(code, "AddOffsetsToTxn"))
            elif code in _FENCED:
                self._fatal(result, fenced_error("AddOffsetsToTxn"))
            elif code in (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, errors.INVALID_TXN_STATE):
                self._fatal(result, _refusal(code, "AddOffsetsToTxn", self.transactional_id))
            elif code == errors.GROUP_AUTHORIZATION_FAILED:
                self._abortable(result, _group_refusal(code, "AddOffsetsToTxn", group.group_id))
            elif code == errors.TRANSACTION_ABORTABLE:
                self._abortable(result, errors.error_for_code(code, "AddOffsetsToTxn"))
            else:
                self._fatal(result, errors.error_for_code(code, "unexpected error in AddOffsetsToTxn"))

        req = TxnRequest(API_ADD_OFFSETS_TO_TXN, body, _PRI_ADD_PARTITIONS, True, on_response, result)
        return req

    def _txn_offset_commit_request(self, offsets: Mapping[TopicPartition, CommittedOffset],
                                   group: ConsumerGroupMetadata, result: TransactionalRequestResult) -> TxnRequest:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), entry in sorted(offsets.items()):
            topics.setdefault(topic, []).append({
                "partition_index": partition, "committed_offset": entry.offset,
                "committed_leader_epoch": entry.leader_epoch, "committed_metadata": entry.metadata})
        body = {"transactional_id": self.transactional_id, "group_id": group.group_id,
                "producer_id": self.producer_id, "producer_epoch": self.epoch,
                "generation_id": group.generation_id, "member_id": group.member_id,
                "group_instance_id": group.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        req: TxnRequest

        def on_response(resp: dict[str, Any] | None, err: BaseException | None) -> None:
            # Java's TxnOffsetCommitHandler: per-partition errors; a retriable one resends the request
            if err is not None or resp is None:
                self._lookup_coordinator_and_retry(req)
                return
            find_again = retry = False
            for t in resp.get("topics") or ():
                for p in t.get("partitions") or ():
                    code = int(p.get("error_code", 0))
                    where = f"TxnOffsetCommit for {t.get('name')}-{p.get('partition_index')}"
                    if code == 0:
                        continue
                    if code in _FIND_AGAIN or code == errors.REQUEST_TIMED_OUT:
                        find_again = True
                    elif errors.error_class_for_code(code).retriable:
                        retry = True
                    elif code == errors.GROUP_AUTHORIZATION_FAILED:
                        self._abortable(result, _group_refusal(code, where, group.group_id))
                        return
                    elif code in (errors.FENCED_INSTANCE_ID, errors.TRANSACTION_ABORTABLE):
                        self._abortable(result, errors.error_for_code(code, where))
                        return
                    elif code in (errors.UNKNOWN_MEMBER_ID, errors.ILLEGAL_GENERATION):
                        failure = errors.CommitFailedError(
                            f"{where} failed because the consumer group metadata does not match the group "
                            f"({errors.error_name(code)}): the consumer is no longer the member {group.member_id!r} "
                            f"of generation {group.generation_id} of group {group.group_id!r}; abort the transaction")
                        failure.__cause__ = errors.error_for_code(code, where)  # the broker's code, for callers
                        self._abortable(result, failure)
                        return
                    elif code in _FENCED:
                        self._fatal(result, fenced_error("TxnOffsetCommit"))
                        return
                    elif code in (errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, errors.UNSUPPORTED_FOR_MESSAGE_FORMAT):
                        self._fatal(result, _refusal(code, where, self.transactional_id))
                        return
                    else:
                        self._fatal(result, errors.error_for_code(code, f"unexpected error in {where}"))
                        return
            if find_again:
                self._lookup_coordinator_and_retry(req)
            elif retry:
                self._retry(req)
            else:
                result.done()

        req = TxnRequest(API_TXN_OFFSET_COMMIT, body, _PRI_ADD_PARTITIONS, True, on_response, result,
                         max_version=None if self.transaction_v2 else TXN_OFFSET_COMMIT_MAX_VERSION_TRANSACTIONS_V1,
                         group_id=group.group_id)
        return req

    def _fatal(self, result: TransactionalRequestResult, error: BaseException) -> None:
        """Java's ``TxnRequestHandler.fatalError``: the producer is done for, and so is the call."""
        self.transition_to_fatal(error)
        result.done(self.fatal_error())

    def _abortable(self, result: TransactionalRequestResult, error: BaseException) -> None:
        """Java's ``TxnRequestHandler.abortableError``: the call fails and the transaction must be aborted."""
        self.transition_to_abortable(error)
        result.done(error)

    # ======================================================== coordinators
    def coordinator_for(self, req: TxnRequest) -> tuple[int | None, tuple[str, int] | None]:
        """The node (and its address) ``req`` goes to: its group's coordinator, else the transaction's."""
        if req.group_id is None:
            return self.coordinator, self.coordinator_address
        found = self.group_coordinators.get(req.group_id)
        return (None, None) if found is None else found

    def _find_coordinator_request(self, group_id: str | None = None) -> TxnRequest:
        """FindCoordinator for the transaction (key type 1) or for a consumer group (key type 0)."""
        key = self.transactional_id if group_id is None else group_id
        body = {"key": key, "key_type": 1 if group_id is None else 0, "coordinator_keys": [key]}
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
                if group_id is None:
                    self.coordinator = int(node)
                    self.coordinator_address = (str(host), int(port or 0))
                else:
                    self.group_coordinators[group_id] = (int(node), (str(host), int(port or 0)))
                log.debug("%s coordinator: node %s at %s:%s", "transaction" if group_id is None else
                          f"group {group_id!r}", node, host, port)
            elif code == 0 or errors.error_class_for_code(code).retriable:
                self._retry(req)
            elif group_id is not None and code == errors.GROUP_AUTHORIZATION_FAILED:
                self.transition_to_abortable(_group_refusal(code, "FindCoordinator", group_id))
            else:
                self.transition_to_fatal(_refusal(code, "FindCoordinator", self.transactional_id))

        req = TxnRequest(API_FIND_COORDINATOR, body, _PRI_FIND_COORDINATOR, False, on_response,
                         is_find_coordinator=True, group_id=group_id)
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
            if req.group_id is None:
                self.coordinator = None
            else:
                self.group_coordinators.pop(req.group_id, None)
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
                if req.needs_coordinator and self.coordinator_for(req)[0] is None:
                    if not any(r.is_find_coordinator and r.group_id == req.group_id for r in self._pending):
                        self._enqueue(self._find_coordinator_request(req.group_id))
                    req = self._pending[0]
                self._pending.remove(req)
                if req.api_key == API_END_TXN or req.api_key == API_INIT_PRODUCER_ID:
                    self._refresh_ids(req)
                return req
            return None

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
