"""librdkafka's partitioners (the ``partitioner`` property of confluent-kafka), as ``Partitioner`` objects.

How it works: ``LibrdkafkaPartitioner(name)`` places records exactly as librdkafka's
``rd_kafka_msg_partitioner`` does with that ``partitioner`` setting, so records produced by
confluent-kafka and by sparkafka with the same setting land on the same partitions:

* ``consistent``: ``crc32(key) % n`` (CRC-32 as zlib's); a null or empty key hashes as no bytes: 0.
* ``consistent_random`` (librdkafka's default): CRC-32 for non-empty keys; null *and empty* keys are
  keyless.
* ``murmur2``: ``(murmur2(key) & 0x7fffffff) % n``, Java's ``toPositive(murmur2(key)) % n`` (a negative
  hash loses its sign bit, as in Java since 0.8.2: not ``abs()``); a null key hashes as no bytes.
* ``murmur2_random``: the same for non-null keys (an empty key is hashed); null keys are keyless. Keyed
  records go where Java's and kafka-python's default partitioners send them.
* ``fnv1a``: FNV-1a 32 of the key read as a signed 32-bit int, negated if negative (Sarama's
  ``NewHashPartitioner``; INT32_MIN stays 2**31 as an unsigned), then ``% n``; a null key hashes as no
  bytes.
* ``fnv1a_random``: the same for non-null keys; null keys are keyless.
* ``random``: a random partition per keyed record (and per empty key); null keys are keyless.

"Keyless" records follow librdkafka's sticky partitioning: one random partition per topic, drawn again
after ``sticky.partitioning.linger.ms`` (librdkafka: twice ``linger.ms`` unless set) or as soon as it
has no leader; with ``sticky_linger_ms=0`` each keyless record gets a random partition. A random draw
is ``rd_kafka_msg_partitioner_random``: a uniform partition, drawn once more if the first has no leader.
The time comes from the injected clock (``sparkafka._clock``).
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Final

from sparkafka._clock import SYSTEM_CLOCK, Clock
from sparkafka._types import ClusterView
from sparkafka.errors import ConfigError, IllegalStateError
from sparkafka.producer.murmur2 import partition_for_key_fast

__all__ = [
    "DEFAULT_STICKY_LINGER_MS",
    "LIBRDKAFKA_PARTITIONERS",
    "LibrdkafkaPartitioner",
    "crc32_partition",
    "fnv1a",
    "fnv1a_partition",
    "murmur2_partition",
]

LIBRDKAFKA_PARTITIONERS: Final = ("random", "consistent", "consistent_random", "murmur2", "murmur2_random",
                                  "fnv1a", "fnv1a_random")
"""The ``partitioner`` values librdkafka accepts."""

DEFAULT_STICKY_LINGER_MS: Final = 10
"""librdkafka's ``sticky.partitioning.linger.ms`` with its default ``linger.ms`` (5): twice linger.ms."""

_FNV_OFFSET: Final = 0x811C9DC5
_FNV_PRIME: Final = 0x01000193


def crc32_partition(key: bytes | None, num_partitions: int) -> int:
    """librdkafka's ``consistent`` partitioner: ``rd_crc32(key) % n`` (no bytes for a null key)."""
    return zlib.crc32(key or b"") % num_partitions


def murmur2_partition(key: bytes | None, num_partitions: int) -> int:
    """librdkafka's ``murmur2`` partitioner: ``(rd_murmur2(key) & 0x7fffffff) % n`` (no bytes for null)."""
    return partition_for_key_fast(key or b"", num_partitions)


def fnv1a(data: bytes) -> int:
    """librdkafka's ``rd_fnv1a``: FNV-1a 32, as a signed int made non-negative, returned unsigned."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & 0xFFFFFFFF
    if h & 0x80000000:
        h = (0x100000000 - h) & 0xFFFFFFFF  # -h of the int32; INT32_MIN wraps to itself: 2**31 unsigned
    return h


def fnv1a_partition(key: bytes | None, num_partitions: int) -> int:
    """librdkafka's ``fnv1a`` partitioner: ``rd_fnv1a(key) % n`` (no bytes for a null key)."""
    return fnv1a(key or b"") % num_partitions


_HASHES: Final[dict[str, Callable[[bytes | None, int], int] | None]] = {
    "random": None,
    "consistent": crc32_partition,
    "consistent_random": crc32_partition,
    "murmur2": murmur2_partition,
    "murmur2_random": murmur2_partition,
    "fnv1a": fnv1a_partition,
    "fnv1a_random": fnv1a_partition,
}
_HASH_EVERY_KEY: Final = frozenset({"consistent", "murmur2", "fnv1a"})
"""Partitioners that hash null keys too (librdkafka calls them for every record)."""


class LibrdkafkaPartitioner:
    """One of librdkafka's partitioners (see the module docstring), as a sparkafka ``Partitioner``."""

    __slots__ = ("_clock", "_empty_is_keyless", "_hash", "_keyless_hashed", "_randrange", "_sticky", "name",
                 "sticky_linger_ms")

    def __init__(self, name: str = "consistent_random", sticky_linger_ms: int = DEFAULT_STICKY_LINGER_MS, *,
                 clock: Clock | None = None, randrange: Callable[[int], int] | None = None) -> None:
        if name not in _HASHES:
            raise ConfigError(f"unknown librdkafka partitioner {name!r}: use one of "
                              f"{', '.join(LIBRDKAFKA_PARTITIONERS)}", "partitioner")
        if type(sticky_linger_ms) is not int or not 0 <= sticky_linger_ms <= 900000:
            raise ConfigError(f"'sticky.partitioning.linger.ms' must be an int from 0 to 900000, got "
                              f"{sticky_linger_ms!r}", "sticky.partitioning.linger.ms")
        self.name = name
        self.sticky_linger_ms = sticky_linger_ms
        self._hash = _HASHES[name]
        self._keyless_hashed = name in _HASH_EVERY_KEY
        """Null keys are hashed (as no bytes) rather than placed at random."""
        self._empty_is_keyless = name == "consistent_random"
        self._clock = clock or SYSTEM_CLOCK
        self._randrange: Callable[[int], int] = randrange or random.randrange
        self._sticky: dict[str, tuple[int, float]] = {}
        """topic -> (sticky partition, when it was drawn in monotonic ms)."""

    def partition(self, topic: str, key: object, key_bytes: bytes | None, value: object,
                  value_bytes: bytes | None, cluster: ClusterView) -> int:
        n = cluster.partition_count(topic)
        if not n:
            raise IllegalStateError(f"no partitions are known for topic {topic!r}")
        if key_bytes is None or (self._empty_is_keyless and not key_bytes):
            if self._keyless_hashed:
                hash_partition = self._hash
                assert hash_partition is not None
                return hash_partition(key_bytes, n)
            if self.sticky_linger_ms:
                return self._sticky_partition(topic, n, cluster)
            return self._random_partition(topic, n, cluster)
        hash_partition = self._hash
        if hash_partition is None:
            return self._random_partition(topic, n, cluster)
        return hash_partition(key_bytes, n)

    def _random_partition(self, topic: str, n: int, cluster: ClusterView) -> int:
        """``rd_kafka_msg_partitioner_random``: uniform; drawn once more if the first has no leader."""
        p = self._randrange(n)
        if cluster.leader_for((topic, p)) is None:
            return self._randrange(n)
        return p

    def _sticky_partition(self, topic: str, n: int, cluster: ClusterView) -> int:
        """``rd_kafka_msg_sticky_partition``: keep the topic's partition for ``sticky_linger_ms``."""
        now = self._clock.monotonic_ms()
        current = self._sticky.get(topic)
        if (current is not None and now - current[1] < self.sticky_linger_ms and current[0] < n
                and cluster.leader_for((topic, current[0])) is not None):
            return current[0]
        p = self._random_partition(topic, n, cluster)
        self._sticky[topic] = (p, now)
        return p

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        return None

    def close(self) -> None:
        return None

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LibrdkafkaPartitioner) and other.name == self.name
                and other.sticky_linger_ms == self.sticky_linger_ms)

    def __hash__(self) -> int:
        return hash((self.name, self.sticky_linger_ms))

    def __repr__(self) -> str:
        return f"LibrdkafkaPartitioner({self.name!r}, sticky_linger_ms={self.sticky_linger_ms})"

