"""MetadataUpdater driving a NetworkClient against fake brokers and librdkafka's mock cluster."""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from sparkafka import errors
from sparkafka._clock import ManualClock
from sparkafka.net.client import ClientResponse, NetworkClient
from sparkafka.net.metadata import Metadata, MetadataUpdater
from sparkafka.protocol.messages import ApiKey

from .fake_broker import FakeBroker, FakeConn, Request, free_port


def _run(
    updater: MetadataUpdater, client: NetworkClient, clock: ManualClock, until: Any, steps: int = 500
) -> None:
    for _ in range(steps):
        if until():
            return
        now = clock.monotonic_ms()
        updater.maybe_update(now)
        client.poll(5, now)
    raise AssertionError("condition not reached")


def test_updater_sends_producer_topics_and_applies_answer(fake_broker: FakeBroker) -> None:
    fake_broker.node_id = 7
    fake_broker.topics = {"orders": 3}
    clock = ManualClock()
    client = NetworkClient(fake_broker.bootstrap, clock=clock, rng=random.Random(3))
    metadata = Metadata(fake_broker.bootstrap, clock=clock)
    updater = MetadataUpdater(metadata, client)
    try:
        metadata.add_topic("orders", clock.monotonic_ms())
        _run(updater, client, clock, lambda: metadata.fetch().partition_count("orders") == 3)
        request = [r for r in fake_broker.requests if r.api_key == ApiKey.METADATA][-1]
        assert request.body is not None
        assert [t["name"] for t in request.body["topics"]] == ["orders"]
        assert request.body["allow_auto_topic_creation"] is True
        cluster = metadata.fetch()
        assert cluster.leader_for(("orders", 2)) == 7
        assert client.nodes() == {7: (fake_broker.host, fake_broker.port)}
        # nothing due until metadata.max.age.ms
        now = clock.monotonic_ms()
        assert updater.maybe_update(now) == pytest.approx(metadata.max_age_ms)
        metadata.request_update()
        clock.advance(200)
        count = fake_broker.count(ApiKey.METADATA)
        _run(
            updater,
            client,
            clock,
            lambda: fake_broker.count(ApiKey.METADATA) > count and not updater.in_flight,
        )
    finally:
        client.close()


def test_rebootstrap_when_every_known_broker_is_unreachable(fake_broker: FakeBroker) -> None:
    dead_port = free_port()

    def handler(conn: FakeConn, req: Request) -> None:
        if req.api_key == ApiKey.METADATA:
            body = fake_broker.metadata_body()
            body["brokers"] = [{"node_id": 1, "host": "127.0.0.1", "port": dead_port, "rack": None}]
            conn.respond(req, body)
        else:
            fake_broker.default_handler(conn, req)

    fake_broker.handler = handler
    clock = ManualClock()
    client = NetworkClient(
        fake_broker.bootstrap, clock=clock, reconnect_backoff_ms=10, reconnect_backoff_max_ms=10
    )
    metadata = Metadata(fake_broker.bootstrap, clock=clock, retry_backoff_ms=10, retry_backoff_max_ms=10)
    updater = MetadataUpdater(metadata, client)
    try:
        _run(updater, client, clock, lambda: client.nodes() == {1: ("127.0.0.1", dead_port)})
        metadata.request_update()
        rebooted = False
        deadline = time.monotonic() + 5
        while not rebooted:
            assert time.monotonic() < deadline
            clock.advance(5)
            now = clock.monotonic_ms()
            updater.maybe_update(now)
            client.poll(5, now)
            rebooted = -1 in client.nodes()
        assert metadata.fetch().is_bootstrap
        assert isinstance(client.connection_failure(1), errors.KafkaConnectionError)
        count = fake_broker.count(ApiKey.METADATA)
        _run(
            updater, client, clock, lambda: fake_broker.count(ApiKey.METADATA) > count
        )  # asks bootstrap again
    finally:
        client.close()


def test_librdkafka_mock_cluster_handshake_and_metadata(mock_cluster: Any) -> None:
    mock_cluster.set_apiversion(ApiKey.PRODUCE, 0, 2)
    clock = ManualClock()
    client = NetworkClient(mock_cluster.bootstrap_servers, clock=clock)
    metadata = Metadata(mock_cluster.bootstrap_servers, clock=clock)
    updater = MetadataUpdater(metadata, client)
    try:
        mock_cluster.create_topic("mocked", partitions=4, replication=1)
        metadata.add_topic("mocked", clock.monotonic_ms())
        _run(updater, client, clock, lambda: metadata.fetch().partition_count("mocked") == 4, steps=2000)
        cluster = metadata.fetch()
        assert sorted(cluster.nodes) == [1, 2, 3]
        leader = cluster.leader_for(("mocked", 0))
        assert leader in (1, 2, 3)
        while not client.ready(leader, clock.monotonic_ms()):
            client.poll(5, clock.monotonic_ms())
        # the mock speaks ApiVersions <= v2: the handshake fell back from our v4
        assert client.api_version(leader, ApiKey.API_VERSIONS) == 2
        with pytest.raises(errors.UnsupportedVersionError, match="Produce"):
            client.api_version(leader, ApiKey.PRODUCE)
        box: list[ClientResponse] = []
        client.send(
            leader, ApiKey.PRODUCE, {"acks": 1, "timeout_ms": 100, "topic_data": []}, callback=box.append
        )
        client.poll(0, clock.monotonic_ms())
        assert isinstance(box[0].error, errors.UnsupportedVersionError)
    finally:
        client.close()


def test_no_rebootstrap_while_a_connection_is_ready_but_busy(fake_broker: FakeBroker) -> None:
    """Java re-bootstraps only when no connection is ready (``LeastLoadedNode.hasNodeAvailableOrConnectionReady``):
    a live broker at max.in.flight.requests.per.connection is no reason to. Seen on a 3-node Apache Kafka
    cluster (tests/kafka_faults): a partition leader killed, the two other brokers saturated by an acks=all
    stream, and the updater re-bootstrapped every ~200 ms (a new connection to a bootstrap address each time)
    until the controller had fenced the dead node."""
    dead_port = free_port()
    fake_broker.node_id = 1

    def handler(conn: FakeConn, req: Request) -> None:
        if req.api_key == ApiKey.METADATA:
            body = fake_broker.metadata_body()
            body["brokers"].append({"node_id": 2, "host": "127.0.0.1", "port": dead_port, "rack": None})
            conn.respond(req, body)
        elif req.api_key != ApiKey.INIT_PRODUCER_ID:  # never answered: the connection stays busy
            fake_broker.default_handler(conn, req)

    fake_broker.handler = handler
    clock = ManualClock()
    client = NetworkClient(fake_broker.bootstrap, clock=clock, reconnect_backoff_ms=10_000,
                           reconnect_backoff_max_ms=10_000, max_in_flight_per_connection=2)
    metadata = Metadata(fake_broker.bootstrap, clock=clock, retry_backoff_ms=10, retry_backoff_max_ms=10)
    updater = MetadataUpdater(metadata, client)
    try:
        _run(updater, client, clock, lambda: set(client.nodes()) == {1, 2})
        _run(updater, client, clock, lambda: client.ready(1, clock.monotonic_ms()))
        client.ready(2, clock.monotonic_ms())  # refused: node 2 backs off for 10 s
        _run(updater, client, clock, lambda: client.connection_failure(2) is not None)
        body = {"transactional_id": None, "transaction_timeout_ms": 2147483647, "producer_id": -1,
                "producer_epoch": -1}
        for _ in range(2):
            client.send(1, ApiKey.INIT_PRODUCER_ID, body, callback=lambda resp: None)
        assert not client.ready(1, clock.monotonic_ms())  # busy
        metadata.request_update()
        for _ in range(20):
            clock.advance(20)
            now = clock.monotonic_ms()
            updater.maybe_update(now)
            client.poll(5, now)
        assert set(client.nodes()) == {1, 2} and not metadata.fetch().is_bootstrap
    finally:
        client.close()
