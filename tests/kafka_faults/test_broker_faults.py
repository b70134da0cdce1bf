"""Broker faults on a 3-node Apache Kafka cluster, for the idempotent and the transactional producer.

How it works: each test streams keyed ledger records (``kafka_faults.stream``: at most ``window``
unacknowledged, so a fault always meets batches on the wire and queued) while it kills, stops and restarts
nodes of ``kafka3``; then it reads the topic back with confluent-kafka (``read_committed`` for the
transactional runs) and checks, with ``faults.ledger``, that every acknowledged record is in the log once,
in send order per partition, that every future is done and every callback ran once with the future's
outcome, and, for transactions, that exactly the committed records are visible. Topics have three
partitions with chosen replicas (``create_assigned_topic``), so a test knows which node leads what. The
kill -9 runs send 100,000 records or more; the others, whose time goes into restarting JVMs, 60,000.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from faults.scenario import Scenario, assert_clean
from kafka_faults.cluster_ops import (
    coordinator_partition,
    create_assigned_topic,
    isr_of,
    wait_for_leader,
    wait_in_sync,
)
from kafka_faults.stream import Background, ErrorLog, Stream
from support.kafka_cluster import KafkaCluster
from transactions.raw_log import read_log

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

TXN_STATE_PARTITIONS = 5  # transaction.state.log.num.partitions of the harness
RECORDS = 100_000
"""Records of the kill -9 runs."""
RECORDS_SLOW = 60_000
"""Records of the other runs, whose time goes into JVM restarts on two shared cores (the module stays near
four minutes)."""
MODES = pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])


def _rotations(first: int, nodes: list[int]) -> list[list[int]]:
    """Three partitions whose replicas are ``nodes`` rotated so that ``first`` leads partition 0."""
    ring = nodes[nodes.index(first):] + nodes[:nodes.index(first)]
    return [ring[i:] + ring[:i] for i in range(len(ring))]


def _start(cluster: KafkaCluster, topic: str, transactional: bool, victim: int | None = None
           ) -> tuple[Scenario, int]:
    """A producer (initialized if transactional) and its topic; returns it and the node leading partition 0:
    ``victim`` if given, else the transaction coordinator (transactional) or node 2."""
    tid = f"{topic}-txn" if transactional else None
    run = Scenario(cluster.bootstrap, topic, transactional_id=tid)
    if victim is None:
        victim = 2
        if tid is not None:  # the coordinator also leads partition 0: the kill hits both
            victim = cluster.leader_of("__transaction_state", coordinator_partition(tid, TXN_STATE_PARTITIONS))
    create_assigned_topic(cluster.bootstrap, topic, _rotations(victim, cluster.node_ids))
    return run, victim


def _retried(run: Scenario) -> float:
    return run.producer.metrics()["record-retry-total"]


def _kill_on_the_wire(cluster: KafkaCluster, run: Scenario, node: int, partition: int = 0) -> None:
    """SIGKILL ``node`` as soon as a Produce request with a batch of ``partition`` is on the wire to it (the
    Sender's in-flight list says when; it only times the fault, nothing is asserted on it)."""
    in_flight = run.producer._sender.in_flight_batches
    deadline = time.monotonic() + 30
    while not any(b.in_request for b in list(in_flight.get((run.topic, partition), ()))):
        assert time.monotonic() < deadline, f"no batch of partition {partition} went out in 30 s"
        time.sleep(0.0005)
    cluster.kill(node)


@MODES
def test_partition_leader_killed_and_restarted(kafka3: KafkaCluster, unique_topic: Callable[[str], str],
                                               transactional: bool) -> None:
    """kill -9 of partition 0's leader (for the transactional producer also its transaction coordinator)
    with a full pipeline; the stream goes on through the failover, the node is restarted mid-stream, leads
    partition 0 again and the stream ends on it."""
    run, victim = _start(kafka3, unique_topic("kill"), transactional)
    stream = Stream(run, txn_size=20_000)
    killed = stream.at(30_000, "kill -9", lambda: _kill_on_the_wire(kafka3, run, victim))
    stream.send(60_000)  # the controller fences the node, new leaders take over
    killed()
    stream.phase(f"node {victim} killed, new leader elected")
    assert kafka3.leader_of(run.topic, 0) != victim
    retried_in_failover = _retried(run)
    restart = Background("restart", lambda: kafka3.start_node(victim))
    during = stream.send_until(restart, per_second=4_000)
    stream.phase(f"node {victim} restarted")
    wait_for_leader(kafka3, run.topic, 0, victim)  # and the stream ends on the restarted node
    stream.phase(f"node {victim} leads partition 0 again")
    stream.send(max(20_000, RECORDS - stream.sent))
    report = stream.finish()
    stream.phase("read back")
    assert_clean(report, all_acknowledged=True)
    assert report.sent >= RECORDS and during > 0, (report.sent, during)
    assert retried_in_failover > 0, "no record was in flight to the killed leader"
    assert not stream.commit_errors, stream.commit_errors


@MODES
def test_isr_below_min_insync_replicas_is_retried_until_the_follower_returns(
        kafka3: KafkaCluster, unique_topic: Callable[[str], str], transactional: bool) -> None:
    """Partitions with two replicas (nodes 1 and 2), so the cluster's min.insync.replicas=2 needs both: node
    2 stopped mid-stream (a controlled shutdown takes it out of the ISR at once), the leader refuses every
    Produce with NOT_ENOUGH_REPLICAS (requests appended just before wait for their timeout, see below); the
    producer retries until node 2 is back, then the stream goes on. Node 3 keeps the KRaft quorum. A batch
    appended before the refusal is deduplicated when its retry arrives."""
    topic = unique_topic("isr")
    tid = f"{topic}-txn" if transactional else None
    # Kafka 4.x keeps the high watermark still while the ISR is below min.insync.replicas (KIP-966; the
    # broker's Partition.maybeIncrementLeaderHW), so a request appended just before node 2 left waits in the
    # leader's purgatory for its timeout (the producer's request.timeout.ms): 5 s here instead of 30
    run = Scenario(kafka3.bootstrap, topic, transactional_id=tid, request_timeout_ms=5_000)
    create_assigned_topic(kafka3.bootstrap, topic, [[1, 2], [2, 1], [1, 2]])
    # node 2 stops inside a transaction whose partitions are all added: between transactions, a transactional
    # producer would see the refusal only as CONCURRENT_TRANSACTIONS (the last commit's markers wait for the
    # ISR too, and the next transaction cannot add a partition before they are written). The second
    # transaction's first records are all acknowledged before the stop (settle): with only the window's
    # records done, its partitions were not always added yet (seen in CI: 564 CONCURRENT_TRANSACTIONS answers
    # and no NOT_ENOUGH_REPLICAS in 60 s)
    # (a transactional stream that commits just then is refused with CONCURRENT_TRANSACTIONS instead)
    refusals = ("NOT_ENOUGH_REPLICAS", "CONCURRENT_TRANSACTIONS") if transactional else ("NOT_ENOUGH_REPLICAS",)
    stream = Stream(run, txn_size=20_000)
    with ErrorLog() as refused:
        stream.send(22_000)
        stream.settle()
        kafka3.stop_node(2)
        assert isr_of(kafka3, topic, 0) == [1] and isr_of(kafka3, topic, 1) == [1]
        stream.phase("node 2 stopped: the ISR is [1]")

        def follower_returns() -> None:
            deadline = time.monotonic() + 60
            while not any(refused.seen(name).is_set() for name in refusals):
                assert time.monotonic() < deadline, f"never refused: {refused.retried}"
                refused.seen("NOT_ENOUGH_REPLICAS").wait(0.2)
            kafka3.start_node(2)
            wait_in_sync(kafka3)

        returned = Background("follower returns", follower_returns)
        stream.send_until(returned, per_second=4_000)
        stream.phase("node 2 back in the ISR")
        stream.send(max(10_000, RECORDS_SLOW - stream.sent))
        report = stream.finish()
    stream.phase(f"read back; retried: {refused.retried}")
    assert_clean(report, all_acknowledged=True)
    assert report.sent >= RECORDS_SLOW
    assert sum(refused.retried.get(name, 0) for name in refusals) > 0, refused.retried
    assert not stream.commit_errors, stream.commit_errors


def test_isr_below_min_insync_replicas_fails_each_record_at_the_delivery_timeout(
        kafka3: KafkaCluster, unique_topic: Callable[[str], str]) -> None:
    """The same refusal with a short delivery.timeout.ms: every record's future and callback fail with a
    typed error (DeliveryTimeoutError, or NotEnoughReplicasError for a batch whose last answer came after its
    deadline), never before delivery.timeout.ms, and none of them is written. Once the follower is back the
    same producer delivers new records (under a new producer id: the failed batches left a gap)."""
    topic = unique_topic("isrto")
    create_assigned_topic(kafka3.bootstrap, topic, [[1, 2], [2, 1], [1, 2]])
    kafka3.stop_node(2)
    assert isr_of(kafka3, topic, 0) == [1] and isr_of(kafka3, topic, 1) == [1]
    timeout_ms = 4_000
    run = Scenario(kafka3.bootstrap, topic, delivery_timeout_ms=timeout_ms, request_timeout_ms=2_000)
    ledger = run.ledger
    with ErrorLog() as refused:
        started = time.monotonic()
        ledger.send(run.producer, topic, 3_000)
        run.producer.flush(timeout=60)
    failed_after = [ledger.callback_time[i] - started for i in range(3_000)]
    kafka3.start_node(2)
    wait_in_sync(kafka3)
    ledger.send(run.producer, topic, 3_000)
    report = run.finish()
    assert_clean(report)
    assert report.failed == 3_000 and report.acknowledged == 3_000, report.summary()
    assert set(report.failures_by_type) <= {"DeliveryTimeoutError", "NotEnoughReplicasError"}, report.summary()
    assert report.in_log == 3_000, "a record that failed was written"
    assert min(failed_after) >= timeout_ms / 1000, f"a record failed {min(failed_after):.2f}s after its send"
    assert refused.retried.get("NOT_ENOUGH_REPLICAS", 0) > 0, refused.retried
    error = ledger.outcome(0)
    assert error is not None and str(topic) in str(error), error


@MODES
def test_rolling_restart_of_all_three_nodes(kafka3: KafkaCluster, unique_topic: Callable[[str], str],
                                            transactional: bool) -> None:
    """Each node in turn: a controlled shutdown (its leaderships move away), a restart, and the next one only
    once every partition is back in sync; the controller hands the restarted node its leaderships back
    meanwhile. The stream runs all the way through."""
    run, _ = _start(kafka3, unique_topic("rolling"), transactional, victim=1)
    stream = Stream(run, txn_size=10_000)
    stream.send(10_000)
    for node in kafka3.node_ids:
        def restart(node: int = node) -> None:
            kafka3.stop_node(node)
            kafka3.start_node(node)
            wait_in_sync(kafka3)

        stream.send_until(Background(f"restart node {node}", restart), per_second=1_500)
        stream.phase(f"node {node} restarted")
    stream.send(max(10_000, RECORDS_SLOW - stream.sent))
    report = stream.finish()
    stream.phase("read back")
    assert_clean(report, all_acknowledged=True)
    assert report.sent >= RECORDS_SLOW
    assert not stream.commit_errors, stream.commit_errors


def test_full_cluster_restart_keeps_the_idempotent_producer_state(kafka3: KafkaCluster,
                                                                  unique_topic: Callable[[str], str]) -> None:
    """All three nodes killed at once (kill -9) while Produce requests are on the wire, started again on the
    logs they left: the producer, alive throughout, resends what was unanswered with the same producer id and
    sequences, and the brokers, whose producer state was rebuilt from the logs, deduplicate what they had
    appended. Every batch in the log carries the one producer id the producer started with."""
    run, _ = _start(kafka3, unique_topic("full"), False, victim=1)
    stream = Stream(run)

    def crash_and_restart() -> None:
        _kill_on_the_wire(kafka3, run, 1)
        for node in (2, 3):
            kafka3.kill(node)
        stream.phase("all three nodes killed")
        for node in kafka3.node_ids:
            kafka3.start_node(node, wait=False)
        kafka3.wait_ready()
        wait_in_sync(kafka3)

    restarted = stream.at(30_000, "cluster restart", crash_and_restart)
    stream.send(40_000)
    restarted()
    stream.phase("the cluster is back")
    stream.send(max(10_000, RECORDS_SLOW - stream.sent))
    report = stream.finish()
    stream.phase("read back")
    assert_clean(report, all_acknowledged=True)
    assert report.sent >= RECORDS_SLOW
    assert _retried(run) > 0, "no record was resent across the restart"
    producer_ids = {b.producer_id for batches in read_log(kafka3.bootstrap, run.topic).values() for b in batches}
    assert len(producer_ids) == 1, f"records were written under several producer ids: {producer_ids}"
