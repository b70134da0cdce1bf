"""A copy-on-write map for read-mostly shared state (Kafka's ``CopyOnWriteMap``).

How it works: the map holds a reference to a plain ``dict`` that is never mutated once published.
Readers use that dict directly, without a lock: one attribute load plus a dict lookup, and whatever
dict they loaded is always complete and consistent. Writers take a lock, copy the dict, change the
copy and publish it by swapping the reference (a single atomic store). Writes are rare (one per new
partition or topic) while reads happen for every record, so the copy cost is paid where it is cheap.
A write is one ``dict`` copy in C (~25 us for 6,000 integer keys); keys keep their insertion order.
"""

from __future__ import annotations

import threading
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Generic, TypeVar, overload

__all__ = ["CopyOnWriteMap"]

K = TypeVar("K")
V = TypeVar("V")
D = TypeVar("D")

_MISSING: object = object()


class CopyOnWriteMap(Generic[K, V]):
    """A thread-safe map: lock-free reads of an immutable snapshot, copy-and-swap writes."""

    __slots__ = ("_lock", "_map")

    def __init__(self, initial: Mapping[K, V] | None = None) -> None:
        self._map: dict[K, V] = dict(initial) if initial else {}
        self._lock = threading.Lock()

    # -- reads (no lock) ---------------------------------------------------------------------
    @overload
    def get(self, key: K) -> V | None: ...

    @overload
    def get(self, key: K, default: D) -> V | D: ...

    def get(self, key: K, default: object = None) -> object:
        return self._map.get(key, default)

    def __getitem__(self, key: K) -> V:
        return self._map[key]

    def __contains__(self, key: object) -> bool:
        return key in self._map

    def __len__(self) -> int:
        return len(self._map)

    def __iter__(self) -> Iterator[K]:
        return iter(self._map)

    def snapshot(self) -> Mapping[K, V]:
        """The current contents. The returned dict is never changed by this map; do not change it."""
        return self._map

    def items(self) -> ItemsView[K, V]:
        """A view of one snapshot: safe to iterate while other threads write."""
        return self._map.items()

    def keys(self) -> KeysView[K]:
        return self._map.keys()

    def values(self) -> ValuesView[V]:
        return self._map.values()

    # -- writes (copy under the lock, then swap) ---------------------------------------------
    def put(self, key: K, value: V) -> V | None:
        """Set ``key``; returns the previous value or None."""
        with self._lock:
            updated = dict(self._map)
            previous = updated.get(key)
            updated[key] = value
            self._map = updated
            return previous

    def put_if_absent(self, key: K, value: V) -> V:
        """Insert ``value`` unless ``key`` is present; returns the value now in the map
        (the existing one if there was one, else ``value``)."""
        current = self._map.get(key, _MISSING)
        if current is not _MISSING:
            return current  # type: ignore[return-value]
        with self._lock:
            current = self._map.get(key, _MISSING)
            if current is not _MISSING:
                return current  # type: ignore[return-value]
            updated = dict(self._map)
            updated[key] = value
            self._map = updated
            return value

    def remove(self, key: K) -> V | None:
        """Delete ``key``; returns the removed value or None."""
        with self._lock:
            if key not in self._map:
                return None
            updated = dict(self._map)
            previous = updated.pop(key)
            self._map = updated
            return previous

    def clear(self) -> None:
        with self._lock:
            self._map = {}

    def __repr__(self) -> str:
        return f"CopyOnWriteMap({self._map!r})"
