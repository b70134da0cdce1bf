"""Transactions on Apache Kafka under both transaction protocols: V2 (KIP-890, the 4.x default) on the
shared ``kafka`` node and the classic one on ``kafka_tv1`` (formatted with ``transaction.version=1``).

How it works: each test runs once per node; a confluent-kafka consumer at ``isolation.level=
read_committed`` (Kafka's own LSO and aborted-transaction index, which Tansu lacks) must see exactly the
records of the committed transactions, in order, after commits, aborts, a producer fenced by a second one
with the same ``transactional.id``, and a transaction the coordinator aborted on ``transaction.timeout.ms``.
``transaction_info()`` says which protocol each transaction used and, under V2, that every EndTxn moved
the producer to a new epoch.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from sparkafka import KafkaProducer, errors
from support.consume import consume_all, create_topic
from support.kafka_cluster import KafkaCluster


@pytest.fixture(params=["kafka", "kafka_tv1"])
def cluster(request: pytest.FixtureRequest) -> tuple[KafkaCluster, int]:
    """(the node, the transaction version it runs)."""
    node: KafkaCluster = request.getfixturevalue(request.param)
    return node, 2 if request.param == "kafka" else 1


def _producer(bootstrap: str, txn_id: str, **extra: Any) -> KafkaProducer:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5,
                              **extra})
    producer.init_transactions(30)
    return producer


def _values(records: list[Any]) -> list[bytes]:
    return [r.value for r in records]


def test_exactly_the_committed_transactions_are_visible(cluster: tuple[KafkaCluster, int],
                                                        unique_topic: Callable[[str], str]) -> None:
    node, version = cluster
    topic = unique_topic("txn")
    create_topic(node.bootstrap, topic, 3)
    producer = _producer(node.bootstrap, f"{topic}-tx")
    try:
        epochs = [producer.transaction_info().producer_epoch]
        expected: list[bytes] = []
        for index, commit in enumerate([True, False, True, False, True]):
            producer.begin_transaction()
            values = [b"t%d-%d" % (index, i) for i in range(2000)]
            for i, value in enumerate(values):
                producer.send(topic, value, key=b"k%d" % (i % 7))
            if commit:
                producer.commit_transaction(30)
                expected += values
            else:
                producer.flush(30)
                producer.abort_transaction(30)
            info = producer.transaction_info()
            assert info.transaction_version == version
            epochs.append(info.producer_epoch)
        if version == 2:  # KIP-890: every EndTxn bumps the epoch, and the producer takes it from the answer
            assert epochs == list(range(epochs[0], epochs[0] + 6)), epochs
        else:
            assert len(set(epochs)) == 1, epochs
    finally:
        producer.close(10)
    records = consume_all(node.bootstrap, topic, expected_count=len(expected), timeout=30,
                          isolation_level="read_committed")
    assert sorted(_values(records)) == sorted(expected)
    by_key: dict[bytes | None, list[bytes]] = {}
    for r in records:
        assert r.value is not None
        by_key.setdefault(r.key, []).append(r.value)
    for key, values in by_key.items():  # each key's records in send order
        assert values == [v for v in expected if b"k%d" % (int(v.split(b"-")[1]) % 7) == key]
    everything = consume_all(node.bootstrap, topic, expected_count=10_000, timeout=30)
    assert len([r for r in everything if r.value is not None]) == 10_000  # the aborted ones are in the log


def test_a_fenced_producer_commits_nothing(cluster: tuple[KafkaCluster, int],
                                           unique_topic: Callable[[str], str]) -> None:
    node, _ = cluster
    topic = unique_topic("fenced")
    create_topic(node.bootstrap, topic, 2)
    txn_id = f"{topic}-tx"
    old = _producer(node.bootstrap, txn_id)
    new: KafkaProducer | None = None
    try:
        old.begin_transaction()
        for i in range(500):
            old.send(topic, b"old-%d" % i)
        old.flush(30)
        new = _producer(node.bootstrap, txn_id)  # fences "old" and aborts its open transaction
        new.begin_transaction()
        for i in range(300):
            new.send(topic, b"new-%d" % i)
        new.commit_transaction(30)
        with pytest.raises((errors.ProducerFencedError, errors.InvalidProducerEpochError)):
            old.commit_transaction(30)
    finally:
        old.close(5)
        if new is not None:
            new.close(10)
    records = consume_all(node.bootstrap, topic, expected_count=300, timeout=30, isolation_level="read_committed")
    assert sorted(_values(records)) == sorted(b"new-%d" % i for i in range(300))


def test_a_transaction_past_its_timeout_fails_loudly(cluster: tuple[KafkaCluster, int],
                                                                       unique_topic: Callable[[str], str]) -> None:
    node, _ = cluster
    topic = unique_topic("timeout")
    create_topic(node.bootstrap, topic, 1)
    producer = _producer(node.bootstrap, f"{topic}-{uuid.uuid4().hex[:6]}", **{"transaction.timeout.ms": 1500})
    try:
        producer.begin_transaction()
        for i in range(100):
            producer.send(topic, b"late-%d" % i)
        producer.flush(30)
        time.sleep(4)  # the coordinator aborts it (timeout 1.5 s, checked every second on these nodes)
        # V2: INVALID_TXN_STATE; V1: the epoch was bumped, so PRODUCER_FENCED (Java throws the same classes)
        with pytest.raises((errors.InvalidTxnStateError, errors.ProducerFencedError),
                           match=r"transaction.timeout.ms \(1500 ms"):
            producer.commit_transaction(30)
    finally:
        producer.close(5)
    assert consume_all(node.bootstrap, topic, timeout=10, isolation_level="read_committed") == []


def test_close_aborts_an_open_transaction_and_close_0_leaves_it_open(cluster: tuple[KafkaCluster, int],
                                                                      unique_topic: Callable[[str], str]) -> None:
    """Java's Sender aborts a transaction nobody ended when the producer closes; a forced close does not."""
    node, _ = cluster
    topic = unique_topic("close")
    create_topic(node.bootstrap, topic, 1)
    closed = _producer(node.bootstrap, f"{topic}-a")
    closed.begin_transaction()
    for i in range(50):
        closed.send(topic, b"closed-%d" % i)
    closed.close(30)
    left = _producer(node.bootstrap, f"{topic}-b")
    left.begin_transaction()
    left.send(topic, b"left-open")
    left.flush(30)
    left.close(0)
    done = _producer(node.bootstrap, f"{topic}-c")
    try:
        done.begin_transaction()
        done.send(topic, b"committed")
        done.commit_transaction(30)
    finally:
        done.close(10)
    # the transaction left open holds the last stable offset back: read_committed sees nothing past it
    assert consume_all(node.bootstrap, topic, timeout=5, isolation_level="read_committed") == []
    everything = [r.value for r in consume_all(node.bootstrap, topic, expected_count=52, timeout=20)]
    assert everything[:50] == [b"closed-%d" % i for i in range(50)] and b"left-open" in everything
    reopened = _producer(node.bootstrap, f"{topic}-b")  # fences the open one: the coordinator aborts it
    reopened.close(10)
    records = consume_all(node.bootstrap, topic, expected_count=1, timeout=20, isolation_level="read_committed")
    assert [r.value for r in records] == [b"committed"]  # the closed transaction was aborted, not committed
