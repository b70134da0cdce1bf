"""Test doubles for the producer internals: a static cluster view and a scripted transaction manager."""

from __future__ import annotations

from collections.abc import Sequence

from sparkafka._types import TopicPartition
from sparkafka.producer.producer_batch import ProducerBatch


class FakeCluster:
    """A fixed metadata snapshot: ``leaders`` maps every known partition to its leader (None = unknown).
    Like ``Cluster`` it must not change once the producer reads it (the accumulator keeps work per snapshot):
    a test with new metadata makes a new one."""

    def __init__(
        self, leaders: dict[TopicPartition, int | None], epochs: dict[TopicPartition, int] | None = None,
        topic_ids: dict[str, bytes] | None = None,
    ) -> None:
        self.leaders = dict(leaders)
        self.epochs = dict(epochs or {})
        self.topic_ids = dict(topic_ids or {})

    @classmethod
    def single_node(cls, topic: str = "t", partitions: int = 3, node: int = 1) -> FakeCluster:
        return cls({(topic, p): node for p in range(partitions)})

    def leader_for(self, tp: TopicPartition) -> int | None:
        return self.leaders.get(tp)

    def topic_id(self, topic: str) -> bytes | None:
        return self.topic_ids.get(topic)

    def leader_epoch(self, tp: TopicPartition) -> int:
        return self.epochs.get(tp, -1)

    def partition_count(self, topic: str) -> int | None:
        count = sum(1 for t, _ in self.leaders if t == topic)
        return count or None

    def available_partitions(self, topic: str) -> Sequence[int]:
        return sorted(p for (t, p), leader in self.leaders.items() if t == topic and leader is not None)

    def partitions_for_node(self, node_id: int) -> Sequence[TopicPartition]:
        return sorted(tp for tp, leader in self.leaders.items() if leader == node_id)


class FakeTransactionManager:
    """Hands out sequences like the idempotent producer; switches let tests block draining."""

    def __init__(self, producer_id: int = 1000, epoch: int = 0) -> None:
        self.producer_id = producer_id
        self.epoch = epoch
        self.has_pid = True
        self.allowed = True
        self.stop = False
        self.completing = False
        self.next_sequence: dict[TopicPartition, int] = {}
        self.in_flight: list[ProducerBatch] = []

    def has_producer_id(self) -> bool:
        return self.has_pid

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        return self.allowed

    def should_stop_drain(self, tp: TopicPartition, first_batch: ProducerBatch) -> bool:
        return self.stop

    def assign_sequence(self, batch: ProducerBatch) -> None:
        seq = self.next_sequence.get(batch.tp, 0)
        batch.set_producer_state(self.producer_id, self.epoch, seq, False)
        self.next_sequence[batch.tp] = seq + batch.record_count
        self.in_flight.append(batch)

    def take_for_drain(self, tp: TopicPartition, first_batch: ProducerBatch) -> bool:
        if not self.allowed or not self.has_pid or self.stop:
            return False
        if not first_batch.has_sequence():
            self.assign_sequence(first_batch)
        return True

    def is_completing(self) -> bool:
        return self.completing

    def add_in_flight_batch(self, batch: ProducerBatch) -> None:
        self.in_flight.append(batch)
