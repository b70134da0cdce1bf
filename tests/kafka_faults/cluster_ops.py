"""What the broker-fault tests do to and learn from the 3-node cluster, through confluent-kafka's admin client.

How it works: ``wait_in_sync`` polls Metadata until every node is listed and every partition of every topic
has a leader and its full ISR (the state every test starts from and leaves behind);
``create_assigned_topic`` creates a topic with chosen replicas, so a test knows which node leads a
partition and which follow it; ``wait_for_leader`` waits until a restarted node leads its partitions again
(the controller moves leadership back to the first replica); ``coordinator_partition`` names the
``__transaction_state`` partition, hence the coordinator, of a transactional id.
"""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from support.kafka_cluster import KafkaCluster

__all__ = ["coordinator_partition", "create_assigned_topic", "isr_of", "wait_for_leader", "wait_in_sync"]


def _admin(cluster: KafkaCluster) -> AdminClient:
    running = [n for n in cluster.node_ids if cluster.is_running(n)]
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers(nodes=running)})


def wait_in_sync(cluster: KafkaCluster, timeout: float = 90.0) -> None:
    """Every node is listed and every partition of every topic has a leader and all its replicas in the ISR."""
    admin = _admin(cluster)
    deadline = time.monotonic() + timeout
    lagging: list[str] = []
    while time.monotonic() < deadline:
        try:
            metadata = admin.list_topics(timeout=5)
        except Exception as exc:  # a node may still be starting: ask again
            lagging = [repr(exc)]
        else:
            lagging = [f"{name}-{p.id} isr={sorted(p.isrs)} replicas={sorted(p.replicas)} leader={p.leader}"
                       for name, topic in metadata.topics.items() for p in topic.partitions.values()
                       if p.leader < 0 or set(p.isrs) != set(p.replicas)]
            if not lagging and set(metadata.brokers) == set(cluster.node_ids):
                return
        time.sleep(0.2)
    raise TimeoutError(f"the cluster was not back in sync within {timeout}s: {lagging[:5]}")


def isr_of(cluster: KafkaCluster, topic: str, partition: int) -> list[int]:
    entry = _admin(cluster).list_topics(topic=topic, timeout=10).topics[topic]
    return sorted(entry.partitions[partition].isrs)


def create_assigned_topic(bootstrap: str, name: str, assignment: list[list[int]],
                          config: dict[str, str] | None = None, timeout: float = 30.0) -> None:
    """Create ``name`` with the given replicas per partition (the first one is the preferred leader) and
    wait until every partition is led by it with its full ISR."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(name, num_partitions=len(assignment), replica_assignment=assignment,
                     config=config or {})
    admin.create_topics([topic], request_timeout=timeout)[name].result(timeout=timeout)
    deadline = time.monotonic() + timeout
    while True:
        entry = admin.list_topics(topic=name, timeout=5).topics.get(name)
        if entry is not None and entry.error is None and len(entry.partitions) == len(assignment) and all(
                p.leader == assignment[p.id][0] and set(p.isrs) == set(assignment[p.id])
                for p in entry.partitions.values()):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} is not led and in sync as assigned ({assignment}) after {timeout}s")
        time.sleep(0.1)


def coordinator_partition(transactional_id: str, partitions: int) -> int:
    """The ``__transaction_state`` partition of a transactional id (Java ``TransactionStateManager.partitionFor``:
    ``Utils.abs(transactionalId.hashCode) % partitions``, with Java's ``String.hashCode``)."""
    h = 0
    for unit in transactional_id.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    signed = h - (1 << 32) if h & 0x80000000 else h
    return 0 if signed == -(1 << 31) else abs(signed) % partitions



def wait_for_leader(cluster: KafkaCluster, topic: str, partition: int, node: int, timeout: float = 60.0) -> None:
    """Wait until ``node`` leads ``topic``/``partition`` (after a restart: the controller's preferred-leader
    election, ``auto.leader.rebalance.enable``, gives the partition back to its first replica)."""
    admin = _admin(cluster)
    deadline = time.monotonic() + timeout
    leader = -1
    while time.monotonic() < deadline:
        entry = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
        if entry is not None and partition in entry.partitions:
            leader = entry.partitions[partition].leader
            if leader == node:
                return
        time.sleep(0.2)
    raise TimeoutError(f"{topic}-{partition} is led by {leader}, not {node}, after {timeout}s")
