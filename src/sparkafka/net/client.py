"""``NetworkClient``: every broker connection of one producer, driven by one selector loop.

How it works: one ``selectors.DefaultSelector`` holds the sockets of all ``BrokerConnection``s plus the
read end of a socketpair used for ``wakeup()``. Exactly one thread (the Sender) calls ``ready``, ``send``
and ``poll``; any thread may call ``wakeup()``, which writes one byte to the pair unless a wake-up is
already pending (a flag coalesces bursts, so it is cheap to call per record).

``ready(node, now)`` starts a connection when there is none and the node is not backing off, and is true
only for a READY connection below the in-flight limit (Java's ``canSendMore``). ``send`` hands a request
to the node's connection and tries to write it at once; it never raises for runtime conditions: a node
that is not ready, or a broker sharing no version of the API, completes the request with a typed error on
the next ``poll``. ``poll(timeout_ms, now)`` selects until I/O, a wake-up, the earliest request or
connection-setup deadline, or the timeout; then it does the reads/writes, enforces deadlines and finally
runs the callbacks of everything that completed (responses, acks=0 writes, time-outs, disconnects).
With the accelerator and an epoll selector the wait is ``_accel.wait_for_io`` (``_c/_sender_io.c``); with
``poll(hand_over=True)`` the sending threads then hand this thread the GIL at once instead of after the
interpreter's switch interval, and plaintext sockets' calls keep it (``IoMode``).

Reconnects back off exponentially with ±20% jitter (reconnect.backoff.ms .. reconnect.backoff.max.ms) and
the connection setup timeout grows the same way; both reset when a connection reaches READY. Node
addresses come from ``update_nodes`` (metadata); bootstrap addresses get ids -1, -2, ...

Security: ``security`` (a ProducerConfig, a mapping of Java keys, or ``SecuritySettings``) is resolved
once; SSL/SASL_SSL build one ``ssl.SSLContext`` (``net.tls``) shared by every connection, SASL_* put a
``SaslAuthenticator`` (``net.sasl``) first among the handshake steps. A connection that fails with
``AuthenticationError`` marks its node (``authentication_error``) until a later connection succeeds, and
the node waits ``reconnect.backoff.max.ms`` before the next attempt, so a rejected client does not hammer
the broker. ``ready()`` also renews SASL sessions that are about to expire (KIP-368): it answers False
while a renewal is due and starts it as soon as the connection has nothing in flight.
"""

from __future__ import annotations

import logging
import math
import random
import select
import selectors
import socket
from collections.abc import Callable, Mapping, Sequence

from .. import errors
from .._clock import SYSTEM_CLOCK, Clock
from ..accel import ACCEL
from ..protocol.versions import ApiVersionsTable
from .addresses import parse_bootstrap_servers
from .backoff import ExponentialBackoff
from .connection import (
    DEFAULT_MAX_RESPONSE_SIZE,
    DISCONNECTED,
    READY,
    BrokerConnection,
    ConnectionState,
    HandshakeStep,
    IoMode,
    NetworkStats,
    RequestBody,
)
from .response import ClientResponse, ResponseCallback
from .sasl import SaslAuthenticator
from .security import SecuritySettings, resolve_security
from .tls import build_ssl_context

__all__ = ["ClientResponse", "NetworkClient", "ResponseCallback"]

log = logging.getLogger("sparkafka.net.client")

_WAIT_FOR_IO: Callable[[int, int, int, bool], list[tuple[int, int]]] | None = getattr(ACCEL, "wait_for_io", None)
"""The accelerator's ``epoll_wait`` that hands the GIL back to this thread early (``_c/_sender_io.c``)."""

DisconnectListener = Callable[[int, "Exception | None"], None]
ReadyListener = Callable[[int], None]
_MAX_SELECT_MS = 3_600_000.0
_IDLE_CHECK_INTERVAL_MS = 1000.0


class _NodeState:
    __slots__ = ("auth_error", "backoff_ms", "failures", "last_attempt_ms", "last_error", "setup_failures")

    def __init__(self) -> None:
        self.auth_error: errors.AuthenticationError | None = None
        self.failures = 0
        self.setup_failures = 0
        self.backoff_ms = 0.0
        self.last_attempt_ms = -math.inf
        self.last_error: Exception | None = None


def _positive(value: float, key: str, minimum: float = 0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise errors.ConfigError(f"{key} must be a number >= {minimum}, got {value!r}", key)
    return float(value)


class NetworkClient:
    """Connections, requests and the I/O loop (one I/O thread; ``wakeup`` from anywhere)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str] | None = None,
        *,
        client_id: str | None = "sparkafka",
        request_timeout_ms: float = 30_000,
        reconnect_backoff_ms: float = 50,
        reconnect_backoff_max_ms: float = 1000,
        socket_connection_setup_timeout_ms: float = 10_000,
        socket_connection_setup_timeout_max_ms: float = 30_000,
        max_in_flight_per_connection: int = 5,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 32768,
        tcp_nodelay: bool = True,
        connections_max_idle_ms: float = 540_000,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        handshake: Sequence[HandshakeStep] = (),
        security: object | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rng: random.Random | None = None,
    ) -> None:
        self.request_timeout_ms = _positive(request_timeout_ms, "request.timeout.ms", 1)
        self.reconnect_backoff_ms = _positive(reconnect_backoff_ms, "reconnect.backoff.ms")
        self.reconnect_backoff_max_ms = _positive(reconnect_backoff_max_ms, "reconnect.backoff.max.ms")
        setup_ms = _positive(socket_connection_setup_timeout_ms, "socket.connection.setup.timeout.ms", 1)
        setup_max_ms = _positive(
            socket_connection_setup_timeout_max_ms, "socket.connection.setup.timeout.max.ms", 1
        )
        if (
            isinstance(max_in_flight_per_connection, bool)
            or not isinstance(max_in_flight_per_connection, int)
            or max_in_flight_per_connection < 1
        ):
            raise errors.ConfigError(
                "max.in.flight.requests.per.connection must be an int >= 1, "
                f"got {max_in_flight_per_connection!r}",
                "max.in.flight.requests.per.connection",
            )
        for key, value in (
            ("send.buffer.bytes", send_buffer_bytes),
            ("receive.buffer.bytes", receive_buffer_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < -1:
                raise errors.ConfigError(f"{key} must be an int >= -1 (-1 = OS default), got {value!r}", key)
        if (
            isinstance(max_response_size, bool)
            or not isinstance(max_response_size, int)
            or max_response_size < 64
        ):
            raise errors.ConfigError(
                f"max response size must be an int >= 64, got {max_response_size!r}", "max.response.size"
            )
        self.security: SecuritySettings = resolve_security(security)
        self._ssl_context = build_ssl_context(self.security) if self.security.uses_tls else None
        self.client_id = client_id
        self.clock = clock
        self.max_in_flight = max_in_flight_per_connection
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.tcp_nodelay = tcp_nodelay
        # -1: never close idle connections, as Java's Selector without an idle expiry manager.
        self.connections_max_idle_ms = _positive(connections_max_idle_ms, "connections.max.idle.ms", -1)
        self.max_response_size = max_response_size
        self._rng = rng if rng is not None else random.Random()
        steps: list[HandshakeStep] = []
        if self.security.uses_sasl:
            steps.append(SaslAuthenticator(self.security, clock=clock, rng=self._rng))
        steps.extend(handshake)
        self._handshake = tuple(steps)
        self._reconnect_backoff = ExponentialBackoff(
            self.reconnect_backoff_ms, self.reconnect_backoff_max_ms, rng=self._rng
        )
        self._setup_backoff = ExponentialBackoff(setup_ms, setup_max_ms, rng=self._rng)
        self._nodes: dict[int, tuple[str, int]] = {}
        self._conns: dict[int, BrokerConnection] = {}
        self._states: dict[int, _NodeState] = {}
        self._ready_once: set[int] = set()
        self._orphans: set[int] = set()
        self._completions: list[tuple[ResponseCallback, ClientResponse]] = []
        self.stats = NetworkStats()
        """Requests and bytes sent and received by every connection (the producer's metrics)."""
        self._disconnect_listeners: list[DisconnectListener] = []
        self._ready_listeners: list[ReadyListener] = []
        self._next_idle_check_ms = -math.inf
        self._closed = False
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._wakeup_pending = False  # a byte is in the wake-up pair (or being written)
        self._wakeup_requested = False  # a wakeup() since the last poll finished selecting
        self._selecting = False  # poll() is in (or about to enter) select
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._io_mode = IoMode()
        self._keys = self._selector.get_map()
        self._epoll_fd = (self._selector.fileno() if _WAIT_FOR_IO is not None
                          and isinstance(self._selector, getattr(selectors, "EpollSelector", ())) else -1)
        """An epoll selector's descriptor when the accelerator's ``wait_for_io`` can wait on it, else -1."""
        if bootstrap_servers is not None:
            addresses = parse_bootstrap_servers(bootstrap_servers)
            self.update_nodes({-(i + 1): address for i, address in enumerate(addresses)})

    # ------------------------------------------------------------------ nodes
    def update_nodes(self, nodes: Mapping[int, tuple[str, int]]) -> None:
        """Replace the node address table (from metadata). Connections to nodes that left are closed once
        idle; a node whose address changed is reconnected."""
        fresh = {int(k): (str(h), int(p)) for k, (h, p) in nodes.items()}
        for node_id, conn in list(self._conns.items()):
            address = fresh.get(node_id)
            if address is None:
                if conn.in_flight_count() == 0:
                    self._drop_connection(node_id, "is no longer in the cluster metadata")
                else:
                    self._orphans.add(node_id)
            elif address != (conn.host, conn.port):
                self._drop_connection(node_id, f"moved to {address[0]}:{address[1]}")
                self._states.pop(node_id, None)
            else:
                self._orphans.discard(node_id)
        self._nodes = fresh

    def nodes(self) -> dict[int, tuple[str, int]]:
        return dict(self._nodes)

    def _drop_connection(self, node_id: int, reason: str) -> None:
        conn = self._conns.pop(node_id, None)
        self._orphans.discard(node_id)
        if conn is not None:
            conn.close(reason)
        self._ready_once.discard(node_id)

    # ------------------------------------------------------------------ readiness
    def ready(self, node_id: int, now: float) -> bool:
        """True if a request can be sent to the node now; otherwise starts connecting if allowed."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.state is READY:
            if conn.reauth_at_ms is not None and now >= conn.reauth_at_ms:
                conn.start_reauthentication(now)  # once nothing is in flight; until then: not ready
                return False
            return conn.can_send_more(self.max_in_flight)
        if (conn is None or conn.state is DISCONNECTED) and self._can_connect(node_id, now):
            self._initiate_connect(node_id, now)
        return False

    def is_ready(self, node_id: int, now: float | None = None) -> bool:
        conn = self._conns.get(node_id)
        if conn is None or conn.state is not READY:
            return False
        if conn.reauth_due(self.clock.monotonic_ms() if now is None else now):
            return False
        return conn.can_send_more(self.max_in_flight)

    def is_connected(self, node_id: int) -> bool:
        conn = self._conns.get(node_id)
        return conn is not None and conn.state is READY

    def connection_state(self, node_id: int) -> ConnectionState:
        conn = self._conns.get(node_id)
        return conn.state if conn is not None else DISCONNECTED

    def connection_failure(self, node_id: int) -> Exception | None:
        """The error that closed the node's last connection (None after a successful handshake)."""
        state = self._states.get(node_id)
        return state.last_error if state is not None else None

    def authentication_error(self, node_id: int | None = None) -> errors.AuthenticationError | None:
        """The AuthenticationError that closed the node's last connection (None once one succeeds).

        Without ``node_id``: an AuthenticationError only if every known node's last connection attempt
        failed authentication (the most recent of them), else None."""
        if node_id is not None:
            state = self._states.get(node_id)
            return state.auth_error if state is not None else None
        if not self._nodes:
            return None
        latest: errors.AuthenticationError | None = None
        latest_ms = -math.inf
        for nid in self._nodes:
            state = self._states.get(nid)
            if state is None or state.auth_error is None:
                return None
            if state.last_attempt_ms >= latest_ms:
                latest, latest_ms = state.auth_error, state.last_attempt_ms
        return latest

    def can_send_more(self, node_id: int) -> bool:
        conn = self._conns.get(node_id)
        return conn is not None and conn.can_send_more(self.max_in_flight)

    def connection_count(self) -> int:
        """Connections ready for requests (the producer's ``connection-count``; read from any thread)."""
        return sum(1 for conn in list(self._conns.values()) if conn.state is READY)

    def in_flight_count(self, node_id: int | None = None) -> int:
        if node_id is not None:
            conn = self._conns.get(node_id)
            return conn.in_flight_count() if conn is not None else 0
        return sum(conn.in_flight_count() for conn in list(self._conns.values()))  # metrics() reads it from any thread

    def connection_delay(self, node_id: int, now: float) -> float:
        """Ms until it is worth checking the node again: the remaining reconnect backoff when disconnected,
        the remaining setup time while connecting, infinity when connected (wait for I/O)."""
        conn = self._conns.get(node_id)
        if conn is not None and conn.state is not DISCONNECTED:
            if conn.state is READY:
                return math.inf
            deadline = conn.next_deadline_ms()
            return max(deadline - now, 0.0) if deadline is not None else 0.0
        if node_id not in self._nodes:
            return self.reconnect_backoff_ms
        state = self._states.get(node_id)
        if state is None:
            return 0.0
        return max(state.last_attempt_ms + state.backoff_ms - now, 0.0)

    def _can_connect(self, node_id: int, now: float) -> bool:
        if self._closed or node_id not in self._nodes:
            return False
        state = self._states.get(node_id)
        return state is None or now >= state.last_attempt_ms + state.backoff_ms

    def _initiate_connect(self, node_id: int, now: float) -> None:
        host, port = self._nodes[node_id]
        conn = self._conns.get(node_id)
        if conn is None:
            conn = BrokerConnection(
                node_id,
                host,
                port,
                client_id=self.client_id,
                clock=self.clock,
                selector=self._selector,
                send_buffer_bytes=self.send_buffer_bytes,
                receive_buffer_bytes=self.receive_buffer_bytes,
                tcp_nodelay=self.tcp_nodelay,
                connect_timeout_ms=self._setup_backoff.initial_ms,
                request_timeout_ms=self.request_timeout_ms,
                max_response_size=self.max_response_size,
                handshake=self._handshake,
                completions=self._completions,
                on_state_change=self._on_state_change,
                ssl_context=self._ssl_context,
                io_mode=self._io_mode,
                stats=self.stats,
            )
            self._conns[node_id] = conn
        state = self._states.setdefault(node_id, _NodeState())
        state.last_attempt_ms = now
        log.debug("connecting to node %s at %s:%s", node_id, host, port)
        conn.connect(now, self._setup_backoff.backoff(state.setup_failures))

    def least_loaded_node(self, now: float) -> int | None:
        """The READY node with the fewest in-flight requests; else a connecting node; else the node that
        can be connected to and was tried longest ago; None if every node is backing off."""
        ids = list(self._nodes)
        if not ids:
            return None
        offset = self._rng.randrange(len(ids))
        best_ready: int | None = None
        best_in_flight = math.inf
        connecting: int | None = None
        can_connect: int | None = None
        for i in range(len(ids)):
            node_id = ids[(offset + i) % len(ids)]
            conn = self._conns.get(node_id)
            if (
                conn is not None
                and conn.state is READY
                and conn.can_send_more(self.max_in_flight)
            ):
                count = conn.in_flight_count()
                if count == 0:
                    return node_id
                if count < best_in_flight:
                    best_in_flight = count
                    best_ready = node_id
            elif conn is not None and conn.is_connecting:
                connecting = node_id
            elif (
                (conn is None or conn.is_disconnected)
                and self._can_connect(node_id, now)
                and (can_connect is None or self._last_attempt(node_id) < self._last_attempt(can_connect))
            ):
                can_connect = node_id
        if best_ready is not None:
            return best_ready
        if connecting is not None:
            return connecting
        return can_connect

    def _last_attempt(self, node_id: int) -> float:
        state = self._states.get(node_id)
        return state.last_attempt_ms if state is not None else -math.inf

    def api_version(self, node_id: int, api_key: int, max_version: int | None = None) -> int:
        """The negotiated (highest shared) version of ``api_key`` on the node's READY connection, at most
        ``max_version`` when given (UnsupportedVersionError when the broker has none of ours)."""
        conn = self._conns.get(node_id)
        if conn is None or conn.versions is None:
            raise errors.IllegalStateError(f"no API versions for node {node_id}: it is not connected")
        return conn.api_version(api_key, max_version)

    def finalized_features(self) -> dict[str, int]:
        """The cluster's finalized features (name -> max version level) from the ApiVersions answer with the
        highest features epoch among the current connections (Java ``ApiVersions.getFinalizedFeaturesInfo``);
        empty before any handshake or from brokers older than ApiVersions v3."""
        best: ApiVersionsTable | None = None
        for conn in list(self._conns.values()):
            table = conn.versions
            if table is not None and (best is None or table.finalized_features_epoch > best.finalized_features_epoch):
                best = table
        return dict(best.finalized_features) if best is not None else {}

    def api_versions_table(self, node_id: int) -> ApiVersionsTable | None:
        """The broker's ApiVersions answer on the node's current connection (None before the handshake)."""
        conn = self._conns.get(node_id)
        return conn.versions if conn is not None else None

    # ------------------------------------------------------------------ listeners
    def add_disconnect_listener(self, listener: DisconnectListener) -> None:
        """``listener(node_id, error)`` runs (on the I/O thread) whenever a connection closes (``error`` None
        when the client closed it)."""
        self._disconnect_listeners.append(listener)

    def add_ready_listener(self, listener: ReadyListener) -> None:
        """``listener(node_id)`` runs (on the I/O thread) whenever a connection becomes ready."""
        self._ready_listeners.append(listener)

    def _tell(self, listeners: Sequence[Callable[..., None]], *args: object) -> None:
        for listener in listeners:
            try:
                listener(*args)
            except Exception:
                log.exception("connection listener failed")

    def _on_state_change(
        self, conn: BrokerConnection, state: ConnectionState, error: Exception | None
    ) -> None:
        node_id = conn.node_id
        node_state = self._states.setdefault(node_id, _NodeState())
        if state is READY:
            log.debug("node %s (%s:%s) is ready", node_id, conn.host, conn.port)
            node_state.failures = 0
            node_state.setup_failures = 0
            node_state.backoff_ms = 0.0
            node_state.last_error = None
            node_state.auth_error = None
            self._ready_once.add(node_id)
            if self._ready_listeners:
                self._tell(self._ready_listeners, node_id)
        elif state is DISCONNECTED:
            now = self.clock.monotonic_ms()
            setup_failed = node_id not in self._ready_once
            if not setup_failed:
                self._ready_once.discard(node_id)
            else:
                node_state.setup_failures += 1
            node_state.backoff_ms = self._reconnect_backoff.backoff(node_state.failures)
            node_state.failures += 1
            node_state.last_attempt_ms = now
            if error is not None:
                node_state.last_error = error
            if isinstance(error, errors.AuthenticationError):
                # A rejected login will be rejected again: do not hammer the broker.
                node_state.auth_error = error
                node_state.backoff_ms = max(node_state.backoff_ms, self.reconnect_backoff_max_ms)
                log.warning("node %s: %s", node_id, error)
            elif error is not None:
                node_state.auth_error = None
                if setup_failed:
                    # Java's NetworkClient warns when a connection could not be established or was closed
                    # during authentication (a TLS client at a plaintext listener is only that: a closed
                    # connection, and then a timeout; this line says why)
                    log.warning("node %s: connection not established: %s", node_id, error)
            log.debug(
                "node %s disconnected (%r); reconnect backoff %.0f ms", node_id, error, node_state.backoff_ms
            )
            self._tell(self._disconnect_listeners, node_id, error)

    # ------------------------------------------------------------------ requests
    def send(
        self,
        node_id: int,
        api_key: int,
        body: RequestBody,
        *,
        version: int | None = None,
        expect_response: bool = True,
        callback: ResponseCallback,
        timeout_ms: float | None = None,
    ) -> None:
        """Send a request to a node ``ready()`` said yes to; ``callback`` gets exactly one ClientResponse.

        ``version=None`` uses the negotiated version. ``expect_response=False`` (acks=0 Produce) completes
        once the bytes are written, with ``body=None``.
        """
        now = self.clock.monotonic_ms()
        conn = self._conns.get(node_id)
        if self._closed or conn is None or conn.state is not READY:
            state = conn.state.name if conn is not None else "DISCONNECTED"
            reason = "the client is closed" if self._closed else f"it is not ready (state {state})"
            error = errors.error_class_for_code(errors.NETWORK_EXCEPTION)(
                f"cannot send api {api_key} to node {node_id}: {reason}"
            )
            self._completions.append(
                (
                    callback,
                    ClientResponse(
                        node_id, api_key, version if version is not None else -1, -1, None, error, 0.0
                    ),
                )
            )
            return
        if version is None:
            try:
                version = conn.api_version(api_key)
            except errors.UnsupportedVersionError as exc:
                self._completions.append((callback, ClientResponse(node_id, api_key, -1, -1, None, exc, 0.0)))
                return
        conn.send(
            api_key, version, body, callback, expect_response=expect_response, timeout_ms=timeout_ms, now=now
        )

    # ------------------------------------------------------------------ the loop
    def wakeup(self) -> None:
        """Interrupt a blocking ``poll`` (any thread; coalesced; safe after close).

        Only a poll that is selecting needs the byte written to the wake-up pair: a poll that has not
        reached its select yet sees ``_wakeup_requested`` and does not block. The two flags are set and
        read in opposite orders here and in ``poll`` (each attribute store is atomic under the GIL), so
        either this call sees ``_selecting`` or that poll sees the request. Senders append a new batch
        ~100 times a second per partition; most arrive while the Sender is busy and skip the syscall
        (and the GIL hand-off it causes)."""
        self._wakeup_requested = True
        if not self._selecting or self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            self._wake_w.send(b"\x01")
        except OSError:  # full (a wake-up is pending anyway) or closed
            pass

    def poll(self, timeout_ms: float, now: float, hand_over: bool = True) -> None:
        """Wait for I/O (at most ``timeout_ms``), do it, enforce deadlines, then run completed callbacks.
        ``hand_over`` (with the accelerator, plaintext): ask the sending threads for the GIL as soon as the
        wait ends (``_wait_for_io``), and let the sockets' calls keep it until the next ``poll`` (``IoMode``).
        False: take the GIL back as CPython gives it, and give it up on every socket call."""
        self._io_mode.keep_gil = hand_over
        if self._closed:
            self._run_callbacks()
            return
        timeout = min(max(float(timeout_ms), 0.0), _MAX_SELECT_MS)
        earliest = math.inf  # the first request or connection-setup deadline
        for conn in self._conns.values():
            deadline = conn.next_deadline_ms()
            if deadline is not None and deadline < earliest:
                earliest = deadline
        if self._completions:
            timeout = 0.0
        elif earliest - now < timeout:
            timeout = max(earliest - now, 0.0)
        self._selecting = True
        if self._wakeup_requested:
            timeout = 0.0
        try:
            ready = (self._selector.select(timeout / 1000.0) if self._epoll_fd < 0
                     else self._wait_for_io(timeout, hand_over))
        finally:
            self._selecting = False
        # Whoever woke us appended before calling wakeup(); the caller's next look at its work (after
        # this poll) sees it, so the request is served.
        self._wakeup_requested = False
        now = self.clock.monotonic_ms()
        for key, mask in ready:
            target = key.data
            if target is None:
                self._drain_wakeup()
            else:
                assert isinstance(target, BrokerConnection)
                target.handle_events(mask, now)
        if now >= earliest:  # deadlines set during this poll lie in the future
            for conn in list(self._conns.values()):
                conn.check_timeouts(now)
        if self._orphans:
            for node_id in list(self._orphans):
                orphan = self._conns.get(node_id)
                if orphan is None or orphan.in_flight_count() == 0:
                    self._drop_connection(node_id, "is no longer in the cluster metadata")
        if now >= self._next_idle_check_ms:
            self._next_idle_check_ms = now + _IDLE_CHECK_INTERVAL_MS
            self._close_idle(now)
        self._run_callbacks()

    def _wait_for_io(self, timeout_ms: float, hand_over: bool) -> list[tuple[selectors.SelectorKey, int]]:
        """``EpollSelector.select`` through the accelerator's ``wait_for_io``: the same events, and a
        sending thread in the C send lane gives this thread the GIL as soon as the wait ends instead of
        after the interpreter's switch interval (``_c/_sender_io.c`` says why that matters)."""
        assert _WAIT_FOR_IO is not None
        keys = self._keys
        ready = []
        for fd, event in _WAIT_FOR_IO(self._epoll_fd, math.ceil(timeout_ms), len(keys), hand_over):
            key = keys.get(fd)
            if key is not None:  # as EpollSelector.select maps epoll's events to the selector's
                events = (selectors.EVENT_WRITE if event & ~select.EPOLLIN else 0) | (
                    selectors.EVENT_READ if event & ~select.EPOLLOUT else 0)
                ready.append((key, events & key.events))
        return ready

    def _drain_wakeup(self) -> None:
        # Drain first, clear the flag after: clearing first lets a wakeup() that lands in between write
        # its byte, have it swallowed here and leave the flag set with an empty pipe, after which every
        # later wakeup() is a no-op. A wakeup() racing the clear below is harmless: poll() is returning.
        # One recv: the flag lets at most a byte or two in; a byte left over wakes the next select.
        try:
            self._wake_r.recv(4096)
        except OSError:
            pass
        self._wakeup_pending = False

    def _close_idle(self, now: float) -> None:
        limit = self.connections_max_idle_ms
        if limit < 0:
            return
        for node_id, conn in list(self._conns.items()):
            if (
                conn.state is READY
                and conn.in_flight_count() == 0
                and now - conn.last_activity_ms > limit
            ):
                log.debug("closing idle connection to node %s", node_id)
                conn.close(f"was idle for more than {limit:.0f} ms (connections.max.idle.ms)")
                state = self._states.get(node_id)
                if state is not None:  # an idle close is not a failure
                    state.failures = 0
                    state.backoff_ms = 0.0

    def _run_callbacks(self) -> None:
        while self._completions:
            batch = self._completions[:]
            self._completions.clear()
            for callback, response in batch:
                try:
                    callback(response)
                except Exception:
                    log.exception("uncaught error in the callback of %r", response)

    def close(self) -> None:
        """Close every connection (in-flight requests fail with NETWORK_EXCEPTION), the wake-up pair and the
        selector. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for node_id in list(self._conns):
            self._drop_connection(node_id, "closed by the client")
        self._run_callbacks()
        try:
            self._selector.unregister(self._wake_r)
        except (KeyError, ValueError, OSError):
            pass
        self._wake_r.close()
        self._wake_w.close()
        self._selector.close()

    def release_after_fork(self) -> None:
        """In a child made by ``fork()``: close this process's copies of the descriptors (the connections'
        sockets, the wake-up pair, the selector's epoll) without any I/O on them. The parent's client still
        uses the same connections and epoll instance: no shutdown, no TLS close_notify, no unregistering
        (an EPOLL_CTL_DEL here would remove the socket from the parent's epoll too). Without it the child
        kept them open, so a connection outlived the parent's ``close()`` while any child lived."""
        self._closed = True
        for conn in self._conns.values():
            conn.release_after_fork()
        self._wake_r.close()
        self._wake_w.close()
        self._selector.close()  # selectors' close(): closes the epoll descriptor, no epoll_ctl

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> NetworkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
