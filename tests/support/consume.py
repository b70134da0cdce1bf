"""Independent read-back and topic setup with confluent-kafka (librdkafka), for checking our producer.

How it works: ``consume_all`` assigns every partition of the topic explicitly from its
first offset (no consumer group join, no commits), with partition-EOF events on, and
polls until it has ``expected_count`` records and every partition is at its end (or, with
no count, until every partition is at its end). Records come back in (partition, offset)
order. ``create_topic`` uses the AdminClient's CreateTopics and then waits until Metadata
shows every partition with a leader.

Tansu caveat: its Fetch never lists aborted transactions, so ``read_committed`` hides only
the open transaction's records (the LSO works) and still returns aborted ones.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from sparkafka.net.admin import AdminClient as SparkafkaAdmin

__all__ = ["ConsumedRecord", "consume_all", "create_topic", "partition_count"]


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    """Milliseconds since the epoch (CreateTime or LogAppendTime, see ``timestamp_type``)."""
    timestamp_type: int = 1
    """confluent_kafka.TIMESTAMP_CREATE_TIME (1) or TIMESTAMP_LOG_APPEND_TIME (2)."""


def _as_bytes(data: str | bytes | None) -> bytes | None:
    return data.encode() if isinstance(data, str) else data


def _header_items(
    headers: list[tuple[str, str | bytes | None]] | dict[str, str | bytes | None] | None,
) -> list[tuple[str, str | bytes | None]]:
    if headers is None:
        return []
    return list(headers.items()) if isinstance(headers, dict) else list(headers)


def partition_count(bootstrap: str, topic: str, timeout: float = 10.0) -> int:
    """The number of partitions of an existing topic (never auto-creates it)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(timeout=max(0.5, deadline - time.monotonic()))
        entry = metadata.topics.get(topic)
        if entry is not None and entry.error is None and entry.partitions:
            return len(entry.partitions)
        if time.monotonic() >= deadline:
            raise LookupError(f"topic {topic!r} not found on {bootstrap} within {timeout}s")
        time.sleep(0.1)


def consume_all(
    bootstrap: str,
    topic: str,
    expected_count: int | None = None,
    timeout: float = 30.0,
    isolation_level: str = "read_uncommitted",
) -> list[ConsumedRecord]:
    """Every record of ``topic`` from the beginning of each partition, sorted by (partition, offset).

    Raises ``TimeoutError`` if ``expected_count`` records (or, without a count, the end of
    every partition) are not reached within ``timeout`` seconds. Records beyond
    ``expected_count`` that are already there are returned too, so callers can assert the
    exact count.
    """
    deadline = time.monotonic() + timeout
    partitions = partition_count(bootstrap, topic, timeout=min(timeout, 10.0))
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"sparkafka-readback-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "allow.auto.create.topics": False,
        "isolation.level": isolation_level,
        "fetch.wait.max.ms": 100,
        "auto.offset.reset": "earliest",
    })
    records: list[ConsumedRecord] = []
    at_end: set[int] = set()
    try:
        # Offset 0 rather than OFFSET_BEGINNING: the same start (auto.offset.reset=earliest covers
        # a log that does not start at 0) without librdkafka's ~0.5 s ListOffsets timer.
        consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
        while True:
            enough = expected_count is None or len(records) >= expected_count
            if enough and len(at_end) == partitions:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                wanted = "every partition's end" if expected_count is None else f"{expected_count} records"
                raise TimeoutError(
                    f"consume_all({topic!r}): got {len(records)} records within {timeout}s, wanted {wanted}; "
                    f"partitions at end: {sorted(at_end)} of {partitions}"
                )
            for message in consumer.consume(num_messages=1000, timeout=min(0.5, remaining)):
                error = message.error()
                if error is not None:
                    eof_partition = message.partition()
                    if error.code() == KafkaError._PARTITION_EOF and eof_partition is not None:
                        at_end.add(eof_partition)
                        continue
                    if error.fatal() or not error.retriable():
                        raise KafkaException(error)
                    continue
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                at_end.discard(partition)
                timestamp_type, timestamp = message.timestamp()
                records.append(ConsumedRecord(
                    partition=partition,
                    offset=offset,
                    key=_as_bytes(message.key()),
                    value=_as_bytes(message.value()),
                    headers=[(name, _as_bytes(value)) for name, value in _header_items(message.headers())],
                    timestamp=timestamp,
                    timestamp_type=timestamp_type,
                ))
    finally:
        consumer.close()
    records.sort(key=lambda r: (r.partition, r.offset))
    return records


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int = 1,
    replication: int = 1,
    timeout: float = 15.0,
    exist_ok: bool = False,
) -> None:
    """Create ``name`` through CreateTopics and wait until all its partitions have a leader.

    Works on Apache Kafka and Tansu. The librdkafka mock cluster has no CreateTopics: use
    ``MockCluster.create_topic`` there.
    """
    admin = AdminClient({"bootstrap.servers": bootstrap})
    future = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication)],
        request_timeout=timeout,
    )[name]
    try:
        future.result(timeout=timeout)
    except KafkaException as exc:
        error = exc.args[0]
        exists = isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS
        if not (exist_ok and exists):
            raise
    deadline = time.monotonic() + timeout
    while True:
        entry = admin.list_topics(topic=name, timeout=timeout).topics.get(name)
        if (entry is not None and entry.error is None and len(entry.partitions) >= partitions
                and all(p.leader >= 0 for p in entry.partitions.values())):
            break
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topic {name!r} has no leader for every partition after {timeout}s")
        time.sleep(0.1)
    # Apache Kafka names a leader in Metadata a moment before that leader accepts writes (it answers
    # NOT_LEADER_OR_FOLLOWER meanwhile): ListOffsets, retried until every leader answers, waits for that.
    with SparkafkaAdmin(bootstrap, request_timeout_ms=timeout * 1000) as ours:
        ours.list_offsets(name, timeout_ms=max(1000.0, (deadline - time.monotonic()) * 1000))
