"""Fixtures of the transaction tests on the librdkafka mock cluster.

How it works: ``topic`` creates a fresh 3-partition topic (replication 3) on the session's mock cluster;
``producer`` is a transactional ``KafkaProducer`` for it (transactional id ``<topic>-id``, short retry
backoff), closed after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from sparkafka.producer.producer import KafkaProducer
from support.mock_cluster import MockCluster

PARTITIONS = 3


@pytest.fixture
def topic(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> str:
    name = unique_topic("txn")
    mock_cluster.create_topic(name, partitions=PARTITIONS, replication=3)
    return name


@pytest.fixture
def producer(mock_cluster: MockCluster, topic: str) -> Iterator[KafkaProducer]:
    p = KafkaProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "transactional.id": f"{topic}-id",
                       "linger.ms": 5, "retry.backoff.ms": 20, "max.block.ms": 20_000})
    yield p
    p.close(timeout=5)
