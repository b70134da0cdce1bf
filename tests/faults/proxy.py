"""A fault-injecting TCP proxy for one broker (network faults in front of a broker that checks sequences).

How it works: ``FaultProxy`` listens on a loopback port and, for each client connection, opens one to the
target broker; a single selector thread moves bytes both ways. Requests go to the broker at once (so it
appends immediately, like a real broker); responses are held back for ``latency_ms`` (a round-trip time
the client may give up on; when it closes its socket, the held responses are dropped). ``down()`` closes
every connection and the listener (new connects are refused) until ``up()`` listens again on the same
port. ``cut()`` only drops the open connections (``cut_when_busy`` first waits for answers to be in
transit). The broker must advertise the proxy's address in its Metadata (``ProxiedTansu``), so the client
never goes around it.

The proxy follows the Kafka framing (4-byte size prefix) both ways: it knows the api key of every request
and which requests are still waiting for their answer (each request is answered in order: the scenarios
use acks=all). ``slow_window(latency_ms, seconds)`` arms a stretch of latency that starts with the next
Produce request forwarded, so a Produce request is on the wire when the answers slow down. (Latency
switched on at an arbitrary moment may find the client (re)connecting: when ``latency_ms`` exceeds the
client's request.timeout.ms its ApiVersions request times out too, and no Produce request reaches the wire
for as long as the latency lasts.) A window counts the Produce requests forwarded during it whose answer
the client never took because it closed the connection first: the client gave up on them.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections import deque

from sparkafka.broker import EmbeddedBroker

__all__ = ["FaultProxy", "ProxiedTansu", "SlowWindow"]

_PRODUCE = 0  # api key


class SlowWindow:
    """``latency_ms`` on every answer for ``seconds``, from the first Produce request forwarded after it
    was armed (and after any earlier window ended). Counters are written by the proxy thread."""

    def __init__(self, latency_ms: float, seconds: float) -> None:
        self.latency_ms = latency_ms
        self.seconds = seconds
        self.started_at: float | None = None  # time.monotonic()
        self.ended = threading.Event()
        self.produce_forwarded = 0  # Produce requests forwarded while the window was open
        self.produce_abandoned = 0  # ... whose answer the client never took: it closed the connection

    def wait(self, timeout: float) -> bool:
        """Wait until the window has ended; False if it did not within ``timeout`` seconds."""
        return self.ended.wait(timeout)

    def __repr__(self) -> str:
        return (f"SlowWindow({self.latency_ms:.0f} ms for {self.seconds} s, started={self.started_at is not None}, "
                f"ended={self.ended.is_set()}, produce forwarded={self.produce_forwarded}, "
                f"abandoned={self.produce_abandoned})")


class _Frames:
    """Follows the size-prefixed frames of one direction of a Kafka connection."""

    __slots__ = ("_head", "_head_len", "_left")

    def __init__(self, head_len: int) -> None:
        self._head_len = head_len  # bytes after the size prefix to report for each frame
        self._head = bytearray()
        self._left = 0  # bytes of the current frame not seen yet

    def feed(self, data: bytes, heads: list[bytes]) -> int:
        """Consume ``data``: append the head of every frame whose head is complete in it to ``heads``;
        return how many frames ended in it."""
        ended = 0
        i, n = 0, len(data)
        prefix = 4 + self._head_len
        while i < n:
            if self._left:
                step = min(self._left, n - i)
                self._left -= step
                i += step
                if not self._left:
                    ended += 1
                continue
            take = data[i:i + prefix - len(self._head)]
            self._head += take
            i += len(take)
            if len(self._head) < prefix:
                break
            heads.append(bytes(self._head[4:]))
            self._left = int.from_bytes(self._head[:4], "big") - self._head_len
            self._head.clear()
            if self._left <= 0:
                self._left = 0
                ended += 1
        return ended


class _Pair:
    __slots__ = ("answers", "client", "held", "produced", "requests", "unanswered", "upstream")

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.held: deque[tuple[float, bytes]] = deque()  # (release time, response bytes)
        self.produced = False  # a Produce request went through (the connection is past its handshake)
        self.requests = _Frames(2)  # client -> broker: the head is the api key
        self.answers = _Frames(0)  # broker -> client, as released to the client
        # one entry per forwarded request still waiting for its answer: the window it was sent in, if a
        # Produce request sent while a window was open
        self.unanswered: deque[SlowWindow | None] = deque()


class FaultProxy:
    """``127.0.0.1:<port>`` -> ``target``, with latency and outages on demand."""

    def __init__(self) -> None:
        self.latency_ms = 0.0
        self.target: tuple[str, int] | None = None
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
        self._armed: deque[SlowWindow] = deque()
        self._window: SlowWindow | None = None  # the open one
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = socket.socketpair()
        self._sel.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._stop = False
        self.port = self._listen(0)
        self._thread = threading.Thread(target=self._run, name="fault-proxy", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    # -------------------------------------------------------------- control (any thread)
    def set_latency(self, ms: float) -> None:
        self.latency_ms = ms
        self._wake()

    def slow_window(self, latency_ms: float, seconds: float) -> SlowWindow:
        """Arm a window of ``latency_ms`` on every answer lasting ``seconds``, opened by the next Produce
        request forwarded once earlier windows have ended (see the module docstring)."""
        window = SlowWindow(latency_ms, seconds)
        with self._lock:
            self._armed.append(window)
        return window

    def down(self) -> None:
        """Drop every connection and refuse new ones."""
        with self._lock:
            if self._listener is not None:
                self._sel.unregister(self._listener)
                self._listener.close()
                self._listener = None
            self._close_all()

    def up(self) -> None:
        with self._lock:
            if self._listener is None:
                self._listen(self.port)
        self._wake()

    def cut(self) -> None:
        with self._lock:
            self._close_all()

    def cut_when_busy(self, timeout: float = 2.0) -> bool:
        """Wait until a connection that carries Produce requests has an answer in transit (needs
        ``latency_ms`` > 0), then drop every connection, so the cut loses answers to requests the broker
        has processed. False if that did not happen within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if any(pair.held and pair.produced for pair in self._pairs):
                    self._close_all()
                    return True
            time.sleep(0.002)
        return False

    def close(self) -> None:
        self._stop = True
        self._wake()
        self._thread.join(5)
        self.down()
        with self._lock:
            self._end_window()
            for window in self._armed:
                window.ended.set()  # never started (started_at stays None)
            self._armed.clear()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()

    # -------------------------------------------------------------- internals
    def _listen(self, port: int) -> int:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        deadline = time.monotonic() + 5
        while True:
            try:
                sock.bind(("127.0.0.1", port))
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        sock.listen(64)
        sock.setblocking(False)
        self._listener = sock
        self._sel.register(sock, selectors.EVENT_READ, "accept")
        bound: int = sock.getsockname()[1]
        return bound

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    def _close_all(self) -> None:
        for pair in self._pairs:
            self._close_pair(pair)
        self._pairs.clear()

    def _close_pair(self, pair: _Pair) -> None:
        for sock in (pair.client, pair.upstream):
            with contextlib.suppress(KeyError, ValueError, OSError):
                self._sel.unregister(sock)
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        assert self._listener is not None
        try:
            client, _ = self._listener.accept()
        except OSError:
            return
        if self.target is None:
            client.close()
            return
        try:
            upstream = socket.create_connection(self.target, timeout=2)
        except OSError:
            client.close()
            return
        for sock in (client, upstream):
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        pair = _Pair(client, upstream)
        self._pairs.append(pair)
        self._sel.register(client, selectors.EVENT_READ, pair)
        self._sel.register(upstream, selectors.EVENT_READ, pair)

    def _latency_s(self) -> float:
        window = self._window
        return (window.latency_ms if window is not None else self.latency_ms) / 1000.0

    def _end_window(self) -> None:
        if self._window is not None:
            self._window.ended.set()
            self._window = None

    def _on_requests(self, pair: _Pair, api_keys: list[bytes]) -> None:
        """Requests starting in a chunk from the client, before the chunk is forwarded."""
        for head in api_keys:
            window: SlowWindow | None = None
            if int.from_bytes(head, "big", signed=True) == _PRODUCE:
                pair.produced = True
                if self._window is None and self._armed:
                    self._window = self._armed.popleft()
                    self._window.started_at = time.monotonic()
                window = self._window
                if window is not None:
                    window.produce_forwarded += 1
            pair.unanswered.append(window)

    def _run(self) -> None:
        while not self._stop:
            timeout = 0.05
            with self._lock:
                now = time.monotonic()
                window = self._window
                if window is not None and window.started_at is not None:
                    ends = window.started_at + window.seconds
                    if now >= ends:
                        self._end_window()
                    else:
                        timeout = min(timeout, ends - now)
                for pair in list(self._pairs):
                    self._release(pair, now)
                    if pair.held:
                        timeout = min(timeout, max(0.0, pair.held[0][0] - now))
            events = self._sel.select(timeout)
            with self._lock:
                for key, _mask in events:
                    if key.data == "wake":
                        with contextlib.suppress(OSError):
                            self._wake_r.recv(4096)
                    elif key.data == "accept":
                        if self._listener is not None:
                            self._accept()
                    else:
                        self._pump(key.data, key.fileobj)  # type: ignore[arg-type]

    def _pump(self, pair: _Pair, sock: socket.socket) -> None:
        if pair not in self._pairs:
            return
        try:
            data = sock.recv(1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._drop(pair, client_left=sock is pair.client)
            return
        if sock is pair.client:
            heads: list[bytes] = []
            pair.requests.feed(data, heads)
            if heads:
                self._on_requests(pair, heads)
            self._send_all(pair, pair.upstream, data)
        else:
            pair.held.append((time.monotonic() + self._latency_s(), data))
            self._release(pair, time.monotonic())

    def _release(self, pair: _Pair, now: float) -> None:
        while pair.held and pair.held[0][0] <= now and pair in self._pairs:
            _, data = pair.held.popleft()
            if self._send_all(pair, pair.client, data):
                for _ in range(pair.answers.feed(data, [])):
                    if pair.unanswered:
                        pair.unanswered.popleft()

    def _send_all(self, pair: _Pair, sock: socket.socket, data: bytes) -> bool:
        try:
            sock.setblocking(True)
            sock.settimeout(2)
            sock.sendall(data)
            sock.setblocking(False)
        except OSError:
            self._drop(pair, client_left=sock is pair.client)
            return False
        return True

    def _drop(self, pair: _Pair, client_left: bool) -> None:
        """Close a pair the client or the broker left (not ``cut``/``down``)."""
        if pair not in self._pairs:
            return
        if client_left:  # the client gave up on the requests still waiting for their answer
            for window in pair.unanswered:
                if window is not None:
                    window.produce_abandoned += 1
        self._pairs.remove(pair)
        self._close_pair(pair)


class ProxiedTansu(EmbeddedBroker):
    """An embedded Tansu that advertises ``advertised`` (the proxy) instead of its own address."""

    def __init__(self, advertised: str) -> None:
        super().__init__()
        self._advertised = advertised

    def _command(self, binary: str, port: int) -> list[str]:
        command = super()._command(binary, port)
        index = command.index("--advertised-listener-url")
        command[index + 1] = f"tcp://{self._advertised}"
        return command
