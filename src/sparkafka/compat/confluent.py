"""confluent-kafka's ``Producer`` on sparkafka: ``from sparkafka.compat.confluent import Producer``.

How it works: ``Producer(conf)`` translates the librdkafka properties once (``confluent_config``: one table)
and builds a sparkafka ``KafkaProducer`` whose ``partitioner.class`` is librdkafka's partitioner
(``consistent_random`` unless ``partitioner`` says otherwise), so keys land where confluent-kafka put them; a
bad config raises ``ConfigException``, a ``KafkaException`` (``_INVALID_ARG``, as librdkafka) that is
sparkafka's ``ConfigError`` too. ``produce()`` checks librdkafka's queue limits
(``queue.buffering.max.messages`` / ``.kbytes``: ``BufferError`` when full, counting every record until its
delivery report is served, as librdkafka does; 0 messages is no limit), creates a ``Message`` and hands the
record to ``KafkaProducer.send`` with the message's ``_delivered`` as the callback. That callback runs on the
I/O thread: it only fills in the message (partition, offset, timestamp, latency or a ``KafkaError``) and
queues it. ``poll()`` / ``flush()`` serve the queued reports on the caller's thread, calling
``on_delivery(err, msg)`` (with ``delivery.report.only.error``, for failed records only: a successful record's
report is still queued and served, silently, so it counts in ``len()`` and the queue limits until then, as
confluent-kafka's); an exception raised by a callback leaves ``poll()`` with the rest still queued. A report's
accessors read as confluent-kafka's: no offset or partition is None, a failed record's timestamp is
``(TIMESTAMP_NOT_AVAILABLE, -1)``. Errors librdkafka reports through the delivery report (the topic's metadata
not available within ``max.block.ms``, an illegal topic name, an explicit partition the topic turns out not to
have when its metadata is first fetched) become a failed report too. As librdkafka's, ``produce()`` does not
wait for a topic's metadata: a record for a topic the producer has no metadata for (a new topic; any topic
after a rebootstrap) is held by a ``MetadataHold`` (``confluent_hold``) and sent by its thread once the
metadata arrives, in produce order per topic, or fails after ``max.block.ms`` (``message.timeout.ms`` if
shorter); ``flush()`` and ``commit_transaction()`` wait for the held records first, ``purge()`` and
``abort_transaction()`` fail them with ``_PURGE_QUEUE``. Errors librdkafka raises from ``produce()`` raise
``KafkaException`` here (a record too large, a partition the topic is known not to have), and a full buffer
(``buffer.memory`` for ``max.block.ms``) is ``BufferError``. (``KafkaProducer.send`` returns such errors in a
failed future, Java's contract, after calling the callback in the producing thread: ``_delivered`` ignores
that call, so ``produce()`` alone decides between a report and a raise.) ``produce()``'s arguments are taken
as confluent-kafka takes them (``partition`` and ``timestamp`` are C integers: a bool is 0 or 1, a float
TypeError, a value out of range OverflowError; a non-str header key is sent as ``str(key)``) except where
confluent-kafka would send something wrong: a negative ``timestamp`` (sent there as the record's CreateTime)
raises ``KafkaException`` (_INVALID_ARG), a bytes header key (sent there as its repr, "b'k'") ``TypeError``.
Transactions wrap the producer's, raising ``KafkaException`` whose ``KafkaError`` says ``retriable()`` /
``txn_requires_abort()`` / ``fatal()`` from the producer's transaction state (a commit after a record failed
carries that record's error code, as librdkafka's); records failed by ``abort_transaction()`` report
``_PURGE_QUEUE``, as librdkafka's purge on abort does. A ``logger`` gets sparkafka's log records through a
handler on the ``sparkafka`` logger while the producer is open: those whose level, read as a syslog severity,
is at or below ``log_level`` (librdkafka's filter; its default 6 leaves DEBUG records out). ``error_cb`` gets,
from ``poll()``, authentication failures, the fatal error once, and (``confluent_transport``) a connection to
a broker failing or lost (``_TRANSPORT``) and every broker down (``_ALL_BROKERS_DOWN``), as librdkafka's. A
``Producer`` dropped without ``close()`` (confluent-kafka users rarely call it: librdkafka's handle is
destroyed when the object is) is closed when it is garbage-collected (a ``weakref.finalize``): its producer
and its log handler. It can only be collected once nothing refers to it, and every record still queued or in
flight does (its ``Message``), so the records produced before it was dropped are sent first.
"""

from __future__ import annotations

import collections
import logging
import operator
import sys
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NoReturn, SupportsIndex

from sparkafka import errors
from sparkafka.compat.confluent_config import CompatSettings, translate
from sparkafka.compat.confluent_hold import MetadataHold
from sparkafka.compat.confluent_transport import TransportEvents
from sparkafka.compat.librdkafka_errors import (
    ConfigException,
    KafkaError,
    KafkaException,
    PurgedError,
    from_exception,
)
from sparkafka.net.admin import AdminClient
from sparkafka.producer.future import FailedFuture, RecordMetadata
from sparkafka.producer.group_metadata import CommittedOffset, group_metadata_of
from sparkafka.producer.librdkafka_partitioners import LibrdkafkaPartitioner
from sparkafka.producer.producer import KafkaProducer

__all__ = [
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigException",
    "KafkaError",
    "KafkaException",
    "Message",
    "PartitionMetadata",
    "Producer",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "TopicMetadata",
]

log = logging.getLogger("sparkafka.compat")

TIMESTAMP_NOT_AVAILABLE: Final = 0
TIMESTAMP_CREATE_TIME: Final = 1
TIMESTAMP_LOG_APPEND_TIME: Final = 2
OFFSET_INVALID: Final = -1001
"""librdkafka's offset of a record without one (failed, or acks=0)."""

_DEFAULT_LINGER_MS: Final = 5
_HOLD_JOIN_S: Final = 2.0
"""How long close() waits for the metadata hold's thread after the producer closed (its send() then returns
at once: a bound, not a wait)."""

DeliveryCallback = Callable[[KafkaError | None, "Message"], object]
HeaderList = list[tuple[str, bytes | None]]


class Message:
    """A produced record as a delivery report shows it (confluent-kafka's ``Message``)."""

    __slots__ = ("_callback", "_error", "_headers", "_key", "_latency", "_offset", "_owner", "_partition",
                 "_produced_ms", "_producing", "_size", "_timestamp", "_timestamp_type", "_topic", "_value")

    def __init__(self, owner: Producer | None, topic: str, key: bytes | None, value: bytes | None,
                 headers: HeaderList | None, timestamp: int, callback: DeliveryCallback | None,
                 produced_ms: float, size: int) -> None:
        self._owner = owner
        self._topic = topic
        self._key = key
        self._value = value
        self._headers = headers
        self._timestamp = timestamp
        self._timestamp_type = TIMESTAMP_CREATE_TIME
        self._callback = callback
        self._produced_ms = produced_ms
        self._size = size
        self._partition = -1
        self._offset = OFFSET_INVALID
        self._error: KafkaError | None = None
        self._latency: float | None = None
        self._producing = 0
        """The id of the thread inside ``produce()`` for this message (0 once it returned)."""

    # -- confluent-kafka's accessors ---------------------------------------------------------------
    def topic(self) -> str:
        return self._topic

    def partition(self) -> int | None:
        """The partition the record was produced to (the one asked for, when it failed: -2 too, as
        confluent-kafka's); None when none was assigned (confluent-kafka's None for librdkafka's
        RD_KAFKA_PARTITION_UA, -1)."""
        return None if self._partition == -1 else self._partition

    def offset(self) -> int | None:
        """The record's offset; None without one (acks=0, a failed record), as confluent-kafka's."""
        return None if self._offset < 0 else self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> HeaderList | None:
        """The headers the record was produced with (confluent-kafka's report shows None)."""
        return self._headers

    def timestamp(self) -> tuple[int, int]:
        """``(TIMESTAMP_CREATE_TIME or TIMESTAMP_LOG_APPEND_TIME, milliseconds since the epoch)``; a failed
        record's is ``(TIMESTAMP_NOT_AVAILABLE, -1)`` (librdkafka's rd_kafka_message_timestamp)."""
        if self._error is not None:
            return TIMESTAMP_NOT_AVAILABLE, -1
        return self._timestamp_type, self._timestamp

    def error(self) -> KafkaError | None:
        return self._error

    def latency(self) -> float | None:
        """Seconds from ``produce()`` to the delivery report (the broker's acknowledgement, or the failure:
        librdkafka's rd_kafka_message_latency counts from the enqueue either way)."""
        return self._latency

    def len(self) -> int:
        """The value's length in bytes."""
        return 0 if self._value is None else len(self._value)

    __len__ = len

    def set_headers(self, headers: HeaderList | None) -> None:
        self._headers = headers

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    # -- the I/O thread's side ------------------------------------------------------------------------
    def _delivered(self, metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        """The KafkaProducer callback (on its I/O thread): fill in the report and queue it. Called by
        ``send()`` itself (a record that failed there, Java's contract) it does nothing: ``produce()``
        decides what librdkafka would do with that error."""
        if self._producing and self._producing == threading.get_ident():
            return
        owner = self._owner
        assert owner is not None
        if metadata is not None and metadata.partition >= 0:
            self._partition = metadata.partition
        if exc is None:
            assert metadata is not None
            if metadata.offset >= 0:
                self._offset = metadata.offset
            if metadata.timestamp != self._timestamp and metadata.timestamp >= 0:
                self._timestamp = metadata.timestamp
                self._timestamp_type = TIMESTAMP_LOG_APPEND_TIME
            self._latency = (owner._clock_ms() - self._produced_ms) / 1000.0
            owner._report(self)
        else:
            self._fail(owner._record_error(exc))

    def _fail(self, error: KafkaError) -> None:
        """Queue the report of a failed record (any thread)."""
        owner = self._owner
        assert owner is not None
        self._error = error
        self._latency = (owner._clock_ms() - self._produced_ms) / 1000.0
        owner._report(self)

    def __repr__(self) -> str:
        return (f"Message(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
                f"error={self._error!r})")


@dataclass
class BrokerMetadata:
    id: int
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


@dataclass
class PartitionMetadata:
    id: int
    leader: int
    replicas: list[int]
    isrs: list[int]
    error: KafkaError | None = None


@dataclass
class TopicMetadata:
    topic: str
    partitions: dict[int, PartitionMetadata] = field(default_factory=dict)
    error: KafkaError | None = None


@dataclass
class ClusterMetadata:
    """What ``list_topics()`` returns (confluent-kafka's ``ClusterMetadata``)."""

    cluster_id: str | None = None
    controller_id: int = -1
    brokers: dict[int, BrokerMetadata] = field(default_factory=dict)
    topics: dict[str, TopicMetadata] = field(default_factory=dict)
    orig_broker_id: int = -1
    orig_broker_name: str | None = None


def _syslog_severity(levelno: int) -> int:
    """A Python logging level as a syslog severity, the reverse of confluent-kafka's map of librdkafka's
    levels (LOG_EMERG..LOG_CRIT -> CRITICAL, LOG_ERR -> ERROR, LOG_WARNING -> WARNING, LOG_NOTICE and
    LOG_INFO -> INFO, LOG_DEBUG -> DEBUG): CRITICAL is LOG_CRIT (2), ERROR 3, WARNING 4, a level between
    WARNING and INFO LOG_NOTICE (5), INFO LOG_INFO (6), anything lower LOG_DEBUG (7)."""
    if levelno >= logging.CRITICAL:
        return 2
    if levelno >= logging.ERROR:
        return 3
    if levelno >= logging.WARNING:
        return 4
    if levelno > logging.INFO:
        return 5
    if levelno == logging.INFO:
        return 6
    return 7


class _Wakeup:
    """Threads waiting in ``poll()`` / ``flush()`` for a report or an event to serve, or for the queue to empty
    (another thread's ``poll()`` served the last report): they count themselves in ``waiters`` and wait on
    ``cond``; whoever appends a report or event, or empties the queue, calls ``notify()`` after that, and only
    when ``waiters`` is not 0 (read without the lock: a waiter counts itself before it looks, the notifier
    looks after its change, so one of them sees the other). One shared flag and an Event lost wake-ups with
    two waiting threads (a flush() next to a polling thread hung)."""

    __slots__ = ("cond", "waiters")

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.waiters = 0

    def notify(self) -> None:
        if self.waiters:
            with self.cond:
                self.cond.notify_all()


class _LoggerBridge(logging.Handler):
    """Passes sparkafka's log records to the ``logger`` given in the config: those whose severity is at
    or below ``log_level``, as librdkafka drops log lines above it before calling the log callback."""

    def __init__(self, target: logging.Logger, log_level: int) -> None:
        super().__init__()
        self.target = target
        self.log_level = log_level

    def emit(self, record: logging.LogRecord) -> None:
        if _syslog_severity(record.levelno) <= self.log_level and self.target.isEnabledFor(record.levelno):
            self.target.handle(record)


class Producer:
    """confluent-kafka's ``Producer(conf)`` (see the module docstring)."""

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(conf or {})
        merged.update(kwargs)  # confluent-kafka takes logger=..., error_cb=... as keyword arguments too
        sources: dict[str, str] = {}
        try:
            settings = translate(merged)
            sources = settings.sources
            java = settings.java
            linger = java.get("linger.ms", _DEFAULT_LINGER_MS)
            sticky = settings.sticky_linger_ms
            if sticky is None:
                sticky = min(900000, 2 * int(linger)) if isinstance(linger, int) else 2 * _DEFAULT_LINGER_MS
            self._settings: CompatSettings = settings
            self._partitioner = LibrdkafkaPartitioner(settings.partitioner, sticky)
            java["partitioner.class"] = self._partitioner
            self._producer = KafkaProducer(java)
        except errors.ConfigError as exc:
            # confluent-kafka raises KafkaException(_INVALID_ARG); this one is sparkafka's ConfigError too. The
            # inner config's errors name Java keys: one the user set under a librdkafka name is named as set
            key, text = exc.key, str(exc)
            source = sources.get(key) if key is not None else None
            if source is not None and source != key:
                key, text = source, f"{text} ({exc.key!r} is what {source!r} sets)"
            raise ConfigException(KafkaError._INVALID_ARG, text, key) from exc
        self._clock_ms = self._producer._clock.monotonic_ms
        self._wall_ms = self._producer._clock.wall_ms
        cfg = self._producer.config
        self._hold: MetadataHold[tuple[Message, int]] = MetadataHold(
            self._producer._metadata, self._producer._client.wakeup, self._producer._clock,
            min(cfg.max_block_ms, cfg.delivery_timeout_ms), send=self._release, fail=self._fail_held,
            admit=self._admit, wait_setting=_hold_setting(cfg.max_block_ms, cfg.delivery_timeout_ms, sources))
        self._default_callback: DeliveryCallback | None = settings.on_delivery
        self._dr_only_error = settings.dr_only_error
        # librdkafka: queue.buffering.max.messages 0 "disables this limit"
        self._max_messages = settings.max_messages if settings.max_messages > 0 else sys.maxsize
        self._max_bytes = settings.max_kbytes * 1024
        self._lock = threading.Lock()
        self._queued = 0
        self._queued_bytes = 0
        self._reports: collections.deque[Message] = collections.deque()
        self._events: collections.deque[KafkaError] = collections.deque()
        self._fatal_reported = False
        self._aborting = False
        """True from ``abort_transaction()`` to the next ``begin_transaction()``."""
        self._wakeup = _Wakeup()
        if settings.error_cb is not None:  # broker connections failing or lost, as librdkafka reports them
            TransportEvents(self._producer._client, self._producer._clock, self._events, self._wakeup.notify)
        self._bridge: _LoggerBridge | None = None
        if settings.logger is not None:
            self._bridge = _LoggerBridge(settings.logger, settings.log_level)
            logging.getLogger("sparkafka").addHandler(self._bridge)
        self._closed = False
        self._finalizer = weakref.finalize(self, _close_abandoned, self._producer, self._bridge)
        self._finalizer.atexit = False  # at exit the daemon threads stop with the interpreter, as before

    # ------------------------------------------------------------------ produce
    def produce(self, topic: str, value: str | bytes | None = None, key: str | bytes | None = None,
                partition: int = -1, on_delivery: DeliveryCallback | None = None,
                callback: DeliveryCallback | None = None, timestamp: int = 0,
                headers: Mapping[str, str | bytes | None] | Sequence[tuple[str, str | bytes | None]] | None = None,
                ) -> None:
        """Queue a record; its delivery report is served by ``poll()`` / ``flush()``."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        value_bytes = _as_bytes(value)
        key_bytes = _as_bytes(key)
        report = callback if callback is not None else on_delivery
        if report is None:
            report = self._default_callback
        elif not callable(report):
            raise TypeError(f"on_delivery must be a callable (err, msg), got {type(report).__name__}")
        partition = _c_int(partition, "partition", 32)
        timestamp = _c_int(timestamp, "timestamp", 64)
        if timestamp < 0:
            # confluent-kafka sends a negative timestamp as the record's CreateTime (-1 is the protocol's "no
            # timestamp"); Java's producer, and sparkafka's, take 0 .. 2**63-1 only: refused, not sent
            raise KafkaException(KafkaError(
                KafkaError._INVALID_ARG, f"Unable to produce message: timestamp must be from 0 (the current time) "
                f"to 2**63-1 milliseconds since the epoch, got {timestamp}"))
        header_list = _header_list(headers) if headers is not None else None
        size = (0 if value_bytes is None else len(value_bytes)) + (0 if key_bytes is None else len(key_bytes))
        with self._lock:
            if self._queued >= self._max_messages or self._queued_bytes + size > self._max_bytes:
                raise BufferError(KafkaError(KafkaError._QUEUE_FULL).str())
            self._queued += 1
            self._queued_bytes += size
        if timestamp == 0:
            timestamp = self._wall_ms()
        message = Message(self, topic, key_bytes, value_bytes, header_list, timestamp, report, self._clock_ms(),
                          size)
        try:
            if partition != -1:
                message._partition = partition  # a failure's report shows the partition asked for
            if self._hold.take(topic, (message, partition)):
                return  # no metadata for the topic yet: sent by the hold's thread (librdkafka never waits)
            self._send(message, partition, held=False)
        except (errors.MetadataTimeoutError, errors.InvalidTopicNameError) as exc:
            message._delivered(None, exc)  # librdkafka reports these in the delivery report
        except BaseException as exc:
            self._unqueue(1, size)
            mapped = _produce_error(exc)
            if mapped is exc:
                raise
            raise mapped from exc

    def _send(self, message: Message, partition: int, held: bool) -> None:
        """Hand a record to ``KafkaProducer.send``; what ``send()`` fails it with is raised. An explicit
        partition the topic does not have is librdkafka's _UNKNOWN_PARTITION: raised from ``produce()`` when the
        topic's metadata was there already, reported for a record ``held`` for it (librdkafka had queued it)."""
        explicit: int | None = None
        if partition != -1:
            explicit = self._check_partition(message._topic, partition)
            if explicit is None:
                if held:
                    message._fail(KafkaError(KafkaError._UNKNOWN_PARTITION))
                    return
                raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION,
                                                "Unable to produce message: Local: Unknown partition"))
        message._producing = threading.get_ident()
        try:
            future = self._producer.send(message._topic, message._value, message._key, explicit, message._timestamp,
                                         message._headers, message._delivered)
        finally:
            message._producing = 0
        if isinstance(future, FailedFuture):  # failed in send(): returned, as Java does, not raised
            raise future.error.with_traceback(None)

    def _release(self, held: tuple[Message, int]) -> None:
        """Send a record the hold kept (its thread): ``produce()`` has returned, so a failure is reported."""
        message, partition = held
        try:
            self._send(message, partition, held=True)
        except BaseException as exc:
            message._delivered(None, exc)

    def _admit(self, held: tuple[Message, int]) -> None:
        """A record too large is refused by ``produce()`` itself even when its topic has no metadata yet
        (librdkafka raises MSG_SIZE_TOO_LARGE at once; ``send()`` checks the size before it waits)."""
        message = held[0]
        self._producer._check_record_size(message._topic, message._key, message._value, message._headers)

    def _fail_held(self, held: tuple[Message, int], error: BaseException) -> None:
        held[0]._delivered(None, error)

    def _check_partition(self, topic: str, partition: int) -> int | None:
        """``partition`` if the topic has it, else None (a negative one other than -1, librdkafka's
        RD_KAFKA_PARTITION_UA, never exists). The topic's partition count is known here (``produce()`` and
        the hold send only then); a closed producer's ``partitions_for`` raises what ``send()`` would."""
        if partition < 0:
            return None
        count = self._producer._metadata.fetch().partition_count(topic)
        if count is None:
            count = len(self._producer.partitions_for(topic))
        return partition if partition < count else None

    def _record_error(self, exc: BaseException) -> KafkaError:
        """The report's error for what failed a record (I/O thread). A record failed because the user's
        ``abort_transaction()`` is under way is librdkafka's _PURGE_QUEUE (abort purges the queue)."""
        if self._aborting and isinstance(exc, errors.TransactionError) and not isinstance(exc, errors.BrokerError):
            return KafkaError(KafkaError._PURGE_QUEUE)
        return from_exception(exc)

    def _report(self, message: Message) -> None:
        """A report is ready (any thread)."""
        self._reports.append(message)
        error = message._error
        if error is not None and (error.fatal() or error.code() == KafkaError._AUTHENTICATION):
            self._event(error)
        if self._wakeup.waiters:  # read after the append (see _Wakeup)
            self._wakeup.notify()

    def _event(self, error: KafkaError) -> None:
        """An error for ``error_cb``: authentication failures and, once, the fatal error."""
        if error.fatal():
            if self._fatal_reported:
                return
            self._fatal_reported = True
        if self._settings.error_cb is not None:
            self._events.append(error)

    def _unqueue(self, count: int, size: int) -> None:
        with self._lock:
            self._queued -= count
            self._queued_bytes -= size
            empty = self._queued <= 0
        if empty and self._wakeup.waiters:  # a flush() in another thread waits for this
            self._wakeup.notify()

    # ------------------------------------------------------------------ poll and flush
    def poll(self, timeout: float | None = None) -> int:
        """Serve the delivery reports (and ``error_cb`` events) that are ready, waiting up to ``timeout``
        seconds for the first (None or -1: as long as it takes). Returns how many were served."""
        served = self._serve()
        if served or timeout == 0:
            return served
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        while True:
            # another thread's poll() may serve what woke this one: then wait on, up to the deadline
            if not self._wait(deadline, lambda: bool(self._reports or self._events)):
                return 0
            served = self._serve()
            if served:
                return served

    def _wait(self, deadline: float | None, done: Callable[[], bool]) -> bool:
        """Wait until ``done()`` (checked whenever a report, an event or an empty queue wakes the waiters) or
        the monotonic ``deadline`` (None: no limit); returns ``done()``."""
        wakeup = self._wakeup
        with wakeup.cond:
            wakeup.waiters += 1
            try:
                while not done():
                    remaining = None if deadline is None else deadline - time.monotonic()
                    if remaining is not None and remaining <= 0:
                        return False
                    wakeup.cond.wait(remaining)
                return True
            finally:
                wakeup.waiters -= 1

    def _serve(self) -> int:
        served = 0
        events = self._events
        while events:
            try:
                event = events.popleft()
            except IndexError:
                break
            served += 1
            error_cb = self._settings.error_cb
            if error_cb is not None:
                error_cb(event)
        reports = self._reports
        for _ in range(len(reports)):
            try:
                message = reports.popleft()
            except IndexError:
                break
            self._unqueue(1, message._size)
            served += 1
            report = message._callback
            message._callback = None
            message._owner = None
            # delivery.report.only.error: confluent-kafka's dr_msg_cb drops a successful record's report here,
            # when it is served (the record counted in len() and the queue limits until then)
            if report is not None and (message._error is not None or not self._dr_only_error):
                report(message._error, message)
        return served

    def flush(self, timeout: float | None = None) -> int:
        """Wait until every queued record is delivered and its report served, or ``timeout`` seconds
        (None or -1: as long as it takes); returns the number still queued."""
        deadline = None if timeout is None or timeout < 0 else time.monotonic() + timeout
        # records held for their topic's metadata first: flush() covers every record produced before it
        self._hold.drain(None if deadline is None else max(0.0, deadline - time.monotonic()))
        try:
            self._producer.flush(None if deadline is None else max(0.0, deadline - time.monotonic()))
        except errors.KafkaError:
            pass  # a timeout, or a failure the delivery reports carry (librdkafka's flush() does not raise)
        while True:
            self._serve()
            if self._queued <= 0:
                return 0
            # woken by a report or event to serve, or by another thread's poll() serving the last report
            if not self._wait(deadline, lambda: bool(self._reports or self._events) or self._queued <= 0):
                return max(0, self._queued)

    def __len__(self) -> int:
        """Records produced whose delivery report was not served yet."""
        return self._queued

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail the records not sent yet with ``_PURGE_QUEUE`` (their reports come from ``poll()``).
        Records already sent complete as the broker answers: an idempotent producer cannot drop them."""
        if self._producer.config.transactional_id is not None:
            raise KafkaException(KafkaError(
                KafkaError._STATE, "purge() of a transactional producer: use abort_transaction(), which fails "
                "the queued records"))
        if in_queue:
            self._hold.fail_all(PurgedError("purged by purge() while waiting for its topic's metadata"))
            self._producer._accumulator.purge_unsent(PurgedError("purged from the queue by purge()"))

    # ------------------------------------------------------------------ metadata
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """Cluster metadata (all topics, or one) from a Metadata request."""
        cfg = self._producer.config
        timeout_ms = float(cfg.request_timeout_ms) if timeout is None or timeout < 0 else timeout * 1000.0
        try:
            with AdminClient(cfg.bootstrap_servers, client_id=cfg.client_id, request_timeout_ms=timeout_ms,
                             security=cfg) as admin:
                cluster = admin.metadata(None if topic is None else [topic], timeout_ms)
        except errors.KafkaError as exc:
            raise KafkaException(from_exception(exc)) from exc
        out = ClusterMetadata(cluster_id=cluster.cluster_id,
                              controller_id=-1 if cluster.controller_id is None else cluster.controller_id)
        for node in cluster.nodes.values():
            out.brokers[node.node_id] = BrokerMetadata(node.node_id, node.host, node.port)
        for name in cluster.topics:
            entry = TopicMetadata(name)
            for info in cluster.partitions_for_topic(name):
                entry.partitions[info.partition] = PartitionMetadata(
                    info.partition, info.leader, list(info.replicas), list(info.isr),
                    KafkaError(info.error_code) if info.error_code else None)
            out.topics[name] = entry
        for name, code in cluster.topic_errors.items():
            out.topics[name] = TopicMetadata(name, {}, KafkaError(code))
        return out

    # ------------------------------------------------------------------ transactions
    def init_transactions(self, timeout: float | None = None) -> None:
        self._txn(self._producer.init_transactions, timeout)

    def begin_transaction(self) -> None:
        self._txn(lambda _: self._producer.begin_transaction(), None)
        self._aborting = False

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush, then commit (delivery reports are served from here too). Records held for their topic's
        metadata join the transaction first: a commit that cannot wait for them times out (retriable)."""
        if timeout is not None and timeout < 0:
            timeout = None
        deadline = None if timeout is None else time.monotonic() + timeout
        if not self._hold.drain(timeout):
            raise KafkaException(KafkaError(
                KafkaError._TIMED_OUT, f"commit_transaction() timed out after {timeout}s: {len(self._hold)} "
                "record(s) still wait for their topic's metadata", False, True, False))
        try:
            self._txn(self._producer.commit_transaction,
                      None if deadline is None else max(0.0, deadline - time.monotonic()))
        finally:
            self._serve()

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Fail the records not sent yet (_PURGE_QUEUE, as librdkafka's purge) and abort (their reports
        are served from here too)."""
        self._aborting = True
        self._hold.fail_all(PurgedError("purged by abort_transaction() while waiting for its topic's metadata"))
        try:
            self._txn(self._producer.abort_transaction, timeout)
        finally:
            self._serve()

    def send_offsets_to_transaction(self, positions: Sequence[Any], group_metadata: object,
                                    timeout: float | None = None) -> None:
        """Commit the consumer's ``positions`` (a list of ``TopicPartition`` with offsets, e.g.
        ``consumer.position(consumer.assignment())``) with the transaction; ``group_metadata`` is
        ``consumer.consumer_group_metadata()``. As librdkafka, partitions without a valid offset are
        skipped, and nothing is sent when none has one."""
        offsets: dict[tuple[str, int], CommittedOffset] = {}
        for tp in positions:
            offset = getattr(tp, "offset", None)
            if type(offset) is not int:
                raise TypeError(f"positions must be TopicPartition objects with an offset, got {tp!r}")
            if offset < 0:
                continue  # librdkafka: an invalid offset (nothing consumed there) is skipped
            epoch = getattr(tp, "leader_epoch", None)
            offsets[(tp.topic, tp.partition)] = CommittedOffset(offset, getattr(tp, "metadata", None) or "",
                                                                -1 if epoch is None else int(epoch))
        try:
            group = group_metadata_of(group_metadata)
        except errors.InvalidRecordInputError as exc:
            raise KafkaException(KafkaError(KafkaError._INVALID_ARG, str(exc))) from exc
        self._txn(lambda t: self._producer.send_offsets_to_transaction(offsets, group, t), timeout)

    def _txn(self, call: Callable[[float | None], None], timeout: float | None) -> None:
        if timeout is not None and timeout < 0:
            timeout = None
        try:
            call(timeout)
        except errors.KafkaError as exc:
            tm = self._producer._tm
            fatal = tm is not None and tm.has_fatal_error()
            abortable = tm is not None and tm.has_abortable_error()
            error = from_exception(exc, fatal=fatal, txn_requires_abort=abortable and not fatal)
            cause = exc.__cause__
            if (abortable and not fatal and isinstance(exc, errors.TransactionError)
                    and not isinstance(exc, errors.BrokerError) and isinstance(cause, errors.KafkaError)):
                # librdkafka raises the error the transaction hit (rd_kafka_txn_set_abortable_error), not
                # _STATE: commit_transaction() after a record failed with TOPIC_AUTHORIZATION_FAILED says so
                error = KafkaError(from_exception(cause).code(), str(exc), False, False, True)
            if isinstance(exc, errors.KafkaTimeoutError):
                error = KafkaError(KafkaError._TIMED_OUT, str(exc), fatal, not fatal, False)
            if fatal:
                self._event(error)
            raise KafkaException(error) from exc

    # ------------------------------------------------------------------ lifecycle
    def close(self, timeout: float | None = None) -> bool:
        """Flush (serving the reports), then stop the producer. Returns True."""
        if self._closed:
            return True
        self._finalizer.detach()
        if timeout is not None and timeout < 0:
            timeout = None
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            self.flush(timeout)
        finally:
            self._closed = True
            self._hold.close(errors.ProducerClosedError(
                "the producer was closed while the record waited for its topic's metadata"))
            # the time flush() left: close(timeout) is bounded by timeout, not twice it; closing the producer
            # also ends a send() of the hold's thread blocked on memory, so the join after it is short
            self._producer.close(None if deadline is None else max(0.0, deadline - time.monotonic()))
            self._hold.join(_HOLD_JOIN_S)
            self._serve()
            if self._bridge is not None:
                logging.getLogger("sparkafka").removeHandler(self._bridge)
        return True

    def __reduce_ex__(self, protocol: SupportsIndex) -> NoReturn:
        raise TypeError("cannot pickle a Producer: it owns an I/O thread, sockets and queued records; "
                        "pickle its config dict and create a Producer where it is needed")

    def __repr__(self) -> str:
        return f"Producer(partitioner={self._partitioner.name!r}, queued={self._queued})"


def _close_abandoned(producer: KafkaProducer, bridge: _LoggerBridge | None) -> None:
    """A ``Producer`` was garbage-collected unclosed: close its producer (nothing is queued or in flight: each
    such record's ``Message`` refers to the ``Producer``; nor held, so the hold's thread has ended) and
    remove its log handler. The hold is not an argument: it refers to the ``Producer``'s methods, which
    would keep it alive."""
    try:
        producer.close(0)
    except Exception:  # a finalizer must not raise
        logging.getLogger("sparkafka.compat").exception("closing an abandoned Producer failed")
    if bridge is not None:
        logging.getLogger("sparkafka").removeHandler(bridge)


def _hold_setting(max_block_ms: int, delivery_timeout_ms: int, sources: Mapping[str, str]) -> str:
    """The setting that bounds how long a record waits for its topic's metadata, as the user would know it:
    ``message.timeout.ms`` (or the name it was set by) when it is the lower, else ``max.block.ms``, said to be
    sparkafka's (a confluent-kafka user never set it)."""
    if delivery_timeout_ms <= max_block_ms:
        return sources.get("delivery.timeout.ms", "message.timeout.ms")
    return ("max.block.ms, sparkafka's wait for a topic's metadata (60 s unless set); message.timeout.ms "
            "when lower")


def _as_bytes(data: object) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, (bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"a bytes-like object is required, not '{type(data).__name__}'")


def _c_int(value: object, name: str, bits: int) -> int:
    """An argument confluent-kafka parses as a C integer (``partition`` an int32, ``timestamp`` an int64): an
    int, a bool (True is 1) or anything with ``__index__``; anything else is TypeError, a value the C type
    cannot hold OverflowError, as there."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}") from None
    limit = 1 << (bits - 1)
    if not -limit <= number < limit:
        raise OverflowError(f"{name} {number} does not fit a signed {bits}-bit integer")
    return number


def _header_list(headers: object) -> HeaderList:
    items: list[Any]
    if isinstance(headers, Mapping):
        items = list(headers.items())
    elif isinstance(headers, (list, tuple)):
        items = list(headers)
    else:
        raise TypeError(f"headers must be a dict or a list of (key, value) tuples, got {type(headers).__name__}")
    out: HeaderList = []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"each header must be a (key, value) tuple, got {item!r}")
        key = item[0]
        if isinstance(key, (bytes, bytearray, memoryview)):
            # confluent-kafka sends str(key) as the key: the text "b'a'" for b"a", not a; refused, not sent
            raise TypeError(f"header key {key!r} must be a str: confluent-kafka would send its repr "
                            f"{str(key)!r} as the key; decode it (key.decode()) to send its text")
        # confluent-kafka sends str(key) for any other key (5 is "5"), as here
        key = key if isinstance(key, str) else str(key)
        try:
            value = _as_bytes(item[1])
        except TypeError:
            raise TypeError(f"header {key!r} value must be None, bytes or str, got {type(item[1]).__name__}") from None
        out.append((key, value))
    return out


def _produce_error(exc: BaseException) -> BaseException:
    """What ``produce()`` raises for an error of ``KafkaProducer.send`` (librdkafka's choices)."""
    if isinstance(exc, KafkaException) or not isinstance(exc, errors.KafkaError):
        return exc
    if isinstance(exc, errors.BufferExhaustedError):
        return BufferError(KafkaError(KafkaError._QUEUE_FULL).str())
    error = from_exception(exc)
    return KafkaException(KafkaError(error.code(), f"Unable to produce message: {error.str()}", error.fatal(),
                                     error.retriable(), error.txn_requires_abort()))
