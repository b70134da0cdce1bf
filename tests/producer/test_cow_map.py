"""CopyOnWriteMap: plain-map semantics, and readers never see a map being changed under them."""

from __future__ import annotations

import threading

from sparkafka.producer.cow_map import CopyOnWriteMap


def test_basic_operations() -> None:
    m: CopyOnWriteMap[str, int] = CopyOnWriteMap()
    assert m.get("a") is None
    assert m.get("a", 7) == 7
    assert m.put_if_absent("a", 1) == 1
    assert m.put_if_absent("a", 2) == 1  # the existing value wins
    assert m.put("b", 3) is None
    assert m.put("b", 4) == 3
    assert len(m) == 2 and "a" in m and m["b"] == 4
    assert sorted(m.values()) == [1, 4]
    assert m.remove("a") == 1
    assert m.remove("a") is None
    m.clear()
    assert len(m) == 0


def test_put_if_absent_keeps_falsy_values() -> None:
    m: CopyOnWriteMap[str, int] = CopyOnWriteMap()
    assert m.put_if_absent("zero", 0) == 0
    assert m.put_if_absent("zero", 5) == 0


def test_snapshots_are_never_mutated() -> None:
    m: CopyOnWriteMap[int, int] = CopyOnWriteMap({1: 1})
    items = m.items()
    snapshot = m.snapshot()
    m.put(2, 2)
    m.remove(1)
    assert list(items) == [(1, 1)]
    assert dict(snapshot) == {1: 1}
    assert dict(m.items()) == {2: 2}


def test_concurrent_readers_iterate_while_writers_insert() -> None:
    """A plain dict would raise 'dictionary changed size during iteration' here."""
    m: CopyOnWriteMap[int, int] = CopyOnWriteMap()
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(base: int) -> None:
        for i in range(3000):
            m.put_if_absent(base + i, base + i)

    def reader() -> None:
        try:
            while not stop.is_set():
                seen = 0
                for key, value in m.items():
                    assert key == value
                    seen += 1
                    if seen % 50 == 0:
                        threading.Event().wait(0)  # let writers run mid-iteration
                assert seen <= len(m)
        except BaseException as exc:  # pragma: no cover - the failure path
            errors.append(exc)

    readers = [threading.Thread(target=reader) for _ in range(2)]
    writers = [threading.Thread(target=writer, args=(base,)) for base in (0, 100000)]
    for t in readers + writers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    assert len(m) == 6000


def test_put_if_absent_races_settle_on_one_value() -> None:
    m: CopyOnWriteMap[str, object] = CopyOnWriteMap()
    winners: list[object] = []
    barrier = threading.Barrier(8)

    def contend() -> None:
        mine = object()
        barrier.wait()
        winners.append(m.put_if_absent("k", mine))

    threads = [threading.Thread(target=contend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(w) for w in winners}) == 1
    assert winners[0] is m.get("k")
