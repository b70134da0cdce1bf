"""Records whose topic has no metadata yet, held so that the confluent layer's ``produce()`` never waits.

How it works: ``KafkaProducer.send`` is Java's ``send()``: it blocks the calling thread until the topic's
metadata arrives, up to max.block.ms (after a rebootstrap also for a topic it knew). librdkafka's
``produce()`` never blocks: it queues the record and fails it later. ``MetadataHold`` gives the confluent
layer that behaviour. ``produce()`` asks ``take()`` first: a record for a topic the current metadata snapshot
does not know, or for a topic that has records held already (the order per topic is kept), is held here and
``take()`` returns True; any other record is sent by the caller at once. The hold's thread (started with a
held record when none runs, ending when nothing is held) looks at every held topic about every 20 ms: once the topic is
known it hands the topic's records to ``send`` in produce order (each stays at the head of its queue until
``send`` returned, so a later ``produce()`` queues behind it instead of overtaking it); a record held longer
than ``wait_ms`` from ``produce()`` (max.block.ms, or message.timeout.ms if shorter: what the blocked
``send()`` would have waited) fails with MetadataTimeoutError; a broker error about the topic
(TOPIC_AUTHORIZATION_FAILED, an invalid name) fails every record held for it. ``drain()`` waits until nothing
is held (``flush()``, ``commit_transaction()``: a held record must join its transaction before the commit),
``fail_all()`` fails what is held (``purge()``, ``abort_transaction()``), ``close()`` fails the rest, and the
thread ends once its current ``send`` returned (``join()`` waits for it). ``send`` and ``fail`` never raise:
they report through the record's delivery report.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from sparkafka import errors
from sparkafka._clock import Clock
from sparkafka._topic import validate_topic_name
from sparkafka.net.metadata import Metadata

__all__ = ["MetadataHold"]

R = TypeVar("R")

_LOOK_EVERY_S = 0.02
"""How often the thread looks at the held topics' metadata (a produce() or close() wakes it at once)."""


@dataclass(frozen=True)
class _Held(Generic[R]):
    record: R
    deadline_ms: float


class MetadataHold(Generic[R]):
    """Records (of any type ``R``) waiting for their topic's metadata; see the module docstring."""

    def __init__(self, metadata: Metadata, wakeup: Callable[[], None], clock: Clock, wait_ms: float,
                 send: Callable[[R], None], fail: Callable[[R, BaseException], None],
                 admit: Callable[[R], None] = lambda record: None, wait_setting: str = "max.block.ms") -> None:
        self._metadata = metadata
        self._admit = admit
        self._wakeup = wakeup
        self._clock = clock
        self.wait_ms = wait_ms
        self.wait_setting = wait_setting
        """The setting ``wait_ms`` comes from, named in the MetadataTimeoutError of a record held that long."""
        self._send = send
        self._fail = fail
        self._cond = threading.Condition()
        self._held: dict[str, collections.deque[_Held[R]]] = {}
        self._sending: _Held[R] | None = None
        """The record the thread is handing to ``send`` (still at the head of its queue)."""
        self._thread: threading.Thread | None = None
        self._closed = False

    def __len__(self) -> int:
        with self._cond:
            return sum(len(queue) for queue in self._held.values())

    def take(self, topic: str, record: R) -> bool:
        """Hold ``record`` if its topic has no metadata or has records held; False: send it now. Raises
        InvalidTopicNameError for a name no broker accepts, and whatever ``admit`` raises for a record that
        must not wait (one too large: ``send()`` raises that before it waits for metadata)."""
        if not self._held and self._metadata.fetch().partition_count(topic) is not None:
            return False  # the usual case, without the lock
        validate_topic_name(topic)
        self._admit(record)
        now = self._clock.monotonic_ms()
        with self._cond:
            queue = self._held.get(topic)
            if queue is None:
                if self._closed or self._metadata.fetch().partition_count(topic) is not None:
                    return False  # closed: send() says so
                queue = self._held[topic] = collections.deque()
            queue.append(_Held(record, now + self.wait_ms))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="sparkafka-confluent-metadata-hold",
                                                daemon=True)
                self._thread.start()
            self._cond.notify_all()
        self._metadata.add_topic(topic, now)
        self._metadata.request_update()
        self._wakeup()
        return True

    def drain(self, timeout_s: float | None) -> bool:
        """Wait until nothing is held (sent or failed); False if ``timeout_s`` passed first."""
        deadline = None if timeout_s is None else self._clock.monotonic_ms() + timeout_s * 1000.0
        with self._cond:
            while self._held:
                if deadline is None:
                    self._cond.wait()
                    continue
                remaining = deadline - self._clock.monotonic_ms()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining / 1000.0)
        return True

    def fail_all(self, error: BaseException) -> int:
        """Fail every held record with ``error`` (not the one being sent right now); returns how many."""
        failed: list[R] = []
        with self._cond:
            for topic in list(self._held):
                queue = self._held[topic]
                keep = queue[0] if queue and queue[0] is self._sending else None
                failed.extend(h.record for h in queue if h is not keep)
                queue.clear()
                if keep is not None:
                    queue.append(keep)
                else:
                    del self._held[topic]
            self._cond.notify_all()
        for record in failed:
            self._fail(record, error)
        return len(failed)

    def close(self, error: BaseException) -> None:
        """Fail what is held with ``error`` and tell the thread to stop once its current ``send`` returned
        (``join`` waits for that: close the producer first, which ends a ``send`` blocked on memory)."""
        with self._cond:
            self._closed = True
        self.fail_all(error)
        with self._cond:
            self._cond.notify_all()

    def join(self, timeout_s: float | None) -> None:
        """Wait up to ``timeout_s`` for the thread to end (after ``close``)."""
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    # ------------------------------------------------------------------ the thread
    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._held:
                    # nothing held: the thread ends (the next take() starts another), so that it keeps
                    # nothing alive (``send`` and ``fail`` are the owner's methods) once the owner is dropped
                    self._thread = None
                    self._cond.notify_all()
                    return
                topics = list(self._held)
            for topic in topics:
                self._serve(topic)
            with self._cond:
                if self._held and not self._closed:
                    self._cond.wait(_LOOK_EVERY_S)

    def _serve(self, topic: str) -> None:
        try:
            self._metadata.wait_for_topic(topic, None, 0, wakeup=self._wakeup)  # known, or raises at once
        except errors.MetadataTimeoutError:
            self._expire(topic)
            return
        except errors.KafkaError as exc:  # the broker's answer about the topic; the producer closed
            self._fail_topic(topic, exc)
            return
        while True:
            with self._cond:
                queue = self._held.get(topic)
                if not queue:
                    return
                head = self._sending = queue[0]
            try:
                self._send(head.record)
            finally:
                with self._cond:
                    self._sending = None
                    if queue and queue[0] is head:
                        queue.popleft()
                    if not queue and self._held.get(topic) is queue:
                        del self._held[topic]
                        self._cond.notify_all()

    def _expire(self, topic: str) -> None:
        now = self._clock.monotonic_ms()
        expired: list[R] = []
        with self._cond:
            queue = self._held.get(topic)
            while queue and queue[0].deadline_ms <= now:
                expired.append(queue.popleft().record)
            if queue is not None and not queue:
                del self._held[topic]
                self._cond.notify_all()
        for record in expired:
            self._fail(record, errors.MetadataTimeoutError(
                f"topic {topic!r} not present in metadata after {self.wait_ms:.0f} ms ({self.wait_setting})"))

    def _fail_topic(self, topic: str, error: BaseException) -> None:
        with self._cond:
            queue = self._held.pop(topic, None)
            self._cond.notify_all()
        for held in queue or ():
            self._fail(held.record, error)
