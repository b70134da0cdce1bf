"""``BrokerConnection``: one non-blocking TCP (optionally TLS) connection to one broker.

How it works: ``connect()`` opens a non-blocking socket (``connect_ex`` -> EINPROGRESS) and registers it
with the client's selector; the state then moves

    DISCONNECTED -> CONNECTING -> [TLS_HANDSHAKE] -> API_VERSIONS -> AUTHENTICATING -> READY

CONNECTING ends when the socket is writable and ``SO_ERROR`` is 0. With an ``ssl_context`` the socket is
then wrapped (SNI = the broker's host) and TLS_HANDSHAKE calls ``do_handshake()`` whenever the selector
reports the readiness OpenSSL asked for (SSLWantRead/WriteError), never blocking. API_VERSIONS sends our
highest ApiVersions version; on UNSUPPORTED_VERSION it retries once with the broker's highest ApiVersions
version (KIP-511, as Java's ``NetworkClient``), then keeps an ``ApiVersionsTable`` so ``api_version(key)``
picks the highest version both sides share. AUTHENTICATING runs the ``handshake`` steps in order (SASL:
each step sends requests with ``send_internal``, or raw length-framed tokens with ``send_raw_token`` for
SaslHandshake v0, and reports ``done(None | error)``); with no steps it is skipped. Only READY accepts
user requests. A step may ``schedule_reauthentication``: once that time has come the owner calls
``start_reauthentication`` while nothing is in flight, the state goes back to AUTHENTICATING for that step
alone, then READY again.

Outgoing frames (from the sans-I/O ``KafkaProtocol``) are queued as memoryviews and written as far as the
socket allows (scatter-gather ``sendmsg`` on plain sockets; on TLS small frames are merged into one ``send``
since SSL sockets have no ``sendmsg``); the write interest is registered only while bytes are pending. With
the accelerator, a plaintext connection reads and writes through ``_accel.recv_nowait`` and ``send_nowait``
(``_c/_sender_io.c``: the same calls, keeping the GIL, which the socket methods give up on every call and may
then wait a switch interval to get back). Incoming bytes go to ``KafkaProtocol.receive_data`` (TLS reads also
drain ``pending()``, the bytes OpenSSL decrypted but the selector cannot see); each decoded response completes
the oldest in-flight request. A request sent with ``expect_response=False`` (acks=0 Produce) completes when
its last byte has been written. Every failure closes the connection and fails every in-flight request with one
typed error: RequestTimedOutError (a request passed its deadline), NetworkExceptionError (connection lost),
the ProtocolError raised by the decoder, AuthenticationError (TLS rejected, SASL rejected, a PLAINTEXT
connection answered by a TLS listener's alert), or KafkaConnectionError / the handshake error for a connection
that never became READY. A failed write first reads what the peer sent: a listener that refuses us sends its
alert (or an answer) and then resets, so the write sees the reset while the alert still waits in the receive
buffer, and that alert, not the reset, is the error. Completed user callbacks are appended to ``completions``
and run by the owner after the I/O step (never re-entrantly).
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import selectors
import socket
import ssl
import struct
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from itertools import islice
from typing import Any

from .. import errors
from .._clock import Clock
from .._version import __version__
from ..accel import ACCEL
from ..protocol.framing import KafkaProtocol
from ..protocol.messages import CLIENT_VERSIONS, ApiKey
from ..protocol.primitives import Buffer
from ..protocol.versions import ApiVersionsTable
from .response import ClientResponse, ResponseCallback
from .tls import handshake_error, looks_like_tls_alert

log = logging.getLogger("sparkafka.net.connection")

CLIENT_SOFTWARE_NAME = "sparkafka"
CLIENT_SOFTWARE_VERSION = __version__  # the package's version (sparkafka._version)
DEFAULT_MAX_RESPONSE_SIZE = 104_857_600  # the broker's socket.request.max.bytes default
_CONNECT_IN_PROGRESS = frozenset({errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, errno.EAGAIN})
_HAS_SENDMSG = hasattr(socket.socket, "sendmsg")
_SENDMSG_MAX_BUFFERS = 64
_READS_PER_EVENT = 16
_UNSUPPORTED_VERSION = errors.UNSUPPORTED_VERSION


_SEND_NOWAIT: Callable[[int, list[Buffer]], int] | None = getattr(ACCEL, "send_nowait", None)
_RECV_NOWAIT: Callable[[int, int], bytes] | None = getattr(ACCEL, "recv_nowait", None)
"""The accelerator's socket calls that keep the GIL (``_c/_sender_io.c``), for plaintext sockets."""


class IoMode:
    """Shared by a ``NetworkClient`` and its connections: whether the plaintext sockets' calls go through
    the accelerator's GIL-keeping ``send_nowait`` / ``recv_nowait`` (``keep_gil``, the default) or the
    socket methods, which give the GIL up on every call (``NetworkClient.poll(hand_over=...)`` sets it)."""

    __slots__ = ("keep_gil",)

    def __init__(self) -> None:
        self.keep_gil = True


class NetworkStats:
    """Shared by a ``NetworkClient`` and its connections: the requests of every API (handshakes included)
    with their bytes and the largest (size prefix included), counted when queued; the bytes written (raw SASL tokens of
    SaslHandshake v0 too) and read, counted as the sockets take and give them. Plain increments on the I/O
    thread, read by the producer's metrics (Java's Selector sensors "bytes-sent": request-*,
    outgoing-byte-*, request-size-*, and "bytes-received": incoming-byte-*). TLS counts the bytes before
    encryption and after decryption, as Java's sends and receives."""

    __slots__ = ("bytes_received", "bytes_sent", "request_bytes", "request_bytes_max", "requests")

    def __init__(self) -> None:
        self.requests = 0
        self.request_bytes = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.request_bytes_max = 0


_TLS_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
_TLS_MERGE_BYTES = 65536
_RAW_SIZE = struct.Struct(">i")


class ConnectionState(enum.IntEnum):
    DISCONNECTED = 0
    CONNECTING = 1
    TLS_HANDSHAKE = 2
    API_VERSIONS = 3
    AUTHENTICATING = 4
    READY = 5


# The states as module constants for the per-request checks here and in client.py (enum members on
# Python 3.11 are slow to read: docs/DESIGN.md, Performance notes).
DISCONNECTED = ConnectionState.DISCONNECTED
CONNECTING = ConnectionState.CONNECTING
TLS_HANDSHAKE = ConnectionState.TLS_HANDSHAKE
API_VERSIONS = ConnectionState.API_VERSIONS
AUTHENTICATING = ConnectionState.AUTHENTICATING
READY = ConnectionState.READY


HandshakeDone = Callable[[Exception | None], None]
HandshakeStep = Callable[["BrokerConnection", HandshakeDone], None]
"""A step run in AUTHENTICATING: ``step(conn, done)`` sends its requests with ``conn.send_internal`` and
calls ``done(None)`` when finished or ``done(error)`` to fail the connection (e.g. AuthenticationError)."""

RequestBody = Mapping[str, Any] | bytes | bytearray | memoryview | tuple[bytes | bytearray | memoryview, ...]
"""A request body: a dict for the schema codec, encoded bytes, or encoded pieces in order (the
producer's Produce body)."""

StateListener = Callable[["BrokerConnection", ConnectionState, "Exception | None"], None]

RawTokenCallback = Callable[[bytes], None]
"""Receives the payload of one raw length-framed token (SaslHandshake v0 style authentication)."""


def _api_name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return f"api {api_key}"


class _InFlight:
    __slots__ = (
        "api_key",
        "callback",
        "correlation_id",
        "deadline_ms",
        "end_offset",
        "expect_response",
        "internal",
        "send_ms",
        "version",
    )

    def __init__(
        self,
        correlation_id: int,
        api_key: int,
        version: int,
        callback: ResponseCallback,
        send_ms: float,
        deadline_ms: float,
        end_offset: int,
        expect_response: bool,
        internal: bool,
    ) -> None:
        self.correlation_id = correlation_id
        self.api_key = api_key
        self.version = version
        self.callback = callback
        self.send_ms = send_ms
        self.deadline_ms = deadline_ms
        self.end_offset = end_offset
        self.expect_response = expect_response
        self.internal = internal


class BrokerConnection:
    """A connection to broker ``node_id`` at ``host:port`` (single-threaded: the I/O thread only)."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        *,
        client_id: str | None,
        clock: Clock,
        selector: selectors.BaseSelector | None = None,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 32768,
        tcp_nodelay: bool = True,
        connect_timeout_ms: float = 10_000,
        request_timeout_ms: float = 30_000,
        max_response_size: int = DEFAULT_MAX_RESPONSE_SIZE,
        handshake: Sequence[HandshakeStep] = (),
        completions: list[tuple[ResponseCallback, ClientResponse]] | None = None,
        on_state_change: StateListener | None = None,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
        io_mode: IoMode | None = None,
        stats: NetworkStats | None = None,
    ) -> None:
        self.node_id = node_id
        self._io_mode = io_mode if io_mode is not None else IoMode()
        self._stats = stats if stats is not None else NetworkStats()
        self.host = host
        self.port = port
        self.client_id = client_id
        self._clock = clock
        self._selector = selector if selector is not None else selectors.DefaultSelector()
        self._own_selector = selector is None
        self.send_buffer_bytes = send_buffer_bytes
        self.receive_buffer_bytes = receive_buffer_bytes
        self.tcp_nodelay = tcp_nodelay
        self.connect_timeout_ms = float(connect_timeout_ms)
        self.request_timeout_ms = float(request_timeout_ms)
        self.max_response_size = max_response_size
        self._handshake = tuple(handshake)
        self._ssl_context = ssl_context
        self._server_hostname = server_hostname or host
        self._tls_wants = selectors.EVENT_READ
        self._raw_waiters: deque[RawTokenCallback] = deque()
        self._raw_buf = bytearray()
        self.reauth_at_ms: float | None = None
        self._reauth_step: HandshakeStep | None = None
        self._reauthenticating: object | None = None
        self.completions: list[tuple[ResponseCallback, ClientResponse]] = (
            completions if completions is not None else []
        )
        self._on_state_change = on_state_change
        self._recv_size = max(65536, receive_buffer_bytes)
        self.state = DISCONNECTED
        self._sock: socket.socket | None = None
        self._fd = -1
        """The plaintext socket's descriptor when its I/O goes through the accelerator (``_c/_sender_io.c``:
        the non-blocking calls keep the GIL), else -1."""
        self._events = 0
        self._protocol: KafkaProtocol | None = None
        self._out: deque[memoryview] = deque()
        self._queued_total = 0
        self._written_total = 0
        self._in_flight: deque[_InFlight] = deque()  # requests that expect a response, oldest first
        self._unwritten_no_response: deque[_InFlight] = deque()  # acks=0 requests not fully written yet
        self._setup_deadline_ms = 0.0
        self._setup_timeout_ms = self.connect_timeout_ms
        self._addr_index = 0
        self._handshake_index = 0
        self._api_versions_retried = False
        self.versions: ApiVersionsTable | None = None
        self._picked: dict[int | tuple[int, int], int] = {}
        self.last_error: Exception | None = None
        self.last_activity_ms = clock.monotonic_ms()

    # ------------------------------------------------------------------ state queries
    @property
    def is_ready(self) -> bool:
        return self.state is READY

    @property
    def is_connecting(self) -> bool:
        """Connecting or handshaking (not READY, not DISCONNECTED)."""
        return CONNECTING <= self.state < READY

    @property
    def is_disconnected(self) -> bool:
        return self.state is DISCONNECTED

    def in_flight_count(self) -> int:
        return len(self._in_flight) + len(self._unwritten_no_response)

    @property
    def uses_tls(self) -> bool:
        return self._ssl_context is not None

    @property
    def tls_version(self) -> str | None:
        """The negotiated TLS version ("TLSv1.3") once the TLS handshake is done, else None."""
        sock = self._sock
        if isinstance(sock, ssl.SSLSocket) and self.state > TLS_HANDSHAKE:
            return sock.version()
        return None

    def reauth_due(self, now: float) -> bool:
        """True when a READY connection's SASL session should be renewed (KIP-368)."""
        at = self.reauth_at_ms
        return at is not None and now >= at and self.state is READY

    def schedule_reauthentication(self, at_ms: float | None, step: HandshakeStep) -> None:
        """Called by a SASL step that succeeded: renew the session with ``step`` at ``at_ms`` (None: never)."""
        self.reauth_at_ms = at_ms
        self._reauth_step = step if at_ms is not None else None

    @property
    def has_unwritten_bytes(self) -> bool:
        return bool(self._out)

    def can_send_more(self, max_in_flight: int) -> bool:
        """Java ``InFlightRequests.canSendMore``: nothing in flight, or the last request is fully written
        and fewer than ``max_in_flight`` are outstanding."""
        count = len(self._in_flight) + len(self._unwritten_no_response)
        return count == 0 or (not self._out and count < max_in_flight)

    def next_deadline_ms(self) -> float | None:
        """The earliest time at which ``check_timeouts`` has something to do."""
        if self.state is DISCONNECTED:
            return None
        deadline: float | None = None
        if self.state is not READY:
            deadline = self._setup_deadline_ms
        for req in self._in_flight:
            if deadline is None or req.deadline_ms < deadline:
                deadline = req.deadline_ms
        for req in self._unwritten_no_response:
            if deadline is None or req.deadline_ms < deadline:
                deadline = req.deadline_ms
        return deadline

    def api_version(self, api_key: int, max_version: int | None = None) -> int:
        """The highest version of ``api_key`` both sides support, at most ``max_version`` when given
        (raises UnsupportedVersionError when there is none, as Java's ``latestUsableVersion``)."""
        if max_version is not None:
            capped = self._picked.get((api_key, max_version))
            if capped is None:
                if self.versions is None:
                    raise errors.IllegalStateError(
                        f"API versions of node {self.node_id} are not known yet (state {self.state.name})")
                try:
                    capped = self.versions.pick_version(api_key, client_max=max_version)
                except errors.UnsupportedVersionError as exc:
                    raise errors.UnsupportedVersionError(f"node {self.node_id}: {exc}") from None
                self._picked[(api_key, max_version)] = capped
            return capped
        version = self._picked.get(api_key)
        if version is not None:
            return version
        if self.versions is None:
            raise errors.IllegalStateError(
                f"API versions of node {self.node_id} are not known yet (state {self.state.name})"
            )
        try:
            version = self.versions.pick_version(api_key)  # our range: CLIENT_VERSIONS
        except errors.UnsupportedVersionError as exc:
            raise errors.UnsupportedVersionError(f"node {self.node_id}: {exc}") from None
        self._picked[api_key] = version
        return version

    # ------------------------------------------------------------------ connecting
    def connect(self, now: float, setup_timeout_ms: float | None = None) -> None:
        """Start a non-blocking connect; failures close the connection (see ``last_error``)."""
        if self.state is not DISCONNECTED:
            raise errors.IllegalStateError(f"connect() on node {self.node_id} in state {self.state.name}")
        timeout = self.connect_timeout_ms if setup_timeout_ms is None else setup_timeout_ms
        self._setup_timeout_ms = timeout
        self._setup_deadline_ms = now + timeout
        self.last_activity_ms = now
        self.last_error = None
        self._protocol = KafkaProtocol(self.client_id, self.max_response_size)
        self._api_versions_retried = False
        self._handshake_index = 0
        self.versions = None
        self._picked = {}
        self._raw_waiters.clear()
        self._raw_buf.clear()
        self.reauth_at_ms = None
        self._reauth_step = None
        self._reauthenticating = None
        self._set_state(CONNECTING, None)
        try:
            infos = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            self._close_with(self._connect_error(f"cannot resolve host {self.host!r}: {exc}"))
            return
        if not infos:
            self._close_with(self._connect_error(f"host {self.host!r} resolved to no address"))
            return
        family, kind, proto, _, sockaddr = infos[self._addr_index % len(infos)]
        self._addr_index += 1
        try:
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            self._close_with(self._connect_error(f"cannot create socket: {exc}"))
            return
        self._sock = sock
        try:
            sock.setblocking(False)
            if self.tcp_nodelay:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.send_buffer_bytes)
            if self.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.receive_buffer_bytes)
            code = sock.connect_ex(sockaddr)
        except OSError as exc:
            self._close_with(self._connect_error(str(exc)))
            return
        if code == 0:
            self._register(selectors.EVENT_READ)
            self._on_connected(now)
        elif code in _CONNECT_IN_PROGRESS:
            self._register(selectors.EVENT_WRITE)
        else:
            self._close_with(self._connect_error(f"{errno.errorcode.get(code, code)}: {_strerror(code)}"))

    def _connect_error(self, detail: str) -> errors.KafkaConnectionError:
        return errors.KafkaConnectionError(
            f"cannot connect to node {self.node_id} at {self.host}:{self.port}: {detail}"
        )

    def _on_connected(self, now: float) -> None:
        log.debug("node %s: TCP connection to %s:%s established", self.node_id, self.host, self.port)
        if self._ssl_context is None and _SEND_NOWAIT is not None and self._sock is not None:
            self._fd = self._sock.fileno()
        if self._ssl_context is not None:
            self._start_tls(now)
            return
        self._start_api_versions(now)

    def _start_api_versions(self, now: float) -> None:
        self._set_state(API_VERSIONS, None)
        self._update_interest()
        hi = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        self._send_api_versions(hi, now)

    # ------------------------------------------------------------------ TLS
    def _start_tls(self, now: float) -> None:
        sock = self._sock
        context = self._ssl_context
        assert sock is not None and context is not None
        if self._events:
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError, OSError):
                pass
            self._events = 0
        try:
            wrapped = context.wrap_socket(
                sock, server_hostname=self._server_hostname, do_handshake_on_connect=False
            )
        except (ssl.SSLError, ValueError, OSError) as exc:
            if sock.fileno() == -1:
                self._sock = None  # wrap_socket detached the descriptor (and closed it on failure)
            self._close_with(handshake_error(exc, self.node_id, self.host, self.port))
            return
        self._sock = wrapped
        self._set_state(TLS_HANDSHAKE, None)
        self._tls_wants = selectors.EVENT_WRITE
        self._update_interest()
        self._do_tls_handshake(now)

    def _do_tls_handshake(self, now: float) -> None:
        sock = self._sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._tls_wants = selectors.EVENT_READ
            self._update_interest()
            return
        except ssl.SSLWantWriteError:
            self._tls_wants = selectors.EVENT_WRITE
            self._update_interest()
            return
        except (ssl.SSLError, OSError) as exc:
            error = handshake_error(exc, self.node_id, self.host, self.port)
            log.debug("node %s: TLS handshake failed: %s", self.node_id, error)
            self._close_with(error)
            return
        log.debug(
            "node %s: TLS established (%s, %s)", self.node_id, sock.version(), (sock.cipher() or ("?",))[0]
        )
        self._start_api_versions(now)

    def _send_api_versions(self, version: int, now: float) -> None:
        body = {
            "client_software_name": CLIENT_SOFTWARE_NAME,
            "client_software_version": CLIENT_SOFTWARE_VERSION,
        }
        self.send_internal(ApiKey.API_VERSIONS, version, body, self._on_api_versions, now=now)

    def _on_api_versions(self, resp: ClientResponse) -> None:
        if resp.error is not None:
            return  # the connection is already closing with this error
        body = resp.body or {}
        code = int(body.get("error_code", 0))
        now = self._clock.monotonic_ms()
        if code == _UNSUPPORTED_VERSION and not self._api_versions_retried:
            broker_max = 0
            for entry in body.get("api_keys") or ():
                if int(entry["api_key"]) == ApiKey.API_VERSIONS:
                    broker_max = int(entry["max_version"])
            hi = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
            retry = min(broker_max, hi)
            if retry < resp.version:
                self._api_versions_retried = True
                log.debug(
                    "node %s: ApiVersions v%s unsupported, retrying with v%s",
                    self.node_id,
                    resp.version,
                    retry,
                )
                self._send_api_versions(retry, now)
                return
        if code:
            if code == _UNSUPPORTED_VERSION:
                exc: Exception = errors.UnsupportedVersionError(
                    f"node {self.node_id} rejected ApiVersions v{resp.version} with UNSUPPORTED_VERSION"
                )
            else:
                exc = errors.error_for_code(code, f"ApiVersions request to node {self.node_id} failed")
            self._close_with(exc)
            return
        try:
            self.versions = ApiVersionsTable.from_response(body)
        except errors.KafkaError as exc:
            self._close_with(exc)
            return
        self._set_state(AUTHENTICATING, None)
        self._next_handshake_step()

    def _next_handshake_step(self) -> None:
        if self._handshake_index >= len(self._handshake):
            self.last_error = None
            self._set_state(READY, None)
            return
        step = self._handshake[self._handshake_index]
        index = self._handshake_index

        def done(error: Exception | None) -> None:
            if self.state is not AUTHENTICATING or self._handshake_index != index:
                return
            if error is not None:
                self._close_with(error)
                return
            self._handshake_index += 1
            self._next_handshake_step()

        self._run_step(step, done)

    def _run_step(self, step: HandshakeStep, done: HandshakeDone) -> None:
        try:
            step(self, done)
        except Exception as exc:  # a broken step must not leave the connection half-open
            self._close_with(
                exc
                if isinstance(exc, errors.KafkaError)
                else errors.AuthenticationError(
                    f"handshake step {step!r} failed for node {self.node_id}: {type(exc).__name__}"
                )
            )

    def start_reauthentication(self, now: float) -> bool:
        """Renew the SASL session (KIP-368) if it is due and nothing is in flight; True if started.

        The connection is AUTHENTICATING (not ready for user requests) until the step reports back; a
        failure closes it with the step's error, success makes it READY again."""
        step = self._reauth_step
        if step is None or not self.reauth_due(now) or self.in_flight_count() or self._out:
            return False
        log.debug("node %s: re-authenticating (the SASL session is about to expire)", self.node_id)
        self.reauth_at_ms = None
        self._setup_timeout_ms = self.request_timeout_ms
        self._setup_deadline_ms = now + self.request_timeout_ms
        self._set_state(AUTHENTICATING, None)
        ticket = object()
        self._reauthenticating = ticket

        def done(error: Exception | None) -> None:
            if self.state is not AUTHENTICATING or self._reauthenticating is not ticket:
                return
            self._reauthenticating = None
            if error is not None:
                self._close_with(error)
                return
            self._set_state(READY, None)

        self._run_step(step, done)
        return True

    # ------------------------------------------------------------------ sending
    def send(
        self,
        api_key: int,
        version: int,
        body: RequestBody,
        callback: ResponseCallback,
        *,
        expect_response: bool = True,
        timeout_ms: float | None = None,
        now: float | None = None,
    ) -> int:
        """Queue a user request (READY only); returns its correlation id. Failures reach ``callback``."""
        if self.state is not READY:
            raise errors.IllegalStateError(f"node {self.node_id} is not ready (state {self.state.name})")
        return self._send(api_key, version, body, callback, expect_response, timeout_ms, now, internal=False)

    def send_internal(
        self,
        api_key: int,
        version: int,
        body: RequestBody,
        callback: ResponseCallback,
        *,
        now: float | None = None,
    ) -> int:
        """Queue a handshake request (any connected state); ``callback`` runs as soon as it completes."""
        if self.state < API_VERSIONS:
            raise errors.IllegalStateError(f"node {self.node_id} is not connected (state {self.state.name})")
        return self._send(api_key, version, body, callback, True, None, now, internal=True)

    def send_raw_token(self, token: bytes, callback: RawTokenCallback) -> None:
        """Write ``int32 length + token`` outside Kafka framing (SASL after SaslHandshake v0); ``callback``
        gets the broker's next length-framed token. Only while AUTHENTICATING."""
        if self.state is not AUTHENTICATING:
            raise errors.IllegalStateError(
                f"raw SASL tokens are only allowed while authenticating (node {self.node_id}, "
                f"state {self.state.name})"
            )
        frame = _RAW_SIZE.pack(len(token)) + token
        self._queued_total += len(frame)
        self._raw_waiters.append(callback)
        self._out.append(memoryview(frame))
        self._flush()

    def _send(
        self,
        api_key: int,
        version: int,
        body: RequestBody,
        callback: ResponseCallback,
        expect_response: bool,
        timeout_ms: float | None,
        now: float | None,
        *,
        internal: bool,
    ) -> int:
        protocol = self._protocol
        assert protocol is not None
        correlation_id, pieces, size = protocol.send_request_parts(api_key, version, body, expect_response)
        if now is None:
            now = self._clock.monotonic_ms()
        self.last_activity_ms = now  # a write is activity too (Java's Selector: reads and writes)
        self._queued_total += size
        stats = self._stats
        stats.requests += 1
        stats.request_bytes += size
        if size > stats.request_bytes_max:
            stats.request_bytes_max = size
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        req = _InFlight(
            correlation_id,
            api_key,
            version,
            callback,
            now,
            now + timeout,
            self._queued_total,
            expect_response,
            internal,
        )
        if expect_response:
            self._in_flight.append(req)
        else:
            self._unwritten_no_response.append(req)
        if (self._out or self._sock is None or self.state <= TLS_HANDSHAKE
                or self._ssl_context is not None or not _HAS_SENDMSG or len(pieces) > _SENDMSG_MAX_BUFFERS):
            self._out.append(memoryview(b"".join(pieces)))  # queued behind other bytes, or TLS: one copy
            self._flush()
        else:
            self._send_pieces(pieces, size)
        return correlation_id

    def _send_pieces(self, pieces: list[Buffer], size: int) -> None:
        """Write a frame's pieces with one ``sendmsg`` (nothing else queued, plaintext), so the Produce
        body's batch buffers go to the kernel without a user-space copy; what the socket does not take
        is copied and queued, since the caller may reuse those buffers once ``send`` returns."""
        sock = self._sock
        assert sock is not None
        try:
            sent = (sock.sendmsg(pieces) if self._fd < 0 or _SEND_NOWAIT is None or not self._io_mode.keep_gil
                    else _SEND_NOWAIT(self._fd, pieces))
        except _TLS_WOULD_BLOCK:
            sent = 0
        except OSError as exc:
            self._io_failed("write", exc)
            return
        self._written_total += sent
        self._stats.bytes_sent += sent
        if sent < size:
            self._out.append(memoryview(b"".join(pieces))[sent:])
        self._after_write()

    # ------------------------------------------------------------------ I/O events
    def handle_events(self, mask: int, now: float) -> None:
        """Called by the owner's selector loop."""
        if self.state is CONNECTING:
            if mask & (selectors.EVENT_WRITE | selectors.EVENT_READ):
                self._finish_connect(now)
            return
        if self.state is TLS_HANDSHAKE:
            self._do_tls_handshake(now)
            return
        if mask & selectors.EVENT_WRITE:
            self._flush()
        if mask & selectors.EVENT_READ and self.state is not DISCONNECTED:
            self._read(now)

    def _finish_connect(self, now: float) -> None:
        sock = self._sock
        assert sock is not None
        try:
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        except OSError as exc:
            code = exc.errno or errno.ECONNREFUSED
        if code != 0:
            self._close_with(self._connect_error(f"{errno.errorcode.get(code, code)}: {_strerror(code)}"))
            return
        self._on_connected(now)

    def _flush(self) -> None:
        sock = self._sock
        out = self._out
        if sock is None or not out or self.state <= TLS_HANDSHAKE:
            self._update_interest()
            return
        tls = self._ssl_context is not None
        fd = self._fd if self._io_mode.keep_gil else -1
        while out:
            try:
                if fd >= 0 and _SEND_NOWAIT is not None:
                    sent = _SEND_NOWAIT(fd, list(islice(out, _SENDMSG_MAX_BUFFERS)))
                elif tls:
                    if len(out) > 1 and len(out[0]) < _TLS_MERGE_BYTES:
                        _merge_head(out)
                    sent = sock.send(out[0])
                elif _HAS_SENDMSG and len(out) > 1:
                    sent = sock.sendmsg(list(islice(out, _SENDMSG_MAX_BUFFERS)))
                else:
                    sent = sock.send(out[0])
            except _TLS_WOULD_BLOCK:
                break
            except OSError as exc:
                self._io_failed("write", exc)
                return
            if sent <= 0:
                break
            self._written_total += sent
            self._stats.bytes_sent += sent
            while sent > 0:
                head = out[0]
                if sent >= len(head):
                    sent -= len(head)
                    out.popleft()
                else:
                    out[0] = head[sent:]
                    sent = 0
        self._after_write()

    def _after_write(self) -> None:
        """Complete the acks=0 requests now fully written; select for writing while bytes are queued."""
        pending = self._unwritten_no_response
        if pending:
            done_at = self._written_total
            now = self._clock.monotonic_ms()
            while pending and pending[0].end_offset <= done_at:
                req = pending.popleft()
                self._complete(req, None, None, now)
        self._update_interest()

    def _read(self, now: float) -> None:
        sock = self._sock
        protocol = self._protocol
        assert sock is not None and protocol is not None
        tls = isinstance(sock, ssl.SSLSocket)
        fd = self._fd if self._io_mode.keep_gil else -1
        for _ in range(_READS_PER_EVENT):
            try:
                data = (sock.recv(self._recv_size) if fd < 0 or _RECV_NOWAIT is None
                        else _RECV_NOWAIT(fd, self._recv_size))
            except _TLS_WOULD_BLOCK:
                return
            except OSError as exc:
                self._io_failed("read", exc)
                return
            if not data:
                self._on_eof(protocol)
                return
            self.last_activity_ms = now
            got = len(data)
            self._stats.bytes_received += got
            if self._raw_waiters or self._raw_buf:
                data = self._feed_raw(data)
                if self.state is DISCONNECTED or self._protocol is not protocol:
                    return
                if not data:
                    if got < self._recv_size and not (tls and _tls_pending(sock)):
                        return
                    continue
            if (
                not tls
                and self.state is API_VERSIONS
                and not protocol.buffered_bytes()
                and looks_like_tls_alert(data)
            ):
                self._close_with(
                    errors.AuthenticationError(
                        f"node {self.node_id} ({self.host}:{self.port}) answered with a TLS alert: it is a TLS "
                        "listener, but this client does not use TLS; set security.protocol to SSL or SASL_SSL"
                    )
                )
                return
            try:
                responses = protocol.receive_data(data)
            except errors.KafkaError as exc:  # ProtocolError subclasses: the stream is unusable
                log.warning("node %s: bad data from %s:%s: %s", self.node_id, self.host, self.port, exc)
                self._close_with(exc)
                return
            if responses:
                done_ms = self._clock.monotonic_ms()
                for response in responses:
                    if not self._in_flight:
                        self._close_with(
                            errors.CorrelationIdMismatchError(
                                f"node {self.node_id} sent a response (correlation id "
                                f"{response.correlation_id}) with no request outstanding"
                            )
                        )
                        return
                    req = self._in_flight[0]
                    if response.correlation_id != req.correlation_id:
                        self._close_with(
                            errors.CorrelationIdMismatchError(
                                f"node {self.node_id} sent correlation id {response.correlation_id}, "
                                f"expected {req.correlation_id}"
                            )
                        )
                        return
                    self._in_flight.popleft()
                    self._complete(req, response.body, None, done_ms)
                    if self.state is DISCONNECTED or self._protocol is not protocol:
                        return  # a handshake callback closed the connection
            if got < self._recv_size and not (tls and _tls_pending(sock)):
                return

    def _feed_raw(self, data: bytes) -> bytes:
        """Consume raw SASL token frames for the waiting callbacks; returns the bytes after them."""
        buf = self._raw_buf
        buf += data
        while self._raw_waiters and len(buf) >= 4:
            (size,) = _RAW_SIZE.unpack_from(buf, 0)
            if size < 0 or size > self.max_response_size:
                self._close_with(
                    errors.AuthenticationError(
                        f"node {self.node_id} sent a SASL token of {size} bytes during authentication"
                    )
                )
                return b""
            if len(buf) < 4 + size:
                return b""
            token = bytes(buf[4 : 4 + size])
            del buf[: 4 + size]
            callback = self._raw_waiters.popleft()
            try:
                callback(token)
            except Exception as exc:
                log.exception("node %s: SASL token callback failed", self.node_id)
                if self.state is not DISCONNECTED:
                    self._close_with(exc)
                return b""
            if self.state is DISCONNECTED:
                return b""
        if self._raw_waiters:
            return b""
        rest = bytes(buf)
        buf.clear()
        return rest

    def _on_eof(self, protocol: KafkaProtocol) -> None:
        if self._raw_waiters:
            self._close_with(
                errors.AuthenticationError(
                    f"node {self.node_id} ({self.host}:{self.port}) closed the connection during SASL "
                    "authentication; a broker without SaslAuthenticate (SaslHandshake v0) rejects a login "
                    "this way: check sasl.mechanism, sasl.username and sasl.password"
                )
            )
            return
        partial = protocol.buffered_bytes()
        if partial:
            self._disconnect(f"the broker closed the connection mid-response ({partial} bytes in)")
        elif self._in_flight:
            self._disconnect("the broker closed the connection with a response outstanding")
        else:
            self._disconnect("the broker closed the connection")

    def _io_failed(self, op: str, exc: OSError) -> None:
        """A socket error: TLS errors before READY are authentication failures, the rest a lost link.

        A failed write is not the whole story: a peer that refuses us (a TLS 1.3 listener rejecting the
        client certificate after the handshake, a TLS listener answering a plaintext client) sends its
        alert and then closes, often with a reset, so our next write fails (SSLEOFError, EPIPE,
        ECONNRESET) while the alert still waits in the receive buffer. It is read first, and decides the
        error; only when it says nothing is the failure a plain (retriable) disconnect."""
        if (
            isinstance(exc, ssl.SSLError)
            and not isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError))
            and self.state is not READY
        ):
            self._close_with(handshake_error(exc, self.node_id, self.host, self.port))
            return
        if op == "write" and self._sock is not None and self._protocol is not None:
            protocol = self._protocol
            log.debug("node %s: write failed (%s); reading what the peer sent first", self.node_id, exc)
            self._read(self._clock.monotonic_ms())
            if self.state is DISCONNECTED or self._protocol is not protocol:
                return  # the peer's data (an alert, a response, its close) decided it
        self._disconnect(f"{op} failed: {exc}")

    def _complete(
        self, req: _InFlight, body: dict[str, Any] | None, error: Exception | None, now: float
    ) -> None:
        resp = ClientResponse(
            self.node_id, req.api_key, req.version, req.correlation_id, body, error, now - req.send_ms
        )
        if req.internal:
            try:
                req.callback(resp)
            except Exception as exc:
                log.exception("node %s: handshake callback failed", self.node_id)
                if self.state is not DISCONNECTED:
                    self._close_with(exc)
        else:
            self.completions.append((req.callback, resp))

    # ------------------------------------------------------------------ timeouts / closing
    def check_timeouts(self, now: float) -> bool:
        """Close the connection if its setup or any request passed its deadline; True if it did."""
        state = self.state
        if state is DISCONNECTED:
            return False
        if state is not READY and now >= self._setup_deadline_ms:
            hint = ""
            if state is TLS_HANDSHAKE:
                hint = "; the broker never answered the TLS handshake: is it a plaintext listener? (security.protocol)"
            elif self._reauthenticating is not None:
                hint = "; SASL re-authentication got no answer (request.timeout.ms)"
            self._close_with(
                self._connect_error(
                    f"connection setup timed out in state {state.name} "
                    f"after {self._setup_timeout_ms:.0f} ms (socket.connection.setup.timeout.ms){hint}"
                )
            )
            return True
        expired: _InFlight | None = None
        for queue in (self._in_flight, self._unwritten_no_response):
            for req in queue:
                if req.deadline_ms <= now and (expired is None or req.deadline_ms < expired.deadline_ms):
                    expired = req
        if expired is None:
            return False
        waited = now - expired.send_ms
        log.debug(
            "node %s: %s request %s timed out after %.0f ms",
            self.node_id,
            _api_name(expired.api_key),
            expired.correlation_id,
            waited,
        )
        timeout_cls = errors.error_class_for_code(errors.REQUEST_TIMED_OUT)

        def make(req: _InFlight) -> Exception:
            return timeout_cls(
                f"{_api_name(req.api_key)} request (correlation id {req.correlation_id}) to node "
                f"{self.node_id} failed: a request on this connection got no response within "
                f"{expired.deadline_ms - expired.send_ms:.0f} ms (request.timeout.ms); connection closed"
            )

        self._close(timeout_cls(f"request to node {self.node_id} timed out after {waited:.0f} ms"), make)
        return True

    def _disconnect(self, reason: str) -> None:
        network_cls = errors.error_class_for_code(errors.NETWORK_EXCEPTION)
        text = f"connection to node {self.node_id} ({self.host}:{self.port}) lost: {reason}"
        if self.state is not READY:
            if self.state is API_VERSIONS and self._ssl_context is None:
                text += (" (before answering ApiVersions: if this listener uses TLS, set security.protocol "
                         "to SSL or SASL_SSL)")
            self._close_with(errors.KafkaConnectionError(text))
            return

        def make(req: _InFlight) -> Exception:
            return network_cls(
                f"{_api_name(req.api_key)} request (correlation id {req.correlation_id}): {text}"
            )

        self._close(errors.KafkaConnectionError(text), make)

    def release_after_fork(self) -> None:
        """Close this process's copy of the socket (a child after ``fork()``: the parent still uses the
        connection, so no shutdown and no TLS close_notify; ``NetworkClient.release_after_fork``)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()  # the descriptor only (an SSLSocket's close() sends no close_notify)

    def close(self, reason: str = "closed by the client") -> None:
        """Close the socket and fail in-flight requests with NETWORK_EXCEPTION; idempotent."""
        if self.state is DISCONNECTED and self._sock is None:
            return
        network_cls = errors.error_class_for_code(errors.NETWORK_EXCEPTION)
        text = f"connection to node {self.node_id} ({self.host}:{self.port}) {reason}"

        def make(req: _InFlight) -> Exception:
            return network_cls(
                f"{_api_name(req.api_key)} request (correlation id {req.correlation_id}): {text}"
            )

        self._close(None, make)

    def _close_with(self, error: Exception) -> None:
        """Close and fail every in-flight request with ``error`` itself."""
        self._close(error, lambda _req: error)

    def _close(self, error: Exception | None, make_error: Callable[[_InFlight], Exception]) -> None:
        if self._sock is not None:
            if self._events:
                try:
                    self._selector.unregister(self._sock)
                except (KeyError, ValueError, OSError):
                    pass
                self._events = 0
            self._fd = -1
            try:
                self._sock.close()
            except OSError:
                pass
            self._sock = None
        self._out.clear()
        self._raw_waiters.clear()
        self._raw_buf.clear()
        self.reauth_at_ms = None
        self._reauth_step = None
        self._reauthenticating = None
        self._queued_total = self._written_total = 0
        failed = list(self._in_flight) + list(self._unwritten_no_response)
        self._in_flight.clear()
        self._unwritten_no_response.clear()
        self._protocol = None
        if error is not None:
            self.last_error = error
        was = self.state
        self.state = DISCONNECTED
        if was >= API_VERSIONS:
            # an established connection was lost: the next one starts again at the first address the name
            # resolves to (Java's ClusterConnectionStates.disconnected clears the addresses of a connected
            # node); only failed attempts move on to the next one
            self._addr_index = 0
        now = self._clock.monotonic_ms()
        for req in failed:
            self._complete(req, None, make_error(req), now)
        if was is not DISCONNECTED and self._on_state_change is not None:
            self._on_state_change(self, DISCONNECTED, error)

    def close_selector(self) -> None:
        """Release a selector this connection created itself (standalone use)."""
        if self._own_selector:
            self._selector.close()

    # ------------------------------------------------------------------ selector plumbing
    def _register(self, events: int) -> None:
        sock = self._sock
        assert sock is not None
        self._selector.register(sock, events, self)
        self._events = events

    def _update_interest(self) -> None:
        sock = self._sock
        if sock is None:
            return
        if self.state is CONNECTING:
            wanted = selectors.EVENT_WRITE
        elif self.state is TLS_HANDSHAKE:
            wanted = self._tls_wants
        else:
            wanted = selectors.EVENT_READ | (selectors.EVENT_WRITE if self._out else 0)
        if wanted != self._events:
            if self._events:
                self._selector.modify(sock, wanted, self)
            else:
                self._selector.register(sock, wanted, self)
            self._events = wanted

    def _set_state(self, state: ConnectionState, error: Exception | None) -> None:
        self.state = state
        if self._on_state_change is not None:
            self._on_state_change(self, state, error)

    def fileno(self) -> int:
        return self._sock.fileno() if self._sock is not None else -1

    def __repr__(self) -> str:
        return f"BrokerConnection(node={self.node_id}, {self.host}:{self.port}, {self.state.name})"


def _tls_pending(sock: socket.socket) -> int:
    """Decrypted bytes OpenSSL holds that the selector cannot see."""
    return sock.pending() if isinstance(sock, ssl.SSLSocket) else 0


def _merge_head(out: deque[memoryview]) -> None:
    """Join the small buffers at the head of ``out`` into one (one TLS record instead of many)."""
    parts: list[memoryview] = []
    total = 0
    while out and total < _TLS_MERGE_BYTES:
        head = out.popleft()
        parts.append(head)
        total += len(head)
    out.appendleft(memoryview(b"".join(parts)))


def _strerror(code: int) -> str:
    try:
        return os.strerror(code)
    except (ValueError, OverflowError):
        return f"error {code}"
