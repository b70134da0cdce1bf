"""Metadata against Java's rules for a re-created topic and for re-bootstrapping.

How it works: ``Metadata`` is fed hand-made Metadata responses (a topic re-created under a new topic id
with its leader epochs starting again; the same id with an older epoch) or driven by a real
``MetadataUpdater`` against Tansu with a ``ManualClock`` across ``metadata.max.age.ms``, and the tests
assert what Java's ``Metadata`` / ``NetworkClient`` do: a new topic id replaces the cached partitions,
and only a due refresh that kept failing for ``metadata.recovery.rebootstrap.trigger.ms`` re-bootstraps.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from sparkafka._clock import ManualClock
from sparkafka.broker import EmbeddedBroker
from sparkafka.net.client import NetworkClient
from sparkafka.net.metadata import Metadata, MetadataUpdater
from sparkafka.producer.producer import KafkaProducer
from sparkafka.protocol.messages import ApiKey

from .fake_broker import FakeBroker

# ----------------------------------------------------------------------------------- metadata helpers


def _partition(index: int, leader: int, epoch: int) -> dict[str, Any]:
    return {"error_code": 0, "partition_index": index, "leader_id": leader, "leader_epoch": epoch,
            "replica_nodes": [leader], "isr_nodes": [leader], "offline_replicas": []}


def _metadata_response(topic: str, topic_id: bytes, partitions: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "brokers": [{"node_id": 1, "host": "h1", "port": 9092, "rack": None},
                    {"node_id": 2, "host": "h2", "port": 9092, "rack": None}],
        "cluster_id": "c", "controller_id": 1,
        "topics": [{"error_code": 0, "name": topic, "topic_id": topic_id, "is_internal": False,
                    "partitions": partitions}],
    }


def test_recreated_topic_with_a_new_id_replaces_the_stale_leader_epoch() -> None:
    """A topic deleted and re-created (new topic id) between two refreshes starts again at leader epoch 0.
    Java (Metadata.updateLatestMetadata, KAFKA-12257) accepts the new partition metadata when the topic id
    changed; keeping the old partition because its epoch is higher leaves the producer sending to the old
    leader forever (NOT_LEADER_OR_FOLLOWER, refresh, same stale answer kept) until every record expires."""
    clock = ManualClock()
    md = Metadata("h1:9092", clock=clock)
    md.add_topic("t", clock.monotonic_ms())
    old_id, new_id = b"\x01" * 16, b"\x02" * 16
    md.update(_metadata_response("t", old_id, [_partition(0, 1, epoch=7)]), clock.monotonic_ms())
    clock.advance(10)
    c = md.update(_metadata_response("t", new_id, [_partition(0, 2, epoch=0)]), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 2
    assert c.leader_epoch(("t", 0)) == 0
    assert c.topic_id("t") == new_id


def test_a_leader_id_without_a_broker_entry_is_no_leader() -> None:
    """Java's MetadataResponse looks the leader id up in the broker list; a leader that is not there is
    unknown (the partition is unavailable and the Sender asks for metadata) rather than a node with no
    address that batches would be drained to."""
    clock = ManualClock()
    md = Metadata("h1:9092", clock=clock)
    md.add_topic("t", clock.monotonic_ms())
    c = md.update(_metadata_response("t", b"\x01" * 16, [_partition(0, 3, epoch=1), _partition(1, 2, epoch=1)]),
                  clock.monotonic_ms())
    assert c.leader_for(("t", 0)) is None and c.leader_for(("t", 1)) == 2
    assert c.partition_count("t") == 2
    assert c.available_partitions("t") == (1,)


def test_stale_epoch_still_ignored_for_the_same_topic_id() -> None:
    """The guard itself stays: same topic id, older epoch -> the newer cached partition is kept (Java)."""
    clock = ManualClock()
    md = Metadata("h1:9092", clock=clock)
    md.add_topic("t", clock.monotonic_ms())
    tid = b"\x05" * 16
    md.update(_metadata_response("t", tid, [_partition(0, 1, epoch=7)]), clock.monotonic_ms())
    c = md.update(_metadata_response("t", tid, [_partition(0, 2, epoch=6)]), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 1 and c.leader_epoch(("t", 0)) == 7
    # a zero (unknown) topic id from an older broker is no reason to accept an older epoch either
    c = md.update(_metadata_response("t", bytes(16), [_partition(0, 2, epoch=6)]), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 1 and c.leader_epoch(("t", 0)) == 7


def test_a_periodic_refresh_does_not_rebootstrap(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    """metadata.recovery.rebootstrap.trigger.ms (KIP-1102) counts from the start of the current, still
    failing, metadata attempt (Java ``metadataAttemptStartMs``, cleared by every successful update). With
    the defaults (metadata.max.age.ms = trigger = 5 min) the routine refresh of a healthy producer fell
    back to the bootstrap snapshot every 5 minutes: every topic's partitions and leaders vanished until the
    answer came (send() blocked on metadata, batches had no leader, broker connections were dropped)."""
    clock = ManualClock()
    client = NetworkClient(tansu.bootstrap_servers, clock=clock)
    metadata = Metadata(tansu.bootstrap_servers, clock=clock)  # defaults: max age 300 s, trigger 300 s
    updater = MetadataUpdater(metadata, client)
    topic = unique_topic("reboot")

    def run_until(done: Callable[[], bool]) -> None:
        for _ in range(2000):
            if done():
                return
            now = clock.monotonic_ms()
            updater.maybe_update(now)
            assert not metadata.fetch().is_bootstrap or metadata.version == 1, "rebootstrapped"
            client.poll(5, now)
        raise AssertionError("metadata not updated")

    try:
        metadata.add_topic(topic, clock.monotonic_ms())
        run_until(lambda: metadata.fetch().partition_count(topic) is not None)
        nodes = client.nodes()
        version = metadata.version
        clock.advance(metadata.max_age_ms)  # the periodic refresh is due
        metadata.touch(topic)  # records went to the topic meanwhile (metadata.max.idle.ms)
        run_until(lambda: metadata.version > version)
        assert metadata.fetch().partition_count(topic) is not None
        assert client.nodes() == nodes
    finally:
        client.close()


def test_rebootstrap_after_the_due_refresh_kept_failing_for_the_trigger() -> None:
    """The other half of KIP-1102: once a refresh is due, failing attempts for the trigger time do
    rebootstrap; a success in between starts the count again."""
    clock = ManualClock()
    md = Metadata("b1:1", clock=clock, metadata_max_age_ms=1000, rebootstrap_trigger_ms=5000)
    md.add_topic("t", clock.monotonic_ms())
    md.update(_metadata_response("t", b"\x01" * 16, [_partition(0, 1, epoch=0)]), clock.monotonic_ms())
    clock.advance(1000)  # due
    assert not md.should_rebootstrap(clock.monotonic_ms())
    clock.advance(4999)
    assert not md.should_rebootstrap(clock.monotonic_ms())
    clock.advance(1)
    assert md.should_rebootstrap(clock.monotonic_ms())
    md.update(_metadata_response("t", b"\x01" * 16, [_partition(0, 1, epoch=0)]), clock.monotonic_ms())
    clock.advance(6000)
    assert not md.should_rebootstrap(clock.monotonic_ms())  # the first attempt since the success


def _rebootstrap_required(updater: MetadataUpdater) -> None:
    from sparkafka.net.response import ClientResponse
    from sparkafka.protocol.messages import ApiKey

    updater._in_flight = True
    updater._on_response(ClientResponse(1, ApiKey.METADATA, 13, 7, {"error_code": 129, "brokers": [],
                                                                      "topics": []}, None, 1.0))


def test_rebootstrap_required_from_the_broker_rebootstraps_with_that_strategy() -> None:
    """KIP-1102: Metadata v13's top-level REBOOTSTRAP_REQUIRED makes Java's client (strategy rebootstrap)
    start again from bootstrap.servers. Before, code 129 was unknown: a fatal error raised to every
    thread waiting for metadata, and the stale brokers were kept."""
    clock = ManualClock()
    md = Metadata("b1:1", clock=clock)
    client = NetworkClient("b1:1", clock=clock)
    try:
        updater = MetadataUpdater(md, client)
        md.add_topic("t", clock.monotonic_ms())
        md.update(_metadata_response("t", b"\x01" * 16, [_partition(0, 1, epoch=0)]), clock.monotonic_ms())
        client.update_nodes(md.fetch().node_addresses())
        assert not md.fetch().is_bootstrap
        _rebootstrap_required(updater)
        assert md.fetch().is_bootstrap
        assert client.nodes() == {-1: ("b1", 1)}
        assert md._fatal is None  # nobody waiting for metadata gets an error: the next refresh follows
    finally:
        client.close()


def test_rebootstrap_required_with_strategy_none_is_a_failed_refresh_not_a_fatal_error() -> None:
    clock = ManualClock()
    md = Metadata("b1:1", clock=clock, recovery_strategy="none")
    client = NetworkClient("b1:1", clock=clock)
    try:
        updater = MetadataUpdater(md, client)
        md.update(_metadata_response("t", b"\x01" * 16, [_partition(0, 1, epoch=0)]), clock.monotonic_ms())
        _rebootstrap_required(updater)
        assert not md.fetch().is_bootstrap
        assert md._fatal is None
    finally:
        client.close()


def test_rebootstrap_required_in_an_api_versions_answer_rebootstraps() -> None:
    """Java's handleApiVersionsResponse: REBOOTSTRAP_REQUIRED in a broker's ApiVersions answer (strategy
    rebootstrap) closes that connection and starts again from bootstrap.servers. Before, the connection
    was only closed (and retried with backoff) while the stale broker list stayed."""
    import time

    from sparkafka.protocol.messages import ApiKey

    from .fake_broker import FakeBroker

    def stale(conn: Any, request: Any) -> None:
        if request.api_key == ApiKey.API_VERSIONS:
            conn.respond(request, {"error_code": 129, "api_keys": [], "throttle_time_ms": 0})

    broker = FakeBroker(handler=stale)
    md = Metadata("b1:1")
    client = NetworkClient("b1:1")
    try:
        updater = MetadataUpdater(md, client)
        response = _metadata_response("t", b"\x01" * 16, [_partition(0, 5, epoch=0)])
        response["brokers"] = [{"node_id": 5, "host": broker.host, "port": broker.port, "rack": None}]
        md.update(response, client.clock.monotonic_ms())
        client.update_nodes(md.fetch().node_addresses())
        deadline = time.monotonic() + 10
        while getattr(client.connection_failure(5), "code", None) != 129:  # refused with REBOOTSTRAP_REQUIRED
            assert time.monotonic() < deadline, "node 5's ApiVersions answer did not close the connection"
            now = client.clock.monotonic_ms()
            client.ready(5, now)
            client.poll(20, now)
        assert not md.fetch().is_bootstrap
        updater.maybe_update(client.clock.monotonic_ms())
        assert md.fetch().is_bootstrap
        assert client.nodes() == {-1: ("b1", 1)}
    finally:
        client.close()
        broker.close()


def test_a_partition_without_a_leader_is_refreshed_every_retry_backoff(fake_broker: FakeBroker) -> None:
    """A record waits for a partition whose leader is being elected (LEADER_NOT_AVAILABLE, no leader): the
    Sender asks for metadata every retry.backoff.ms (100 ms, +-20%) until one is named, as Java's, whose
    NetworkClient.poll runs maybeUpdate after Sender.sendProducerData asked for the refresh. The Sender
    asked after its loop's look for due refreshes and then slept up to 1 s: one refresh a second."""
    leaderless = threading.Event()
    plain_body = fake_broker.metadata_body

    def body() -> dict[str, Any]:
        answer = plain_body()
        if leaderless.is_set():
            for topic in answer["topics"]:
                for partition in topic["partitions"]:
                    partition["leader_id"], partition["error_code"] = -1, 5  # LEADER_NOT_AVAILABLE
        return answer

    fake_broker.metadata_body = body  # type: ignore[method-assign]
    fake_broker.topics = {"t": 1}
    producer = KafkaProducer({"bootstrap.servers": fake_broker.bootstrap, "retry.backoff.ms": 100, "linger.ms": 0,
                              "enable.idempotence": False, "acks": 1})
    try:
        assert producer.partitions_for("t") == [0]
        leaderless.set()
        producer._metadata.request_update()
        producer._client.wakeup()
        time.sleep(0.3)
        before = fake_broker.count(ApiKey.METADATA)
        producer.send("t", b"x", partition=0)  # queued: its partition has no leader
        time.sleep(1.5)
        refreshes = fake_broker.count(ApiKey.METADATA) - before
        assert refreshes >= 6, refreshes  # ~12 at 100 ms; 1 or 2 at one a second
    finally:
        producer.close(0)


def test_an_older_epoch_after_an_answer_without_the_partition_is_still_refused() -> None:
    """Epoch 5 (leader 1); then an answer with a topic error (a broker whose cache lags) leaves the partition
    out; then one from another lagging broker gives epoch 4 (leader 2): Java keeps the newest epoch seen per
    partition (``lastSeenLeaderEpochs``) while the topic is kept, so the stale leader is not taken and the
    partition has no leader until an answer at least as new. Only the previous snapshot was compared, so the
    stale leader was taken (Produce to a broker that is no longer the leader)."""
    clock = ManualClock()
    md = Metadata("h1:9092", clock=clock)
    md.add_topic("t", clock.monotonic_ms())
    tid = b"\x05" * 16
    md.update(_metadata_response("t", tid, [_partition(0, 1, epoch=5)]), clock.monotonic_ms())
    answer = _metadata_response("t", tid, [])
    answer["topics"][0]["error_code"] = 5  # LEADER_NOT_AVAILABLE
    assert md.update(answer, clock.monotonic_ms()).leader_for(("t", 0)) is None
    c = md.update(_metadata_response("t", tid, [_partition(0, 2, epoch=4)]), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) is None
    c = md.update(_metadata_response("t", tid, [_partition(0, 2, epoch=5)]), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 2 and c.leader_epoch(("t", 0)) == 5
    # a re-created topic (another id) starts its epochs again
    c = md.update(_metadata_response("t", b"\x06" * 16, [_partition(0, 1, epoch=0)]), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 1 and c.leader_epoch(("t", 0)) == 0
