"""Small shared types used across layers.

How it works: a topic-partition is a plain ``(topic, partition)`` tuple (cheap to build and hash on the
hot path); ``ClusterView`` is the read-only view of cluster metadata that the accumulator and the
partitioners need, implemented by ``sparkafka.net.metadata.Cluster`` (an immutable snapshot).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

MAX_STRING_BYTES = (1 << 15) - 1
"""The most UTF-8 bytes of a Kafka STRING (int16 length prefix), e.g. client.id and transactional.id."""

TopicPartition = tuple[str, int]
"""``(topic, partition)``."""

Header = tuple[str, "bytes | None"]
Headers = Sequence[Header]


class ClusterView(Protocol):
    """What the producer internals read from a metadata snapshot."""

    def leader_for(self, tp: TopicPartition) -> int | None:
        """Node id of the partition's leader, or None if unknown."""
        ...

    def leader_epoch(self, tp: TopicPartition) -> int:
        """The partition's leader epoch (-1 if unknown)."""
        ...

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions of the topic (all of them, available or not), None if the topic is unknown."""
        ...

    def available_partitions(self, topic: str) -> Sequence[int]:
        """Partitions of the topic that have a known leader."""
        ...

    def partitions_for_node(self, node_id: int) -> Sequence[TopicPartition]:
        """Partitions (of topics in this snapshot) led by the node, in a stable order."""
        ...
