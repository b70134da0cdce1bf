"""A fault-injecting TCP proxy for one broker (network faults in front of a broker that checks sequences).

How it works: ``FaultProxy`` listens on a loopback port and, for each client connection, opens one to the
target broker; a single selector thread moves bytes both ways. Requests go to the broker at once (so it
appends immediately, like a real broker); responses are held back for ``latency_ms`` (a round-trip time
the client may give up on; when it closes its socket, the held responses are dropped). ``down()`` closes
every connection and the listener (new connects are refused) until ``up()`` listens again on the same
port. ``cut()`` only drops the open connections (``cut_when_busy`` first waits for answers to be in
transit). The broker must advertise the proxy's address in its Metadata (``ProxiedTansu``), so the client
never goes around it.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections import deque

from sparkafka.broker import EmbeddedBroker

__all__ = ["FaultProxy", "ProxiedTansu"]


class _Pair:
    __slots__ = ("client", "held", "produced", "upstream")

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.held: deque[tuple[float, bytes]] = deque()  # (release time, response bytes)
        self.produced = False  # a Produce request went through (the connection is past its handshake)


class FaultProxy:
    """``127.0.0.1:<port>`` -> ``target``, with latency and outages on demand."""

    def __init__(self) -> None:
        self.latency_ms = 0.0
        self.target: tuple[str, int] | None = None
        self._sel = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._pairs: list[_Pair] = []
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

    def _run(self) -> None:
        while not self._stop:
            timeout = 0.05
            with self._lock:
                now = time.monotonic()
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
            self._pairs.remove(pair)
            self._close_pair(pair)
            return
        if sock is pair.client:
            if data[4:6] == b"\x00\x00":  # a request header starting in this chunk names api key 0
                pair.produced = True
            self._send_all(pair, pair.upstream, data)
        else:
            pair.held.append((time.monotonic() + self.latency_ms / 1000.0, data))
            self._release(pair, time.monotonic())

    def _release(self, pair: _Pair, now: float) -> None:
        while pair.held and pair.held[0][0] <= now and pair in self._pairs:
            _, data = pair.held.popleft()
            self._send_all(pair, pair.client, data)

    def _send_all(self, pair: _Pair, sock: socket.socket, data: bytes) -> None:
        try:
            sock.setblocking(True)
            sock.settimeout(2)
            sock.sendall(data)
            sock.setblocking(False)
        except OSError:
            if pair in self._pairs:
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
