"""kafka-python's ``FutureRecordMetadata`` and ``RecordMetadata`` over sparkafka's record future.

How it works: ``FutureRecordMetadata`` wraps the future ``KafkaProducer.send`` returned and gives it
kafka-python's surface: ``get(timeout)`` (``KafkaTimeoutError`` when not done in time, the record's error
when it failed), the ``is_done`` / ``value`` / ``exception`` attributes, ``succeeded()``, ``failed()``,
``retriable()``, and ``add_callback(f, *args, **kwargs)`` / ``add_errback`` / ``add_both`` / ``chain``.
Callbacks run once the record is final, on the producer's I/O thread (kafka-python: its sender thread),
or at once in the caller's thread when it already is; an exception in a callback is logged, as
kafka-python does. A record that timed out (sparkafka's ``DeliveryTimeoutError``, a ``KafkaTimeoutError``)
fails with a retriable copy of its error (a subclass of its class and of ``RetriableError``,
``retriable`` True), since kafka-python's ``KafkaTimeoutError`` is a ``RetriableError``. A record too
large fails with ``MessageSizeTooLargeError`` (``errors.as_kafka_python``); ``get()``, ``exception`` and the
errbacks all see that one object. ``RecordMetadata`` has kafka-python's nine fields
(``checksum`` is None: message format v2 has no per-record checksum).
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, NamedTuple, cast

from sparkafka.compat.kafka_python.errors import as_kafka_python
from sparkafka.errors import KafkaTimeoutError, RetriableError
from sparkafka.producer.future import FutureRecordMetadata as _RecordFuture

__all__ = ["FutureRecordMetadata", "RecordMetadata", "TopicPartition"]

log = logging.getLogger("sparkafka.compat")

_CONVERT_LOCK = threading.Lock()


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class RecordMetadata(NamedTuple):
    """kafka-python's ``RecordMetadata``."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class FutureRecordMetadata:
    """What the compat ``send()`` returns (see the module docstring)."""

    __slots__ = ("_error", "_header_size", "_inner")

    def __init__(self, inner: _RecordFuture, header_size: int) -> None:
        self._inner = inner
        self._header_size = header_size
        self._error: BaseException | None = None
        """The record's error as kafka-python shows it (made once, see ``_failure``)."""

    def _failure(self) -> BaseException | None:
        """The record's error once it failed, a timeout made retriable (see the module docstring)."""
        inner = self._inner
        if not inner.done():
            return None
        error = inner.exception(0)
        if error is None:
            return None
        with _CONVERT_LOCK:  # the I/O thread (errbacks) and the caller may ask at once: one object
            if self._error is None:
                self._error = _kafka_python_error(error)
            return self._error

    # -- state ---------------------------------------------------------------------------------------
    @property
    def is_done(self) -> bool:
        return self._inner.done()

    @property
    def exception(self) -> BaseException | None:
        """The record's error once it failed (an attribute, as kafka-python's)."""
        return self._failure()

    @property
    def value(self) -> RecordMetadata | None:
        """The metadata once the record succeeded."""
        inner = self._inner
        if not inner.done() or inner.exception(0) is not None:
            return None
        return self._metadata()

    def succeeded(self) -> bool:
        return self._inner.done() and self._inner.exception(0) is None

    def failed(self) -> bool:
        return self._inner.done() and self._inner.exception(0) is not None

    def retriable(self) -> bool:
        return isinstance(self.exception, RetriableError)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to ``timeout`` seconds (None: as long as it takes); raise the record's error if it
        failed, ``KafkaTimeoutError`` if it is not done in time."""
        try:
            self._inner.result(timeout)
        except KafkaTimeoutError as exc:
            if not self._inner.done():
                raise KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.") from None
            error = self._failure()
            if error is None or error is exc:
                raise
            raise error from exc.__cause__
        return self._metadata()

    def _metadata(self) -> RecordMetadata:
        md = self._inner.value()
        return RecordMetadata(md.topic, md.partition, TopicPartition(md.topic, md.partition), md.offset,
                              md.timestamp, None, md.serialized_key_size, md.serialized_value_size,
                              self._header_size)

    # -- callbacks -----------------------------------------------------------------------------------
    def add_callback(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """``f(*args, metadata, **kwargs)`` once the record succeeds."""
        fn = functools.partial(f, *args, **kwargs) if args or kwargs else f

        def on_done(_: object) -> None:
            if self._inner.exception(0) is None:
                _run(fn, self._metadata(), "callback")

        self._inner.add_done_callback(on_done)
        return self

    def add_errback(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """``f(*args, exception, **kwargs)`` once the record fails."""
        fn = functools.partial(f, *args, **kwargs) if args or kwargs else f

        def on_done(_: object) -> None:
            error = self._failure()
            if error is not None:
                _run(fn, error, "errback")

        self._inner.add_done_callback(on_done)
        return self

    def add_both(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        self.add_callback(f, *args, **kwargs)
        return self.add_errback(f, *args, **kwargs)

    def chain(self, future: Any) -> FutureRecordMetadata:
        """Complete kafka-python's ``future`` (``success`` / ``failure``) with this record's outcome."""
        self.add_callback(future.success)
        return self.add_errback(future.failure)

    def __repr__(self) -> str:
        return f"FutureRecordMetadata({self._inner!r})"


_RETRIABLE_CLASSES: dict[type[KafkaTimeoutError], type[KafkaTimeoutError]] = {}


def _retriable_class(kind: type[KafkaTimeoutError]) -> type[KafkaTimeoutError]:
    """``kind`` made retriable (one class per kind; called under ``_CONVERT_LOCK``): kafka-python's
    ``KafkaTimeoutError`` is a ``RetriableError``."""
    made = _RETRIABLE_CLASSES.get(kind)
    if made is None:
        made = cast("type[KafkaTimeoutError]", type(kind.__name__, (kind, RetriableError), {
            "retriable": True, "__module__": kind.__module__, "__qualname__": kind.__qualname__,
            "__doc__": kind.__doc__}))
        _RETRIABLE_CLASSES[kind] = made
    return made


def _kafka_python_error(error: BaseException) -> BaseException:
    """The error as kafka-python would show it: a timeout is retriable (same class name, text, cause), a
    too-large record is ``MessageSizeTooLargeError`` (``as_kafka_python``)."""
    error = as_kafka_python(error)
    if not isinstance(error, KafkaTimeoutError) or error.retriable:
        return error
    kind = _retriable_class(type(error))
    copy = kind.__new__(kind, *error.args)
    copy.__dict__.update(error.__dict__)
    copy.__cause__ = error.__cause__
    copy.__traceback__ = error.__traceback__
    return copy


def _run(fn: Callable[[Any], object], argument: object, kind: str) -> None:
    try:
        fn(argument)
    except Exception:
        log.exception("Error processing %s", kind)
