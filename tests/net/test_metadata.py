"""Cluster snapshots and the Metadata manager (no sockets)."""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from sparkafka import errors
from sparkafka._clock import SYSTEM_CLOCK, ManualClock
from sparkafka._topic import validate_topic_name
from sparkafka.net.addresses import parse_bootstrap_servers
from sparkafka.net.backoff import ExponentialBackoff
from sparkafka.net.metadata import Cluster, Metadata


def _partition(index: int, leader: int, epoch: int = 0, code: int = 0) -> dict[str, Any]:
    return {
        "error_code": code,
        "partition_index": index,
        "leader_id": leader,
        "leader_epoch": epoch,
        "replica_nodes": [leader],
        "isr_nodes": [leader],
        "offline_replicas": [],
    }


def _response(
    topics: dict[str, list[dict[str, Any]]], errors_by_topic: dict[str, int] | None = None
) -> dict[str, Any]:
    body_topics: list[dict[str, Any]] = [
        {"error_code": 0, "name": name, "is_internal": False, "partitions": parts}
        for name, parts in topics.items()
    ]
    for name, code in (errors_by_topic or {}).items():
        body_topics.append({"error_code": code, "name": name, "is_internal": False, "partitions": []})
    return {
        "brokers": [
            {"node_id": 1, "host": "h1", "port": 9092, "rack": None},
            {"node_id": 2, "host": "h2", "port": 9093, "rack": "r2"},
        ],
        "cluster_id": "c1",
        "controller_id": 2,
        "topics": body_topics,
    }


def test_cluster_lookups() -> None:
    c = Cluster.from_metadata_response(
        _response({"t": [_partition(1, 2, 5), _partition(0, 1), _partition(2, -1)]})
    )
    assert c.partition_count("t") == 3
    assert c.partition_count("nope") is None
    assert c.leader_for(("t", 0)) == 1
    assert c.leader_for(("t", 1)) == 2
    assert c.leader_for(("t", 2)) is None  # no leader
    assert c.leader_epoch(("t", 1)) == 5
    assert c.leader_epoch(("t", 9)) == -1
    assert list(c.available_partitions("t")) == [0, 1]
    assert list(c.partitions_for_node(1)) == [("t", 0)]
    assert list(c.partitions_for_node(2)) == [("t", 1)]
    assert list(c.partitions_for_node(7)) == []
    assert c.controller_id == 2 and c.cluster_id == "c1"
    node = c.node(2)
    assert node is not None and (node.host, node.port, node.rack) == ("h2", 9093, "r2")
    assert c.node_addresses() == {1: ("h1", 9092), 2: ("h2", 9093)}
    assert not c.is_bootstrap


def test_cluster_bootstrap_ids_are_negative() -> None:
    c = Cluster.bootstrap([("a", 1), ("b", 2)])
    assert c.node_addresses() == {-1: ("a", 1), -2: ("b", 2)}
    assert c.is_bootstrap and c.topics == frozenset()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a:1", [("a", 1)]),
        (" a:1 , b:2,a:1 ", [("a", 1), ("b", 2)]),
        (["a:1", "[::1]:9092"], [("a", 1), ("::1", 9092)]),
        ("tcp://h:5", [("h", 5)]),
    ],
)
def test_parse_bootstrap_servers(value: Any, expected: list[tuple[str, int]]) -> None:
    assert parse_bootstrap_servers(value) == expected


@pytest.mark.parametrize("value", ["", "host", "host:x", "host:0", "host:70000", "::1:9092", ":9092", 5])
def test_parse_bootstrap_servers_rejects(value: Any) -> None:
    with pytest.raises(errors.ConfigError) as info:
        parse_bootstrap_servers(value)
    assert info.value.key == "bootstrap.servers"


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "bad name", "t/x", "ü", "abc\n", "\nabc"])
def test_invalid_topic_names(name: str) -> None:
    with pytest.raises(errors.InvalidTopicNameError):
        validate_topic_name(name)


def test_backoff_grows_with_jitter_and_caps() -> None:
    b = ExponentialBackoff(50, 1000, rng=random.Random(7))
    for attempt in range(8):
        value = b.backoff(attempt)
        base = min(50 * 2**attempt, 1000)
        assert min(base * 0.8, 1000) - 1 <= value <= min(base * 1.2, 1000)
    assert b.backoff(30) <= 1000
    assert ExponentialBackoff(100, 100).backoff(5) == 100  # max <= initial: constant, no jitter
    values = {ExponentialBackoff(50, 1000, rng=random.Random(s)).backoff(2) for s in range(20)}
    assert len(values) > 1  # jitter


def test_time_to_next_update_and_backoff() -> None:
    clock = ManualClock()
    md = Metadata(
        "h:1", clock=clock, metadata_max_age_ms=10_000, retry_backoff_ms=100, retry_backoff_max_ms=100
    )
    now = clock.monotonic_ms()
    assert md.update_requested() and md.time_to_next_update(now) == 0
    md.update(_response({}), now)
    assert not md.update_requested()
    assert md.time_to_next_update(now) == 10_000
    assert md.time_to_next_update(now + 4000) == 6000
    md.request_update()
    assert md.time_to_next_update(now) == 100  # refresh backoff since the last refresh
    assert md.time_to_next_update(now + 100) == 0
    md.handle_failed_update(errors.KafkaConnectionError("x"), now + 100)
    assert md.time_to_next_update(now + 150) == 50
    assert md.update_requested()


def test_age_counts_from_the_last_successful_update() -> None:
    """The producer's metadata-age: since the last answer (a failed refresh does not reset it), since the
    Metadata was made before the first."""
    clock = ManualClock()
    md = Metadata("h:1", clock=clock)
    clock.advance(700)
    assert md.age_ms(clock.monotonic_ms()) == 700
    md.update(_response({}), clock.monotonic_ms())
    clock.advance(2500)
    assert md.age_ms(clock.monotonic_ms()) == 2500
    md.handle_failed_update(errors.KafkaConnectionError("x"), clock.monotonic_ms())
    clock.advance(500)
    assert md.age_ms(clock.monotonic_ms()) == 3000


def test_update_builds_snapshot_and_bumps_version() -> None:
    clock = ManualClock()
    md = Metadata("h:1", clock=clock)
    assert md.fetch().is_bootstrap
    v0 = md.version
    md.add_topic("t", clock.monotonic_ms())
    assert md.build_request_topics() == ["t"]
    c = md.update(_response({"t": [_partition(0, 1)], "other": [_partition(0, 2)]}), clock.monotonic_ms())
    assert md.version == v0 + 1
    assert md.fetch() is c
    assert c.partition_count("t") == 1
    assert c.partition_count("other") is None  # not requested: not kept
    assert c.node_addresses() == {1: ("h1", 9092), 2: ("h2", 9093)}


def test_idle_topics_are_dropped_and_touch_keeps_them() -> None:
    clock = ManualClock()
    md = Metadata("h:1", clock=clock, metadata_max_idle_ms=5000)
    now = clock.monotonic_ms()
    md.add_topic("idle", now)
    md.add_topic("busy", now)
    md.update(_response({"idle": [_partition(0, 1)], "busy": [_partition(0, 1)]}), now)
    clock.advance(3000)
    md.wait_for_topic("busy", None, 0)  # fast path: marks "busy" as used
    md.update(_response({"idle": [_partition(0, 1)], "busy": [_partition(0, 1)]}), clock.monotonic_ms())
    clock.advance(3000)
    c = md.update(_response({"idle": [_partition(0, 1)], "busy": [_partition(0, 1)]}), clock.monotonic_ms())
    assert md.topics == frozenset({"busy"})
    assert c.partition_count("idle") is None and c.partition_count("busy") == 1
    assert md.build_request_topics() == ["busy"]


def test_stale_leader_epoch_is_ignored() -> None:
    clock = ManualClock()
    md = Metadata("h:1", clock=clock)
    md.add_topic("t", clock.monotonic_ms())
    md.update(_response({"t": [_partition(0, 1, epoch=5)]}), clock.monotonic_ms())
    c = md.update(_response({"t": [_partition(0, 2, epoch=4)]}), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 1 and c.leader_epoch(("t", 0)) == 5
    c = md.update(_response({"t": [_partition(0, 2, epoch=6)]}), clock.monotonic_ms())
    assert c.leader_for(("t", 0)) == 2


def test_wait_for_topic_fast_path_returns_snapshot() -> None:
    clock = ManualClock()
    md = Metadata("h:1", clock=clock)
    md.add_topic("t", clock.monotonic_ms())
    c = md.update(_response({"t": [_partition(0, 1), _partition(1, 1)]}), clock.monotonic_ms())
    assert md.wait_for_topic("t", None, 0) is c
    assert md.wait_for_topic("t", 1, 0) is c


def test_wait_for_topic_times_out_naming_topic() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    wakeups: list[int] = []
    md.set_wakeup(lambda: wakeups.append(1))
    with pytest.raises(errors.MetadataTimeoutError, match="'missing'"):
        md.wait_for_topic("missing", None, 50)
    assert wakeups, "the sender must be woken up to fetch metadata"
    assert "missing" in md.topics and md.update_requested()
    other: list[int] = []
    with pytest.raises(errors.MetadataTimeoutError):
        md.wait_for_topic("missing2", None, 20, wakeup=lambda: other.append(1))
    assert other  # an explicit wakeup wins over the registered one


def test_wait_for_missing_partition_times_out_with_count() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    md.add_topic("t", SYSTEM_CLOCK.monotonic_ms())
    md.update(_response({"t": [_partition(0, 1)]}), SYSTEM_CLOCK.monotonic_ms())
    with pytest.raises(errors.MetadataTimeoutError, match="partition 3 of topic 't' with partition count 1"):
        md.wait_for_topic("t", 3, 30)


def test_wait_for_topic_is_released_by_update_from_another_thread() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    started = threading.Event()

    def sender() -> None:
        started.wait(5)
        while "t" not in md.topics:
            pass
        md.update(_response({"t": [_partition(0, 1)]}), SYSTEM_CLOCK.monotonic_ms())

    md.set_wakeup(started.set)
    thread = threading.Thread(target=sender)
    thread.start()
    c = md.wait_for_topic("t", 0, 10_000)
    thread.join()
    assert c.leader_for(("t", 0)) == 1


@pytest.mark.parametrize(("code", "exc"), [(17, errors.InvalidTopicNameError), (29, errors.BrokerError)])
def test_topic_errors_raise_immediately(code: int, exc: type[Exception]) -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    md.add_topic("t", SYSTEM_CLOCK.monotonic_ms())
    md.update(_response({}, {"t": code}), SYSTEM_CLOCK.monotonic_ms())
    with pytest.raises(exc, match="'t'") as info:
        md.wait_for_topic("t", None, 60_000)
    if code == 29:
        assert isinstance(info.value, errors.BrokerError) and info.value.code == 29


def test_retriable_topic_error_keeps_waiting() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    md.add_topic("t", SYSTEM_CLOCK.monotonic_ms())
    md.update(_response({}, {"t": 5}), SYSTEM_CLOCK.monotonic_ms())  # LEADER_NOT_AVAILABLE
    with pytest.raises(errors.MetadataTimeoutError):
        md.wait_for_topic("t", None, 30)


def test_local_topic_validation_in_wait() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    with pytest.raises(errors.InvalidTopicNameError, match="illegal characters"):
        md.wait_for_topic("bad topic", None, 60_000)


def test_fatal_update_error_reaches_waiters() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)
    md.handle_failed_update(errors.UnsupportedVersionError("too old"), SYSTEM_CLOCK.monotonic_ms())
    with pytest.raises(errors.UnsupportedVersionError):
        md.wait_for_topic("t", None, 60_000)


def test_rebootstrap_restores_bootstrap_nodes() -> None:
    clock = ManualClock()
    md = Metadata("b1:1,b2:2", clock=clock, rebootstrap_trigger_ms=1000)
    md.update(_response({}), clock.monotonic_ms())
    assert not md.fetch().is_bootstrap and not md.should_rebootstrap(clock.monotonic_ms())
    clock.advance(1000)
    assert md.should_rebootstrap(clock.monotonic_ms())
    md.rebootstrap()
    assert md.fetch().node_addresses() == {-1: ("b1", 1), -2: ("b2", 2)}
    assert md.update_requested()


def test_metadata_config_errors() -> None:
    with pytest.raises(errors.ConfigError, match=r"metadata\.max\.idle\.ms"):
        Metadata("h:1", metadata_max_idle_ms=10)
    with pytest.raises(errors.ConfigError, match=r"metadata\.recovery\.strategy"):
        Metadata("h:1", recovery_strategy="sometimes")


def test_a_new_topic_is_fetched_without_waiting_out_the_backoff() -> None:
    """Java ``requestUpdateForNewTopics``: the first request for a topic does not wait for the retry backoff
    since the last refresh; once an answer named it, asking again waits for the backoff as before."""
    clock = ManualClock()
    md = Metadata("h:1", clock=clock, metadata_max_age_ms=300_000, retry_backoff_ms=100, retry_backoff_max_ms=100)
    now = clock.monotonic_ms()
    md.update(_response({"known": [_partition(0, 1)]}), now)  # e.g. the refresh init_transactions made
    md.request_update()
    assert md.time_to_next_update(now + 10) == 90
    md.add_topic("fresh", now + 10)
    assert md.update_requested() and md.time_to_next_update(now + 10) == 0
    md.update(_response({}, {"fresh": errors.UNKNOWN_TOPIC_OR_PARTITION}), now + 20)  # named, not created yet
    with md._cond:
        md._request_update_for_topic("fresh")
    assert md.time_to_next_update(now + 30) == 90
    md.add_topic("fresh", now + 30)  # already in the set: no immediate refresh
    assert md.time_to_next_update(now + 30) == 90


def test_waiting_for_a_new_topic_asks_at_once() -> None:
    """``wait_for_topic`` on a topic no answer has named: the update it asks for is due at once, even right
    after another refresh."""
    clock = ManualClock()
    md = Metadata("h:1", clock=clock, metadata_max_age_ms=300_000, retry_backoff_ms=100, retry_backoff_max_ms=100)
    now = clock.monotonic_ms()
    md.update(_response({"known": [_partition(0, 1)]}), now)
    due: list[float] = []

    def sender_wakeup() -> None:  # what the Sender would compute when woken
        due.append(md.time_to_next_update(clock.monotonic_ms()))
        md.update(_response({"known": [_partition(0, 1)], "fresh": [_partition(0, 1), _partition(1, 1)]}),
                  clock.monotonic_ms())

    cluster = md.wait_for_topic("fresh", None, 1000, wakeup=sender_wakeup)
    assert cluster.partition_count("fresh") == 2
    assert due == [0]
