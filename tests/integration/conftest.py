"""Fixtures for the end-to-end producer tests: one ``target`` fixture over Tansu and the mock cluster.

How it works: ``target`` is parametrized over ``"kafka"`` (the session's shared Apache Kafka node, the
broker of record), ``"tansu"`` (the session's shared Tansu broker: never restarted here) and ``"mock"`` (a
fresh librdkafka mock cluster of 3 brokers). Each is wrapped in a
``Target`` that knows the bootstrap address, how to create a topic with a given partition count
(CreateTopics on Apache Kafka and Tansu, ``MockCluster.create_topic`` on the mock) and how to build producers for it;
every producer it built is closed at teardown with a bounded timeout, so a broken ``close`` cannot hang
the suite. ``mock_target`` is the mock alone, for tests that inject faults.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sparkafka.producer.producer import KafkaProducer
from support.consume import create_topic
from support.endpoints import broker_endpoint
from support.mock_cluster import MockCluster


class Target:
    """A broker under test."""

    def __init__(self, name: str, bootstrap: str, mock: MockCluster | None,
                 unique_topic: Callable[[str], str]) -> None:
        self.name = name
        self.bootstrap = bootstrap
        self.mock = mock
        self._unique_topic = unique_topic
        self.producers: list[KafkaProducer] = []

    def topic(self, partitions: int = 1, prefix: str = "t") -> str:
        """Create a new topic with ``partitions`` partitions and return its name."""
        name = self._unique_topic(prefix)
        if self.mock is not None:
            self.mock.create_topic(name, partitions, 1)
        else:
            create_topic(self.bootstrap, name, partitions)
        return name

    def producer(self, config: dict[str, Any] | None = None, **kwargs: Any) -> KafkaProducer:
        """A KafkaProducer for this broker (``bootstrap.servers`` filled in), closed at teardown."""
        merged: dict[str, Any] = {"bootstrap.servers": self.bootstrap}
        merged.update(config or {})
        producer = KafkaProducer(merged, **kwargs)
        self.producers.append(producer)
        return producer

    def close_producers(self) -> None:
        for producer in self.producers:
            producer.close(2)

    def __repr__(self) -> str:
        return f"Target({self.name}, {self.bootstrap})"


def _target(request: pytest.FixtureRequest, name: str, unique_topic: Callable[[str], str]) -> Target:
    if name == "mock":
        mock: MockCluster = request.getfixturevalue("mock_cluster")
        return Target("mock", mock.bootstrap_servers, mock, unique_topic)
    endpoint = broker_endpoint(request, name)
    return Target(name, endpoint.bootstrap_servers, None, unique_topic)


@pytest.fixture(params=["kafka", "tansu", "mock"])
def target(request: pytest.FixtureRequest, unique_topic: Callable[[str], str]) -> Iterator[Target]:
    """Apache Kafka, Tansu, then the mock cluster."""
    t = _target(request, request.param, unique_topic)
    yield t
    t.close_producers()


@pytest.fixture(params=["kafka", "tansu"])
def broker_target(request: pytest.FixtureRequest, unique_topic: Callable[[str], str]) -> Iterator[Target]:
    """Apache Kafka, then Tansu: the real brokers (for what the mock cluster cannot check)."""
    t = _target(request, request.param, unique_topic)
    yield t
    t.close_producers()


@pytest.fixture(params=["mock"])
def mock_target(request: pytest.FixtureRequest, unique_topic: Callable[[str], str]) -> Iterator[Target]:
    """The librdkafka mock cluster alone (fault injection)."""
    t = _target(request, "mock", unique_topic)
    yield t
    t.close_producers()


@pytest.fixture(params=["kafka"])
def kafka_target(request: pytest.FixtureRequest, unique_topic: Callable[[str], str]) -> Iterator[Target]:
    """The shared Apache Kafka node alone."""
    t = _target(request, "kafka", unique_topic)
    yield t
    t.close_producers()


@pytest.fixture(params=["tansu"])
def tansu_target(request: pytest.FixtureRequest, unique_topic: Callable[[str], str]) -> Iterator[Target]:
    """The shared Tansu broker alone."""
    t = _target(request, "tansu", unique_topic)
    yield t
    t.close_producers()
