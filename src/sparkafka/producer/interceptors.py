"""Producer interceptors (Java's ``ProducerInterceptor`` and ``ProducerInterceptors``): ``interceptor.classes``.

How it works:

* ``ProducerRecord`` is a record as ``send()`` takes it (topic, value, key, partition, timestamp, headers,
  in ``send()``'s order): key and value are the user's objects, before serialization.
* ``resolve_interceptors`` turns the ``interceptor.classes`` value (a sequence, already checked by
  ``config.py``) into a ``ProducerInterceptors`` chain, once per producer: a class is created without
  arguments and configured with the producer's settings as given plus ``client.id`` (Java's
  ``getConfiguredInstances``); an object with ``on_send`` is used as given; a plain function is an
  interceptor whose ``on_send`` it is.
* ``ProducerInterceptors.on_send`` runs every interceptor's ``on_send`` in order, each on the record the
  previous one returned; one that raises (or returns something else than a ``ProducerRecord``) is
  logged and skipped, the chain goes on with the record it was given (Java ``ProducerInterceptors.onSend``).
* ``acknowledgement_callback`` wraps the user's callback for one record: the interceptors'
  ``on_acknowledgement(metadata, exception)`` run first, then the callback (Java's ``AppendCallbacks``),
  for every result: acknowledged, failed by the broker, expired, and failed in ``send()`` itself
  (``on_send_error``, also for errors ``send()`` raises, as Java's ``doSend``). An interceptor whose
  ``on_acknowledgement`` takes a third parameter also gets the record's headers (KIP-512). Exceptions in
  ``on_acknowledgement`` are logged and ignored. It runs on the producer's I/O thread (or in the sending
  thread for a record that failed in ``send()``), so it must be quick.
* ``close()`` closes every interceptor once, logging errors (Java ``Utils.closeQuietly``).

A producer with interceptors takes the Python ``send`` for every record (no C send lane).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from sparkafka.errors import ConfigError

from .future import RecordMetadata

__all__ = ["ProducerInterceptor", "ProducerInterceptors", "ProducerRecord", "resolve_interceptors"]

log = logging.getLogger("sparkafka.producer")


class ProducerRecord(NamedTuple):
    """A record as ``send()`` takes it, before serialization (Java's ``ProducerRecord``); an interceptor's
    ``on_send`` returns it changed with ``record._replace(value=...)``."""

    topic: str
    value: Any = None
    key: Any = None
    partition: int | None = None
    timestamp: int | None = None
    headers: Any = None


class ProducerInterceptor(Protocol):
    """An interceptor (Java's ``ProducerInterceptor``). ``on_send`` is required; ``on_acknowledgement``
    (``(metadata, exception)``, or ``(metadata, exception, headers)``), ``close()`` and, for a class given
    in ``interceptor.classes``, ``configure(configs)`` are optional."""

    def on_send(self, record: ProducerRecord) -> ProducerRecord: ...


class _Entry:
    """One interceptor and how to call it (decided once)."""

    __slots__ = ("ack", "close", "name", "on_send", "with_headers")

    def __init__(self, interceptor: object) -> None:
        self.name = type(interceptor).__name__
        on_send = getattr(interceptor, "on_send", None)
        if not callable(on_send):
            if callable(interceptor):
                on_send = interceptor  # a plain function is an interceptor's on_send
                self.name = getattr(interceptor, "__qualname__", self.name)
            else:
                raise ConfigError(f"interceptor {interceptor!r} has no on_send method", "interceptor.classes")
        self.on_send: Callable[[ProducerRecord], object] = on_send
        ack = getattr(interceptor, "on_acknowledgement", None) if on_send is not interceptor else None
        self.ack: Callable[..., object] | None = ack if callable(ack) else None
        self.with_headers = self.ack is not None and _takes_three(self.ack)
        close = getattr(interceptor, "close", None) if on_send is not interceptor else None
        self.close: Callable[[], object] | None = close if callable(close) else None


def _takes_three(method: Callable[..., object]) -> bool:
    """Whether ``on_acknowledgement`` accepts a third positional argument (the headers)."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3 or any(p.kind is p.VAR_POSITIONAL for p in params)


class ProducerInterceptors:
    """The producer's interceptors, in ``interceptor.classes`` order."""

    __slots__ = ("_acks", "_closed", "_entries")

    def __init__(self, interceptors: Sequence[object]) -> None:
        self._entries = [_Entry(i) for i in interceptors]
        self._acks = [e for e in self._entries if e.ack is not None]
        self._closed = False

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        for entry in self._entries:
            try:
                result = entry.on_send(record)
            except Exception:
                log.warning("Error executing interceptor onSend callback for topic: %s, partition: %s "
                            "(interceptor %s)", record.topic, record.partition, entry.name, exc_info=True)
                continue
            if isinstance(result, ProducerRecord):
                record = result
            else:
                log.warning("interceptor %s returned %r from on_send instead of a ProducerRecord; the record "
                            "goes on unchanged", entry.name, type(result).__name__)
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, exception: BaseException | None, headers: Any) -> None:
        for entry in self._acks:
            ack = entry.ack
            assert ack is not None
            try:
                if entry.with_headers:
                    ack(metadata, exception, headers)
                else:
                    ack(metadata, exception)
            except Exception:
                log.warning("Error executing interceptor onAcknowledgement callback (interceptor %s)",
                            entry.name, exc_info=True)

    def on_send_error(self, record: ProducerRecord, partition: int | None, exception: BaseException) -> None:
        """A record that failed in ``send()`` (raised or returned): ``on_acknowledgement`` with Java's
        metadata for it (the topic, the partition if known, -1 elsewhere)."""
        tp = partition if type(partition) is int else -1
        self.on_acknowledgement(RecordMetadata(record.topic, tp, -1, -1, -1, -1), exception, record.headers)

    def acknowledgement_callback(self, callback: Callable[[RecordMetadata, BaseException | None], object] | None,
                                 headers: Any) -> _Acknowledge:
        return _Acknowledge(self, callback, headers)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for entry in self._entries:
            if entry.close is not None:
                try:
                    entry.close()
                except Exception:
                    log.exception("closing interceptor %s failed", entry.name)


class _Acknowledge:
    """A record's callback with interceptors: ``on_acknowledgement`` first, then the user's callback
    (Java ``AppendCallbacks.onCompletion``)."""

    __slots__ = ("_callback", "_chain", "_headers")

    def __init__(self, chain: ProducerInterceptors,
                 callback: Callable[[RecordMetadata, BaseException | None], object] | None, headers: Any) -> None:
        self._chain = chain
        self._callback = callback
        self._headers = headers

    def __call__(self, metadata: RecordMetadata, exception: BaseException | None) -> None:
        self._chain.on_acknowledgement(metadata, exception, self._headers)
        if self._callback is not None:
            self._callback(metadata, exception)


def resolve_interceptors(specs: Sequence[object], configs: Mapping[str, Any]) -> ProducerInterceptors | None:
    """The chain for ``interceptor.classes`` (None when empty): classes created and configured, objects and
    functions used as given."""
    if not specs:
        return None
    made: list[object] = []
    for spec in specs:
        if isinstance(spec, type):
            try:
                interceptor: object = spec()
            except Exception as exc:
                raise ConfigError(f"interceptor.classes: {spec.__name__} could not be created without "
                                  f"arguments: {exc}", "interceptor.classes") from exc
            configure = getattr(interceptor, "configure", None)
            if callable(configure):
                try:
                    configure(dict(configs))
                except Exception as exc:
                    raise ConfigError(f"interceptor.classes: {spec.__name__}.configure() failed: {exc}",
                                      "interceptor.classes") from exc
            made.append(interceptor)
        else:
            made.append(spec)
    return ProducerInterceptors(made)
