"""librdkafka's partitioners: each places records where confluent-kafka (librdkafka) places them.

How it works: the proof produces the same records with confluent-kafka (``partitioner`` set) and with a
sparkafka ``KafkaProducer`` whose ``partitioner.class`` is ``LibrdkafkaPartitioner(name)``, to topics of
1 to 31 partitions on the librdkafka mock cluster, and compares the partitions both delivery reports
give, record by record. Keys: a seeded random corpus of 0-40 bytes plus edge cases, with hashes whose
32-bit sign bit is set for murmur2 and FNV-1a (checked), the empty key and the null key. Where
librdkafka draws at random (null keys, empty keys for consistent_random, every key for random) the
comparison is of behaviour: with ``sticky.partitioning.linger.ms`` at its maximum every such record of a
run shares one partition, with 0 they spread over every partition. The unit tests pin the hash
functions to librdkafka's own vectors (``rd_murmur2`` / ``rd_fnv1a``) and the sticky timer to the
injected clock.
"""

from __future__ import annotations

import pickle
import random
import zlib
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka import Producer as ConfluentProducer

from sparkafka import KafkaProducer
from sparkafka._clock import ManualClock
from sparkafka.errors import ConfigError
from sparkafka.producer.librdkafka_partitioners import (
    LIBRDKAFKA_PARTITIONERS,
    LibrdkafkaPartitioner,
    crc32_partition,
    fnv1a,
    fnv1a_partition,
    murmur2_partition,
)
from sparkafka.producer.murmur2 import murmur2
from support.mock_cluster import MockCluster

PARTITION_COUNTS = (1, 2, 3, 5, 7, 8, 12, 16, 31)
HASHING = ("consistent", "consistent_random", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random")


def _corpus() -> list[bytes]:
    rng = random.Random(25)
    keys = [b"", b"a", b"kafka", b"1234", b"\x00", b"\xff" * 4, b"\xff" * 7, "ключ-🔑".encode(),
            bytes(range(256))]
    keys += [f"user-{i}".encode() for i in range(60)]
    keys += [rng.randbytes(rng.randrange(1, 41)) for _ in range(150)]
    return keys


INT32_MIN_FNV1A_KEY = b"\x02W\x96\xdfM"
"""A key whose FNV-1a 32 is 0x80000000 (INT32_MIN as the signed int librdkafka negates)."""
KEYS = [*_corpus(), INT32_MIN_FNV1A_KEY]


def test_the_corpus_has_negative_hashes() -> None:
    assert sum(1 for k in KEYS if murmur2(k) < 0) > 20  # murmur2 returns Java's signed int
    assert sum(1 for k in KEYS if (fnv1a_raw(k) & 0x80000000)) > 20


def fnv1a_raw(data: bytes) -> int:
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


# --------------------------------------------------------------------------------------- the proof


def _topics(mock: MockCluster, unique_topic: Callable[[str], str]) -> dict[int, str]:
    topics = {}
    for n in PARTITION_COUNTS:
        topics[n] = unique_topic(f"p{n}")
        mock.create_topic(topics[n], n, 1)
    return topics


def _confluent_partitions(bootstrap: str, name: str, topics: dict[int, str], keys: Sequence[bytes | None],
                          **extra: Any) -> dict[int, list[int]]:
    producer = ConfluentProducer({"bootstrap.servers": bootstrap, "partitioner": name, **extra})
    # librdkafka counts a partition as available once its leader's broker handle is assigned, a moment after
    # the first metadata; until then a sticky partition is drawn again for every record. One delivered
    # record per partition (explicit: the partitioner is not asked) settles that first. One per topic did
    # not: under load the sticky test saw librdkafka put a topic's first record on partition 2 and the rest
    # on partition 0 (its partition 2 not yet available at the second record, with a 900 s sticky linger).
    for n, topic in topics.items():
        for partition in range(n):
            producer.produce(topic, b"warm-up", partition=partition)
    assert producer.flush(30) == 0
    out: dict[int, list[int]] = {}
    for n, topic in topics.items():
        got: list[int] = [-1] * len(keys)

        def report(err: Any, msg: Any, got: list[int] = got) -> None:
            assert err is None, err
            got[int(msg.value())] = msg.partition()

        for i, key in enumerate(keys):
            producer.produce(topic, str(i).encode(), key=key, on_delivery=report)
            producer.poll(0)
        out[n] = got
    assert producer.flush(30) == 0
    return out


def _sparkafka_partitions(bootstrap: str, partitioner: LibrdkafkaPartitioner, topics: dict[int, str],
                          keys: Sequence[bytes | None]) -> dict[int, list[int]]:
    with KafkaProducer(bootstrap_servers=bootstrap, partitioner_class=partitioner) as producer:
        futures = {n: [producer.send(topic, str(i).encode(), key) for i, key in enumerate(keys)]
                   for n, topic in topics.items()}
        producer.flush(30)
        return {n: [f.result(0).partition for f in fs] for n, fs in futures.items()}


@pytest.mark.parametrize("name", HASHING)
def test_keyed_records_land_where_librdkafka_puts_them(name: str, mock_cluster: MockCluster,
                                                       unique_topic: Callable[[str], str]) -> None:
    topics = _topics(mock_cluster, unique_topic)
    hashed: list[bytes | None] = [k for k in KEYS if k or name != "consistent_random"]
    if name in ("consistent", "murmur2", "fnv1a"):
        hashed.append(None)  # these hash a null key as no bytes
    theirs = _confluent_partitions(mock_cluster.bootstrap_servers, name, topics, hashed)
    ours = _sparkafka_partitions(mock_cluster.bootstrap_servers, LibrdkafkaPartitioner(name), topics, hashed)
    for n in PARTITION_COUNTS:
        assert ours[n] == theirs[n], f"{name} with {n} partitions"
    assert len(set(theirs[31])) > 20  # the keys really spread (a constant would not prove anything)


@pytest.mark.parametrize("name", ["random", "consistent_random", "murmur2_random", "fnv1a_random"])
@pytest.mark.parametrize("keyless", [None, b""])
def test_keyless_records_follow_librdkafkas_sticky_rule(name: str, keyless: bytes | None, mock_cluster: MockCluster,
                                                        unique_topic: Callable[[str], str]) -> None:
    """Null keys (and, for consistent_random, empty keys) stick to one random partition for
    sticky.partitioning.linger.ms; with 0 each is random. Empty keys for the others are hashed (random
    for ``random``), which the spread/constant checks below also tell apart."""
    topics = {n: t for n, t in _topics(mock_cluster, unique_topic).items() if n in (1, 7, 8)}
    keys = [keyless] * 300
    sticky = keyless is None or name == "consistent_random"
    for linger in (900000, 0):
        theirs = _confluent_partitions(mock_cluster.bootstrap_servers, name, topics, keys,
                                       **{"sticky.partitioning.linger.ms": linger})
        ours = _sparkafka_partitions(mock_cluster.bootstrap_servers, LibrdkafkaPartitioner(name, linger),
                                     topics, keys)
        for n in topics:
            for who, result in (("librdkafka", theirs[n]), ("sparkafka", ours[n])):
                if sticky and linger:
                    assert len(set(result)) == 1, (who, name, n, linger, result)
                elif sticky or name == "random":
                    assert set(result) == set(range(n)), (who, name, n, linger, result)
                else:
                    assert set(result) == set(theirs[n]) and len(set(result)) == 1, (who, name, n, linger, result)


# ------------------------------------------------------------------------------------------ units


@pytest.mark.parametrize(("key", "murmur", "fnv"), [
    (b"kafka", 0xD067CF64, 0x0D33C4E1),
    (b"giberish123456789", 0x8F552B0C, 0x77A58295),
    (b"1234", 0x9FC97B14, 0x023BDD03),
    (b"234", 0xE7C009CA, 0x2DEA3CD2),
    (b"34", 0x873930DA, 0x740FA83E),
    (b"4", 0x5A4B5CA1, 0x310CA263),
    (b"PreAmbleWillBeRemoved,ThePrePartThatIs", 0x78424F1C, 0x65CBD69C),
    (b"", 0x106E08D9, 0x7EE3623B),
])
def test_hashes_match_librdkafkas_own_vectors(key: bytes, murmur: int, fnv: int) -> None:
    assert murmur2(key) & 0xFFFFFFFF == murmur
    assert fnv1a(key) == fnv
    for n in (1, 3, 8, 31):
        assert murmur2_partition(key, n) == (murmur & 0x7FFFFFFF) % n
        assert fnv1a_partition(key, n) == fnv % n
        assert crc32_partition(key, n) == zlib.crc32(key) % n


def test_fnv1a_of_int32_min_stays_unsigned_2_to_31() -> None:
    """``-h`` of INT32_MIN wraps to itself in librdkafka: as an unsigned it is 2**31 (this key is in the
    corpus, so the proof above compares it with librdkafka too)."""
    assert fnv1a_raw(INT32_MIN_FNV1A_KEY) == 0x80000000
    assert fnv1a(INT32_MIN_FNV1A_KEY) == 0x80000000
    assert [fnv1a_partition(INT32_MIN_FNV1A_KEY, n) for n in (3, 5, 7)] == [2**31 % 3, 2**31 % 5, 2**31 % 7]


class _Cluster:
    def __init__(self, n: int, leaderless: Sequence[int] = ()) -> None:
        self.n = n
        self.leaderless = set(leaderless)

    def partition_count(self, topic: str) -> int | None:
        return self.n

    def leader_for(self, tp: tuple[str, int]) -> int | None:
        return None if tp[1] in self.leaderless else 1


def test_sticky_partition_changes_after_the_linger_on_the_injected_clock() -> None:
    clock = ManualClock()
    draws = iter([3, 5, 1])
    p = LibrdkafkaPartitioner("murmur2_random", 10, clock=clock, randrange=lambda n: next(draws))
    cluster: Any = _Cluster(8)
    assert [p.partition("t", None, None, None, b"v", cluster) for _ in range(4)] == [3] * 4
    clock.advance(9.9)
    assert p.partition("t", None, None, None, b"v", cluster) == 3
    clock.advance(0.1)
    assert p.partition("t", None, None, None, b"v", cluster) == 5
    cluster.leaderless = {5}  # the sticky partition lost its leader: drawn again at once
    assert p.partition("t", None, None, None, b"v", cluster) == 1


def test_random_draws_again_once_when_the_partition_has_no_leader() -> None:
    draws = iter([2, 2, 0])
    p = LibrdkafkaPartitioner("random", 0, randrange=lambda n: next(draws))
    cluster: Any = _Cluster(4, leaderless=[2])
    assert p.partition("t", None, b"k", None, b"v", cluster) == 2  # the second draw is taken as it is
    assert p.partition("t", None, b"k", None, b"v", cluster) == 0


def test_every_name_and_bad_settings() -> None:
    assert set(LIBRDKAFKA_PARTITIONERS) == {"random", *HASHING}
    with pytest.raises(ConfigError, match=r"unknown librdkafka partitioner 'crc32'.*consistent_random") as info:
        LibrdkafkaPartitioner("crc32")
    assert info.value.key == "partitioner"
    with pytest.raises(ConfigError, match=r"'sticky\.partitioning\.linger\.ms' must be an int from 0 to 900000"):
        LibrdkafkaPartitioner("random", 900001)


def test_partitioners_pickle_with_the_config() -> None:
    for name in LIBRDKAFKA_PARTITIONERS:
        partitioner = LibrdkafkaPartitioner(name, 7)
        again = pickle.loads(pickle.dumps(partitioner))
        assert again == partitioner and again.sticky_linger_ms == 7
        cluster: Any = _Cluster(5)
        if name != "random":
            assert again.partition("t", None, b"key", None, None, cluster) == partitioner.partition(
                "t", None, b"key", None, None, cluster)
