"""Idempotence: the producer id, its epoch and every partition's sequence numbers (the idempotent half
of the Java client's ``TransactionManager``, with its ``TxnPartitionMap``).

How it works. The producer id and epoch come from InitProducerId. Each successful InitProducerId starts a
new *generation*. Every partition keeps its own sequence space (``_PartitionEntry``): the generation it
belongs to, the next sequence, the last acknowledged sequence and the batches that have a sequence but
are not complete yet (``in_flight``: on the wire, waiting for a retry, or expired while on the wire),
in sequence order. ``assign_sequence`` gives a batch the next sequence (advanced by its record count,
wrapping at 2**31-1); a retried batch keeps its sequence, and only the lowest in-flight batch of a
partition may be resent (``should_stop_drain``), so a retry never overtakes.

When a partition's sequence space is broken (OUT_OF_ORDER_SEQUENCE_NUMBER with a real gap,
UNKNOWN_PRODUCER_ID, a batch that failed with a non-retriable error, a batch that expired after being
sent and whose fate stays unknown once nothing else is in flight) the partition is marked for a
*rewrite*. The Sender then asks for a new epoch of the producer id (KIP-360: InitProducerId v3+ with the
current id and epoch, as Java's ``bumpIdempotentEpochAndResetIdIfNeeded``; the broker answers the same
id with the next epoch, or a new id when the epoch runs out); a broker that refuses the bump (Tansu
answers it with an error) gets asked for a brand-new id from then on. Once the new id/epoch is known and
none of the partition's batches is on the wire, the partition's remaining batches are renumbered from 0
under it. Other partitions keep their old id for the batches they have in flight (so a retry of a batch
that may already be written is still deduplicated by the broker) and switch to the new generation when
they have nothing in flight. A transactional producer never rewrites: its rules differ where Java's do
(``can_retry``: restart at 0 under the same id after UNKNOWN_PRODUCER_ID past the log start;
``_close_gap``: later batches move down over a failed one), and a broken sequence makes its transaction
abortable instead.

The seams. ``IdempotenceManager`` is the base of ``transactions.TransactionManager``, which owns the
producer's state machine (an idempotent producer uses it too: its fatal state). This module never reads
that state; it asks through the hooks the subclass implements: ``has_fatal_error()``,
``transition_to_fatal(error)``, ``_sequence_outcome_unknown(tp)`` (a transactional producer aborts) and
``_should_stop_drain`` (the state's gate in front of ``_sequence_blocks_drain``, the per-partition gate
here). What a failed or expired batch does to the producer's state is decided there too
(``handle_failed_batch``, ``handle_expired_batch``); what it does to the sequences is decided here
(``_sequences_after_failed_batch``, ``_sequences_after_expired_batch``). A new producer id or epoch for
every partition at once (a transactional InitProducerId) goes through ``restart_sequences``.

Locking: the Sender thread and user threads share ``self.lock`` (re-entrant); every public method
takes it.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from .. import errors
from .._types import TopicPartition
from ..record.layout import NO_SEQUENCE, increment_sequence, sequence_after
from .producer_batch import remove_in_flight

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch

__all__ = ["NO_EPOCH", "NO_PRODUCER_ID", "IdempotenceManager"]

log = logging.getLogger("sparkafka.producer")

NO_PRODUCER_ID = -1
NO_EPOCH = -1
_SEQUENCE_SPACE = 1 << 31
_FENCED = frozenset({errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH})


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


class IdempotenceManager:
    """Producer id, epoch and per-partition sequences; the base of ``TransactionManager``."""

    def __init__(self, is_transactional: bool) -> None:
        self.is_transactional = is_transactional
        self.lock = threading.RLock()
        self.producer_id = NO_PRODUCER_ID
        self.epoch = NO_EPOCH
        self._generation = 0
        self._partitions: dict[TopicPartition, _PartitionEntry] = {}
        self._unresolved: dict[TopicPartition, int] = {}  # tp -> the sequence after the failed batch
        self._rewrite: set[TopicPartition] = set()
        self._init_in_flight = False
        self._init_is_bump = False
        self._bump_refused = False
        self._split_slot: tuple[TopicPartition, int] | None = None
        self._acked_producer_id: dict[TopicPartition, int] = {}
        """The producer id of the last batch acknowledged on each partition (kept across new epochs): the
        broker then holds state for that producer id there (see ``_sequence_blocks_drain``)."""

    # ================================================================== basics
    @property
    def generation(self) -> int:
        """Incremented by every successful InitProducerId."""
        return self._generation

    def _entry(self, tp: TopicPartition) -> _PartitionEntry:
        e = self._partitions.get(tp)
        if e is None:
            e = self._partitions[tp] = _PartitionEntry(self._generation, self.producer_id, self.epoch)
        return e

    # ================================================== hooks (the state machine's side)
    def has_fatal_error(self) -> bool:
        raise NotImplementedError

    def transition_to_fatal(self, error: BaseException) -> None:
        raise NotImplementedError

    def _sequence_outcome_unknown(self, tp: TopicPartition) -> None:
        """A batch of ``tp`` failed or expired after it was sent and no later batch was acknowledged: the
        partition may have a gap. The idempotent producer restarts its sequences under a new producer id."""
        self._request_rewrite(tp, "a batch failed or expired after it was sent")

    def _should_stop_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """The drain gate: the subclass checks its state first, then calls ``_sequence_blocks_drain``."""
        raise NotImplementedError

    # ======================================================= accumulator hooks
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

    def _sequence_blocks_drain(self, tp: TopicPartition, first: ProducerBatch) -> bool:
        """Java ``shouldStopDrainBatchesForPartition``'s sequence part: no producer id, a partition waiting
        for a rewrite, a stale producer id's batches in flight, the partition's first batch not yet
        acknowledged, an unresolved sequence, or a retry that is not the lowest sequence in flight."""
        if self.producer_id == NO_PRODUCER_ID:
            return True
        e = self._partitions.get(tp)
        if e is None:
            return False
        if tp in self._rewrite:
            return True
        if first.base_sequence == NO_SEQUENCE:
            if e.in_flight and e.generation != self._generation:
                return True  # batches of an older producer id still in flight here
            if e.in_flight and e.last_acked_sequence == -1 and self._acked_producer_id.get(tp) != e.producer_id:
                # The partition's first batch under this producer id is not acknowledged yet: a broker
                # with no state for the producer on that partition appends a first batch with ANY
                # sequence (ProducerAppendInfo.checkSequence), so a second batch must not overtake it: if
                # the first failed retriably (NOT_LEADER_OR_FOLLOWER on a topic just created), the
                # second would be appended and the first could never be (OUT_OF_ORDER_SEQUENCE_NUMBER
                # until delivery.timeout.ms). One batch in flight until the first acknowledgement. Under a
                # new epoch of an id the partition has acknowledged before (a KIP-360 bump, every
                # transaction of Transactions V2) the broker refuses a first batch that does not start at
                # sequence 0, so nothing is held back there.
                return True
            return tp in self._unresolved
        # a retry goes only when it is the lowest sequence still in flight
        return bool(e.in_flight) and e.in_flight[0] is not first and first in e.in_flight

    def assign_sequence(self, batch: ProducerBatch) -> None:
        """Give a never-sent batch the partition's next sequence and track it as in flight."""
        with self.lock:
            self._assign_sequence(batch)

    def _assign_sequence(self, batch: ProducerBatch) -> None:
        tp = batch.tp
        e = self._partitions.get(tp)
        if e is None:  # self._entry(tp), one call less per batch
            e = self._partitions[tp] = _PartitionEntry(self._generation, self.producer_id, self.epoch)
        if e.generation != self._generation and not e.in_flight:
            e.restart(self._generation, self.producer_id, self.epoch)
            self._unresolved.pop(tp, None)
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
            e = self._entry(batch.tp)
            lst = e.in_flight
            slot = self._split_slot
            if slot is not None and slot[0] == batch.tp:
                lst.insert(slot[1], batch)
            else:
                lst.append(batch)
                # in sequence order from the partition's next unacknowledged sequence (wrapping at 2**31-1)
                start = increment_sequence(e.last_acked_sequence, 1) if e.last_acked_sequence >= 0 else 0
                lst.sort(key=lambda b: (b.base_sequence - start) % _SEQUENCE_SPACE)

    def end_split(self) -> None:
        with self.lock:
            self._split_slot = None

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        with self.lock:
            self._remove_in_flight(batch)

    def _remove_in_flight(self, batch: ProducerBatch) -> bool:
        e = self._partitions.get(batch.tp)
        return e is not None and remove_in_flight(e.in_flight, batch)

    def in_flight_batches(self, tp: TopicPartition) -> list[ProducerBatch]:
        with self.lock:
            e = self._partitions.get(tp)
            return [] if e is None else list(e.in_flight)

    def next_sequence(self, tp: TopicPartition) -> int:
        with self.lock:
            e = self._partitions.get(tp)
            return 0 if e is None else e.next_sequence

    def _any_on_wire(self) -> bool:
        """A batch with a sequence is part of a Produce request still waiting for its answer."""
        return any(e.on_wire() for e in self._partitions.values())

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
            self._init_is_bump = self.producer_id != NO_PRODUCER_ID and not self._bump_refused
            pid, epoch = (self.producer_id, self.epoch) if self._init_is_bump else (NO_PRODUCER_ID, NO_EPOCH)
            return {"transactional_id": None, "transaction_timeout_ms": 2147483647,
                    "producer_id": pid, "producer_epoch": epoch}

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
            if code != 0 and self._init_is_bump:
                # the broker would not bump this id's epoch: ask for a new id from now on (Java resets the
                # producer id when the bump is not possible)
                log.info("InitProducerId refused the epoch bump of producer id %d (%s); asking for a new id",
                         self.producer_id, errors.error_name(code))
                self._bump_refused = True
                return False
            if code != 0:
                text = "InitProducerId for the idempotent producer"
                if code == errors.CLUSTER_AUTHORIZATION_FAILED:
                    # KafkaApis.handleInitProducerIdRequest: IDEMPOTENT_WRITE on the cluster, or since Kafka 3.0
                    # (KIP-679) WRITE on any topic.
                    text += (": not authorized to get a producer id; the principal needs WRITE on a topic (Kafka "
                             "3.0+) or IDEMPOTENT_WRITE on the cluster, or set enable.idempotence=false")
                exc = errors.error_for_code(code, text)
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

    def restart_sequences(self, pid: int, epoch: int) -> None:
        """A new producer id or epoch for every partition at once (a transactional InitProducerId): every
        partition's sequences restart at 0 and nothing is left unresolved."""
        self._new_producer_id(pid, epoch)
        self._partitions.clear()
        self._unresolved.clear()

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
        if current is None or sequence_after(after, current):
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
                self._sequence_outcome_unknown(tp)
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
            if e is None:
                return
            if not remove_in_flight(e.in_flight, batch):
                return
            producer_id = e.producer_id
            if batch.producer_id != producer_id or batch.producer_epoch != e.producer_epoch:
                return
            self._acked_producer_id[batch.tp] = producer_id
            count = batch.record_count
            last = increment_sequence(batch.base_sequence, count - 1)
            acked = e.last_acked_sequence
            if acked == -1 or sequence_after(last, acked):
                e.last_acked_sequence = last
            if base_offset >= 0:
                last_offset = base_offset + count - 1
                if last_offset > e.last_acked_offset:
                    e.last_acked_offset = last_offset

    def _sequences_after_failed_batch(self, batch: ProducerBatch, code: int | None, exc: BaseException,
                                      adjust_sequences: bool) -> None:
        """What a batch that failed for good does to its partition's sequences (the second half of Java's
        ``handleFailedBatch``; the state machine has already taken its decision). Lock held."""
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
                    and sequence_after(b.base_sequence, failed.base_sequence):
                b.reset_producer_state(b.producer_id, b.producer_epoch,
                                       (b.base_sequence - count) % _SEQUENCE_SPACE)
        e.next_sequence = (e.next_sequence - count) % _SEQUENCE_SPACE

    def _sequences_after_expired_batch(self, batch: ProducerBatch) -> None:
        """A batch hit delivery.timeout.ms. If it was ever sent, its fate is unknown: new batches for the
        partition wait until everything in flight there has completed (``maybe_resolve_sequences``).
        A batch still on the wire stays tracked until its answer (or time-out) arrives. Lock held."""
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
