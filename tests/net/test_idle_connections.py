"""connections.max.idle.ms as Java's Selector applies it: writes count as activity (an acks=0 connection
only writes), and a negative value turns idle closing off."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from sparkafka._clock import ManualClock
from sparkafka.net.client import ClientResponse, NetworkClient
from sparkafka.net.connection import ConnectionState
from sparkafka.protocol.messages import ApiKey

from .fake_broker import FakeBroker


def _client(bootstrap: str, clock: ManualClock, **kw: object) -> NetworkClient:
    return NetworkClient(bootstrap, client_id="review", clock=clock, rng=random.Random(3), **kw)  # type: ignore[arg-type]


def _poll_until(client: NetworkClient, cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        client.ready(-1, client.clock.monotonic_ms())
        client.poll(20, client.clock.monotonic_ms())


def _nonempty(box: list[ClientResponse]) -> Callable[[], bool]:
    return lambda: bool(box)


def _acks0_produce(client: NetworkClient) -> list[ClientResponse]:
    box: list[ClientResponse] = []
    client.send(
        -1,
        ApiKey.PRODUCE,
        {"acks": 0, "timeout_ms": 100, "topic_data": []},
        expect_response=False,
        callback=box.append,
    )
    return box


def test_writes_keep_a_connection_from_being_idle_closed(fake_broker: FakeBroker) -> None:
    """Java's Selector refreshes a channel's idle time on every read or write event. An acks=0 producer
    only writes (the broker never answers): its busy connection must not be closed as idle."""
    clock = ManualClock()
    with _client(fake_broker.bootstrap, clock, connections_max_idle_ms=1000) as client:
        _poll_until(client, lambda: client.ready(-1, clock.monotonic_ms()))
        for i in range(6):  # 6 x 400 ms of manual time, one written request in each step
            clock.advance(400)
            box = _acks0_produce(client)
            _poll_until(client, _nonempty(box))
            assert box[0].error is None
            client.poll(0, clock.monotonic_ms())
            assert client.connection_state(-1) is ConnectionState.READY, f"closed as idle at step {i}"
        _poll_until(client, lambda: fake_broker.count(ApiKey.PRODUCE) == 6)
        assert fake_broker.connections == 1
        clock.advance(1500)  # now really idle: closed
        client.poll(0, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED


def test_negative_connections_max_idle_ms_disables_idle_closing(fake_broker: FakeBroker) -> None:
    """connections.max.idle.ms accepts -1 (the config table allows it): Java's Selector then has no idle
    expiry manager, so connections are never closed for being idle."""
    clock = ManualClock()
    with _client(fake_broker.bootstrap, clock, connections_max_idle_ms=-1) as client:
        _poll_until(client, lambda: client.ready(-1, clock.monotonic_ms()))
        clock.advance(10 * 24 * 3600 * 1000)
        client.poll(0, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.READY
