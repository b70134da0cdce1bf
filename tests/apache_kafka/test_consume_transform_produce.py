"""Consume-transform-produce exactly once on Apache Kafka (KIP-447): ``send_offsets_to_transaction``.

How it works: a loop reads an input topic with confluent-kafka's consumer in a real consumer group
(``isolation.level=read_committed``, no auto-commit), transforms each record, and per poll produces the
results with sparkafka's transactional producer and commits the consumer's offsets in the same transaction
(``send_offsets_to_transaction(offsets, consumer.consumer_group_metadata())``). The loop is stopped mid-way
twice, once by aborting its open transaction and once by a "kill" (producer and consumer closed without
ending the transaction: the restarted producer's ``init_transactions`` with the same transactional.id
fences and aborts it), and restarted each time from the group's committed offsets. Then the output topic
read at read_committed must hold every input record exactly once, transformed, and the group's committed
offsets must be the input's end offsets. Runs under transactions V2 (``kafka``: TxnOffsetCommit v5 alone)
and V1 (``kafka_tv1``: AddOffsetsToTxn, then TxnOffsetCommit v4).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka import Producer as ConfluentProducer

from sparkafka import KafkaProducer, errors
from sparkafka.producer.group_metadata import ConsumerGroupMetadata, group_metadata_of
from support.consume import consume_all, create_topic
from support.kafka_cluster import KafkaCluster

RECORDS = 3000
PARTITIONS = 3


@pytest.fixture(params=["kafka", "kafka_tv1"])
def cluster(request: pytest.FixtureRequest) -> tuple[KafkaCluster, int]:
    node: KafkaCluster = request.getfixturevalue(request.param)
    return node, 2 if request.param == "kafka" else 1


def _transform(value: bytes) -> bytes:
    return b"out:" + value.upper()


class Loop:
    """One incarnation of the consume-transform-produce application."""

    def __init__(self, bootstrap: str, source: str, sink: str, group: str, txn_id: str) -> None:
        self.source, self.sink = source, sink
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "isolation.level": "read_committed", "fetch.wait.max.ms": 100,
        })
        self.consumer.subscribe([source])
        self.producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5})
        self.producer.init_transactions(60)  # fences an earlier incarnation and aborts its open transaction
        self.versions: set[int] = set()

    def _poll(self) -> list[object]:
        return [m for m in self.consumer.consume(num_messages=250, timeout=1.0) if m.error() is None]

    def _process(self, messages: list[object]) -> None:
        """Begin a transaction, produce the transformed records and add the consumer's offsets to it."""
        self.producer.begin_transaction()
        offsets: dict[tuple[str, int], int] = {}
        for m in messages:
            self.producer.send(self.sink, _transform(m.value()), key=m.key())  # type: ignore[attr-defined]
            offsets[(m.topic(), m.partition())] = m.offset() + 1  # type: ignore[attr-defined]
        self.producer.send_offsets_to_transaction(offsets, self.consumer.consumer_group_metadata(), timeout=60)
        self.versions.add(self.producer.transaction_info().transaction_version)

    def run(self, transactions: int | None) -> int:
        """Commit up to ``transactions`` transactions (None: until the input is consumed); returns how many."""
        done = 0
        idle = 0
        while transactions is None or done < transactions:
            messages = self._poll()
            if not messages:
                idle += 1
                if transactions is None and idle >= 3 and self._caught_up():
                    break
                continue
            idle = 0
            self._process(messages)
            self.producer.commit_transaction(60)
            done += 1
        return done

    def _caught_up(self) -> bool:
        """The group's committed offsets reached the end of every input partition (positions would not do:
        a partition with nothing left to read has none)."""
        partitions = [TopicPartition(self.source, p) for p in range(PARTITIONS)]
        for tp in self.consumer.committed(partitions, timeout=10):
            _, high = self.consumer.get_watermark_offsets(tp, timeout=10)
            if tp.offset < high:
                return False
        return True

    def stop_with_abort(self) -> None:
        messages = self._poll() or self._poll()
        assert messages, "no input left to leave uncommitted"
        self._process(messages)
        self.producer.flush(30)
        self.producer.abort_transaction(60)
        self.consumer.close()
        self.producer.close(10)

    def stop_with_kill(self) -> None:
        messages = self._poll() or self._poll()
        assert messages, "no input left to leave uncommitted"
        self._process(messages)
        self.producer.flush(30)  # the records are in the log, the offsets with the coordinator: nothing ends it
        self.producer.close(0)
        self.consumer.close()


def test_consume_transform_produce_is_exactly_once_across_an_abort_and_a_kill(
        cluster: tuple[KafkaCluster, int], unique_topic: Callable[[str], str]) -> None:
    node, version = cluster
    source, sink = unique_topic("ctp-in"), unique_topic("ctp-out")
    create_topic(node.bootstrap, source, PARTITIONS)
    create_topic(node.bootstrap, sink, PARTITIONS)
    feeder = ConfluentProducer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for i in range(RECORDS):
        feeder.produce(source, b"record-%05d" % i, key=b"k%d" % (i % 17))
    assert feeder.flush(30) == 0
    group, txn_id = f"{source}-group", f"{source}-tx"

    first = Loop(node.bootstrap, source, sink, group, txn_id)
    assert first.run(3) == 3
    first.stop_with_abort()
    second = Loop(node.bootstrap, source, sink, group, txn_id)
    assert second.run(2) == 2
    second.stop_with_kill()
    last = Loop(node.bootstrap, source, sink, group, txn_id)
    try:
        last.run(None)
    finally:
        last.consumer.close()
        last.producer.close(10)
    assert first.versions == second.versions == last.versions == {version}

    committed_view = consume_all(node.bootstrap, sink, expected_count=RECORDS, timeout=60,
                                 isolation_level="read_committed")
    counts = Counter(r.value for r in committed_view)
    assert counts == Counter(_transform(b"record-%05d" % i) for i in range(RECORDS))  # each exactly once
    everything = consume_all(node.bootstrap, sink, timeout=60)
    assert len(everything) > RECORDS  # the aborted and the killed transactions' records are in the log
    checker = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committed = checker.committed([TopicPartition(source, p) for p in range(PARTITIONS)], timeout=30)
        ends = [checker.get_watermark_offsets(TopicPartition(source, p), timeout=30)[1] for p in range(PARTITIONS)]
    finally:
        checker.close()
    assert [tp.offset for tp in committed] == ends and sum(ends) == RECORDS


def test_offsets_of_a_consumer_that_left_the_group_are_refused(cluster: tuple[KafkaCluster, int],
                                                               unique_topic: Callable[[str], str]) -> None:
    """KIP-447 fencing: the group coordinator checks the member id and generation; a stale member's offsets
    fail the call with CommitFailedError and the transaction must be aborted; the producer goes on."""
    node, _ = cluster
    source = unique_topic("ctp-stale")
    create_topic(node.bootstrap, source, 1)
    group = f"{source}-group"
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    feeder = ConfluentProducer({"bootstrap.servers": node.bootstrap})
    feeder.produce(source, b"x")
    feeder.flush(30)
    consumer.subscribe([source])
    while not consumer.consume(num_messages=1, timeout=1.0):
        pass
    real = group_metadata_of(consumer.consumer_group_metadata())
    assert real.group_id == group and real.member_id and real.generation_id >= 1
    stale = ConsumerGroupMetadata(group, real.generation_id + 5, real.member_id, real.group_instance_id)
    producer = KafkaProducer({"bootstrap.servers": node.bootstrap, "transactional.id": f"{source}-tx"})
    try:
        producer.init_transactions(60)
        producer.begin_transaction()
        with pytest.raises((errors.CommitFailedError, errors.TransactionError)):
            producer.send_offsets_to_transaction({(source, 0): 1}, stale, timeout=60)
        with pytest.raises(errors.TransactionError):
            producer.commit_transaction(60)
        producer.abort_transaction(60)
        producer.begin_transaction()
        producer.send_offsets_to_transaction({(source, 0): 1}, consumer.consumer_group_metadata(), timeout=60)
        producer.commit_transaction(60)
    finally:
        producer.close(10)
    committed = consumer.committed([TopicPartition(source, 0)], timeout=30)
    consumer.close()
    assert committed[0].offset == 1


def _feed(bootstrap: str, topic: str, count: int) -> None:
    feeder = ConfluentProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        feeder.produce(topic, b"r%d" % i, partition=i % 2)
    assert feeder.flush(30) == 0


def _committed(bootstrap: str, group: str, topic: str) -> list[int]:
    checker = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        return [tp.offset for tp in checker.committed([TopicPartition(topic, p) for p in range(2)], timeout=30)]
    finally:
        checker.close()


def test_the_confluent_layer_commits_a_consumers_positions(kafka: KafkaCluster,
                                                           unique_topic: Callable[[str], str]) -> None:
    """confluent-kafka's documented loop, unchanged but for the import: ``send_offsets_to_transaction(
    consumer.position(consumer.assignment()), consumer.consumer_group_metadata())``."""
    from sparkafka.compat.confluent import Producer

    source, sink = unique_topic("ctp-cf-in"), unique_topic("ctp-cf-out")
    create_topic(kafka.bootstrap, source, 2)
    create_topic(kafka.bootstrap, sink, 2)
    _feed(kafka.bootstrap, source, 40)
    group = f"{source}-group"
    consumer = Consumer({"bootstrap.servers": kafka.bootstrap, "group.id": group, "enable.auto.commit": False,
                         "auto.offset.reset": "earliest", "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": kafka.bootstrap, "transactional.id": f"{source}-tx"})
    try:
        consumer.subscribe([source])
        producer.init_transactions(60)
        seen = 0
        while seen < 40:
            messages = [m for m in consumer.consume(num_messages=100, timeout=1.0) if m.error() is None]
            if not messages:
                continue
            producer.begin_transaction()
            for m in messages:
                producer.produce(sink, _transform(m.value() or b""), m.key())
            producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                                 consumer.consumer_group_metadata(), 60)
            producer.commit_transaction(60)
            seen += len(messages)
    finally:
        producer.close()
        consumer.close()
    assert _committed(kafka.bootstrap, group, source) == [20, 20]
    out = consume_all(kafka.bootstrap, sink, expected_count=40, isolation_level="read_committed")
    assert sorted(r.value or b"" for r in out) == sorted(_transform(b"r%d" % i) for i in range(40))


def test_the_kafka_python_layer_commits_with_kafka_pythons_group_metadata(
        kafka: KafkaCluster, unique_topic: Callable[[str], str]) -> None:
    """kafka-python's loop: ``send_offsets_to_transaction({TopicPartition: OffsetAndMetadata},
    consumer.group_metadata())`` with kafka-python's own consumer in the group."""
    import kafka as kafka_python

    from sparkafka.compat.kafka_python import KafkaProducer as CompatProducer

    source, sink = unique_topic("ctp-kp-in"), unique_topic("ctp-kp-out")
    create_topic(kafka.bootstrap, source, 2)
    create_topic(kafka.bootstrap, sink, 2)
    _feed(kafka.bootstrap, source, 10)
    group = f"{source}-group"
    consumer = kafka_python.KafkaConsumer(source, bootstrap_servers=kafka.bootstrap, group_id=group,
                                          enable_auto_commit=False, auto_offset_reset="earliest")
    producer = CompatProducer(bootstrap_servers=kafka.bootstrap, transactional_id=f"{source}-tx")
    try:
        producer.init_transactions()
        seen = 0
        while seen < 10:
            batches = consumer.poll(timeout_ms=1000)
            if not batches:
                continue
            producer.begin_transaction()
            offsets = {}
            for tp, records in batches.items():
                for record in records:
                    producer.send(sink, _transform(record.value or b""))
                offsets[tp] = kafka_python.OffsetAndMetadata(records[-1].offset + 1, "", -1)
                seen += len(records)
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
    finally:
        producer.close()
        consumer.close()
    assert _committed(kafka.bootstrap, group, source) == [5, 5]
    out = consume_all(kafka.bootstrap, sink, expected_count=10, isolation_level="read_committed")
    assert sorted(r.value or b"" for r in out) == sorted(_transform(b"r%d" % i) for i in range(10))
