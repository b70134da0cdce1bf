"""Ending other producers' transactions (``producer.txn_commit``) on Apache Kafka, both protocols.

How it works: each test runs on the shared ``kafka`` node (Transactions V2) and on ``kafka_tv1``. A
transactional producer sends and flushes without committing (in a child process for the commit test, so
nothing but the handle crosses over), then a ``TransactionFinisher`` with a connection of its own commits,
aborts or fences that transaction. confluent-kafka reads back at ``isolation.level=read_committed``:
exactly the committed transactions' records must be there, and nothing of the aborted ones; a second
finish is a no-op; a commit the coordinator can no longer accept is a ``TransactionLostError``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from sparkafka import KafkaProducer, errors
from sparkafka.producer.txn_commit import TransactionFinisher, TransactionHandle
from support.consume import consume_all, create_topic
from support.kafka_cluster import KafkaCluster


@pytest.fixture(params=["kafka", "kafka_tv1"])
def cluster(request: pytest.FixtureRequest) -> tuple[KafkaCluster, int]:
    """(the node, the transaction version it runs)."""
    node: KafkaCluster = request.getfixturevalue(request.param)
    return node, 2 if request.param == "kafka" else 1


def _open_transaction(bootstrap: str, topic: str, txn_id: str, values: list[bytes], **extra: Any) -> TransactionHandle:
    """Send ``values`` in a transaction that is flushed, left open, and its producer closed."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5, **extra})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        for i, value in enumerate(values):
            producer.send(topic, value, key=b"k%d" % (i % 5))
        producer.flush(30)
        return TransactionHandle.of(producer.transaction_info())
    finally:
        producer.close(0)  # a forced close does not end the transaction (any other close aborts it)


_CHILD = textwrap.dedent("""
    import json, sys
    from sparkafka import KafkaProducer
    bootstrap, topic, txn_id, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    p = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(count):
        p.send(topic, b"child-%d" % i)
    p.flush(30)
    info = p.transaction_info()
    p.close(0)
    print(json.dumps([info.transactional_id, info.producer_id, info.producer_epoch, info.transaction_version]))
""")


def _finisher(node: KafkaCluster) -> TransactionFinisher:
    return TransactionFinisher({"bootstrap.servers": node.bootstrap}, timeout_ms=30_000)


def test_a_transaction_left_open_by_another_process_is_committed_once(
        cluster: tuple[KafkaCluster, int], unique_topic: Callable[[str], str]) -> None:
    node, version = cluster
    topic = unique_topic("finish")
    create_topic(node.bootstrap, topic, 3)
    txn_id = f"{topic}-tx"
    out = subprocess.run([sys.executable, "-c", _CHILD, node.bootstrap, topic, txn_id, "3000"],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    handle = TransactionHandle(*json.loads(out.strip().splitlines()[-1]))
    assert handle.transactional_id == txn_id and handle.transaction_version == version
    with _finisher(node) as finisher:
        assert [t.transactional_id for t in finisher.list_open(f"{topic}-")] == [txn_id]
        (described,) = finisher.describe([txn_id]).values()
        assert (described.state, described.producer_id, described.producer_epoch) == (
            "Ongoing", handle.producer_id, handle.producer_epoch)
        assert {p for _, p in described.partitions} <= {0, 1, 2} and described.partitions
        finisher.commit(handle)
        finisher.commit(handle)  # repeated after completion: no error, nothing changes
        assert finisher.list_open(f"{topic}-") == []
    records = consume_all(node.bootstrap, topic, expected_count=3000, timeout=30, isolation_level="read_committed")
    assert sorted(r.value or b"" for r in records) == sorted(b"child-%d" % i for i in range(3000))


def test_abort_hides_the_records_and_a_later_commit_is_lost(
        cluster: tuple[KafkaCluster, int], unique_topic: Callable[[str], str]) -> None:
    node, _ = cluster
    topic = unique_topic("abort")
    create_topic(node.bootstrap, topic, 2)
    doomed = _open_transaction(node.bootstrap, topic, f"{topic}-a", [b"doomed-%d" % i for i in range(500)])
    kept = _open_transaction(node.bootstrap, topic, f"{topic}-b", [b"kept-%d" % i for i in range(400)])
    with _finisher(node) as finisher:
        finisher.abort(doomed)
        finisher.abort(doomed)  # a second abort is a no-op
        with pytest.raises(errors.TransactionLostError, match=r"transaction.timeout.ms.*transaction.max.timeout.ms") \
                as lost:
            finisher.commit(doomed)
        assert lost.value.code == errors.INVALID_TXN_STATE  # the coordinator's answer on both protocols
        assert lost.value.transactional_id == f"{topic}-a" and f"{topic}-a" in str(lost.value)
        finisher.commit(kept)
        with pytest.raises(errors.error_class_for_code(errors.INVALID_TXN_STATE), match="committed"):
            finisher.abort(kept)
    records = consume_all(node.bootstrap, topic, expected_count=400, timeout=30, isolation_level="read_committed")
    assert sorted(r.value or b"" for r in records) == sorted(b"kept-%d" % i for i in range(400))


def test_fencing_an_id_aborts_its_open_transaction(
        cluster: tuple[KafkaCluster, int], unique_topic: Callable[[str], str]) -> None:
    node, _ = cluster
    topic = unique_topic("fence")
    create_topic(node.bootstrap, topic, 2)
    orphan = _open_transaction(node.bootstrap, topic, f"{topic}-orphan", [b"orphan-%d" % i for i in range(300)])
    kept = _open_transaction(node.bootstrap, topic, f"{topic}-kept", [b"kept-%d" % i for i in range(200)])
    with _finisher(node) as finisher:
        assert [t.transactional_id for t in finisher.list_open(f"{topic}-")] == [f"{topic}-kept", f"{topic}-orphan"]
        producer_id, epoch = finisher.fence(orphan.transactional_id)
        assert (producer_id, epoch) != (orphan.producer_id, orphan.producer_epoch) and epoch > 0
        assert finisher.fence(f"{topic}-never-used-{uuid.uuid4().hex[:6]}")[1] == 0
        assert [t.transactional_id for t in finisher.list_open(f"{topic}-")] == [f"{topic}-kept"]
        with pytest.raises(errors.TransactionLostError) as fenced:
            finisher.commit(orphan)
        assert fenced.value.code == errors.PRODUCER_FENCED
        finisher.abort(orphan)  # already aborted by the fence: nothing to do
        finisher.commit(kept)
    records = consume_all(node.bootstrap, topic, expected_count=200, timeout=30, isolation_level="read_committed")
    assert sorted(r.value or b"" for r in records) == sorted(b"kept-%d" % i for i in range(200))


def test_a_transaction_past_its_timeout_cannot_be_committed(
        cluster: tuple[KafkaCluster, int], unique_topic: Callable[[str], str]) -> None:
    node, version = cluster
    topic = unique_topic("expired")
    create_topic(node.bootstrap, topic, 1)
    txn_id = f"{topic}-tx"
    handle = _open_transaction(node.bootstrap, topic, txn_id, [b"late-%d" % i for i in range(50)],
                               **{"transaction.timeout.ms": 1500})
    with TransactionFinisher({"bootstrap.servers": node.bootstrap, "transaction.timeout.ms": 1500},
                             timeout_ms=30_000) as finisher:
        # the coordinator aborts it after 1.5 s (it checks every second on these nodes): wait for that
        for _ in range(300):
            state = finisher.describe([txn_id])[txn_id].state
            if state != "Ongoing":
                break
            finisher.admin.client.poll(100, finisher.admin.client.clock.monotonic_ms())
        assert state != "Ongoing"
        with pytest.raises(errors.TransactionLostError,
                           match=r"transaction.timeout.ms \(the producer's was 1500 ms\)") as lost:
            finisher.commit(handle)
        # V2: the abort bumped the epoch and the commit counts as a retry of it; V1: the epoch was bumped
        assert lost.value.code == (errors.INVALID_TXN_STATE if version == 2 else errors.PRODUCER_FENCED)
    assert consume_all(node.bootstrap, topic, timeout=10, isolation_level="read_committed") == []
