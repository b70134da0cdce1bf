"""Sender: the producer's background I/O thread (Java ``Sender``).

How it works: ``run()`` loops over ``run_once()`` until close. One iteration:
1. metadata: send a Metadata request if one is due;
2. idempotence/transactions: settle unresolved sequences; after a fatal error fail every batch and stop
   sending; a transactional producer sends at most one transactional request (FindCoordinator,
   InitProducerId, AddPartitionsToTxn, EndTxn) and sends no data while one is outstanding; an idempotent
   producer sends InitProducerId when it has no producer id or needs a new one;
3. ``accumulator.ready()`` -> nodes with sendable batches (full, lingered, memory exhausted, flush,
   close, transaction completing, backoff over); topics with unknown leaders trigger a metadata refresh;
4. drop nodes the network client is not ready for (connecting, in-flight limit);
5. ``accumulator.drain()`` up to ``max.request.size`` per node (the transaction manager assigns sequences
   and holds back what must wait); mute partitions when ``max.in.flight.requests.per.connection == 1``;
6. expire batches (queued or on the wire) older than ``delivery.timeout.ms``;
7. one Produce request per node (the batches' bytes spliced into the request); while full batches are
   queued behind the heads (the node's last drain left one) and a node can take another request, up to
   four more rounds of step 5 and 7 for those nodes, with only partitions whose head has a batch behind
   it (open batches keep lingering);
8. ``client.poll()`` until something is due; responses run ``_complete_batch``: success completes the
   futures and callbacks in order; retriable errors re-enqueue with exponential backoff (in sequence
   order); DUPLICATE_SEQUENCE_NUMBER counts as success; MESSAGE_TOO_LARGE splits; invalid-metadata
   errors request a refresh; anything else fails the batch's records with a typed error. An answer for a
   batch that already failed (expired on the wire) only updates the sequence bookkeeping.
Every time value comes from the injected clock, so tests can step ``run_once`` by hand.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from .. import errors
from .._clock import Clock
from .._types import TopicPartition
from ..accel import ACCEL
from ..net.connection import DISCONNECTED
from ..protocol.messages import PRODUCE_MAX_VERSION_TRANSACTIONS_V1, PRODUCE_MAX_VERSION_WITH_NAMES, ApiKey
from ..protocol.primitives import ZERO_UUID, uuid_bytes
from ..protocol.produce import PRODUCE_FIRST_TOPIC_ID, PRODUCE_MAX_VERSION, encode_produce_request_parts
from ..record.layout import NO_SEQUENCE, RECORD_BATCH_OVERHEAD
from .producer_batch import remove_in_flight
from .transactions import TransactionManager, TxnRequest

_MARK_IO_THREAD = getattr(ACCEL, "io_thread", None)
"""Marks the Sender thread as one that never waits for a sending turn (``_c/_send_turns.c``)."""

if TYPE_CHECKING:
    from ..net.client import ClientResponse, NetworkClient
    from ..net.metadata import Metadata, MetadataUpdater
    from .accumulator import RecordAccumulator
    from .metrics import ProducerMetrics
    from .producer_batch import ProducerBatch

log = logging.getLogger("sparkafka.producer")

_MAX_FULL_ROUNDS = 5  # requests per node in one loop while full batches are queued (max.in.flight bounds it)
_MAX_POLL_MS = 1000.0  # never sleep longer: expiry and transactional timers are re-checked at least this often
_PRODUCE = ApiKey.PRODUCE  # a module constant (docs/DESIGN.md, Performance notes)


class Sender:
    """The I/O loop of one producer. ``run`` is the thread body; ``run_once`` one iteration."""

    def __init__(
        self,
        *,
        client: NetworkClient,
        metadata: Metadata,
        metadata_updater: MetadataUpdater,
        accumulator: RecordAccumulator,
        transaction_manager: TransactionManager | None,
        clock: Clock,
        metrics: ProducerMetrics,
        acks: int,
        retries: int,
        max_request_size: int,
        request_timeout_ms: int,
        delivery_timeout_ms: int,
        retry_backoff_ms: int,
        guarantee_message_order: bool,
        transactional_id: str | None = None,
    ) -> None:
        self.client = client
        self.metadata = metadata
        self.metadata_updater = metadata_updater
        self.accumulator = accumulator
        self.tm = transaction_manager
        self.clock = clock
        self.metrics = metrics
        self.acks = acks
        self.retries = retries
        self.max_request_size = max_request_size
        self.request_timeout_ms = request_timeout_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.guarantee_message_order = guarantee_message_order
        self.transactional_id = transactional_id
        # v13 names topics by id (used when Metadata gave every topic of the request one); a transaction
        # under protocol v1 stops at v11 (messages.py)
        self._produce_max_version = (PRODUCE_MAX_VERSION if transactional_id is None
                                     else PRODUCE_MAX_VERSION_TRANSACTIONS_V1)
        # KIP-516 topic ids of the metadata snapshot they were read from (a new snapshot starts them afresh):
        # name -> 16 bytes and 16 bytes -> name, filled as Produce v13 requests name topics
        self._ids_snapshot: object = None
        self._id_of: dict[str, bytes] = {}
        self._name_of: dict[bytes, str] = {}
        self.running = True
        self.force_close = False
        self.in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        """Batches on the wire, per partition, in send order."""
        self._next_expiry_check_ms = -math.inf  # _expire scans when the clock reaches it
        self._init_pid_retry_at = -math.inf
        self._txn_request_in_flight: TxnRequest | None = None
        self._txn_node_wait: tuple[TxnRequest, float] | None = None
        self.thread: threading.Thread | None = None
        self.thread_ident: int | None = None
        self.fatal_error: BaseException | None = None

    # ------------------------------------------------------------------ thread
    def run(self) -> None:
        self.thread_ident = threading.get_ident()
        if _MARK_IO_THREAD is not None:  # a callback's send() must not wait for another thread's turn
            _MARK_IO_THREAD()
        log.debug("sender thread started")
        while self.running:
            self._run_once_guarded()
        # graceful close: send what is buffered and wait for the answers; then, once every append that
        # passed the closed check has added its batch, whatever those added
        while not self.force_close and self._work_left():
            self._run_once_guarded()
        self.accumulator.await_appends()
        while not self.force_close and self._work_left():
            self._run_once_guarded()
        # then abort a transaction that no commit or abort is ending (Java's Sender.run; a forced close,
        # close(0), leaves it open for another process to end by its handle, as Flink's sink does)
        tm = self.tm
        while not self.force_close and tm is not None and tm.is_transactional and tm.has_ongoing_transaction():
            if not tm.is_completing():
                log.info("aborting the open transaction because the producer is closing")
                try:
                    tm.begin_abort()
                except errors.KafkaError as exc:
                    log.error("could not abort the open transaction while closing: %r", exc)
                    break
            self._run_once_guarded()
        if self.force_close or self.accumulator.has_incomplete():
            self.accumulator.abort_incomplete_batches(
                errors.ProducerClosedError("the producer was closed before this record was delivered"))
        if self.tm is not None:
            self.tm.close(errors.ProducerClosedError("the producer was closed"))
        try:
            self.client.close()
        except Exception:  # pragma: no cover - best effort
            log.exception("error closing the network client")
        log.debug("sender thread stopped")

    def _work_left(self) -> bool:
        tm = self.tm
        if tm is not None and tm.has_fatal_error():
            return self.client.in_flight_count() > 0
        if self.accumulator.has_undrained() or self.client.in_flight_count() > 0:
            return True
        # Java's hasPendingTransactionalRequests: requests count only inside a transaction (a FindCoordinator or
        # InitProducerId that cannot get through kept close() without a timeout waiting forever)
        return (tm is not None and tm.is_transactional and tm.has_pending_requests()
                and tm.has_ongoing_transaction())

    def _run_once_guarded(self) -> None:
        try:
            self.run_once()
        except (Exception, SystemExit, GeneratorExit) as exc:  # never let the I/O thread die silently
            log.exception("uncaught error in the producer I/O thread")
            self.fatal_error = exc
            try:
                self.client.poll(self.retry_backoff_ms, self.clock.monotonic_ms())
            except Exception:
                pass

    def initiate_close(self) -> None:
        self.accumulator.close()  # first: once the loop sees running False, no new append may start
        self.running = False
        self.wakeup()

    def force(self) -> None:
        self.force_close = True
        self.accumulator.close()
        self.running = False
        self.wakeup()

    def wakeup(self) -> None:
        self.client.wakeup()

    # --------------------------------------------------------------- one loop
    def run_once(self) -> None:
        now = self.clock.monotonic_ms()
        metadata_timeout = self.metadata_updater.maybe_update(now)
        tm = self.tm
        if tm is not None:
            tm.maybe_resolve_sequences()
            if tm.has_fatal_error():
                if self.accumulator.has_incomplete():
                    self.accumulator.abort_incomplete_batches(tm.fatal_error())
                self.client.poll(self.retry_backoff_ms, now)
                return
            if tm.is_transactional:
                if self._maybe_send_and_poll_txn_request(now):
                    return
            elif tm.needs_producer_id():
                self._maybe_send_init_producer_id(now)
        auth_error = self.client.authentication_error()
        if auth_error is not None and self.accumulator.has_undrained():
            # every broker rejected our login: records never sent fail now, not at delivery.timeout.ms; a
            # transaction missing them must not commit (Java's handleFailedBatch: abortable)
            if tm is not None:
                tm.maybe_transition_to_error_state(auth_error)
            self.accumulator.abort_undrained_batches(auth_error)
        poll_timeout = self._send_producer_data(now, metadata_timeout)
        if self.metadata.update_requested():
            # asked for by this loop (a partition without a leader): as Java's NetworkClient.poll, which runs
            # maybeUpdate after sendProducerData, the refresh goes out once the backoff allows, not after
            # the longer wait the first look returned (up to _MAX_POLL_MS: ~1 s between refreshes during an
            # election instead of retry.backoff.ms)
            poll_timeout = min(poll_timeout, self.metadata_updater.maybe_update(now))
        self.client.poll(poll_timeout, now, self.accumulator.has_full_backlog())

    def _send_producer_data(self, now: float, metadata_timeout: float) -> float:
        cluster = self.metadata.fetch()
        result = self.accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.metadata.add_topic(topic, now)
            self.metadata.request_update()
        ready_nodes = set()
        auth_failed: dict[int, errors.AuthenticationError] = {}
        not_ready_timeout = math.inf
        for node in result.ready_nodes:
            if self.client.ready(node, now):
                ready_nodes.add(node)
                self.accumulator.update_node_latency_stats(node, now, True)
            else:
                not_ready_timeout = min(not_ready_timeout, self.client.connection_delay(node, now))
                self.accumulator.update_node_latency_stats(node, now, False)
                auth_error = self.client.authentication_error(node)
                if auth_error is not None:
                    auth_failed[node] = auth_error
        if auth_failed:
            # A rejected login is not retried per batch: fail what is queued for that broker now
            # rather than at delivery.timeout.ms.
            for node, failed in self.accumulator.drain(cluster, set(auth_failed), self.max_request_size,
                                                       now).items():
                for b in failed:
                    self._fail_batch(b, auth_failed[node], adjust_sequences=False)
        batches = self.accumulator.drain(cluster, ready_nodes, self.max_request_size, now)
        sent_any = self._track_in_flight(batches)
        expiry_timeout = self._expire(now)
        poll_timeout = min(result.next_ready_check_delay_ms, not_ready_timeout, metadata_timeout,
                           expiry_timeout, _MAX_POLL_MS)
        if ready_nodes and not sent_any:
            # data is ready but held back (producer id, ordering, transaction): check again soon
            poll_timeout = min(poll_timeout, self.retry_backoff_ms)
        if sent_any:
            poll_timeout = 0.0
        for round_number in range(1, _MAX_FULL_ROUNDS + 1):
            busy = [node for node, node_batches in batches.items() if node_batches]
            for node in busy:
                self._send_produce_request(node, batches[node], now)
            if round_number == _MAX_FULL_ROUNDS:
                break
            # A backlog of full batches (the producer outruns the Sender): while a node can take another
            # request, send the full ones now rather than after a whole loop (ready, poll) per request.
            more = [node for node in busy
                    if self.accumulator.may_have_full_batches(node) and self.client.ready(node, now)]
            if not more:
                break
            batches = self.accumulator.drain(cluster, more, self.max_request_size, now, full_only=True)
            if not self._track_in_flight(batches):
                break
        return max(0.0, poll_timeout)

    def _track_in_flight(self, batches: dict[int, list[ProducerBatch]]) -> bool:
        """Record drained batches as in flight (muting their partitions when order must be kept);
        True if there was any."""
        sent_any = False
        touch = self.metadata.touch
        in_flight = self.in_flight_batches
        mute = self.accumulator.mute if self.guarantee_message_order else None
        touched = None
        for node_batches in batches.values():
            for b in node_batches:
                tp = b.tp
                if tp[0] is not touched:
                    touched = tp[0]
                    touch(touched)  # a topic with data in flight stays in the metadata (metadata.max.idle.ms)
                sent_any = True
                lst = in_flight.get(tp)
                if lst is None:
                    in_flight[tp] = [b]
                else:
                    lst.append(b)
                if mute is not None:
                    mute(tp)
        return sent_any

    def _expire(self, now: float) -> float:
        """Fail batches past delivery.timeout.ms; returns ms until the next one is due.

        The scan (every partition's queue under its lock, every in-flight list) runs only when something
        can have expired: it records the earliest deadline of what is queued or in flight, and a batch
        created after the scan is due no earlier than scan time + delivery.timeout.ms. Retried and split
        batches were queued or in flight at the scan. Until then each Sender loop pays one comparison."""
        check_at = self._next_expiry_check_ms
        if now < check_at:
            return check_at - now
        timeout = self.delivery_timeout_ms
        expired: list[ProducerBatch] = []
        next_due = math.inf
        for tp, lst in list(self.in_flight_batches.items()):
            while lst and lst[0].has_reached_delivery_timeout(timeout, now):
                expired.append(lst.pop(0))
            if not lst:
                del self.in_flight_batches[tp]
            else:
                next_due = min(next_due, lst[0].created_ms + timeout - now)
        self.accumulator.reset_next_batch_expiry_time()
        expired.extend(self.accumulator.expired_batches(now))
        next_due = min(next_due, self.accumulator.next_batch_expiry_time_ms - now)
        # With max.in.flight 1 a partition stays muted while a request of it is on the wire (Java unmutes only
        # in completeBatch); an expired batch that never went out (drained, then expired before its request)
        # must not leave it muted for good, one still on the wire must not unmute it early.
        on_wire = {b.tp for b in expired if b.in_request} if self.guarantee_message_order else set()
        for b in expired:
            if b.final_state is not None:
                continue
            exc = errors.DeliveryTimeoutError(
                f"Expiring {b.record_count} record(s) for {b.tp[0]}-{b.tp[1]}: "
                f"{now - b.created_ms:.0f} ms has passed since batch creation "
                f"(delivery.timeout.ms={timeout})"
                + (f"; its last attempt failed with {b.last_error}" if b.last_error else ""))
            if self.tm is not None:
                self.tm.handle_expired_batch(b, exc)
            if b.done(-1, -1, exc):
                self.metrics.record_errors(b.record_count)
            self.accumulator.deallocate(b)
            if self.guarantee_message_order and not b.in_request and b.tp not in on_wire \
                    and not any(x.in_request for x in self.in_flight_batches.get(b.tp, ())):
                self.accumulator.unmute(b.tp)
        next_due = max(0.0, next_due)
        self._next_expiry_check_ms = now + min(next_due, timeout)
        return next_due

    # ----------------------------------------------------------- produce path
    def _send_produce_request(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        for b in batches:
            if b.final_state is not None:
                # Expired by this loop's scan after the drain (Java sends them anyway): the caller was told,
                # and the buffer is back in the pool, where a new batch may already be writing into it.
                batches = [b for b in batches if b.final_state is None]
                if not batches:
                    return
                break
        try:
            tm = self.tm
            max_version = (PRODUCE_MAX_VERSION if tm is not None and tm.transaction_v2
                           else self._produce_max_version)
            version = self.client.api_version(node, _PRODUCE, max_version)
            id_of: dict[str, bytes] | None = None
            if version >= PRODUCE_FIRST_TOPIC_ID:
                # KIP-516: v13 names each topic by the id Metadata gave it; without one for every topic, v12
                id_of = self._topic_ids(batches)
                if id_of is None:
                    version = self.client.api_version(node, _PRODUCE, PRODUCE_MAX_VERSION_WITH_NAMES)
        except errors.UnsupportedVersionError as exc:  # the broker is too old for RecordBatch v2
            self._fail_without_retry(batches, exc)
            return
        by_topic: dict[str, list[tuple[int, Any]]] = {}
        by_tp: dict[TopicPartition, ProducerBatch] = {}
        records = wire_bytes = uncompressed = largest = 0
        ratios = queued = longest = 0.0
        for b in batches:
            tp = b.tp
            wire = b.records_bytes
            entries = by_topic.get(tp[0])
            if entries is None:
                entries = by_topic[tp[0]] = []
            entries.append((tp[1], wire))
            by_tp[tp] = b
            b.in_request = True
            size = wire.nbytes
            records += b.record_count
            wire_bytes += size
            if size > largest:
                largest = size
            waited = b.drained_ms - b.created_ms  # Java's queueTimeMs
            queued += waited
            if waited > longest:
                longest = waited
            raw = b.builder.uncompressed_bytes + RECORD_BATCH_OVERHEAD  # no max(): it costs ~750 instructions
            uncompressed += raw if raw > size else size
            ratios += b.builder.actual_compression_ratio  # 1.0 without compression
        topics: list[tuple[Any, list[tuple[int, Any]]]] = list(by_topic.items())
        names_by_id: dict[bytes, str] | None = None
        if id_of is not None:
            topics = [(id_of[name], entries) for name, entries in topics]
            names_by_id = self._name_of  # this snapshot's: only grows, and a new snapshot gets a new dict
        # The pieces reference the batches' pooled buffers; client.send writes them or copies what the socket
        # did not take before it returns, so a batch expired or completed later can give its buffer back.
        try:
            body = encode_produce_request_parts(version, self.transactional_id, self.acks, self.request_timeout_ms,
                                                topics)
        except errors.KafkaError as exc:
            # a field the request cannot carry: its batches fail now, as a request refused as a whole does,
            # rather than wait for delivery.timeout.ms marked as sent in a request that never left
            for b in batches:
                b.in_request = False
            self._fail_without_retry(batches, exc)
            return
        self.metrics.record_request(len(batches), records, wire_bytes, uncompressed, ratios, largest, queued, longest)

        def on_response(resp: ClientResponse) -> None:
            self._handle_produce_response(resp, by_tp, names_by_id)

        self.client.send(node, _PRODUCE, body, version=version, expect_response=self.acks != 0,
                         callback=on_response)

    def _topic_ids(self, batches: list[ProducerBatch]) -> dict[str, bytes] | None:
        """``{topic name: id}`` covering every topic of ``batches``, or None if Metadata lacks one of the ids.

        The ids are those of the current metadata snapshot, kept until the next snapshot: a request costs a
        dict lookup per batch, not a read and conversion of every id and two dicts built (~9k instructions
        per request measured on Apache Kafka 4.4)."""
        cluster = self.metadata.fetch()
        if cluster is not self._ids_snapshot:
            self._ids_snapshot = cluster
            self._id_of = {}
            self._name_of = {}
        id_of = self._id_of
        for b in batches:
            name = b.tp[0]
            if name not in id_of:
                topic_id = cluster.topic_id(name)
                if not topic_id or topic_id == ZERO_UUID:
                    return None
                raw = uuid_bytes(topic_id)
                id_of[name] = raw
                self._name_of[raw] = name
        return id_of

    def _handle_produce_response(self, resp: ClientResponse, by_tp: dict[TopicPartition, ProducerBatch],
                                 names_by_id: dict[bytes, str] | None = None) -> None:
        now = self.clock.monotonic_ms()
        for batch in by_tp.values():
            batch.in_request = False
        if resp.error is None and resp.body is not None:  # Java's Sender: answered requests only
            self.metrics.record_latency(resp.latency_ms)
            self.metrics.record_throttle(resp.body.get("throttle_time_ms") or 0)
        if resp.error is not None:
            exc = resp.error
            if isinstance(exc, (errors.UnsupportedVersionError, errors.AuthenticationError)):
                self._fail_without_retry(by_tp.values(), exc)
                return
            code = exc.code if isinstance(exc, errors.BrokerError) else errors.NETWORK_EXCEPTION
            log.debug("produce request to node %s failed: %r", resp.node_id, exc)
            for b in by_tp.values():
                self._complete_batch(b, code, -1, -1, -1, None, str(exc), now)
            return
        if resp.body is None:  # acks=0
            for b in by_tp.values():
                self._complete_batch(b, 0, -1, -1, -1, None, None, now)
            return
        complete = self._complete_batch
        succeed = self._succeed
        unanswered = by_tp  # this request's own map: each answered batch is taken out of it
        for topic_resp in resp.body.get("responses", ()):
            name = (str(topic_resp.get("name")) if names_by_id is None
                    else names_by_id.get(bytes(topic_resp.get("topic_id") or b""), ""))
            for p in topic_resp.get("partition_responses", ()):
                found = unanswered.pop((name, p["index"]), None)
                if found is None:
                    continue
                get = p.get
                code = get("error_code", 0)
                if not code and found.final_state is None:
                    succeed(found, get("base_offset", -1), get("log_append_time_ms", -1))
                else:
                    complete(found, code, get("base_offset", -1), get("log_append_time_ms", -1),
                             get("log_start_offset", -1), get("record_errors") or None, get("error_message"), now)
        for b in unanswered.values():
            complete(b, errors.NETWORK_EXCEPTION, -1, -1, -1, None,
                     "the broker's response did not mention this partition", now)

    def _fail_without_retry(self, batches: Iterable[ProducerBatch], exc: BaseException) -> None:
        """Fail the batches of a request that cannot be sent or was refused as a whole (no Produce version in
        common, authentication failed): each is answered (``_answered``) and, if not done yet, fails with
        ``exc``."""
        for b in batches:
            self._answered(b)
            if not b.is_done():
                self._fail_batch(b, exc, adjust_sequences=False)

    def _complete_batch(self, batch: ProducerBatch, code: int, base_offset: int, log_append_time: int,
                        log_start_offset: int, record_errors: list[dict[str, Any]] | None,
                        error_message: str | None, now: float) -> None:
        """Act on one batch's answer; a bug while doing so fails the batch instead of leaving it (and
        every ``flush()`` and ``close()`` waiting on it) pending forever."""
        try:
            self._complete_batch_unguarded(batch, code, base_offset, log_append_time, log_start_offset,
                                           record_errors, error_message, now)
        except Exception as exc:
            self._fail_after_internal_error(batch, code, exc)

    def _succeed(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        """``_complete_batch`` for an answer without error to a batch that is not done yet (the usual
        case, one call less per batch), with the same guard."""
        try:
            self._answered(batch)
            self._complete_ok(batch, base_offset, log_append_time)
        except Exception as exc:
            self._fail_after_internal_error(batch, 0, exc)

    def _fail_after_internal_error(self, batch: ProducerBatch, code: int, exc: Exception) -> None:
        log.exception("internal error while completing batch %s", batch)
        if not batch.is_done():
            batch.abort(errors.KafkaError(
                f"sparkafka failed to complete the batch to {batch.tp[0]}-{batch.tp[1]} after the "
                f"broker's answer ({errors.error_name(code)}): {exc!r}; its records were not delivered"))
            self.accumulator.deallocate(batch)

    def _complete_batch_unguarded(self, batch: ProducerBatch, code: int, base_offset: int, log_append_time: int,
                                  log_start_offset: int, record_errors: list[dict[str, Any]] | None,
                                  error_message: str | None, now: float) -> None:
        tm = self.tm
        self._answered(batch)
        if batch.final_state is not None:
            # expired while on the wire, or aborted: only the sequence bookkeeping is left to do, and
            # (as Java, whose completeBatch goes on to its metadata check) a stale leader is refreshed
            if tm is not None:
                tm.handle_late_response(batch, code, base_offset)
            if code and errors.error_class_for_code(code).invalid_metadata:
                self.metadata.request_update()
            return
        if not code:
            self._complete_ok(batch, base_offset, log_append_time)
        elif code == errors.MESSAGE_TOO_LARGE and batch.record_count > 1:
            log.warning("MESSAGE_TOO_LARGE for %d records to %s-%d: splitting the batch",
                        batch.record_count, batch.tp[0], batch.tp[1])
            if tm is not None:
                tm.begin_split(batch)  # the parts keep the batch's sequence range, in its place
            try:
                self.accumulator.split_and_reenqueue(batch)
            finally:
                if tm is not None:
                    tm.end_split()
            self.accumulator.deallocate(batch)
            self.metrics.record_split()
        elif code != 0:
            exc_cls = errors.error_class_for_code(code)
            if self._can_retry(batch, code, log_start_offset, now):
                log.debug("retrying batch %s-%d (attempt %d) after %s", batch.tp[0], batch.tp[1],
                          batch.attempts + 1, exc_cls.name)
                batch.last_error = exc_cls.name
                self.accumulator.reenqueue(batch, now)
                self.metrics.record_retry(batch.record_count)
            elif code == errors.DUPLICATE_SEQUENCE_NUMBER:
                self._complete_ok(batch, -1, -1)  # already written; its offset is not known
            else:
                exc = self._exception_for(batch, code, error_message)
                per_record: dict[int, BaseException] | None = None
                if record_errors:
                    per_record = self._record_errors(batch, code, record_errors, error_message)
                self._fail_batch(batch, exc, adjust_sequences=batch.attempts < self.retries,
                                 record_errors=per_record)
            if exc_cls.invalid_metadata:
                self.metadata.request_update()

    def _record_errors(self, batch: ProducerBatch, code: int, record_errors: list[dict[str, Any]],
                       message: str | None) -> dict[int, BaseException]:
        """Java: the listed records get the partition's error; the others fail with a generic error."""
        listed: dict[int, BaseException] = {}
        for entry in record_errors:
            index = int(entry.get("batch_index", -1))
            text = entry.get("batch_index_error_message") or message
            listed[index] = errors.error_for_code(code, f"record {index} of the batch to "
                                                        f"{batch.tp[0]}-{batch.tp[1]}" + (f": {text}" if text else ""))
        innocent = errors.KafkaError(
            f"this record was part of a batch to {batch.tp[0]}-{batch.tp[1]} that had one or more invalid "
            f"records ({errors.error_name(code)}); it was not written")
        return {i: listed.get(i, innocent) for i in range(batch.record_count)}

    def _exception_for(self, batch: ProducerBatch, code: int, message: str | None) -> BaseException:
        where = f"{batch.tp[0]}-{batch.tp[1]}"
        if code == errors.TOPIC_AUTHORIZATION_FAILED:
            return errors.error_for_code(code, f"not authorized to write to topic {batch.tp[0]!r}"
                                         + (f": {message}" if message else ""))
        if code == errors.CLUSTER_AUTHORIZATION_FAILED:
            return errors.error_for_code(code, "the producer is not authorized to do idempotent sends")
        if code == errors.MESSAGE_TOO_LARGE:
            return errors.RecordTooLargeError(
                f"the broker rejected a single record to {where} as too large (MESSAGE_TOO_LARGE); "
                "raise the topic's max.message.bytes or send a smaller record")
        return errors.error_for_code(code, f"for {where}" + (f": {message}" if message else ""))

    def _can_retry(self, batch: ProducerBatch, code: int, log_start_offset: int, now: float) -> bool:
        if batch.attempts >= self.retries:
            return False
        if batch.has_reached_delivery_timeout(self.delivery_timeout_ms, now):
            return False
        if self.tm is not None and batch.has_sequence():
            return self.tm.can_retry(code, batch, log_start_offset)
        return errors.error_class_for_code(code).retriable

    def _answered(self, batch: ProducerBatch) -> None:
        """A batch's request is over, whatever its outcome: out of the in-flight list, and its partition
        unmuted when ``max.in.flight.requests.per.connection`` is 1 (Java's ``completeBatch`` unmutes on
        every outcome; a path that forgot it left the partition muted until its next batch expired)."""
        tp = batch.tp
        lst = self.in_flight_batches.get(tp)
        if lst is not None:
            remove_in_flight(lst, batch)
            if not lst:
                del self.in_flight_batches[tp]
        if self.guarantee_message_order:
            self.accumulator.unmute(tp)

    def _complete_ok(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        tm = self.tm
        if tm is not None and batch.base_sequence != NO_SEQUENCE:  # batch.has_sequence()
            tm.handle_completed_batch(batch, base_offset)
        if batch.succeed(base_offset, log_append_time):
            self.metrics.record_success(batch)
        self.accumulator.deallocate(batch)

    def _fail_batch(self, batch: ProducerBatch, exc: BaseException, adjust_sequences: bool,
                    record_errors: dict[int, BaseException] | None = None) -> None:
        if self.tm is not None:
            self.tm.handle_failed_batch(batch, exc, adjust_sequences)
        if batch.done(-1, -1, exc, record_errors):
            self.metrics.record_errors(batch.record_count)
        self.accumulator.deallocate(batch)

    # --------------------------------------------------------- idempotent producer id
    def _maybe_send_init_producer_id(self, now: float) -> None:
        tm = self.tm
        assert tm is not None
        if now < self._init_pid_retry_at:
            return
        node = self.client.least_loaded_node(now)
        if node is None:
            self.metadata.request_update()
            return
        if not self.client.ready(node, now):
            return
        body = tm.init_producer_id_request()

        def on_response(resp: ClientResponse) -> None:
            if not tm.handle_idempotent_init_response(resp.body, resp.error):
                # Java retries it after retry.backoff.ms every time (TxnRequestHandler.retryBackoffMs; no
                # exponential growth, no cap at retry.backoff.max.ms)
                self._init_pid_retry_at = self.clock.monotonic_ms() + self.retry_backoff_ms

        self.client.send(node, ApiKey.INIT_PRODUCER_ID, body, expect_response=True, callback=on_response)

    # --------------------------------------------------------- transactions
    def _maybe_send_and_poll_txn_request(self, now: float) -> bool:
        """Java ``maybeSendAndPollTransactionalRequest``: True if this loop is used up by a
        transactional request (in flight, sent now, or waiting for its node)."""
        tm = self.tm
        assert tm is not None
        if self._txn_request_in_flight is not None:
            self._expire(now)
            self.client.poll(self.retry_backoff_ms, now)
            return True
        if tm.has_abortable_error() or tm.is_aborting():
            if self.accumulator.has_incomplete():
                self.accumulator.abort_undrained_batches(
                    tm.last_error or errors.TransactionError("the transaction is being aborted"))
        req = tm.next_request(self.accumulator.has_incomplete())
        if req is None:
            return False
        if req.retry_at_ms < 0:
            backoff = self.retry_backoff_ms if req.retry_backoff_ms is None else req.retry_backoff_ms
            req.retry_at_ms = now + backoff
        if req.retry_at_ms > now:
            tm.requeue(req)
            self._expire(now)
            self.client.poll(min(req.retry_at_ms - now, self.retry_backoff_ms), now)
            return True
        node = self._txn_target(req, now)
        if node is None or not self.client.ready(node, now):
            refused = self.client.authentication_error(node) if node is not None else self.client.authentication_error()
            if refused is not None:
                # Java's Sender.runOnce: an AuthenticationException while awaiting the node fails every pending
                # transactional request and the producer, fatally (TransactionManager.authenticationFailed);
                # init_transactions() raised a timeout, again and again, while the login kept failing
                tm.requeue(req)
                tm.transition_to_fatal(refused)
                self.client.poll(self.retry_backoff_ms, now)
                return True
            self._await_txn_node(req, node, now)
            return True
        self._txn_node_wait = None
        try:
            version = None if req.max_version is None else self.client.api_version(node, req.api_key,
                                                                                   req.max_version)
        except errors.UnsupportedVersionError as exc:  # the coordinator shares no version of it
            tm.transition_to_fatal(exc)  # as the answer below would (was: in flight forever)
            return True
        self._txn_request_in_flight = req
        tm.in_flight_request = req

        def on_response(resp: ClientResponse) -> None:
            self._txn_request_in_flight = None
            tm.in_flight_request = None
            if isinstance(resp.error, errors.UnsupportedVersionError):
                tm.transition_to_fatal(resp.error)  # the broker is too old for transactions
                return
            if resp.error is not None:
                log.debug("%s failed: %r", req.name, resp.error)
            with tm.lock:
                req.handler(resp.body, resp.error)

        log.debug("sending %s to node %s", req.name, node)
        self.client.send(node, req.api_key, req.body, version=version, expect_response=True, callback=on_response)
        self.client.poll(self.retry_backoff_ms, now)
        return True

    def _txn_target(self, req: TxnRequest, now: float) -> int | None:
        tm = self.tm
        assert tm is not None
        if not req.needs_coordinator:
            return self.client.least_loaded_node(now)
        node, address = tm.coordinator_for(req)  # the transaction's, or a consumer group's (TxnOffsetCommit)
        if node is None:
            return None
        known = getattr(self.client, "nodes", None)
        if address is not None and callable(known):
            nodes = known()
            if node not in nodes:  # the coordinator is not in our metadata yet: dial it by address
                nodes[node] = address
                self.client.update_nodes(nodes)
        return node

    def _await_txn_node(self, req: TxnRequest, node: int | None, now: float) -> None:
        """The target node is not ready: wait for it, but not longer than request.timeout.ms, and not at all
        once a connection attempt to the coordinator failed, before looking for the coordinator again (Java
        ``awaitNodeReady``, whose ``NetworkClientUtils.awaitReady`` gives up when ``connectionFailed``, and
        ``maybeFindCoordinatorAndRetry``). A coordinator that died takes its partition of the transaction
        log with it: another broker leads that partition and is the coordinator now."""
        tm = self.tm
        assert tm is not None
        wait = self._txn_node_wait
        if wait is None or wait[0] is not req:
            wait = self._txn_node_wait = (req, now)
        if req.needs_coordinator and (tm.coordinator_for(req)[0] is None or now - wait[1] >= self.request_timeout_ms
                                      or (node is not None and self.client.connection_state(node) is DISCONNECTED)):
            self._txn_node_wait = None
            tm.lookup_coordinator(req)
            self.metadata.request_update()
        else:
            tm.requeue(req)
            if req.needs_coordinator is False:
                self.metadata.request_update()
        self._expire(now)
        self.client.poll(self.retry_backoff_ms, now)
