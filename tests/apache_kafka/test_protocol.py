"""The wire protocol against Apache Kafka 4.x itself: negotiated versions, finalized features, and a
broker that validates what it is sent (CRC-32C and record checks that Tansu skips).

How it works: an ``AdminClient`` (the network layer alone) handshakes with the shared ``kafka`` node (and
``kafka_tv1``, formatted with ``transaction.version=1``) and reports the versions it picked; raw Produce
requests carry a golden one-record batch, intact and then with one byte of its value flipped, so the
CRC no longer matches: Kafka must append the first and refuse the second with CORRUPT_MESSAGE.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported without __all__
    ConfigResource,
    ResourceType,
)

from sparkafka import KafkaProducer
from sparkafka.net.admin import AdminClient
from sparkafka.net.client import ClientResponse, NetworkClient
from sparkafka.protocol.messages import PRODUCE_MAX_VERSION_WITH_NAMES, ApiKey
from support.consume import consume_all, create_topic
from support.golden import ONE_RECORD_BATCH
from support.kafka_cluster import KafkaCluster


def _produce(client: NetworkClient, node: int, topic: str, batch: bytes) -> dict[str, Any]:
    version = min(client.api_version(node, ApiKey.PRODUCE), PRODUCE_MAX_VERSION_WITH_NAMES)
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 10_000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}
    box: list[ClientResponse] = []
    client.send(node, ApiKey.PRODUCE, body, version=version, callback=box.append)
    deadline = time.monotonic() + 15
    while not box:
        assert time.monotonic() < deadline, "no Produce answer"
        client.poll(100, client.clock.monotonic_ms())
    assert box[0].error is None and box[0].body is not None, box[0].error
    part: dict[str, Any] = box[0].body["responses"][0]["partition_responses"][0]
    return part


def test_versions_negotiated_with_kafka_4(kafka: KafkaCluster) -> None:
    with AdminClient(kafka.bootstrap, request_timeout_ms=15_000) as admin:
        assert admin.negotiated_version(ApiKey.PRODUCE) == 13
        assert admin.negotiated_version(ApiKey.METADATA) == 13
        assert admin.negotiated_version(ApiKey.API_VERSIONS) == 4
        assert admin.negotiated_version(ApiKey.END_TXN) >= 4
        node = next(iter(admin.describe_cluster().nodes))
        admin.api_versions(node_id=node)  # connected to the node itself, not the bootstrap address
        table = admin.client.api_versions_table(node)
        assert table is not None
        assert table.finalized_features_epoch >= 0
        assert table.feature_level("metadata.version") > 0
        assert table.feature_level("transaction.version") == 2  # the 4.x default


def test_a_cluster_formatted_with_transaction_version_1_says_so(kafka_tv1: KafkaCluster) -> None:
    with AdminClient(kafka_tv1.bootstrap, request_timeout_ms=15_000) as admin:
        node = next(iter(admin.describe_cluster().nodes))
        admin.api_versions(node_id=node)
        table = admin.client.api_versions_table(node)
        assert table is not None and table.feature_level("transaction.version") == 1


def test_a_corrupted_batch_is_refused_and_an_intact_one_appended(kafka: KafkaCluster,
                                                                 unique_topic: Any) -> None:
    topic = unique_topic("crc")
    create_topic(kafka.bootstrap, topic, 1)
    corrupted = bytearray(ONE_RECORD_BATCH)
    corrupted[-2] ^= 0x01  # a byte of the value "value": covered by the CRC, not by any length
    with AdminClient(kafka.bootstrap, request_timeout_ms=15_000) as admin:
        leader = admin.describe_cluster().leader_for((topic, 0))
        assert leader is not None
        admin.api_versions(node_id=leader)
        refused = _produce(admin.client, leader, topic, bytes(corrupted))
        assert refused["error_code"] == 2, refused  # CORRUPT_MESSAGE
        accepted = _produce(admin.client, leader, topic, ONE_RECORD_BATCH)
        assert accepted["error_code"] == 0 and accepted["base_offset"] == 0, accepted
    records = consume_all(kafka.bootstrap, topic, expected_count=1, timeout=20)
    assert [(r.key, r.value) for r in records] == [(b"key", b"value")]


def test_the_test_node_deletes_no_record_by_age(kafka: KafkaCluster, unique_topic: Any) -> None:
    # The golden batch above is stamped 2023: under Kafka's 7-day default the retention task deleted it
    # between the Produce and the readback whenever it ran in between (the node starts it 30 s after boot).
    topic = unique_topic("retention")
    create_topic(kafka.bootstrap, topic, 1)
    resource = ConfigResource(ResourceType.TOPIC, topic)
    admin = ConfluentAdmin({"bootstrap.servers": kafka.bootstrap})  # kept alive until the answer
    configs = admin.describe_configs([resource])[resource].result(timeout=15)
    assert configs["retention.ms"].value == "-1"


@pytest.mark.parametrize(("transactional", "node_fixture", "produce", "end_txn"), [
    (False, "kafka", 13, None),     # topics named by id (KIP-516)
    (True, "kafka", 13, 5),         # Transactions V2: Produce 12+, EndTxn 5
    (True, "kafka_tv1", 11, 4),     # the classic protocol: Produce <= 11, EndTxn <= 4
])
def test_the_producer_speaks_the_versions_its_broker_and_transaction_protocol_allow(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, unique_topic: Any,
        transactional: bool, node_fixture: str, produce: int, end_txn: int | None) -> None:
    node: KafkaCluster = request.getfixturevalue(node_fixture)
    sent: list[tuple[int, int | None]] = []
    real_send = NetworkClient.send

    def spy(self: NetworkClient, node_id: int, api_key: int, body: Any, **kwargs: Any) -> None:
        version = kwargs.get("version")
        sent.append((api_key, self.api_version(node_id, api_key) if version is None else version))
        real_send(self, node_id, api_key, body, **kwargs)

    monkeypatch.setattr(NetworkClient, "send", spy)
    topic = unique_topic("versions")
    create_topic(node.bootstrap, topic, 2)
    config: dict[str, Any] = {"bootstrap.servers": node.bootstrap, "linger.ms": 5}
    if transactional:
        config["transactional.id"] = f"{topic}-tx"
    with KafkaProducer(config) as producer:
        if transactional:
            producer.init_transactions(30)
            producer.begin_transaction()
        for i in range(100):
            producer.send(topic, b"v%d" % i, key=b"k%d" % i)
        if transactional:
            producer.commit_transaction(30)
        producer.flush(30)
    assert {v for k, v in sent if k == ApiKey.PRODUCE} == {produce}
    if end_txn is not None:
        assert {v for k, v in sent if k == ApiKey.END_TXN} == {end_txn}
        assert (ApiKey.ADD_PARTITIONS_TO_TXN in {k for k, _ in sent}) == (end_txn == 4)
    isolation = "read_committed" if transactional else "read_uncommitted"
    assert len(consume_all(node.bootstrap, topic, expected_count=100, timeout=20, isolation_level=isolation)) == 100
