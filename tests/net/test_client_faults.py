"""NetworkClient against fake brokers on loopback: handshakes, bad bytes, time-outs, backoff, wakeup."""

from __future__ import annotations

import functools
import logging
import random
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from sparkafka import errors
from sparkafka._clock import SYSTEM_CLOCK, Clock, ManualClock
from sparkafka.net.admin import AdminClient
from sparkafka.net.client import ClientResponse, NetworkClient
from sparkafka.net.connection import ConnectionState
from sparkafka.protocol.messages import ApiKey
from sparkafka.protocol.produce import encode_produce_request_parts

from .fake_broker import FakeBroker, FakeConn, Request, free_port

NETWORK_EXCEPTION = errors.error_class_for_code(13)
REQUEST_TIMED_OUT = errors.error_class_for_code(7)


def _client(bootstrap: str, clock: Clock = SYSTEM_CLOCK, **kw: object) -> NetworkClient:
    kw.setdefault("reconnect_backoff_ms", 20)
    kw.setdefault("reconnect_backoff_max_ms", 200)
    return NetworkClient(bootstrap, client_id="test", clock=clock, rng=random.Random(1), **kw)  # type: ignore[arg-type]


def _poll_until(
    client: NetworkClient, cond: Callable[[], bool], timeout_s: float = 5.0, node: int = -1
) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        client.ready(node, client.clock.monotonic_ms())
        client.poll(20, client.clock.monotonic_ms())


def _connect(client: NetworkClient, node: int = -1) -> None:
    _poll_until(client, lambda: client.ready(node, client.clock.monotonic_ms()), node=node)


def _send_acks0_produce(client: NetworkClient, node: int = -1) -> list[ClientResponse]:
    box: list[ClientResponse] = []
    client.send(node, ApiKey.PRODUCE, {"acks": 0, "timeout_ms": 100, "topic_data": []}, expect_response=False,
                callback=box.append)
    return box


def _send_metadata(client: NetworkClient, node: int = -1, **kw: object) -> list[ClientResponse]:
    box: list[ClientResponse] = []
    client.send(node, ApiKey.METADATA, {"topics": []}, callback=box.append, **kw)  # type: ignore[arg-type]
    return box


def test_handshake_negotiates_versions(fake_broker: FakeBroker) -> None:
    fake_broker.api_versions[ApiKey.METADATA] = (0, 9)
    with _client(fake_broker.bootstrap) as client:
        assert not client.ready(-1, client.clock.monotonic_ms())  # starts connecting
        assert client.connection_state(-1) is ConnectionState.CONNECTING
        _connect(client)
        assert client.api_version(-1, ApiKey.METADATA) == 9
        assert client.api_version(-1, ApiKey.PRODUCE) == 13
        first = fake_broker.requests[0]
        assert first.api_key == ApiKey.API_VERSIONS and first.api_version == 4
        assert first.client_id == "test"
        assert first.body is not None and first.body["client_software_name"] == "sparkafka"
        box = _send_metadata(client)
        _poll_until(client, lambda: bool(box))
        resp = box[0]
        assert resp.error is None and resp.version == 9 and resp.node_id == -1
        assert resp.body is not None and resp.body["brokers"][0]["port"] == fake_broker.port
        assert client.in_flight_count() == 0


def test_api_versions_falls_back_to_broker_max() -> None:
    def handler(conn: FakeConn, req: Request) -> None:
        if req.api_key == ApiKey.API_VERSIONS and req.api_version > 2:
            # an old broker answers with a v0 body: UNSUPPORTED_VERSION + its own ranges
            body = broker.api_versions_body()
            body["error_code"] = 35
            conn.respond(req, body, version=0)
        else:
            broker.default_handler(conn, req)

    broker = FakeBroker(handler=handler)
    broker.api_versions[ApiKey.API_VERSIONS] = (0, 2)
    try:
        with _client(broker.bootstrap) as client:
            _connect(client)
            assert [r.api_version for r in broker.requests if r.api_key == ApiKey.API_VERSIONS] == [4, 2]
            assert client.api_version(-1, ApiKey.API_VERSIONS) == 2
    finally:
        broker.close()


def test_unknown_error_code_in_api_versions_is_typed() -> None:
    def handler(conn: FakeConn, req: Request) -> None:
        body = broker.api_versions_body()
        body["error_code"] = 9999
        conn.respond(req, body)

    broker = FakeBroker(handler=handler)
    try:
        with _client(broker.bootstrap) as client:
            _poll_until(client, lambda: client.connection_failure(-1) is not None)
            failure = client.connection_failure(-1)
            assert isinstance(failure, errors.BrokerError) and failure.code == -1
            assert "9999" in str(failure)
            assert client.connection_state(-1) is ConnectionState.DISCONNECTED
    finally:
        broker.close()


def test_unreachable_bootstrap_backs_off_with_jitter() -> None:
    clock = ManualClock()
    port = free_port()
    client = _client(f"127.0.0.1:{port}", clock, reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    try:
        delays = []
        for _ in range(7):
            now = clock.monotonic_ms()
            assert client.ready(-1, now) is False
            deadline = time.monotonic() + 5
            while client.connection_state(-1) is not ConnectionState.DISCONNECTED:
                assert time.monotonic() < deadline
                client.poll(10, now)
            assert isinstance(client.connection_failure(-1), errors.KafkaConnectionError)
            assert str(port) in str(client.connection_failure(-1))
            delay = client.connection_delay(-1, now)
            delays.append(delay)
            assert client.ready(-1, now) is False  # backing off: no new attempt
            assert client.least_loaded_node(now) is None
            clock.advance(delay)
        for attempt, delay in enumerate(delays):
            base = min(50 * 2**attempt, 1000)
            assert min(base * 0.8, 1000) - 1 <= delay <= min(base * 1.2, 1000)
        assert delays[-1] == 1000 or delays[-1] >= 800
        assert len(set(delays[:4])) == 4
    finally:
        client.close()


def test_a_connection_that_is_not_established_is_a_warning_saying_why(
        fake_broker: FakeBroker, caplog: pytest.LogCaptureFixture) -> None:
    """Java's NetworkClient warns when a connection could not be established or closed during authentication;
    this client logged it at DEBUG, so a TLS client at a plaintext listener saw nothing but a metadata timeout
    (found by a security review). A connection lost after it was ready is not a setup failure (DEBUG)."""
    port = free_port()
    client = _client(f"127.0.0.1:{port}")
    try:
        with caplog.at_level(logging.DEBUG, logger="sparkafka.net"):
            client.ready(-1, client.clock.monotonic_ms())
            _poll_until(client, lambda: client.connection_state(-1) is ConnectionState.DISCONNECTED)
        [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
        assert "node -1: connection not established: " in warning.getMessage()
        assert str(port) in warning.getMessage()
    finally:
        client.close()
    caplog.clear()
    client = _client(fake_broker.bootstrap)
    try:
        _connect(client)
        with caplog.at_level(logging.DEBUG, logger="sparkafka.net"):
            for conn in list(fake_broker._conns):
                conn.close()
            _poll_until(client, lambda: client.connection_state(-1) is ConnectionState.DISCONNECTED)
        assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    finally:
        client.close()


def test_admin_against_unreachable_bootstrap_raises_quickly() -> None:
    port = free_port()
    admin = AdminClient(
        f"127.0.0.1:{port}", request_timeout_ms=600, reconnect_backoff_ms=10, reconnect_backoff_max_ms=50
    )
    try:
        with pytest.raises(errors.KafkaConnectionError, match=str(port)):
            admin.describe_cluster(timeout_ms=600)
    finally:
        admin.close()


def test_server_closing_mid_response_fails_with_network_exception(fake_broker: FakeBroker) -> None:
    def handler(conn: FakeConn, req: Request) -> None:
        if req.api_key == ApiKey.METADATA:
            conn.send_raw(struct.pack(">i", 100) + b"\x00" * 10)
            conn.close()
        else:
            fake_broker.default_handler(conn, req)

    fake_broker.handler = handler
    with _client(fake_broker.bootstrap) as client:
        _connect(client)
        box = _send_metadata(client)
        _poll_until(client, lambda: bool(box))
        assert isinstance(box[0].error, NETWORK_EXCEPTION)
        assert box[0].error.retriable
        assert "closed the connection" in str(box[0].error)
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED


@pytest.mark.parametrize(
    ("frame", "error_type"),
    [
        # size says 6: correlation id + 2 bytes, far too short for a Metadata body
        (lambda cid: struct.pack(">ii", 6, cid) + b"\x00\x01", errors.ProtocolError),
        # a frame that claims 2 GiB
        (lambda cid: struct.pack(">ii", 0x7FFFFFFF, cid), errors.FrameTooLargeError),
        # a full valid-looking frame for another correlation id
        (lambda cid: struct.pack(">ii", 4, cid + 1000), errors.CorrelationIdMismatchError),
    ],
    ids=["truncated", "oversized", "wrong-correlation-id"],
)
def test_bad_frames_fail_in_flight_requests_with_typed_errors(
    fake_broker: FakeBroker, frame: Callable[[int], bytes], error_type: type[Exception]
) -> None:
    def handler(conn: FakeConn, req: Request) -> None:
        if req.api_key == ApiKey.METADATA:
            conn.send_raw(frame(req.correlation_id))
        else:
            fake_broker.default_handler(conn, req)

    fake_broker.handler = handler
    with _client(fake_broker.bootstrap, max_response_size=1 << 20) as client:
        _connect(client)
        box = _send_metadata(client)
        _poll_until(client, lambda: bool(box))
        assert isinstance(box[0].error, error_type), box[0].error
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED
        assert client.connection_failure(-1) is box[0].error


def test_request_timeout_closes_connection_and_fails_all_in_flight(fake_broker: FakeBroker) -> None:
    fake_broker.handler = lambda conn, req: (
        fake_broker.default_handler(conn, req) if req.api_key == ApiKey.API_VERSIONS else None
    )
    clock = ManualClock()
    with _client(fake_broker.bootstrap, clock, request_timeout_ms=1000) as client:
        _connect(client)
        first = _send_metadata(client)
        clock.advance(400)
        second = _send_metadata(client)
        assert client.in_flight_count(-1) == 2
        client.poll(0, clock.monotonic_ms())
        assert not first and not second
        clock.advance(600)  # the first request's deadline
        client.poll(0, clock.monotonic_ms())
        assert isinstance(first[0].error, REQUEST_TIMED_OUT)
        assert isinstance(second[0].error, REQUEST_TIMED_OUT)
        assert first[0].error.code == 7 and first[0].latency_ms == 1000
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED
        assert client.in_flight_count() == 0
        assert fake_broker.eof.wait(5), "the socket must be closed"


def test_old_produce_version_gives_unsupported_version(fake_broker: FakeBroker) -> None:
    fake_broker.api_versions[ApiKey.PRODUCE] = (0, 2)
    with _client(fake_broker.bootstrap) as client:
        _connect(client)
        with pytest.raises(errors.UnsupportedVersionError):
            client.api_version(-1, ApiKey.PRODUCE)
        box: list[ClientResponse] = []
        client.send(-1, ApiKey.PRODUCE, {"acks": 1, "timeout_ms": 100, "topic_data": []}, callback=box.append)
        client.poll(0, client.clock.monotonic_ms())
        assert isinstance(box[0].error, errors.UnsupportedVersionError)
        assert fake_broker.count(ApiKey.PRODUCE) == 0  # nothing was sent
        assert client.is_ready(-1)  # the connection stays usable for other APIs


def test_acks0_request_completes_when_written(fake_broker: FakeBroker) -> None:
    with _client(fake_broker.bootstrap) as client:
        _connect(client)
        box = _send_acks0_produce(client)
        _poll_until(client, lambda: bool(box))
        assert box[0].error is None and box[0].body is None
        assert client.in_flight_count() == 0
        _poll_until(client, lambda: fake_broker.count(ApiKey.PRODUCE) == 1)


def test_in_flight_limit_and_send_to_unready_node(fake_broker: FakeBroker) -> None:
    fake_broker.handler = lambda conn, req: (
        fake_broker.default_handler(conn, req) if req.api_key == ApiKey.API_VERSIONS else None
    )
    with _client(fake_broker.bootstrap, max_in_flight_per_connection=2) as client:
        now = client.clock.monotonic_ms()
        box = _send_metadata(client)  # not connected yet: fails on the next poll, no exception
        client.poll(0, now)
        assert isinstance(box[0].error, NETWORK_EXCEPTION)
        _connect(client)
        _send_metadata(client)
        assert client.can_send_more(-1) and client.ready(-1, now)
        _send_metadata(client)
        assert client.in_flight_count(-1) == 2
        assert not client.can_send_more(-1) and not client.ready(-1, now)
        assert client.least_loaded_node(now) is None  # the only node is saturated
        assert client.connection_delay(-1, now) == float("inf")


def test_wakeup_interrupts_a_long_poll(fake_broker: FakeBroker) -> None:
    with _client(fake_broker.bootstrap) as client:
        timer = threading.Timer(0.2, client.wakeup)
        started = time.monotonic()
        timer.start()
        client.poll(30_000, client.clock.monotonic_ms())
        elapsed = time.monotonic() - started
        timer.join()
        assert elapsed < 10, f"poll was not woken up ({elapsed:.1f} s)"
        for _ in range(1000):  # coalesced: many wake-ups cost one byte
            client.wakeup()
        client.poll(10_000, client.clock.monotonic_ms())  # returns at once (pending wake-up)
        started = time.monotonic()
        client.poll(50, client.clock.monotonic_ms())  # the pipe was drained: this one waits
        assert time.monotonic() - started >= 0.02


def test_wakeup_outside_select_writes_no_byte_and_is_never_lost(fake_broker: FakeBroker) -> None:
    with _client(fake_broker.bootstrap) as client:
        client.wakeup()  # not polling: only the request flag, no syscall
        assert not client._wakeup_pending
        started = time.monotonic()
        client.poll(30_000, client.clock.monotonic_ms())  # sees the request: does not block
        assert time.monotonic() - started < 10
        started = time.monotonic()
        client.poll(50, client.clock.monotonic_ms())  # request consumed: this one waits
        assert time.monotonic() - started >= 0.02

        # A writer publishes a value then wakes the poller, at every point of its loop: a lost
        # wake-up leaves a 30 s poll blocked and the whole exchange far past its bound.
        rounds = 300
        value = [0]
        seen = threading.Event()
        failures: list[str] = []

        def writer() -> None:
            for i in range(1, rounds + 1):
                value[0] = i
                client.wakeup()
                if not seen.wait(20):
                    failures.append(f"round {i} was never seen")
                    return
                seen.clear()

        thread = threading.Thread(target=writer)
        started = time.monotonic()
        thread.start()
        last = 0
        while last < rounds and not failures and time.monotonic() - started < 60:
            client.poll(30_000, client.clock.monotonic_ms())
            if value[0] != last:
                last = value[0]
                seen.set()
        thread.join(30)
        assert not failures and last == rounds, (failures, last)
        assert time.monotonic() - started < 30, "a wake-up was lost"

def test_disconnect_listener_and_reconnect(fake_broker: FakeBroker) -> None:
    seen: list[tuple[int, Exception | None]] = []
    with _client(fake_broker.bootstrap) as client:
        client.add_disconnect_listener(lambda node, err: seen.append((node, err)))
        _connect(client)
        for conn in list(fake_broker._conns):
            conn.close()
        _poll_until(client, lambda: bool(seen))
        assert seen[0][0] == -1 and isinstance(seen[0][1], errors.KafkaConnectionError)
        _connect(client)  # reconnects after the backoff
        assert fake_broker.connections == 2


def test_connection_setup_timeout() -> None:
    # a listener that never accepts: the TCP handshake completes but ApiVersions is never answered
    import socket

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    clock = ManualClock()
    try:
        client = _client(
            f"127.0.0.1:{server.getsockname()[1]}",
            clock,
            socket_connection_setup_timeout_ms=500,
            socket_connection_setup_timeout_max_ms=500,
        )
        client.ready(-1, clock.monotonic_ms())
        for _ in range(5):
            client.poll(10, clock.monotonic_ms())
        assert client.connection_state(-1) in (ConnectionState.CONNECTING, ConnectionState.API_VERSIONS)
        clock.advance(500)
        client.poll(0, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED
        failure = client.connection_failure(-1)
        assert isinstance(failure, errors.KafkaConnectionError) and "setup timed out" in str(failure)
        client.close()
        client.close()  # idempotent
        client.wakeup()  # safe after close
    finally:
        server.close()


def test_update_nodes_and_least_loaded(fake_broker: FakeBroker) -> None:
    other = FakeBroker()
    try:
        with _client(fake_broker.bootstrap) as client:
            _connect(client)
            client.update_nodes({1: (fake_broker.host, fake_broker.port), 2: (other.host, other.port)})
            assert client.connection_state(-1) is ConnectionState.DISCONNECTED  # bootstrap conn dropped
            now = client.clock.monotonic_ms()
            assert client.least_loaded_node(now) in (1, 2)
            _connect(client, 1)
            assert client.least_loaded_node(now) == 1
    finally:
        other.close()


def test_config_errors_name_the_key() -> None:
    with pytest.raises(errors.ConfigError) as info:
        NetworkClient("h:1", max_in_flight_per_connection=0)
    assert info.value.key == "max.in.flight.requests.per.connection"
    with pytest.raises(errors.ConfigError) as info:
        NetworkClient("h:1", request_timeout_ms=-5)
    assert info.value.key == "request.timeout.ms"


def test_close_fails_in_flight_requests(fake_broker: FakeBroker) -> None:
    fake_broker.handler = lambda conn, req: (
        fake_broker.default_handler(conn, req) if req.api_key == ApiKey.API_VERSIONS else None
    )
    client = _client(fake_broker.bootstrap)
    _connect(client)
    box = _send_metadata(client)
    client.close()
    assert len(box) == 1 and isinstance(box[0].error, NETWORK_EXCEPTION)
    assert "closed by the client" in str(box[0].error)
    late = _send_metadata(client)  # after close: still exactly one typed answer, no exception
    client.poll(0, client.clock.monotonic_ms())
    assert isinstance(late[0].error, NETWORK_EXCEPTION)


def test_idle_connection_is_closed_without_backoff_penalty(fake_broker: FakeBroker) -> None:
    clock = ManualClock()
    with _client(fake_broker.bootstrap, clock, connections_max_idle_ms=1000) as client:
        _connect(client)
        clock.advance(1500)
        client.poll(0, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED
        assert client.connection_delay(-1, clock.monotonic_ms()) == 0


def test_writes_keep_a_connection_from_being_idle_closed(fake_broker: FakeBroker) -> None:
    """Java's Selector refreshes a channel's idle time on every read or write event. An acks=0 producer
    only writes (the broker never answers): its busy connection must not be closed as idle."""
    clock = ManualClock()
    with _client(fake_broker.bootstrap, clock, connections_max_idle_ms=1000) as client:
        _connect(client)
        for i in range(6):  # 6 x 400 ms of manual time, one written request in each step
            clock.advance(400)
            box = _send_acks0_produce(client)
            _poll_until(client, functools.partial(bool, box))  # the list fills when written
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
        _connect(client)
        clock.advance(10 * 24 * 3600 * 1000)
        client.poll(0, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.READY


def test_produce_pieces_partly_written_are_copied_before_send_returns(fake_broker: FakeBroker) -> None:
    """A Produce body goes to the socket as pieces (one sendmsg, no user-space copy). When the socket
    takes only part of it, the rest must be copied before ``send`` returns: the batch buffers go back to
    the pool and are overwritten, yet the broker must receive the bytes as they were at ``send``."""
    gate = threading.Event()

    def handler(conn: FakeConn, req: Request) -> None:
        if req.api_key == ApiKey.METADATA:
            gate.wait(10)  # stop reading: the client's Produce backs up in the socket buffers
        if req.api_key == ApiKey.PRODUCE:
            return
        fake_broker.default_handler(conn, req)

    fake_broker.handler = handler
    batch = bytearray(random.Random(7).randbytes(3 * 1024 * 1024))
    expected = bytes(batch)
    body = encode_produce_request_parts(9, None, -1, 30_000, [("t", [(0, memoryview(batch))])])
    with _client(fake_broker.bootstrap, send_buffer_bytes=16384) as client:
        _connect(client)
        _send_metadata(client)
        client.send(-1, ApiKey.PRODUCE, body, version=9, callback=lambda r: None)
        conn = client._conns[-1]
        assert conn._out, "the socket took the whole frame: this test needs a partial write"
        batch[:] = bytes(len(batch))  # the pool reuses the buffer
        gate.set()
        _poll_until(client, lambda: fake_broker.count(ApiKey.PRODUCE) == 1, timeout_s=20)
    produce = next(r for r in fake_broker.requests if r.api_key == ApiKey.PRODUCE)
    assert produce.body is not None
    records = produce.body["topic_data"][0]["partition_data"][0]["records"]
    assert bytes(records) == expected


def test_in_flight_count_can_be_read_while_the_io_thread_changes_the_node_table() -> None:
    """``producer.metrics()`` reads ``requests-in-flight`` (``in_flight_count()``) on the caller's thread while
    the Sender adds connections (``ready``) and drops them (``update_nodes``): summing over the live dict
    raised "dictionary changed size during iteration" (thousands of times in 200,000 reads)."""
    port = free_port()  # nothing listens: connections are made and dropped
    client = _client(f"127.0.0.1:{port}", reconnect_backoff_ms=0, reconnect_backoff_max_ms=1)
    stop = threading.Event()

    def io_thread() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            nodes = {n: ("127.0.0.1", port) for n in range(i % 50)}
            client.update_nodes(nodes)
            for n in nodes:
                client.ready(n, client.clock.monotonic_ms())

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=io_thread, daemon=True)
    thread.start()
    failures: list[RuntimeError] = []
    try:
        for _ in range(100_000):
            try:
                client.in_flight_count()
            except RuntimeError as exc:
                failures.append(exc)
    finally:
        stop.set()
        thread.join(10)
        sys.setswitchinterval(interval)
        client.close()
    assert failures == []


def test_a_lost_connection_reconnects_to_the_first_address_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name resolving to [the broker, an address that refuses]: the first connect takes the broker; after
    that working connection is lost, the next one starts again at the first address (Java's
    ClusterConnectionStates.disconnected clears a connected node's addresses), so no attempt fails. The
    index used to advance on every connect: every reconnect tried the refusing address first (a failed
    attempt and a reconnect backoff; a black-holed one would cost socket.connection.setup.timeout.ms)."""
    broker = FakeBroker()
    resolve = socket.getaddrinfo

    def two_addresses(host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        if host == "broker.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port)),
                    (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.2", port))]
        return resolve(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", two_addresses)
    client = _client(f"broker.test:{broker.port}", reconnect_backoff_ms=50, reconnect_backoff_max_ms=100)
    failures: list[BaseException] = []

    def connect() -> None:
        last = None
        deadline = time.monotonic() + 10
        while not client.ready(-1, client.clock.monotonic_ms()):
            assert time.monotonic() < deadline, "not connected"
            client.poll(10, client.clock.monotonic_ms())
            failure = client.connection_failure(-1)
            if failure is not None and failure is not last:
                failures.append(failure)
                last = failure

    try:
        connect()
        for _ in range(2):
            client._conns[-1].close("closed by the broker")  # a broker restart, connections.max.idle.ms
            connect()
        assert failures == []
    finally:
        client.close()
        broker.close()
