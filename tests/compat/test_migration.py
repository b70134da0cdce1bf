"""Migration: the same keyed records, produced with default settings by the original library and by its
compat layer, land on the same partitions.

How it works: 1,500 keys (text ids and random bytes of 1-64 bytes; hundreds of them hash to negative
signed 32-bit ints, checked) are produced to two new topics of the same partition count on Tansu, one by confluent-kafka
(librdkafka's default partitioner, consistent_random: CRC-32) or kafka-python (its DefaultPartitioner:
murmur2) and one by the compat producer, nothing configured but the bootstrap address. A confluent-kafka
consumer reads both topics back and every key must be on the same partition in both.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable
from typing import Any

import kafka
import pytest
from confluent_kafka import Producer as ConfluentProducer

from sparkafka.compat.confluent import Producer as CompatProducer
from sparkafka.compat.kafka_python import KafkaProducer as CompatKafkaProducer
from sparkafka.producer.murmur2 import murmur2
from support.consume import consume_all, create_topic

pytestmark = [pytest.mark.timeout(180)]


def _keys() -> list[bytes]:
    rng = random.Random(2025)
    keys = [f"customer-{i}".encode() for i in range(700)]
    keys += [rng.randbytes(rng.randrange(1, 65)) for _ in range(800)]
    return list(dict.fromkeys(keys))


KEYS = _keys()


def test_the_keys_have_negative_hashes() -> None:
    assert sum(1 for k in KEYS if murmur2(k) < 0) > 300
    assert sum(1 for k in KEYS if zlib.crc32(k) & 0x80000000) > 300


def _placement(bootstrap: str, topic: str) -> dict[bytes, int]:
    records = consume_all(bootstrap, topic, expected_count=len(KEYS), timeout=60)
    assert len(records) == len(KEYS)
    return {r.key: r.partition for r in records if r.key is not None}


def _topic(bootstrap: str, unique_topic: Callable[[str], str], partitions: int) -> str:
    topic = unique_topic("mig")
    create_topic(bootstrap, topic, partitions)
    return topic


@pytest.mark.parametrize("partitions", [6, 7])
def test_confluent_kafka_and_the_compat_producer_agree(tansu: Any, unique_topic: Callable[[str], str],
                                                       partitions: int) -> None:
    bootstrap = tansu.bootstrap_servers
    theirs, ours = _topic(bootstrap, unique_topic, partitions), _topic(bootstrap, unique_topic, partitions)
    original = ConfluentProducer({"bootstrap.servers": bootstrap})
    compat = CompatProducer({"bootstrap.servers": bootstrap})
    try:
        for i, key in enumerate(KEYS):
            original.produce(theirs, b"v%d" % i, key=key)
            original.poll(0)
            compat.produce(ours, b"v%d" % i, key=key)
            compat.poll(0)
        assert original.flush(60) == 0 and compat.flush(60) == 0
    finally:
        compat.close()
    expected = _placement(bootstrap, theirs)
    assert _placement(bootstrap, ours) == expected
    assert len(set(expected.values())) == partitions


@pytest.mark.parametrize("partitions", [6, 7])
def test_kafka_python_and_the_compat_producer_agree(tansu: Any, unique_topic: Callable[[str], str],
                                                    partitions: int) -> None:
    bootstrap = tansu.bootstrap_servers
    theirs, ours = _topic(bootstrap, unique_topic, partitions), _topic(bootstrap, unique_topic, partitions)
    original = kafka.KafkaProducer(bootstrap_servers=bootstrap)
    compat = CompatKafkaProducer(bootstrap_servers=bootstrap)
    try:
        for i, key in enumerate(KEYS):
            original.send(theirs, b"v%d" % i, key=key)
            compat.send(ours, b"v%d" % i, key=key)
        original.flush(60)
        compat.flush(60)
    finally:
        original.close()
        compat.close()
    expected = _placement(bootstrap, theirs)
    assert _placement(bootstrap, ours) == expected
    assert len(set(expected.values())) == partitions
