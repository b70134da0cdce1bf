"""The librdkafka mock cluster harness, checked with confluent-kafka clients."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from sparkafka.broker import probe_api_versions
from sparkafka.errors import MESSAGE_TOO_LARGE, NOT_LEADER_OR_FOLLOWER
from support.consume import consume_all
from support.mock_cluster import ApiKey, MockCluster, MockClusterError

pytestmark = pytest.mark.broker


def _send(bootstrap: str, topic: str, values: list[bytes], partition: int = -1,
          **conf: object) -> list[KafkaError | None]:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10000, **conf})
    results: list[KafkaError | None] = []
    for value in values:
        producer.produce(topic, value=value, partition=partition,
                         on_delivery=lambda err, msg: results.append(err))
    assert producer.flush(15) == 0
    return results


def _hosts(bootstrap: str) -> list[tuple[str, int]]:
    return [(h, int(p)) for h, p in (entry.rsplit(":", 1) for entry in bootstrap.split(","))]


def test_three_brokers_in_metadata(mock_cluster: MockCluster) -> None:
    assert len(_hosts(mock_cluster.bootstrap_servers)) == 3
    metadata = AdminClient({"bootstrap.servers": mock_cluster.bootstrap_servers}).list_topics(timeout=10)
    assert sorted(metadata.brokers) == [1, 2, 3]


def test_round_trip(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("mock")
    mock_cluster.create_topic(topic, partitions=3, replication=3)
    assert _send(mock_cluster.bootstrap_servers, topic, [b"v%d" % i for i in range(30)]) == [None] * 30
    records = consume_all(mock_cluster.bootstrap_servers, topic, expected_count=30, timeout=20)
    assert sorted(r.value or b"" for r in records) == sorted(b"v%d" % i for i in range(30))


def test_injected_produce_error_reaches_the_producer(
    mock_cluster: MockCluster, unique_topic: Callable[[str], str]
) -> None:
    topic = unique_topic("inject")
    mock_cluster.create_topic(topic, partitions=1, replication=1)
    mock_cluster.push_request_errors(ApiKey.PRODUCE, [MESSAGE_TOO_LARGE])
    results = _send(mock_cluster.bootstrap_servers, topic, [b"x"], partition=0)
    assert len(results) == 1 and results[0] is not None
    assert results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert consume_all(mock_cluster.bootstrap_servers, topic, timeout=20) == []


def test_retriable_errors_are_consumed_one_request_each(
    mock_cluster: MockCluster, unique_topic: Callable[[str], str]
) -> None:
    topic = unique_topic("retry")
    mock_cluster.create_topic(topic, partitions=1, replication=1)
    mock_cluster.start_request_tracking()
    mock_cluster.push_request_errors(ApiKey.PRODUCE, [NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER])
    results = _send(mock_cluster.bootstrap_servers, topic, [b"x"], partition=0, **{"retry.backoff.ms": 10})
    assert results == [None]
    produce_requests = [r for r in mock_cluster.requests() if r.api_key == ApiKey.PRODUCE]
    assert len(produce_requests) == 3  # two failures, then the success
    assert len(consume_all(mock_cluster.bootstrap_servers, topic, expected_count=1, timeout=20)) == 1


def test_broker_error_stack_and_rtts(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("stack")
    mock_cluster.create_topic(topic, partitions=1, replication=1)
    mock_cluster.partition_set_leader(topic, 0, 2)
    mock_cluster.push_broker_request_errors(2, ApiKey.PRODUCE, [(MESSAGE_TOO_LARGE, 10)])
    assert mock_cluster.broker_error_stack_count(2, ApiKey.PRODUCE) == 1
    results = _send(mock_cluster.bootstrap_servers, topic, [b"x"], partition=0)
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert mock_cluster.broker_error_stack_count(2, ApiKey.PRODUCE) == 0


def test_partition_level_error(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("perr")
    mock_cluster.create_topic(topic, partitions=2, replication=1)
    mock_cluster.push_partition_request_errors(topic, 1, ApiKey.PRODUCE, [MESSAGE_TOO_LARGE])
    results = _send(mock_cluster.bootstrap_servers, topic, [b"x"], partition=1)
    assert results[0] is not None and results[0].code() == KafkaError.MSG_SIZE_TOO_LARGE


def test_broker_down_refuses_connections(mock_cluster: MockCluster) -> None:
    host, port = _hosts(mock_cluster.bootstrap_servers)[0]
    assert probe_api_versions(host, port)
    mock_cluster.broker_set_down(1)
    with pytest.raises(OSError):
        probe_api_versions(host, port, timeout_s=1.0)
    mock_cluster.broker_set_up(1)
    assert probe_api_versions(host, port)


def test_api_versions_can_be_limited(mock_cluster: MockCluster) -> None:
    host, port = _hosts(mock_cluster.bootstrap_servers)[0]
    versions = probe_api_versions(host, port)
    assert versions[18][1] == 2  # the mock's ApiVersions stops at v2: clients must fall back
    mock_cluster.set_apiversion(ApiKey.PRODUCE, 3, 7)
    assert probe_api_versions(host, port)[0] == (3, 7)


def test_bad_calls_raise_and_close_releases_the_ports() -> None:
    cluster = MockCluster(num_brokers=1)
    with pytest.raises(MockClusterError, match="broker_set_down"):
        cluster.broker_set_down(42)
    host, port = _hosts(cluster.bootstrap_servers)[0]
    cluster.close()
    cluster.close()  # idempotent
    assert cluster.closed
    with pytest.raises(MockClusterError, match="closed"):
        cluster.create_topic("t")
    with pytest.raises(OSError), socket.create_connection((host, port), timeout=1.0):
        pass
