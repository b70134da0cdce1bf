"""The network layer against real brokers (Apache Kafka and Tansu): handshake, metadata, CreateTopics, ListOffsets,
Produce."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from sparkafka import errors
from sparkafka._clock import SYSTEM_CLOCK
from sparkafka.net.admin import AdminClient
from sparkafka.net.client import ClientResponse, NetworkClient
from sparkafka.net.metadata import Metadata, MetadataUpdater
from sparkafka.protocol.messages import PRODUCE_MAX_VERSION_WITH_NAMES, ApiKey
from support.consume import consume_all
from support.golden import ONE_RECORD_BATCH
from support.wire import record_batch

pytestmark = pytest.mark.broker



def _topic() -> str:
    return f"net-{uuid.uuid4().hex[:10]}"


def _produce(client: NetworkClient, node: int, topic: str, partition: int,
             records: bytes = ONE_RECORD_BATCH) -> dict[str, Any]:
    version = min(client.api_version(node, ApiKey.PRODUCE), PRODUCE_MAX_VERSION_WITH_NAMES)
    body = {
        "transactional_id": None,
        "acks": -1,
        "timeout_ms": 10_000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": records}]}
        ],
    }
    box: list[ClientResponse] = []
    client.send(node, ApiKey.PRODUCE, body, version=version, callback=box.append)
    deadline = time.monotonic() + 10
    while not box:
        assert time.monotonic() < deadline
        client.poll(100, client.clock.monotonic_ms())
    assert box[0].error is None, box[0].error
    assert box[0].body is not None
    return box[0].body


def test_admin_roundtrip(broker: Any) -> None:
    topic = _topic()
    with AdminClient(broker.bootstrap_servers, request_timeout_ms=15_000) as admin:
        versions = admin.api_versions()
        assert ApiKey.PRODUCE in versions and ApiKey.METADATA in versions
        hi = versions[ApiKey.PRODUCE][1]
        assert admin.negotiated_version(ApiKey.PRODUCE) == min(hi, 13)
        cluster = admin.describe_cluster()
        assert cluster.nodes and all(n >= 0 for n in cluster.nodes)
        admin.create_topics([(topic, 3, 1)], timeout_ms=15_000)
        cluster = admin.describe_cluster()
        assert cluster.partition_count(topic) == 3
        assert len(cluster.available_partitions(topic)) == 3
        assert admin.list_offsets(topic) == {0: 0, 1: 0, 2: 0}

        leader = cluster.leader_for((topic, 1))
        assert leader is not None
        answer = _produce(admin.client, leader, topic, 1)
        part = answer["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0 and part["base_offset"] == 0
        _produce(admin.client, leader, topic, 1)
        assert admin.list_offsets(topic) == {0: 0, 1: 2, 2: 0}
        assert admin.list_offsets(topic, earliest=True) == {0: 0, 1: 0, 2: 0}

        with pytest.raises(errors.BrokerError, match=topic) as info:
            admin.create_topics([(topic, 3, 1)], timeout_ms=10_000)
        assert info.value.code == 36  # TOPIC_ALREADY_EXISTS
        admin.create_topics([(topic, 3, 1)], timeout_ms=10_000, exist_ok=True)


def test_end_offsets_are_exact_where_list_offsets_lags(broker: Any) -> None:
    """Tansu's ListOffsets answers the base offset of a partition's last batch plus one; ``end_offsets``
    corrects it with a Fetch (high watermark and the last batch's header), and matches Apache Kafka's."""
    topic = _topic()
    with AdminClient(broker.bootstrap_servers) as admin:
        admin.create_topics([(topic, 3, 1)], timeout_ms=15_000)
        assert admin.end_offsets(topic) == {0: 0, 1: 0, 2: 0}
        cluster = admin.describe_cluster()
        # partition 0: one batch of 200 records of 1,000 bytes (larger than the Fetch's 64 KiB per partition)
        # partition 1: batches of 3 and 2 records; partition 2: empty
        sent = {0: [record_batch([bytes([65 + n % 26]) * 1000 for n in range(200)])],
                1: [record_batch([b"a", b"b", b"c"]), record_batch([b"d", b"e"])]}
        for partition, batches in sent.items():
            leader = cluster.leader_for((topic, partition))
            assert leader is not None
            for batch in batches:
                answer = _produce(admin.client, leader, topic, partition, batch)
                assert answer["responses"][0]["partition_responses"][0]["error_code"] == 0
        listed = admin.list_offsets(topic)
        if broker.name == "tansu":
            assert listed == {0: 1, 1: 4, 2: 0}  # base offset of the last batch + 1
        else:
            assert listed == {0: 200, 1: 5, 2: 0}
        assert admin.end_offsets(topic) == {0: 200, 1: 5, 2: 0}
    records = consume_all(broker.bootstrap_servers, topic, 205)
    assert sorted((r.partition, r.offset) for r in records) == (
        [(0, n) for n in range(200)] + [(1, n) for n in range(5)])


def test_metadata_updater_feeds_waiting_thread(broker: Any) -> None:
    topic = _topic()
    with AdminClient(broker.bootstrap_servers) as admin:
        admin.create_topics([(topic, 2, 1)], timeout_ms=15_000)
    client = NetworkClient(broker.bootstrap_servers, client_id="updater-test")
    metadata = Metadata(broker.bootstrap_servers, clock=SYSTEM_CLOCK)
    updater = MetadataUpdater(metadata, client)
    stop = threading.Event()

    def sender_loop() -> None:
        while not stop.is_set():
            now = SYSTEM_CLOCK.monotonic_ms()
            timeout = updater.maybe_update(now)
            client.poll(min(timeout, 200), now)

    thread = threading.Thread(target=sender_loop, daemon=True)
    thread.start()
    try:
        cluster = metadata.wait_for_topic(topic, 1, 15_000)
        assert cluster.partition_count(topic) == 2
        assert cluster.leader_for((topic, 0)) is not None
        assert not cluster.is_bootstrap and all(n >= 0 for n in cluster.nodes)
        assert client.nodes() == cluster.node_addresses()  # the client now dials the real node ids
        with pytest.raises(errors.MetadataTimeoutError, match="partition 5"):
            metadata.wait_for_topic(topic, 5, 300)
    finally:
        stop.set()
        client.wakeup()
        thread.join(5)
        client.close()
