"""One producer per executor Python process and config, shared by the tasks that run there.

How it works: Spark runs the sink's tasks in long-lived Python worker processes, one task at a time
each (``spark.python.worker.reuse``). Building a producer costs a metadata round trip and an I/O
thread, so ``ProducerCache`` keeps one per frozen config (the sorted ``kafka.*`` options) and lends
it to each task with ``lease(config)``. A producer unused for its idle timeout is closed by a daemon
reaper thread; every cached producer is closed at interpreter exit. A task whose producer failed
(a delivery error, a closed producer) ``evict``s it, so the retry gets a fresh one.

Fork safety: the PySpark daemon forks worker processes. A producer's I/O thread does not survive a
fork, so when the cache sees a new process id (checked on every lease, and reset by an
``os.register_at_fork`` hook for the shared cache) it forgets the inherited producers without
touching them and builds fresh ones.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from sparkafka._clock import SYSTEM_CLOCK, Clock
from sparkafka.producer.arrow.send import ProducerLike

__all__ = ["CachedProducer", "ConfigKey", "ProducerCache", "freeze_config", "shared_cache"]

log = logging.getLogger("sparkafka.spark")

ConfigKey = tuple[tuple[str, str], ...]
DEFAULT_IDLE_TIMEOUT_MS = 60_000
CLOSE_TIMEOUT_S = 10.0


class CachedProducer(ProducerLike, Protocol):
    """What the cache needs from a producer: the send side plus ``close``."""

    def close(self, timeout: float | None = None) -> None: ...


ProducerFactory = Callable[[Mapping[str, str]], CachedProducer]


def freeze_config(config: Mapping[str, Any] | ConfigKey) -> ConfigKey:
    """The cache key of a config: its items as strings, sorted."""
    items = config.items() if isinstance(config, Mapping) else config
    return tuple(sorted((str(k), str(v)) for k, v in items))


def default_factory(config: Mapping[str, str]) -> CachedProducer:
    from sparkafka.producer.producer import KafkaProducer

    producer: CachedProducer = KafkaProducer(dict(config))
    return producer


class _Entry:
    __slots__ = ("idle_timeout_ms", "in_use", "last_used_ms", "producer", "retired")

    def __init__(self, producer: CachedProducer, idle_timeout_ms: int, now_ms: float) -> None:
        self.producer = producer
        self.in_use = 0
        self.last_used_ms = now_ms
        self.idle_timeout_ms = idle_timeout_ms
        self.retired = False


class ProducerCache:
    """Producers keyed by frozen config, shared by the tasks of one process."""

    def __init__(self, factory: ProducerFactory = default_factory, *, clock: Clock = SYSTEM_CLOCK,
                 reaper: bool = True, close_timeout_s: float = CLOSE_TIMEOUT_S) -> None:
        self._factory = factory
        self._clock = clock
        self._reaper_enabled = reaper
        self._close_timeout_s = close_timeout_s
        self._reset()

    def _reset(self) -> None:
        """Forget everything (used at construction and in a forked child; never closes)."""
        self._pid = os.getpid()
        self._cond = threading.Condition(threading.Lock())
        self._entries: dict[ConfigKey, _Entry] = {}
        self._retired: list[_Entry] = []
        self._reaper: threading.Thread | None = None
        self._stopped = False
        self.created = 0
        """Producers built by this cache in this process (for tests and logs)."""

    def after_fork_in_child(self) -> None:
        """Drop the producers inherited from the parent: their I/O threads do not exist here."""
        self._reset()

    def _check_pid(self) -> None:
        if os.getpid() != self._pid:
            log.debug("process changed from %d to %d: dropping inherited producers", self._pid, os.getpid())
            self._reset()

    def __len__(self) -> int:
        self._check_pid()
        return len(self._entries)

    # ---------------------------------------------------------------------------------------- leases

    def acquire(self, config: Mapping[str, Any] | ConfigKey,
                idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS) -> tuple[ConfigKey, CachedProducer]:
        """The producer for ``config`` (built on first use); pair with ``release``."""
        self._check_pid()
        key = freeze_config(config)
        with self._cond:
            entry = self._entries.get(key)
            if entry is None:
                # Built under the lock: concurrent tasks of one config must share one producer.
                producer = self._factory(dict(key))
                self.created += 1
                entry = _Entry(producer, idle_timeout_ms, self._clock.monotonic_ms())
                self._entries[key] = entry
                self._start_reaper()
            entry.in_use += 1
            entry.idle_timeout_ms = idle_timeout_ms
            return key, entry.producer

    def release(self, key: ConfigKey, producer: CachedProducer) -> None:
        """Give a leased producer back; closes it if it was evicted and nobody else uses it."""
        if os.getpid() != self._pid:
            return
        to_close: _Entry | None = None
        with self._cond:
            entry = self._entries.get(key)
            if entry is not None and entry.producer is producer:
                entry.in_use -= 1
                entry.last_used_ms = self._clock.monotonic_ms()
                self._cond.notify_all()
                return
            for retired in self._retired:
                if retired.producer is producer:
                    retired.in_use -= 1
                    if retired.in_use <= 0:
                        self._retired.remove(retired)
                        to_close = retired
                    break
        if to_close is not None:
            self._close(to_close.producer)

    @contextlib.contextmanager
    def lease(self, config: Mapping[str, Any] | ConfigKey,
              idle_timeout_ms: int = DEFAULT_IDLE_TIMEOUT_MS) -> Iterator[CachedProducer]:
        key, producer = self.acquire(config, idle_timeout_ms)
        try:
            yield producer
        finally:
            self.release(key, producer)

    def evict(self, key: ConfigKey, producer: CachedProducer) -> None:
        """Stop lending ``producer``; it is closed now if unused, else when its last lease ends."""
        if os.getpid() != self._pid:
            return
        with self._cond:
            entry = self._entries.get(key)
            if entry is None or entry.producer is not producer:
                return
            del self._entries[key]
            entry.retired = True
            if entry.in_use > 0:
                self._retired.append(entry)
                return
        self._close(producer)

    # ---------------------------------------------------------------------------------------- closing

    def _close(self, producer: CachedProducer) -> None:
        try:
            producer.close(self._close_timeout_s)
        except Exception:  # closing is best effort; the producer is gone from the cache either way
            log.warning("closing a cached producer failed", exc_info=True)

    def _take_idle(self, now_ms: float) -> list[_Entry]:
        idle = [(k, e) for k, e in self._entries.items()
                if e.in_use == 0 and now_ms - e.last_used_ms >= e.idle_timeout_ms]
        for k, _ in idle:
            del self._entries[k]
        return [e for _, e in idle]

    def close_idle(self) -> int:
        """Close the producers unused for their idle timeout; returns how many were closed."""
        self._check_pid()
        with self._cond:
            idle = self._take_idle(self._clock.monotonic_ms())
        for entry in idle:
            self._close(entry.producer)
        return len(idle)

    def close_all(self) -> None:
        """Close every cached producer (those still leased included) and stop the reaper."""
        if os.getpid() != self._pid:
            return
        with self._cond:
            entries = list(self._entries.values()) + self._retired
            self._entries.clear()
            self._retired = []
            self._stopped = True
            self._cond.notify_all()
        for entry in entries:
            self._close(entry.producer)

    def _start_reaper(self) -> None:
        if not self._reaper_enabled or self._reaper is not None:
            return
        self._stopped = False
        self._reaper = threading.Thread(target=self._reap, name="sparkafka-producer-reaper", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        cond = self._cond
        while True:
            with cond:
                if self._stopped or cond is not self._cond:
                    return
                now = self._clock.monotonic_ms()
                idle = self._take_idle(now)
                if not idle:
                    waits = [e.last_used_ms + e.idle_timeout_ms - now
                             for e in self._entries.values() if e.in_use == 0]
                    cond.wait(max(0.05, min(waits) / 1000.0) if waits else None)
                    continue
            for entry in idle:
                log.debug("closing a producer idle for %d ms", entry.idle_timeout_ms)
                self._close(entry.producer)


_SHARED = ProducerCache()


def shared_cache() -> ProducerCache:
    """The process-wide cache used by the Spark sink."""
    return _SHARED


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_SHARED.after_fork_in_child)
atexit.register(_SHARED.close_all)
