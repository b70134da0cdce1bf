"""Keyed records land on the partition the Java client would choose.

The reference is librdkafka's ``murmur2_random`` partitioner (documented as Java-compatible): a
confluent-kafka Producer sends the same keys to the same topic, and for every key both clients'
delivery reports must name the same partition. Several partition counts, including non-powers of two.
"""

from __future__ import annotations

import random

import pytest
from confluent_kafka import Producer

from .conftest import Target

pytestmark = pytest.mark.broker

PARTITION_COUNTS = (1, 3, 4, 7, 12)


def _keys() -> list[bytes]:
    keys = [b"", b"a", b"key", b"\x00", b"\xff" * 3, "\u00fc\u00f1\u00ee\u00e7\u00f8d\u00eb".encode()]
    keys += [b"user-%d" % i for i in range(120)]
    rng = random.Random(20261121)  # fixed: a random 1-byte key could repeat b"a" or b"\x00" above
    keys += [rng.randbytes(n) for n in (1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 64, 255, 1000)]
    return keys


def _librdkafka_partitions(bootstrap: str, topic: str, keys: list[bytes]) -> dict[bytes, int]:
    result: dict[bytes, int] = {}
    errors: list[object] = []

    def report(err: object, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            result[msg.key()] = msg.partition()  # type: ignore[attr-defined]

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 5, "allow.auto.create.topics": False})
    for key in keys:
        producer.produce(topic, value=b"reference", key=key, on_delivery=report)
    remaining = producer.flush(20)
    assert remaining == 0 and not errors, (remaining, errors)
    return result


def test_keyed_partition_matches_java(target: Target) -> None:
    keys = _keys()
    assert len(set(keys)) == len(keys)
    producer = target.producer({"linger.ms": 5})
    for count in PARTITION_COUNTS:
        topic = target.topic(count, prefix=f"p{count}")
        assert producer.partitions_for(topic) == list(range(count))
        futures = {key: producer.send(topic, value=b"ours", key=key) for key in keys}
        producer.flush(15)
        ours = {key: f.result(0).partition for key, f in futures.items()}
        reference = _librdkafka_partitions(target.bootstrap, topic, keys)
        assert reference.keys() == ours.keys()
        mismatched = {k: (ours[k], reference[k]) for k in keys if ours[k] != reference[k]}
        assert not mismatched, f"{count} partitions: (ours, librdkafka) per key: {mismatched}"
        if count > 1:
            assert len(set(ours.values())) > 1  # the keys really spread out


def test_null_keys_spread_with_sticky_partitioner(target: Target) -> None:
    """Keyless records go to one partition per batch, and over many batches to several partitions."""
    topic = target.topic(4)
    producer = target.producer({"linger.ms": 0, "batch.size": 200})
    futures = [producer.send(topic, value=b"x" * 50) for _ in range(400)]
    producer.flush(15)
    partitions = [f.result(0).partition for f in futures]
    assert set(partitions) <= {0, 1, 2, 3}
    assert len(set(partitions)) >= 2
