"""Fault scenarios on the librdkafka mock cluster (3 brokers): 100,000 keyed records each, idempotence on,
read back with confluent-kafka, and checked by ``faults.ledger``: every acknowledged record present exactly
once, per-partition order = send order, every missing record failed with a typed error, nothing hangs.

Which producer: the mock (librdkafka 2.16) checks sequence numbers only for *transactional* producers;
for a plain idempotent producer it appends whatever arrives, in any order. So scenarios whose guarantee
depends on the broker rejecting a batch that overtook a failed one run a transactional producer,
committing every 10,000 records (the sequence machinery is the same); scenarios whose guarantees hold on
any broker run the plain idempotent producer. Resends of batches that were already written (request
time-outs) are tested against Tansu in ``test_tansu_faults.py``: the mock's duplicate window advances
on an acknowledged duplicate, so the next resend of an older batch is appended again.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

import pytest

from faults.ledger import failed_indexes
from faults.scenario import RECORDS, Scenario, assert_clean
from sparkafka import errors
from support.mock_cluster import TRANSPORT_ERROR, ApiKey, MockCluster

pytestmark = [pytest.mark.faults, pytest.mark.timeout(240)]

PARTITIONS = 6
RETRIABLE = [errors.NOT_LEADER_OR_FOLLOWER, errors.REQUEST_TIMED_OUT, 19, 20, 3]
"""NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND,
UNKNOWN_TOPIC_OR_PARTITION."""


def _topic(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> str:
    topic = unique_topic("faults")
    mock_cluster.create_topic(topic, partitions=PARTITIONS, replication=3)
    return topic


def _later(seconds: float, action: Callable[[], None]) -> threading.Timer:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()
    return timer


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_bursts_of_retriable_produce_errors(mock_cluster: MockCluster, unique_topic: Callable[[str], str],
                                            compression: str) -> None:
    """With lz4, batches are compressed when a new batch takes over, before their producer state is
    known; that state (id, epoch, sequence, transactional bit) written at drain into the compressed
    bytes, and the resends, must leave batches the broker and an independent consumer accept."""
    topic = _topic(mock_cluster, unique_topic)
    rng = random.Random(4)
    run = Scenario(mock_cluster.bootstrap_servers, topic, transactional_id=f"{topic}-txn",
                   compression_type=compression)

    def burst(index: int) -> None:
        if index:
            codes = [rng.choice([*RETRIABLE, TRANSPORT_ERROR]) for _ in range(rng.randint(3, 12))]
            mock_cluster.push_request_errors(ApiKey.PRODUCE, codes)

    run.send(RECORDS, every=2_000, hook=burst)
    retries = run.producer.metrics().get("record-retry-total", 0)
    report = run.finish()
    assert_clean(report, all_acknowledged=True)
    assert not run.commit_errors
    assert retries > 0, "no retry happened: the faults were not injected"


def test_partition_leaders_move_mid_stream(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = _topic(mock_cluster, unique_topic)
    rng = random.Random(7)
    run = Scenario(mock_cluster.bootstrap_servers, topic, transactional_id=f"{topic}-txn")

    def move(index: int) -> None:
        if index:
            for partition in range(PARTITIONS):
                mock_cluster.partition_set_leader(topic, partition, rng.randint(1, 3))

    run.send(RECORDS, every=5_000, hook=move)
    report = run.finish()
    assert_clean(report, all_acknowledged=True)
    assert not run.commit_errors
    # the moves happened under the producer: a batch sent to a partition's old leader came back
    # NOT_LEADER_OR_FOLLOWER and went again (else this test checked a quiet run)
    assert run.producer.metrics()["record-retry-total"] > 0


def test_a_broker_goes_down_and_comes_back(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = _topic(mock_cluster, unique_topic)
    for partition in range(PARTITIONS):  # the mock picks leaders at random: broker 2 may lead none (a quiet run)
        mock_cluster.partition_set_leader(topic, partition, partition % 3 + 1)
    run = Scenario(mock_cluster.bootstrap_servers, topic, transactional_id=f"{topic}-txn")
    timers: list[threading.Timer] = []
    lost: list[int] = []
    run.producer._client.add_disconnect_listener(lambda node, error: lost.append(node))

    def bounce(index: int) -> None:
        if index in (25_000, 65_000):
            mock_cluster.broker_set_down(2)
            timers.append(_later(2.0, lambda: mock_cluster.broker_set_up(2)))

    run.send(RECORDS, every=5_000, hook=bounce)
    lost_before_close = list(lost)  # close() disconnects too
    report = run.finish()
    for timer in timers:
        timer.join()
    assert_clean(report, all_acknowledged=True)
    assert not run.commit_errors
    assert 2 in lost_before_close  # the producer lost its connection to the broker taken down (else: a quiet run)


def test_every_broker_down_longer_than_the_delivery_timeout(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    """Records fail with DeliveryTimeoutError (or, once the producer has fallen back to the bootstrap
    addresses and lost the topic's metadata, send() raises MetadataTimeoutError after max.block.ms, as in
    Java with metadata.recovery.strategy=rebootstrap); nothing hangs; the producer recovers."""
    topic = _topic(mock_cluster, unique_topic)
    run = Scenario(mock_cluster.bootstrap_servers, topic, delivery_timeout_ms=3000, request_timeout_ms=1000,
                   max_block_ms=2000)
    first, during, after = 30_000, 40_000, 30_000
    run.send(first)
    down_at = time.monotonic()
    mock_cluster.broker_set_down(-1)
    attempted = run.ledger.send(run.producer, topic, during, stop_on_error=True)
    outage = range(first, first + attempted)
    while time.monotonic() < down_at + 3.0 + 5.0 and not all(run.ledger.futures[i].done() for i in outage):
        time.sleep(0.1)
    assert all(run.ledger.futures[i].done() for i in outage), "records hang while every broker is down"
    timeouts = (errors.DeliveryTimeoutError, errors.MetadataTimeoutError)
    assert all(isinstance(run.ledger.outcome(i), timeouts) for i in outage)
    # Every broker stays down for longer than delivery.timeout.ms. (Not an assertion on the elapsed time:
    # when the very first record of the outage already found no metadata, send() gave up after
    # max.block.ms, i.e. 2 s, and that record was the whole outage range.)
    time.sleep(max(0.0, down_at + 3.5 - time.monotonic()))
    mock_cluster.broker_set_up(-1)
    start = len(run.ledger)
    run.send(after)
    report = run.finish()
    assert_clean(report)
    assert all(run.ledger.outcome(i) is None for i in range(start, len(run.ledger))), "no recovery"
    assert set(report.failures_by_type) <= {"DeliveryTimeoutError", "MetadataTimeoutError"}, report.summary()


@pytest.mark.parametrize("code", [errors.TOPIC_AUTHORIZATION_FAILED, 87])  # 87: INVALID_RECORD
def test_a_non_retriable_error_fails_only_the_affected_batch(
        mock_cluster: MockCluster, unique_topic: Callable[[str], str], code: int) -> None:
    topic = _topic(mock_cluster, unique_topic)
    run = Scenario(mock_cluster.bootstrap_servers, topic)
    injected: list[int] = []

    def poison(index: int) -> None:
        if index in (20_000, 50_000, 80_000):
            partition = len(injected) % PARTITIONS
            injected.append(partition)
            mock_cluster.push_partition_request_errors(topic, partition, ApiKey.PRODUCE, [code])

    run.send(RECORDS, every=10_000, hook=poison)
    report = run.finish()
    assert_clean(report)
    failed = failed_indexes(run.ledger)
    expected_cls = errors.error_class_for_code(code)
    assert failed and all(isinstance(run.ledger.outcome(i), expected_cls) for i in failed)
    # exactly one batch per injection: each failed batch shares one error object
    assert len({id(run.ledger.outcome(i)) for i in failed}) == len(injected)
    assert report.acknowledged == RECORDS - len(failed)
