"""Sender: the producer's background I/O thread (seed 002, facts §6-§7).

How it works: ``run()`` loops over ``run_once()`` until close. One iteration:
1. idempotence/transactions: get a producer id (InitProducerId), bump the epoch when sequences are
   unresolved, send at most one transactional request (FindCoordinator / AddPartitionsToTxn / EndTxn);
2. ``accumulator.ready()`` -> nodes with sendable batches (full, linger expired, memory exhausted,
   flush, close, backoff over); topics with unknown leaders trigger a metadata refresh;
3. drop nodes the network client is not ready for (connecting, in-flight limit);
4. ``accumulator.drain()`` up to ``max.request.size`` per node; mute partitions when
   ``max.in.flight.requests.per.connection == 1``;
5. expire batches (queued or in flight) older than ``delivery.timeout.ms``;
6. one Produce request per node (the batches' wire bytes spliced into the request);
7. ``client.poll()`` for the time until something becomes ready; responses run ``_complete_batch``:
   success completes futures and callbacks in order; retriable errors re-enqueue with exponential
   backoff; MESSAGE_TOO_LARGE splits; invalid-metadata errors request a refresh; anything else fails the
   batch's records with a typed error.
Every time value comes from the injected clock, so tests can step ``run_once`` by hand.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any

from .. import errors
from .._clock import Clock
from .._types import TopicPartition
from ..protocol.messages import ApiKey
from ..protocol.produce import encode_produce_request
from .transaction_manager import TransactionManager, TxnRequest

if TYPE_CHECKING:
    from ..net.client import ClientResponse, NetworkClient
    from ..net.metadata import Metadata, MetadataUpdater
    from .accumulator import RecordAccumulator
    from .metrics import ProducerMetrics
    from .producer_batch import ProducerBatch

log = logging.getLogger("sparkafka.producer")

_PRODUCE_MAX_VERSION_BY_NAME = 12  # v13 addresses topics by id


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
        self.running = True
        self.force_close = False
        self.in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        self._init_pid_retry_at = 0.0
        self._txn_request_in_flight: TxnRequest | None = None
        self.thread: threading.Thread | None = None
        self.thread_ident: int | None = None
        self.fatal_error: BaseException | None = None

    # ------------------------------------------------------------------ thread
    def run(self) -> None:
        self.thread_ident = threading.get_ident()
        log.debug("sender thread started")
        while self.running:
            self._run_once_guarded()
        # graceful close: send what is buffered and wait for responses
        while not self.force_close and (
                self.accumulator.has_undrained() or self.client.in_flight_count() > 0
                or (self.tm is not None and self.tm.is_transactional and self.tm.has_pending_requests()
                    and not self.tm.has_fatal_error())):
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

    def _run_once_guarded(self) -> None:
        try:
            self.run_once()
        except Exception as exc:  # never let the I/O thread die silently
            log.exception("uncaught error in the producer I/O thread")
            self.fatal_error = exc
            self.clock_sleep_guard()

    def clock_sleep_guard(self) -> None:
        try:
            self.client.poll(self.retry_backoff_ms, self.clock.monotonic_ms())
        except Exception:
            pass

    def initiate_close(self) -> None:
        self.running = False
        self.accumulator.close()
        self.wakeup()

    def force(self) -> None:
        self.force_close = True
        self.running = False
        self.accumulator.close()
        self.wakeup()

    def wakeup(self) -> None:
        self.client.wakeup()

    # --------------------------------------------------------------- one loop
    def run_once(self) -> None:
        now = self.clock.monotonic_ms()
        tm = self.tm
        if tm is not None:
            if tm.has_fatal_error():
                err = tm.last_error or errors.TransactionError("fatal producer error")
                self.accumulator.abort_undrained_batches(err)
                self.client.poll(self.retry_backoff_ms, now)
                return
            if not tm.is_transactional:
                if tm.needs_producer_id() and now >= self._init_pid_retry_at:
                    if not self._send_init_producer_id(now):
                        self.client.poll(self.retry_backoff_ms, now)
                        return
            else:
                if tm.has_abortable_error() or tm.is_aborting():
                    self.accumulator.abort_undrained_batches(
                        tm.last_error or errors.TransactionError("the transaction is being aborted"))
                if tm.is_completing() and self.accumulator.has_incomplete() \
                        and not self.accumulator.flush_in_progress():
                    self.accumulator.begin_flush()
                if self._txn_request_in_flight is not None or self._maybe_send_txn_request(now):
                    self.client.poll(self.retry_backoff_ms, now)
                    return
            if not tm.has_producer_id():
                self.client.poll(self.retry_backoff_ms, now)
                return
        poll_timeout = self._send_producer_data(now)
        self.client.poll(poll_timeout, now)

    def _send_producer_data(self, now: float) -> float:
        cluster = self.metadata.fetch()
        result = self.accumulator.ready(cluster, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self.metadata.add_topic(topic, now)
            self.metadata.request_update()
        ready_nodes = set()
        not_ready_timeout = float("inf")
        for node in result.ready_nodes:
            if self.client.ready(node, now):
                ready_nodes.add(node)
                self.accumulator.update_node_latency_stats(node, now, True)
            else:
                not_ready_timeout = min(not_ready_timeout, self.client.connection_delay(node, now))
                self.accumulator.update_node_latency_stats(node, now, False)
        batches = self.accumulator.drain(cluster, ready_nodes, self.max_request_size, now)
        for node_batches in batches.values():
            for b in node_batches:
                self.in_flight_batches.setdefault(b.tp, []).append(b)
                if self.guarantee_message_order:
                    self.accumulator.mute(b.tp)
        self._expire(now)
        metadata_timeout = self.metadata_updater.maybe_update(now)
        poll_timeout = min(result.next_ready_check_delay_ms, not_ready_timeout, metadata_timeout)
        if any(batches.values()):
            poll_timeout = 0.0
        for node, node_batches in batches.items():
            if node_batches:
                self._send_produce_request(node, node_batches, now)
        return max(0.0, poll_timeout)

    def _expire(self, now: float) -> None:
        expired: list[ProducerBatch] = []
        for tp, lst in list(self.in_flight_batches.items()):
            while lst and lst[0].has_reached_delivery_timeout(self.delivery_timeout_ms, now):
                expired.append(lst.pop(0))
            if not lst:
                del self.in_flight_batches[tp]
        expired.extend(self.accumulator.expired_batches(now))
        for b in expired:
            if b.final_state is not None:
                continue
            msg = (f"Expiring {b.record_count} record(s) for {b.tp[0]}-{b.tp[1]}: "
                   f"{now - b.created_ms:.0f} ms has passed since batch creation "
                   f"(delivery.timeout.ms={self.delivery_timeout_ms})")
            if self.tm is not None and b.has_sequence() and getattr(b, "in_request", False):
                self.tm.mark_sequence_unresolved(b)
            self._fail_batch(b, errors.DeliveryTimeoutError(msg), adjust_sequences=False)

    # ----------------------------------------------------------- produce path
    def _send_produce_request(self, node: int, batches: list[ProducerBatch], now: float) -> None:
        try:
            version = min(self.client.api_version(node, ApiKey.PRODUCE), _PRODUCE_MAX_VERSION_BY_NAME)
        except errors.UnsupportedVersionError as exc:  # the broker is too old for RecordBatch v2
            for b in batches:
                self._fail_batch(b, exc, adjust_sequences=False)
            return
        by_topic: dict[str, list[tuple[int, Any]]] = {}
        by_tp: dict[TopicPartition, ProducerBatch] = {}
        for b in batches:
            by_topic.setdefault(b.tp[0], []).append((b.tp[1], b.records_bytes))
            by_tp[b.tp] = b
            b.in_request = True
        body = encode_produce_request(version, self.transactional_id, self.acks, self.request_timeout_ms,
                                      list(by_topic.items()))
        self.metrics.record_request(batches)

        def on_response(resp: ClientResponse) -> None:
            self._handle_produce_response(resp, by_tp)

        self.client.send(node, ApiKey.PRODUCE, body, version=version, expect_response=self.acks != 0,
                         callback=on_response)

    def _handle_produce_response(self, resp: ClientResponse, by_tp: dict[TopicPartition, ProducerBatch]) -> None:
        now = self.clock.monotonic_ms()
        for batch in by_tp.values():
            batch.in_request = False
        self.metrics.record_latency(resp.latency_ms)
        if resp.error is not None:
            exc = resp.error
            code = exc.code if isinstance(exc, errors.BrokerError) else errors.NETWORK_EXCEPTION
            if isinstance(exc, errors.UnsupportedVersionError):
                for b in by_tp.values():
                    self._fail_batch(b, exc, adjust_sequences=False)
                return
            log.debug("produce request to node %s failed: %r", resp.node_id, exc)
            for b in by_tp.values():
                self._complete_batch(b, code, -1, -1, -1, None, str(exc), now)
            return
        if resp.body is None:  # acks=0
            for b in by_tp.values():
                self._complete_batch(b, 0, -1, -1, -1, None, None, now)
            return
        seen: set[TopicPartition] = set()
        for topic_resp in resp.body.get("responses", ()):
            name = str(topic_resp.get("name"))
            for p in topic_resp.get("partition_responses", ()):
                tp = (name, int(p["index"]))
                found = by_tp.get(tp)
                if found is None:
                    continue
                seen.add(tp)
                b = found
                self._complete_batch(
                    b, int(p.get("error_code", 0)), int(p.get("base_offset", -1)),
                    int(p.get("log_append_time_ms", -1)), int(p.get("log_start_offset", -1)),
                    p.get("record_errors") or None, p.get("error_message"), now)
        for tp, b in by_tp.items():
            if tp not in seen:
                self._complete_batch(b, errors.NETWORK_EXCEPTION, -1, -1, -1, None,
                                     "the broker's response did not mention this partition", now)

    def _complete_batch(self, batch: ProducerBatch, code: int, base_offset: int, log_append_time: int,
                        log_start_offset: int, record_errors: list[dict[str, Any]] | None,
                        error_message: str | None, now: float) -> None:
        tm = self.tm
        if code == errors.MESSAGE_TOO_LARGE and batch.record_count > 1 and batch.final_state is None:
            log.warning("MESSAGE_TOO_LARGE for %d records to %s-%d: splitting the batch",
                        batch.record_count, batch.tp[0], batch.tp[1])
            self._remove_in_flight(batch)
            if tm is not None:
                tm._remove_in_flight(batch)  # the split batches keep the sequence range
            self.accumulator.split_and_reenqueue(batch)
            self.accumulator.deallocate(batch)
            self.metrics.record_split()
        elif code != 0:
            exc_cls = errors.error_class_for_code(code)
            if self._can_retry(batch, code, log_start_offset, now):
                log.debug("retrying batch %s-%d (attempt %d) after %s", batch.tp[0], batch.tp[1],
                          batch.attempts + 1, exc_cls.name)
                self._remove_in_flight(batch)
                self.accumulator.reenqueue(batch, now)
                self.metrics.record_retry(batch.record_count)
            elif code == errors.DUPLICATE_SEQUENCE_NUMBER:
                self._complete_ok(batch, -1, -1)
            else:
                exc = self._exception_for(batch, code, error_message)
                per_record: dict[int, BaseException] | None = None
                if record_errors:
                    per_record = {}
                    for re_ in record_errors:
                        idx = int(re_.get("batch_index", -1))
                        msg = re_.get("batch_index_error_message") or error_message
                        per_record[idx] = errors.error_for_code(code, msg)
                self._fail_batch(batch, exc, adjust_sequences=batch.attempts < self.retries,
                                 record_errors=per_record)
            if exc_cls.invalid_metadata:
                self.metadata.request_update()
        else:
            self._complete_ok(batch, base_offset, log_append_time)
        if self.guarantee_message_order:
            self.accumulator.unmute(batch.tp)

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
        if batch.final_state is not None or batch.attempts >= self.retries:
            return False
        if batch.has_reached_delivery_timeout(self.delivery_timeout_ms, now):
            return False
        if self.tm is not None and batch.has_sequence():
            return self.tm.can_retry(code, batch, log_start_offset)
        return errors.error_class_for_code(code).retriable

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        lst = self.in_flight_batches.get(batch.tp)
        if lst is not None:
            try:
                lst.remove(batch)
            except ValueError:
                pass
            if not lst:
                del self.in_flight_batches[batch.tp]

    def _complete_ok(self, batch: ProducerBatch, base_offset: int, log_append_time: int) -> None:
        self._remove_in_flight(batch)
        if self.tm is not None and batch.has_sequence():
            self.tm.handle_completed_batch(batch, base_offset)
        if batch.done(base_offset, log_append_time, None):
            self.metrics.record_success(batch)
        self.accumulator.deallocate(batch)

    def _fail_batch(self, batch: ProducerBatch, exc: BaseException, adjust_sequences: bool,
                    record_errors: dict[int, BaseException] | None = None) -> None:
        self._remove_in_flight(batch)
        if self.tm is not None:
            self.tm.handle_failed_batch(batch, exc, adjust_sequences)
        if batch.done(-1, -1, exc, record_errors):
            self.metrics.record_errors(batch.record_count)
        self.accumulator.deallocate(batch)

    # --------------------------------------------------------- idempotence/txn
    def _send_init_producer_id(self, now: float) -> bool:
        assert self.tm is not None
        node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            self.metadata.request_update()
            return False
        body = self.tm.init_producer_id_request()
        tm = self.tm

        def on_response(resp: ClientResponse) -> None:
            tm.handle_idempotent_init_response(resp.body, resp.error)
            if resp.error is not None or (resp.body or {}).get("error_code", 0):
                self._init_pid_retry_at = self.clock.monotonic_ms() + self.retry_backoff_ms
                if resp.error is not None:
                    log.debug("InitProducerId failed: %r", resp.error)

        self.client.send(node, ApiKey.INIT_PRODUCER_ID, body, expect_response=True, callback=on_response)
        return True

    def _maybe_send_txn_request(self, now: float) -> bool:
        tm = self.tm
        assert tm is not None
        req = tm.next_request(self.accumulator.has_incomplete())
        if req is None:
            return False
        if req.retry_at_ms < 0:
            req.retry_at_ms = now + self.retry_backoff_ms
        if req.retry_at_ms > now:
            tm.requeue(req)
            return True
        if req.needs_coordinator:
            node = tm.coordinator
        else:
            node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            if req.needs_coordinator and node is not None and self.metadata.fetch().node(node) is None:
                self.metadata.request_update()
            tm.requeue(req)
            return True
        self._txn_request_in_flight = req
        tm.in_flight_request = req

        def on_response(resp: ClientResponse) -> None:
            self._txn_request_in_flight = None
            tm.in_flight_request = None
            with tm.lock:
                req.handler(resp.body, resp.error)

        self.client.send(node, req.api_key, req.body, expect_response=True, callback=on_response)
        return True
