"""Fixtures of the broker-fault suite on Apache Kafka: one 3-node KRaft cluster per module.

How it works: ``kafka3`` starts three combined KRaft nodes (replication factor 3, ``min.insync.replicas=2``,
the harness's defaults for three nodes) with a small heap, and a broker session timeout of 3 s instead
of 9 s, so the controller fences a killed node (takes it out of every ISR and elects new leaders) within
a few seconds. The module's tests share it: each test starts again what it stopped (a node found down
afterwards is started and fails the test), and the next test begins only once every partition of the
cluster has its full ISR (``wait_in_sync``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from conftest import make_kafka_cluster, running_kafka
from kafka_faults.cluster_ops import wait_in_sync
from support.gateway import Certificates
from support.kafka_cluster import KafkaCluster

FAILOVER_CONFIG = {
    # KRaft: a broker without a heartbeat for this long is fenced (its partitions get new leaders and it
    # leaves every ISR); Kafka's default is 9 s
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
    # a restarted follower rejoins the ISR soon after it caught up
    "replica.lag.time.max.ms": "4000",
    # a restarted node gets the leadership of its partitions back (preferred replica election) within 2 s
    # of rejoining their ISR, while the stream goes on; Kafka's default looks every 300 s
    "leader.imbalance.check.interval.seconds": "2",
}


@pytest.fixture(scope="module")
def kafka3(kafka_certs: Certificates) -> Iterator[KafkaCluster]:
    """Three Apache Kafka nodes for this module (RF 3, min.insync.replicas=2). Tests restart what they stop."""
    cluster = make_kafka_cluster(kafka_certs, nodes=3, name="kafka3", config=FAILOVER_CONFIG)
    cluster.heap = "448m"
    with running_kafka(cluster) as running:
        yield running


@pytest.fixture(autouse=True)
def _restored(kafka3: KafkaCluster) -> Iterator[None]:
    """Every test leaves all nodes running: one found down is started again (so the next tests run on the full
    cluster) and fails the test; then wait until the cluster is in sync."""
    yield
    down = [n for n in kafka3.node_ids if not kafka3.is_running(n)]
    for node in down:
        kafka3.start_node(node, wait=False)
    if down:
        kafka3.wait_ready(down)
    wait_in_sync(kafka3)
    assert not down, f"node(s) {down} were down at the end of the test (restarted now)"
