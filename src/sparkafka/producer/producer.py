"""KafkaProducer: the public producer (Java ``KafkaProducer``).

How it works: ``send()`` runs in the caller's thread and only does cheap work: serialize key and
value, look up the topic in the current metadata snapshot (waiting up to ``max.block.ms`` only the
first time a topic is seen), choose the partition (explicit, custom partitioner, murmur2 of the key,
or -1 = "let the accumulator's sticky partitioner choose"), and append to the RecordAccumulator, which
returns a future. The Sender thread (``sender.py``) owns all network I/O. ``flush()`` marks every
batch sendable and waits for the batches that existed when it was called; ``close()`` stops accepting
sends, lets the Sender drain what is buffered, and forces the rest to fail at its timeout.
"""

from __future__ import annotations

import contextlib
import logging
import operator
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, SupportsIndex

from .. import errors
from .._clock import SYSTEM_CLOCK, Clock, timeout_seconds, wait_seconds
from .._topic import validate_topic_name
from .._types import ClusterView, TopicPartition
from ..accel import ACCEL
from ..config import INT32_MAX, ProducerConfig
from ..net.addresses import canonical_bootstrap_servers
from ..net.client import NetworkClient
from ..net.metadata import Metadata, MetadataUpdater
from ..record.builder import estimate_batch_size_upper_bound
from ..record.compression import CompressionType, require_codec
from ..serializers import BUILTIN_SERIALIZERS, serialize
from .accumulator import RecordAccumulator
from .future import FailedFuture, FutureRecordMetadata, RecordFuture, RecordMetadata
from .group_metadata import group_metadata_of, offsets_of
from .interceptors import ProducerInterceptors, ProducerRecord, resolve_interceptors
from .metrics import ProducerMetrics
from .murmur2 import partition_for_key_fast
from .partitioner import Partitioner, resolve_partitioner
from .send_lane import install_send_lane
from .sender import Sender
from .transactions import TransactionInfo, TransactionManager

if TYPE_CHECKING:
    import pyarrow

    from .arrow.bulk import BulkAppend
    from .arrow.report import ArrowSendResult

log = logging.getLogger("sparkafka.producer")

HeaderValue = bytes | bytearray | memoryview | str | None
Headers = Sequence[tuple[str, HeaderValue]] | Mapping[str, HeaderValue]
"""Record headers: ``(key, value)`` pairs, or a dict (one header per key)."""

_API_ERRORS = (errors.KafkaTimeoutError, errors.RecordTooLargeError, errors.BrokerError, errors.AuthenticationError)
"""What ``send()`` returns in a failed future instead of raising, as Java's ``ApiException`` (see ``send``):
a metadata or memory wait past ``max.block.ms``, a record too large, a broker's error for the topic
(not authorized, ...), an authentication failure; invalid topic names and a fenced producer too."""

_live_producers: weakref.WeakSet[KafkaProducer] = weakref.WeakSet()
_FORCED_CLOSE_GRACE_S = 2.0
"""How long close() waits for the I/O thread after forcing it to stop (it fails what is left, then exits)."""
_time_ns = time.time_ns  # SystemClock.wall_ms inlined (see __init__)
_HAND_OVER_GIL: Callable[[], None] | None = getattr(ACCEL, "hand_over_gil", None)
"""Gives the GIL to a Sender back from its socket wait (``_c/_sender_io.c``); None without the accelerator."""


def _after_fork_in_child() -> None:
    """Every producer of the parent is closed in the child (its I/O thread did not survive the fork): sends
    raise ProducerClosedError, and the child's copies of its sockets are closed at once (no I/O: the parent
    still uses them), so that they do not outlive the parent's close()."""
    for p in list(_live_producers):
        p._forked_from = p._owner_pid
        p._set_closing()
        try:
            p._client.release_after_fork()
        except Exception:  # never fail the fork
            log.exception("releasing a producer's connections in a forked child failed")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class KafkaProducer:
    """A thread-safe Kafka producer. Create one per process and share it across threads.

    ``KafkaProducer({"bootstrap.servers": "host:9092", "linger.ms": 5})`` or
    ``KafkaProducer(bootstrap_servers="host:9092", linger_ms=5)``.
    """

    def __init__(self, config: Mapping[str, Any] | ProducerConfig | None = None, *,
                 clock: Clock | None = None, **kwargs: Any) -> None:
        if isinstance(config, ProducerConfig):
            cfg = config
        else:
            cfg = ProducerConfig.from_mapping(config, **kwargs)
        self.config = cfg
        self._clock = clock or SYSTEM_CLOCK
        # Record timestamps come from the clock's wall_ms. The system clock's is inlined in send() (what
        # SystemClock.wall_ms computes; the method call would add ~570 instructions per record), as in the
        # C send lane, which serves only the system clock.
        self._wall_ms: Callable[[], int] | None = None if self._clock is SYSTEM_CLOCK else self._clock.wall_ms
        self._owner_pid = os.getpid()
        self._forked_from: int | None = None
        self._closing = False
        self._send_lane: Any = None
        self._closed = False
        self._close_lock = threading.Lock()

        compression = CompressionType.from_name(cfg.compression_type)
        require_codec(compression)  # a missing codec library fails here, naming the package
        raw = BUILTIN_SERIALIZERS["bytes"]
        self._key_ser = None if cfg.key_serializer is raw else cfg.key_serializer
        self._value_ser = None if cfg.value_serializer is raw else cfg.value_serializer
        self._partitioner: Partitioner | None = resolve_partitioner(cfg.partitioner_class, _partitioner_configs(cfg))
        self._interceptors: ProducerInterceptors | None = None
        try:
            self._interceptors = resolve_interceptors(cfg.interceptor_classes, _partitioner_configs(cfg))
            self._build(cfg, compression)
        except BaseException:
            self._abandon_construction()
            raise

    def _abandon_construction(self) -> None:
        """A step of the constructor failed (a TLS file that does not exist, an interceptor's configure()):
        close what was made already, the user's partitioner and interceptors included (Java's constructor
        closes the producer it was building, ``close(Duration.ZERO, true)``)."""
        sender: Sender | None = getattr(self, "_sender", None)
        thread: threading.Thread | None = getattr(self, "_io_thread", None)
        if sender is not None and thread is not None and thread.is_alive():
            sender.force()
            thread.join(_FORCED_CLOSE_GRACE_S)
        client: NetworkClient | None = getattr(self, "_client", None)
        if client is not None:
            client.close()
        self._close_partitioner()

    def _build(self, cfg: ProducerConfig, compression: CompressionType) -> None:
        """The constructor past the user's partitioner and interceptors (``__init__`` closes them if this fails)."""
        self._ignore_keys = bool(cfg.partitioner_ignore_keys)
        self._max_block_ms = int(cfg.max_block_ms)
        self._max_request_size = int(cfg.max_request_size)
        self._buffer_memory = int(cfg.buffer_memory)
        self._record_limit = min(self._max_request_size, self._buffer_memory)
        self._valid_topics: set[str] = set()

        self.metrics_registry = ProducerMetrics(self._clock)
        bootstrap: Sequence[str] = cfg.bootstrap_servers
        if cfg.client_dns_lookup == "resolve_canonical_bootstrap_servers_only":
            bootstrap = canonical_bootstrap_servers(bootstrap)
        self._metadata = Metadata(
            bootstrap_servers=bootstrap,
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            recovery_strategy=cfg.metadata_recovery_strategy,
            rebootstrap_trigger_ms=cfg.metadata_recovery_rebootstrap_trigger_ms,
            clock=self._clock,
        )
        self._client = NetworkClient(
            bootstrap,
            client_id=cfg.client_id,
            request_timeout_ms=cfg.request_timeout_ms,
            reconnect_backoff_ms=cfg.reconnect_backoff_ms,
            reconnect_backoff_max_ms=cfg.reconnect_backoff_max_ms,
            socket_connection_setup_timeout_ms=cfg.socket_connection_setup_timeout_ms,
            socket_connection_setup_timeout_max_ms=cfg.socket_connection_setup_timeout_max_ms,
            max_in_flight_per_connection=cfg.max_in_flight_requests_per_connection,
            send_buffer_bytes=cfg.send_buffer_bytes,
            receive_buffer_bytes=cfg.receive_buffer_bytes,
            connections_max_idle_ms=cfg.connections_max_idle_ms,
            clock=self._clock,
            security=cfg,
        )
        self._tm: TransactionManager | None = None
        if cfg.enable_idempotence:
            self._tm = TransactionManager(cfg.transactional_id, cfg.transaction_timeout_ms,
                                          cfg.retry_backoff_ms)
            self._tm.finalized_features = self._client.finalized_features
        self._accumulator = RecordAccumulator(
            batch_size=max(1, int(cfg.batch_size)),
            buffer_memory=self._buffer_memory,
            compression=compression,
            compression_level=cfg.compression_level(),
            linger_ms=cfg.linger_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            partitioner_ignore_keys=self._ignore_keys,
            adaptive_partitioning=cfg.partitioner_adaptive_partitioning_enable,
            availability_timeout_ms=cfg.partitioner_availability_timeout_ms,
            partitioner=self._partitioner,
            clock=self._clock,
            transaction_manager=self._tm,
        )
        self.metrics_registry.gauges.update({
            "buffer-total-bytes": lambda: float(self._buffer_memory),
            "buffer-available-bytes": lambda: float(self._accumulator.free.available_memory()),
            "waiting-threads": lambda: float(self._accumulator.free.queued()),
            "bufferpool-wait-ratio": lambda: float(self._accumulator.free.wait_ratio()),
            "requests-in-flight": lambda: float(self._client.in_flight_count()),
            "connection-count": lambda: float(self._client.connection_count()),
            "metadata-age": lambda: self._metadata.age_ms(self._clock.monotonic_ms()) / 1000.0,
        })
        self.metrics_registry.buffer_exhausted = lambda: self._accumulator.pool.exhausted_count
        self.metrics_registry.network = self._client.stats  # requests of every API and bytes, as Java's Selector
        updater = MetadataUpdater(self._metadata, self._client, clock=self._clock)
        self._sender = Sender(
            client=self._client, metadata=self._metadata, metadata_updater=updater,
            accumulator=self._accumulator, transaction_manager=self._tm, clock=self._clock,
            metrics=self.metrics_registry, acks=int(cfg.acks), retries=int(cfg.retries),
            max_request_size=self._max_request_size, request_timeout_ms=int(cfg.request_timeout_ms),
            delivery_timeout_ms=int(cfg.delivery_timeout_ms), retry_backoff_ms=int(cfg.retry_backoff_ms),
            guarantee_message_order=int(cfg.max_in_flight_requests_per_connection) == 1,
            transactional_id=cfg.transactional_id,
        )
        self._io_thread = threading.Thread(
            target=self._sender.run, name=f"kafka-producer-network-thread | {cfg.client_id}", daemon=True)
        self._io_thread.start()
        # producer.send is the C send lane when the accelerator is built (producer/send_lane.py); the lane
        # stamps records with the system's wall clock itself, so an injected clock keeps the Python path, and
        # so do interceptors (each record goes through their on_send)
        self._send_lane = (install_send_lane(self, KafkaProducer.send)
                           if self._clock is SYSTEM_CLOCK and self._interceptors is None else None)
        _live_producers.add(self)

    def _set_closing(self) -> None:
        """Refuse new records from now on (every send takes the Python path, which raises)."""
        self._closing = True
        if self._send_lane is not None:
            self._send_lane.disable()

    # ------------------------------------------------------------------ send
    def send(self, topic: str, value: Any = None, key: Any = None, partition: int | None = None,
             timestamp: int | None = None,
             headers: Headers | None = None, callback: Any = None) -> RecordFuture:
        """Append a record and return its future (Java ``KafkaProducer.send``).

        As in Java, an error the broker or the producer's limits give the record (Java's
        ``ApiException``: metadata or memory not available within ``max.block.ms``, a record over
        ``max.request.size`` / ``buffer.memory``, an invalid topic name, a topic not authorized, a
        fenced producer) does not raise: the callback gets it at once, in this thread, and the
        returned future holds it (``FailedFuture``). What Java's ``send()`` throws raises: bad
        arguments, a serializer's failure, a closed producer, a send outside a transaction or after
        the producer's fatal or abortable error. Both count in ``record-error-total``.

        With ``interceptor.classes``, their ``on_send`` may change the record first, and their
        ``on_acknowledgement`` sees every result (``producer/interceptors.py``)."""
        if self._interceptors is not None:
            return self._send_intercepted(self._interceptors, ProducerRecord(topic, value, key, partition,
                                                                             timestamp, headers), callback)
        if _HAND_OVER_GIL is not None:  # a Sender back from its socket wait runs first (_c/_sender_io.c)
            _HAND_OVER_GIL()
        try:
            return self._do_send(topic, value, key, partition, timestamp, headers, callback)
        except errors.KafkaError as exc:
            if not self._returned_by_send(exc, topic):
                self.metrics_registry.record_send_errors(1)
                raise
            return self._failed_send(exc, topic, partition, callback)

    def _append_from_lane(self, topic: str, partition: int, timestamp: int, key: bytes | None,
                          value: bytes | None, callback: Any) -> RecordFuture:
        """The rest of ``send`` for a record the C send lane checked but could not append to its
        partition's open batch (it opens or fills a batch, a partition switch, a held lock): the lane
        already did what ``_do_send`` does before the append (types, sizes, metadata known, the murmur2
        partition, or -1 for the sticky partitioner; the timestamp), so this starts at
        ``RecordAccumulator.append``. Anything out of the ordinary (closing, a fatal error since the
        lane looked) takes the whole Python ``send``; a transactional producer's lane hands its records to
        ``send`` itself (``install_send_lane``). The lane's calls into Python cost a
        keyed record 1,107 instructions on average before, 945 after (callgrind, Apache Kafka, 6
        partitions: about 22k less per 16 KB batch)."""
        tm = self._tm
        if self._closing or (tm is not None and tm.last_error is not None):
            return KafkaProducer.send(self, topic, value, key, callback=callback)
        try:
            result = self._accumulator.append(topic, partition, timestamp, key, value, None, callback,
                                              self._max_block_ms, self._clock.monotonic_ms(),
                                              self._metadata._cluster)
        except errors.KafkaError as exc:
            if not self._returned_by_send(exc, topic):
                self.metrics_registry.record_send_errors(1)
                raise
            return self._failed_send(exc, topic, None, callback)
        if result.batch_is_full or result.new_batch_created:
            self._client.wakeup()
        future = result.future
        assert future is not None
        return future

    def _send_intercepted(self, chain: ProducerInterceptors, record: ProducerRecord, callback: Any) -> RecordFuture:
        """``send`` with interceptors (Java ``send`` + ``doSend``): ``on_send`` first; every outcome reaches
        ``on_acknowledgement``, also an error ``send()`` raises (Java's ``onSendError``)."""
        record = chain.on_send(record)
        topic, value, key, partition, timestamp, headers = record
        if callback is not None and not callable(callback):
            raise errors.InvalidRecordInputError(
                f"callback must be a callable (metadata, exception) or None, got {type(callback).__name__}")
        try:
            return self._do_send(topic, value, key, partition, timestamp, headers,
                                 chain.acknowledgement_callback(callback, headers))
        except errors.KafkaError as exc:
            if not self._returned_by_send(exc, topic):
                self.metrics_registry.record_send_errors(1)
                chain.on_send_error(record, partition, exc)
                raise
            failed = self._failed_send(exc, topic, partition, callback)
            chain.on_send_error(record, _failed_partition(exc, partition), failed.error)
            return failed
        except Exception as exc:
            chain.on_send_error(record, partition, exc)
            raise

    def _returned_by_send(self, exc: errors.KafkaError, topic: object) -> bool:
        """Whether Java's ``send()`` returns ``exc`` in a failed future (an ``ApiException``) instead of
        throwing it."""
        if isinstance(exc, errors.ProducerFencedError):
            return True  # Java's maybeFailWithError throws a new ProducerFencedException: an ApiException
        tm = self._tm
        if tm is not None and exc is tm.last_error:
            return False  # the producer's fatal state (Java: a KafkaException wrapping it)
        if isinstance(exc, errors.InvalidTopicNameError):
            return isinstance(topic, str)  # not a str: Java's ProducerRecord refuses it before send()
        return isinstance(exc, _API_ERRORS)

    def _failed_send(self, exc: errors.KafkaError, topic: str, partition: int | None,
                     callback: Any) -> FailedFuture:
        """Java ``doSend``'s ``catch (ApiException e)``: the callback gets the error with metadata that
        has the topic and partition (``_failed_partition``) and -1 elsewhere, the error is counted, a
        transaction becomes abortable (or the producer fatal, for the errors that make it so)."""
        exc = exc.with_traceback(None)
        log.debug("send() to topic %r failed: %r", topic, exc)
        if callback is not None and callable(callback):
            tp = _failed_partition(exc, partition)
            try:
                callback(RecordMetadata(topic, tp, -1, -1, -1, -1), exc)
            except Exception:
                log.exception("Error executing user-provided callback on message for topic-partition %s-%d",
                              topic, tp)
        self.metrics_registry.record_send_errors(1)
        if self._tm is not None:
            self._tm.maybe_transition_to_error_state(exc)
        return FailedFuture(exc)

    def _do_send(self, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None,
                 headers: Headers | None, callback: Any) -> FutureRecordMetadata:
        """Java ``doSend``: append the record and return its future; raises every error (``send`` sorts
        them)."""
        if self._closing:
            raise self._closed_error()
        if callback is not None and not callable(callback):
            raise errors.InvalidRecordInputError(
                f"callback must be a callable (metadata, exception) or None, got {type(callback).__name__}")
        key_obj, value_obj = key, value  # the record's own objects, for a custom partitioner (as in Java)
        ks = self._key_ser
        if ks is not None:
            key = serialize(ks, topic, "key", key)
        elif key is not None and type(key) is not bytes:
            key = _as_bytes(key, topic, "key")
        vs = self._value_ser
        if vs is not None:
            value = serialize(vs, topic, "value", value)
        elif value is not None and type(value) is not bytes:
            value = _as_bytes(value, topic, "value")
        if headers is not None:
            headers = _check_headers(headers)
        key_size = -1 if key is None else len(key)
        value_size = -1 if value is None else len(value)
        if key_size + value_size + 258 >= self._record_limit or headers:  # 258: 256 + the two -1s
            self._check_record_size(topic, key, value, headers)
        if timestamp is not None and (type(timestamp) is not int or not 0 <= timestamp <= 0x7FFFFFFFFFFFFFFF):
            raise errors.InvalidRecordInputError(
                f"timestamp must be an int of milliseconds from 0 to 2**63-1 (a Java long), got {timestamp!r}")
        # Metadata.fetch() and Cluster.partition_count() read, as two plain attribute reads (two Python
        # calls less per record; tests/producer/test_send_path.py pins the equivalence)
        if partition is not None and type(partition) is not int:
            partition = _partition_index(partition, "partition")
        snapshot = self._metadata._cluster
        n = snapshot._counts.get(topic)
        cluster: ClusterView = snapshot
        waited_ms = 0.0
        if n is None or (partition is not None and partition >= n):
            if partition is not None and partition > INT32_MAX:  # no topic has it: no point waiting
                raise errors.InvalidRecordInputError(
                    f"partition {partition} is above {INT32_MAX}, the largest partition number (an int32)")
            started = self._clock.monotonic_ms()
            cluster, n = self._wait_on_metadata(topic, partition)
            waited_ms = self._clock.monotonic_ms() - started
        if partition is None:
            if self._partitioner is not None:
                partition = self._partitioner.partition(topic, key_obj, key, value_obj, value, cluster)
                if type(partition) is not int:  # a float would become the partition queue's key
                    partition = _partition_index(partition, "the partitioner's partition")
                if not 0 <= partition < n:
                    raise errors.InvalidRecordInputError(
                        f"the partitioner returned partition {partition} for topic {topic!r}, "
                        f"which has {n} partitions")
            elif key is not None and not self._ignore_keys:
                partition = partition_for_key_fast(key, n)  # (murmur2(key) & 0x7FFFFFFF) % n, n >= 1
            else:
                partition = -1
        elif partition < 0 or partition >= n:
            raise errors.InvalidRecordInputError(
                f"partition {partition!r} is out of range for topic {topic!r}: it has {n} partitions "
                f"(0..{n - 1})")
        if timestamp is None:
            wall_ms = self._wall_ms
            timestamp = _time_ns() // 1_000_000 if wall_ms is None else wall_ms()
        tm = self._tm
        transactional = tm is not None and tm.transactional_id is not None
        if tm is not None and (transactional or tm.last_error is not None):
            tm.check_send_allowed()
        if headers is None:
            # Fast path: the record leaves its partition's open batch still open, so no wake-up is needed and
            # the monotonic clock is not read. In a transaction too: its partition is added after the append,
            # as below (Java's doSend), and the drain holds a batch back until it is (take_for_drain); the
            # general path cost a transactional record ~26,000 instructions (callgrind, keyed records).
            fast = self._accumulator.append_open(topic, partition, timestamp, key, value, callback, cluster,
                                                 key_size, value_size)
            if fast is not None:
                if transactional:
                    assert tm is not None
                    tp = (topic, fast._produce_result.partition)
                    if not tm.maybe_add_partition(tp):
                        self._refuse_outside_transaction(tm, tp)
                return fast
        # max.block.ms bounds the metadata wait and the memory wait together (as in Java)
        block_ms = max(0, int(self._max_block_ms - waited_ms)) if waited_ms else self._max_block_ms
        result = self._accumulator.append(topic, partition, timestamp, key, value, headers, callback,
                                          block_ms, self._clock.monotonic_ms(), cluster)
        if transactional:
            assert tm is not None
            if not tm.maybe_add_partition((topic, result.partition)):
                self._refuse_outside_transaction(tm, (topic, result.partition))
        if result.batch_is_full or result.new_batch_created:
            self._client.wakeup()
        future = result.future
        assert future is not None
        return future

    def _refuse_outside_transaction(self, tm: TransactionManager, tp: TopicPartition) -> None:
        """A transactional record was appended for ``tp`` while another thread began ``commit_transaction()``
        or ``abort_transaction()`` (after this ``send()`` checked the state): ``tp`` cannot join the
        transaction any more, so its batches would never be drained (and a commit would wait for them until
        delivery.timeout.ms, then fail; a later transaction might take them in). They fail now, each record's
        future and callback with IllegalStateError (Java's send() throws it there and leaves the record to
        expire)."""
        self._accumulator.abort_unsent_of(tp, errors.IllegalStateError(
            f"a record for {tp[0]}-{tp[1]} was sent while the transaction was being completed "
            f"({tm.state.name}): its partition could not join the transaction, so it was not sent; send "
            f"inside a transaction only, not while another thread commits or aborts it"))

    def send_arrow(self, topic: str | None, batch: pyarrow.RecordBatch, **columns: Any) -> ArrowSendResult:
        """Send every row of an Arrow record batch (columns ``value``, ``key``, ``topic``,
        ``partition``, ``headers``, as in Spark's Kafka sink) through the bulk path, with the same
        guarantees as ``send()``; returns one completion handle for all rows. See ``sparkafka.producer.arrow``."""
        from .arrow.send import send_arrow

        return send_arrow(self, topic, batch, **columns)

    @property
    def record_limit(self) -> int:
        """The largest record (as a one-record batch) ``send()`` accepts: ``min(max.request.size,
        buffer.memory)``."""
        return self._record_limit

    def send_columns(self, topic: str, values: pyarrow.Array, keys: pyarrow.Array | None = None,
                     headers: pyarrow.Array | None = None, partitions: pyarrow.Array | None = None) -> BulkAppend:
        """The bulk path for one topic (``producer/arrow/bulk.py``): Arrow arrays of values, keys,
        headers (``list<struct<key, value>>``) and partitions (nulls: the partitioner chooses) of equal
        length, already checked (``producer/arrow/send.py`` does that). Raises like ``send()`` before
        anything is appended; an error after some rows were appended is returned in the result. Either
        way rows that ``send()`` would have failed in their futures (an ``ApiException`` in Java's
        ``doSend``: no metadata or no memory within max.block.ms, say) make a transaction abortable, as
        ``send()`` does: it lacks those rows, so it must not commit."""
        try:
            appended = self._send_columns(topic, values, keys, headers, partitions)
        except errors.KafkaError as exc:
            self._rows_failed(exc, topic)
            raise
        if appended.error is not None:
            self._rows_failed(appended.error, topic)
        return appended

    def _rows_failed(self, exc: BaseException, topic: str) -> None:
        tm = self._tm
        if tm is not None and isinstance(exc, errors.KafkaError) and self._returned_by_send(exc, topic):
            tm.maybe_transition_to_error_state(exc)

    def _send_columns(self, topic: str, values: pyarrow.Array, keys: pyarrow.Array | None,
                      headers: pyarrow.Array | None, partitions: pyarrow.Array | None) -> BulkAppend:
        from .arrow.bulk import append_arrow

        if self._closing:
            raise self._closed_error()
        if self._interceptors is not None:
            raise errors.IllegalStateError(
                "send_arrow() sends whole Arrow batches without a Python record per row, so interceptor.classes "
                "cannot see them: use send() per record with interceptors, or a producer without them")
        tm = self._tm
        add: Callable[[int], None] | None = None
        if tm is not None and (tm.transactional_id is not None or tm.last_error is not None):
            tm.check_send_allowed()
            if tm.transactional_id is not None:
                def add(partition: int) -> None:
                    if not tm.maybe_add_partition((topic, partition)):
                        self._refuse_outside_transaction(tm, (topic, partition))
        # max.block.ms bounds the whole call: the metadata wait and every wait for memory together
        deadline_ms = self._clock.monotonic_ms() + self._max_block_ms
        cluster: ClusterView = self._metadata.fetch()
        n = cluster.partition_count(topic)
        if n is None:
            cluster, n = self._wait_on_metadata(topic, None)
        return append_arrow(
            self._accumulator, topic, n, keys, values, headers, partitions,
            timestamp=self._clock.wall_ms(), deadline_ms=deadline_ms, record_limit=self._record_limit,
            custom=self._partitioner, ignore_keys=self._ignore_keys, cluster=cluster, wakeup=self._client.wakeup,
            partition_added=add)

    def _check_record_size(self, topic: str, key: bytes | None, value: bytes | None,
                           headers: Sequence[tuple[str, bytes | None]] | None) -> None:
        size = estimate_batch_size_upper_bound(key, value, headers)
        if size > self._max_request_size:
            raise errors.RecordTooLargeError(
                f"the record to topic {topic!r} is {size} bytes when serialized, which is larger than "
                f"max.request.size ({self._max_request_size})")
        if size > self._buffer_memory:
            raise errors.RecordTooLargeError(
                f"the record to topic {topic!r} is {size} bytes when serialized, which is larger than "
                f"buffer.memory ({self._buffer_memory})")

    def _wait_on_metadata(self, topic: str, partition: int | None) -> tuple[ClusterView, int]:
        if topic not in self._valid_topics:
            validate_topic_name(topic)
            self._valid_topics.add(topic)
        if partition is not None and (type(partition) is not int or partition < 0):
            raise errors.InvalidRecordInputError(
                f"partition must be a non-negative int or None, got {partition!r}")
        self._metadata.add_topic(topic, self._clock.monotonic_ms())
        self._metadata.request_update()
        self._client.wakeup()
        cluster = self._metadata.wait_for_topic(topic, partition, self._max_block_ms,
                                                wakeup=self._client.wakeup)
        n = cluster.partition_count(topic)
        assert n is not None
        return cluster, n

    def _closed_error(self) -> errors.KafkaError:
        if self._forked_from is not None and os.getpid() != self._forked_from:
            return errors.ProducerClosedError(
                f"this KafkaProducer was created in process {self._forked_from} and cannot be used in "
                f"the forked child process {os.getpid()}: its I/O thread does not exist here. "
                "Create a new KafkaProducer in the child.")
        return errors.ProducerClosedError("cannot send: the producer is closed")

    # ------------------------------------------------------ flush and close
    def flush(self, timeout: float | None = None) -> None:
        """Block until every record sent before this call is complete (acknowledged or failed).

        Raises KafkaTimeoutError if that takes longer than ``timeout`` seconds."""
        timeout = timeout_seconds(timeout, "flush()")
        if self._closed:
            return
        if self._forked_from is not None:
            raise self._closed_error()
        if threading.get_ident() == self._sender.thread_ident:
            raise errors.IllegalStateError("flush() cannot be called from a producer callback")
        self._accumulator.begin_flush()
        self._client.wakeup()
        if not self._accumulator.await_flush_completion(timeout):
            raise errors.KafkaTimeoutError(
                f"flush() timed out after {timeout}s with records still not acknowledged")
        err = self._tm.last_error if self._tm is not None and self._tm.has_fatal_error() else None
        if err is not None and isinstance(err, errors.AuthenticationError):
            raise err

    def close(self, timeout: float | None = None) -> None:
        """Send what is buffered and stop the I/O thread, waiting at most ``timeout`` seconds
        (None = until done). Records still pending at the timeout fail with ProducerClosedError.
        Called from a callback, it closes at once without waiting; called again from another thread, it
        waits (up to ``timeout``) for the I/O thread to end, as Java's. An open transaction is aborted, as
        Java's Sender does, unless ``timeout`` is 0 (a forced close): then it stays open for another
        process to end by its handle (``producer.txn_commit``), or for its coordinator to abort after
        ``transaction.timeout.ms``."""
        timeout = timeout_seconds(timeout, "close()")
        if self._forked_from is not None:
            self._set_closing()
            self._closed = True
            return
        in_callback = threading.get_ident() == self._sender.thread_ident
        with self._close_lock:
            closed_before = self._closed
            if not closed_before:
                self._set_closing()
                if in_callback or timeout == 0:
                    self._sender.force()
                else:
                    self._sender.initiate_close()
        if closed_before:
            # Java's close() joins the I/O thread however often it is called: after a close() from a
            # callback (which could not wait), a close() from another thread waits for the thread to end
            if not in_callback and timeout != 0:
                self._io_thread.join(wait_seconds(timeout))
            return
        if in_callback:
            self._metadata.close()  # wakes threads waiting for metadata; the I/O thread stops by itself
            self._close_partitioner()
            self._closed = True
            return
        if timeout != 0:
            self._io_thread.join(wait_seconds(timeout))
            if self._io_thread.is_alive():
                log.warning("close() timed out after %ss; failing the records still pending", timeout)
                self._sender.force()
        # A forced close only fails what is left and stops, so it is quick; wait for it (as Java does) so
        # that every future is complete when close() returns. Bounded, in case a user callback blocks.
        self._io_thread.join(_FORCED_CLOSE_GRACE_S)
        if self._io_thread.is_alive():
            log.error("the producer I/O thread did not stop within %ss of a forced close (is a send "
                      "callback blocking?)", _FORCED_CLOSE_GRACE_S)
        self._metadata.close()
        self._close_partitioner()
        self._closed = True

    def _close_partitioner(self) -> None:
        """Close the interceptors and a user partitioner (Java's ``Utils.closeQuietly``): an error is logged."""
        if self._interceptors is not None:
            self._interceptors.close()
        if self._partitioner is not None:
            try:
                self._partitioner.close()
            except Exception:
                log.exception("closing the partitioner failed")

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ metadata
    def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition ids (waits up to ``max.block.ms`` for metadata)."""
        if self._closing:
            raise self._closed_error()
        validate_topic_name(topic)
        n = self._metadata.fetch().partition_count(topic)
        if n is None:
            _, n = self._wait_on_metadata(topic, None)
        return list(range(n))

    def metrics(self) -> dict[str, float]:
        """Java-named producer metrics (record-send-rate, request-latency-avg, ...)."""
        return self.metrics_registry.snapshot()

    # -------------------------------------------------------- transactions
    def _txn(self) -> TransactionManager:
        if self._tm is None or self._tm.transactional_id is None:
            raise errors.IllegalStateError(
                "transactions need a transactional.id (and enable.idempotence, on by default)")
        if self._closing:
            raise self._closed_error()
        return self._tm

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register the transactional.id with its coordinator, fencing older producers with it."""
        timeout = timeout_seconds(timeout, "init_transactions()")
        tm = self._txn()
        result = tm.initialize_transactions()
        self._client.wakeup()
        result.wait(timeout if timeout is not None else self._max_block_ms / 1000.0)

    def begin_transaction(self) -> None:
        self._txn().begin_transaction()

    def transaction_info(self) -> TransactionInfo:
        """The transactional id, the producer id and epoch in use now, and the transaction protocol of the
        current (or last) transaction: 2 (KIP-890, the broker's ``transaction.version`` >= 2) or 1."""
        tm = self._txn()
        with tm.lock:
            return TransactionInfo(str(tm.transactional_id), tm.producer_id, tm.epoch, tm.transaction_version)

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit. Raises if any record of the transaction failed (then abort)."""
        timeout = timeout_seconds(timeout, "commit_transaction()")
        tm = self._txn()
        result = tm.begin_commit()
        self._client.wakeup()
        result.wait(timeout if timeout is not None else self._max_block_ms / 1000.0)

    def abort_transaction(self, timeout: float | None = None) -> None:
        timeout = timeout_seconds(timeout, "abort_transaction()")
        tm = self._txn()
        result = tm.begin_abort()
        self._client.wakeup()
        result.wait(timeout if timeout is not None else self._max_block_ms / 1000.0)

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_metadata: object,
                                    timeout: float | None = None) -> None:
        """Commit a consumer group's offsets as part of the current transaction (Java
        ``sendOffsetsToTransaction``, KIP-447): they count only if the transaction commits, so a
        consume-transform-produce loop reads and writes each record exactly once.

        ``offsets``: ``{(topic, partition): next offset to consume}`` (values may be ``OffsetAndMetadata``-like).
        ``group_metadata``: the consumer's ``ConsumerGroupMetadata`` (``sparkafka.producer.group_metadata``),
        confluent-kafka's ``consumer.consumer_group_metadata()``, kafka-python's ``consumer.group_metadata()``
        or a group id. Waits up to ``timeout`` seconds (default ``max.block.ms``) for the group coordinator;
        a refusal (the consumer left the group: ``CommitFailedError``) makes the transaction abortable."""
        timeout = timeout_seconds(timeout, "send_offsets_to_transaction()")
        group = group_metadata_of(group_metadata)
        entries = offsets_of(offsets)
        tm = self._txn()
        if not entries:
            return  # as Java: nothing to send
        result = tm.send_offsets_to_transaction(entries, group)
        self._client.wakeup()
        result.wait(timeout if timeout is not None else self._max_block_ms / 1000.0)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[KafkaProducer]:
        """``with producer.transaction(): producer.send(...)`` commits, or aborts on an exception. A
        commit that fails abortably (a record of the transaction failed) is aborted before its error is
        raised, so the producer is ready for the next transaction; a commit that timed out is not (call
        ``commit_transaction()`` again, as in Java)."""
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            tm = self._tm
            if tm is not None and not tm.has_fatal_error():
                self.abort_transaction()
            raise
        try:
            self.commit_transaction()
        except errors.KafkaError:
            tm = self._tm
            if tm is not None and tm.has_abortable_error():
                self.abort_transaction()
            raise

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        """A producer owns an I/O thread, sockets and buffered records, so it does not pickle (nor copy);
        its ``config`` does: build a new producer from it on the other side."""
        raise TypeError(
            f"cannot pickle or copy a KafkaProducer ({self.config.client_id!r}): it owns an I/O thread, "
            "sockets and buffered records. Pickle producer.config (a ProducerConfig) instead and create "
            "KafkaProducer(config) where it is needed (one per process)")

    def __repr__(self) -> str:
        return f"KafkaProducer(client_id={self.config.client_id!r}, closed={self._closed})"


def _partitioner_configs(cfg: ProducerConfig) -> dict[str, Any]:
    """What a ``partitioner.class`` class is configured with: the settings the user gave, by their Java
    names, plus ``client.id`` (Java's ``getConfiguredInstance`` with the originals)."""
    configs = {name: value for name, value in cfg.to_properties(mask_secrets=False).items() if cfg.user_set(name)}
    configs["client.id"] = cfg.client_id
    return configs


def _failed_partition(exc: errors.KafkaError, partition: object) -> int:
    """The partition a record that failed in ``send()`` reports: the one ``send()`` had placed it in, else
    the one the caller gave, else -1 (Java's ``AppendCallbacks.topicPartition``)."""
    if exc.send_partition >= 0:
        return exc.send_partition
    return partition if type(partition) is int else -1


def _partition_index(value: object, what: str) -> int:
    """A partition given as another integer type (numpy's, ``operator.index``) as an int; anything else (a
    float, a bool, a str) is an ``InvalidRecordInputError`` naming ``what``."""
    if not isinstance(value, bool):
        try:
            return operator.index(value)  # type: ignore[arg-type]
        except TypeError:
            pass
    raise errors.InvalidRecordInputError(f"{what} must be an int, got {type(value).__name__} {value!r}")


def _as_bytes(obj: object, topic: str, field: str) -> bytes:
    if isinstance(obj, (bytearray, memoryview)):
        return bytes(obj)
    raise errors.SerializationError(
        f"the {field} for topic {topic!r} is a {type(obj).__name__}, not bytes; configure "
        f"{field}.serializer (e.g. 'str', 'json', 'int' or a callable) to send such objects")


def _check_headers(headers: Headers) -> list[tuple[str, bytes | None]]:
    """Headers as a list of ``(str, bytes | None)`` pairs, from a sequence of pairs or a mapping (a dict
    gives one header per key, in its order)."""
    out: list[tuple[str, bytes | None]] = []
    try:
        items: list[object] = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
    except TypeError:
        raise errors.InvalidRecordInputError(
            f"headers must be a sequence of (str, bytes) pairs or a dict, got {type(headers).__name__}") from None
    for i, h in enumerate(items):
        if not isinstance(h, tuple) or len(h) != 2:
            raise errors.InvalidRecordInputError(f"header {i} must be a (key, value) pair, got {h!r}")
        k, v = h[0], h[1]
        if not isinstance(k, str):
            raise errors.InvalidRecordInputError(f"header {i} key must be a str, got {type(k).__name__}")
        if v is not None and type(v) is not bytes:
            if isinstance(v, (bytearray, memoryview)):
                v = bytes(v)
            elif isinstance(v, str):
                try:
                    v = v.encode()
                except UnicodeEncodeError:
                    raise errors.InvalidRecordInputError(
                        f"header {k!r} value must be a str encodable as UTF-8, got {v!r:.60}") from None
            else:
                raise errors.InvalidRecordInputError(
                    f"header {k!r} value must be bytes, str or None, got {type(v).__name__}")
        assert v is None or type(v) is bytes
        out.append((k, v))
    return out


__all__ = ["Headers", "KafkaProducer", "RecordMetadata"]
