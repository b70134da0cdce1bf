"""The per-process producer cache: reuse, idle close, eviction and fork safety (fake producers)."""

from __future__ import annotations

import multiprocessing
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

import pytest

from sparkafka._clock import ManualClock
from sparkafka.spark.producer_cache import ProducerCache

if TYPE_CHECKING:  # pytest puts tests/spark on sys.path; mypy names the module from tests/
    from spark.spark_fakes import FakeProducer
else:
    from spark_fakes import FakeProducer


class Factory:
    def __init__(self) -> None:
        self.made: list[FakeProducer] = []

    def __call__(self, config: Mapping[str, str]) -> FakeProducer:
        p = FakeProducer(config=dict(config))
        self.made.append(p)
        return p


def closed(producer: object) -> bool:
    assert isinstance(producer, FakeProducer)
    return producer.closed


def make(clock: ManualClock | None = None) -> tuple[ProducerCache, Factory, ManualClock]:
    factory, clock = Factory(), clock or ManualClock()
    return ProducerCache(factory, clock=clock, reaper=False), factory, clock


def test_same_config_shares_one_producer_across_tasks() -> None:
    cache, factory, _ = make()
    with cache.lease({"bootstrap.servers": "a:1", "linger.ms": "5"}) as p1:
        pass
    with cache.lease((("linger.ms", "5"), ("bootstrap.servers", "a:1"))) as p2:
        pass
    with cache.lease({"bootstrap.servers": "a:1"}) as p3:
        pass
    assert p1 is p2 and p3 is not p1
    assert len(factory.made) == 2 and factory.made[0].config == {"bootstrap.servers": "a:1",
                                                                 "linger.ms": "5"}


def test_idle_producers_are_closed_but_not_leased_ones() -> None:
    cache, factory, clock = make()
    with cache.lease({"a": "1"}, idle_timeout_ms=1000):
        pass
    key, busy = cache.acquire({"b": "2"}, idle_timeout_ms=1000)
    clock.advance(999)
    assert cache.close_idle() == 0
    clock.advance(1)
    assert cache.close_idle() == 1
    assert factory.made[0].closed and not closed(busy) and len(cache) == 1
    cache.release(key, busy)
    clock.advance(1000)
    assert cache.close_idle() == 1 and closed(busy)
    with cache.lease({"a": "1"}) as again:
        assert again is not factory.made[0]


def test_evicted_producer_closes_when_its_last_lease_ends() -> None:
    cache, _, _ = make()
    key, p = cache.acquire({"a": "1"})
    key2, same = cache.acquire({"a": "1"})
    cache.evict(key, p)
    cache.release(key, p)
    assert not closed(p)
    with cache.lease({"a": "1"}) as fresh:
        assert fresh is not p
    cache.release(key2, same)
    assert closed(p)


def test_close_all_closes_everything() -> None:
    cache, factory, _ = make()
    cache.acquire({"a": "1"})
    with cache.lease({"b": "1"}):
        pass
    cache.close_all()
    assert all(p.closed for p in factory.made) and len(cache) == 0


def test_pid_change_builds_a_fresh_producer_without_closing_the_inherited_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    cache, factory, _ = make()
    with cache.lease({"a": "1"}) as parent:
        pass
    real_pid = os.getpid()
    monkeypatch.setattr(os, "getpid", lambda: real_pid + 1)
    with cache.lease({"a": "1"}) as child:
        pass
    assert child is not parent and not closed(parent) and len(factory.made) == 2


def _child_lease(cache: ProducerCache, parents: FakeProducer,
                 queue: multiprocessing.Queue[tuple[int, bool, bool]]) -> None:
    with cache.lease({"a": "1"}) as p:
        queue.put((cache.created, p is not parents, isinstance(p, FakeProducer) and not p.closed))


def test_real_fork_gets_its_own_producer() -> None:
    """A forked child must not use the producer it inherited (its Sender thread did not survive the fork): it
    builds its own. The child's copy of the parent's producer is the same object (fork copies memory), so
    identity tells the two apart; ``created`` alone cannot (1 either way: reset then one more, or inherited)."""
    cache, factory, _ = make()
    with cache.lease({"a": "1"}):
        pass
    ctx = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[tuple[int, bool, bool]] = ctx.Queue()
    proc = ctx.Process(target=_child_lease, args=(cache, factory.made[0], queue))
    proc.start()
    created_in_child, own, usable = queue.get(timeout=30)
    proc.join(30)
    assert own and usable and created_in_child == 1  # the child built its own; the counter restarted
    assert cache.created == 1 and not factory.made[0].closed


def test_reaper_thread_closes_idle_producers() -> None:
    factory = Factory()
    cache = ProducerCache(factory)
    with cache.lease({"a": "1"}, idle_timeout_ms=0):
        pass
    deadline = time.monotonic() + 10
    while not factory.made[0].closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert factory.made[0].closed and len(cache) == 0
    cache.close_all()
