"""``Cluster``: an immutable snapshot of cluster metadata.

How it works: a snapshot is built once (from a Metadata response, or from the bootstrap addresses) and
never changed; the producer swaps whole snapshots. At build time every lookup the hot path needs is
precomputed into plain dicts (leader and epoch per ``(topic, partition)``, partition count and available
partitions per topic, partitions per node), so ``leader_for`` / ``partition_count`` are one dict read.
Implements ``sparkafka._types.ClusterView``. Bootstrap snapshots use negative node ids (-1, -2, ...).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from .._types import TopicPartition

_NO_PARTITIONS: tuple[int, ...] = ()
_NO_TPS: tuple[TopicPartition, ...] = ()


class Node(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None = None


class PartitionInfo(NamedTuple):
    topic: str
    partition: int
    leader: int  # -1 when there is no leader
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error_code: int = 0


class Cluster:
    """Read-only metadata snapshot (``ClusterView``)."""

    __slots__ = (
        "_available",
        "_by_node",
        "_counts",
        "_epochs",
        "_internal",
        "_leaders",
        "_nodes",
        "_partitions",
        "_topic_errors",
        "_topic_ids",
        "cluster_id",
        "controller_id",
        "is_bootstrap",
    )

    def __init__(
        self,
        nodes: Iterable[Node],
        partitions: Iterable[PartitionInfo] = (),
        *,
        cluster_id: str | None = None,
        controller_id: int | None = None,
        topic_errors: Mapping[str, int] | None = None,
        internal_topics: Iterable[str] = (),
        topic_ids: Mapping[str, Any] | None = None,
        is_bootstrap: bool = False,
    ) -> None:
        self._nodes: dict[int, Node] = {n.node_id: n for n in nodes}
        self.cluster_id = cluster_id
        self.controller_id = controller_id if controller_id is not None and controller_id >= 0 else None
        self.is_bootstrap = is_bootstrap
        self._topic_errors: dict[str, int] = dict(topic_errors or {})
        self._internal = frozenset(internal_topics)
        self._topic_ids: dict[str, Any] = dict(topic_ids or {})
        by_topic: dict[str, list[PartitionInfo]] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, []).append(p)
        self._partitions: dict[TopicPartition, PartitionInfo] = {}
        self._leaders: dict[TopicPartition, int] = {}
        self._epochs: dict[TopicPartition, int] = {}
        self._counts: dict[str, int] = {}
        self._available: dict[str, tuple[int, ...]] = {}
        by_node: dict[int, list[TopicPartition]] = {}
        for topic in sorted(by_topic):
            infos = sorted(by_topic[topic], key=lambda p: p.partition)
            self._counts[topic] = len(infos)
            available: list[int] = []
            for p in infos:
                tp = (topic, p.partition)
                self._partitions[tp] = p
                self._epochs[tp] = p.leader_epoch
                if p.leader >= 0 and p.leader in self._nodes:  # Java: a leader id with no broker entry is no leader
                    self._leaders[tp] = p.leader
                    available.append(p.partition)
                    by_node.setdefault(p.leader, []).append(tp)
            self._available[topic] = tuple(available)
        self._by_node: dict[int, tuple[TopicPartition, ...]] = {n: tuple(tps) for n, tps in by_node.items()}

    # ------------------------------------------------------------------ construction
    @classmethod
    def empty(cls) -> Cluster:
        return cls(())

    @classmethod
    def bootstrap(cls, addresses: Sequence[tuple[str, int]]) -> Cluster:
        """A snapshot with only the bootstrap brokers, ids -1, -2, ... (as Java does)."""
        return cls(
            (Node(-(i + 1), host, port) for i, (host, port) in enumerate(addresses)), is_bootstrap=True
        )

    @classmethod
    def from_metadata_response(cls, body: Mapping[str, Any]) -> Cluster:
        """Build from a decoded Metadata response body (any version)."""
        nodes = [
            Node(int(b["node_id"]), str(b["host"]), int(b["port"]), b.get("rack"))
            for b in body.get("brokers") or ()
        ]
        partitions: list[PartitionInfo] = []
        errors: dict[str, int] = {}
        internal: list[str] = []
        ids: dict[str, Any] = {}
        for t in body.get("topics") or ():
            name = t.get("name")
            if name is None:
                continue
            code = int(t.get("error_code", 0))
            if code:
                errors[name] = code
                continue
            if t.get("is_internal"):
                internal.append(name)
            if t.get("topic_id") is not None:
                ids[name] = t["topic_id"]
            for p in t.get("partitions") or ():
                partitions.append(partition_info_from_body(name, p))
        controller = body.get("controller_id")
        return cls(
            nodes,
            partitions,
            cluster_id=body.get("cluster_id"),
            controller_id=int(controller) if controller is not None else None,
            topic_errors=errors,
            internal_topics=internal,
            topic_ids=ids,
        )

    def with_partitions(
        self, partitions: Iterable[PartitionInfo], topic_errors: Mapping[str, int] | None = None
    ) -> Cluster:
        """A copy with a different partition list (same nodes and ids)."""
        return Cluster(
            self._nodes.values(),
            partitions,
            cluster_id=self.cluster_id,
            controller_id=self.controller_id,
            topic_errors=self._topic_errors if topic_errors is None else topic_errors,
            internal_topics=self._internal,
            topic_ids=self._topic_ids,
            is_bootstrap=self.is_bootstrap,
        )

    # ------------------------------------------------------------------ ClusterView
    def leader_for(self, tp: TopicPartition) -> int | None:
        return self._leaders.get(tp)

    def leader_epoch(self, tp: TopicPartition) -> int:
        return self._epochs.get(tp, -1)

    def partition_count(self, topic: str) -> int | None:
        return self._counts.get(topic)

    def available_partitions(self, topic: str) -> Sequence[int]:
        return self._available.get(topic, _NO_PARTITIONS)

    def partitions_for_node(self, node_id: int) -> Sequence[TopicPartition]:
        return self._by_node.get(node_id, _NO_TPS)

    # ------------------------------------------------------------------ more lookups
    @property
    def nodes(self) -> Mapping[int, Node]:
        return self._nodes

    def node(self, node_id: int) -> Node | None:
        return self._nodes.get(node_id)

    def node_addresses(self) -> dict[int, tuple[str, int]]:
        return {n.node_id: (n.host, n.port) for n in self._nodes.values()}

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._counts)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self._partitions.get(tp)

    def partitions_for_topic(self, topic: str) -> list[PartitionInfo]:
        count = self._counts.get(topic)
        if count is None:
            return []
        return [p for p in (self._partitions.get((topic, i)) for i in range(count)) if p is not None]

    def all_partitions(self) -> Iterable[PartitionInfo]:
        return self._partitions.values()

    @property
    def topic_errors(self) -> Mapping[str, int]:
        """Topics the last response returned with a non-zero error code (they are not in the snapshot)."""
        return self._topic_errors

    def topic_id(self, topic: str) -> Any:
        return self._topic_ids.get(topic)

    def is_internal(self, topic: str) -> bool:
        return topic in self._internal

    def __repr__(self) -> str:
        return (
            f"Cluster(id={self.cluster_id!r}, nodes={sorted(self._nodes)}, topics={len(self._counts)}, "
            f"partitions={len(self._partitions)}, bootstrap={self.is_bootstrap})"
        )


def partition_info_from_body(topic: str, p: Mapping[str, Any]) -> PartitionInfo:
    return PartitionInfo(
        topic,
        int(p["partition_index"]),
        int(p.get("leader_id", -1)),
        int(p.get("leader_epoch", -1)),
        tuple(p.get("replica_nodes") or ()),
        tuple(p.get("isr_nodes") or ()),
        tuple(p.get("offline_replicas") or ()),
        int(p.get("error_code", 0)),
    )
