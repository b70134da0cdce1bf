"""A tiny scriptable Kafka server on loopback, for failure tests of the network layer.

How it works: a listening socket and one thread per accepted connection (plain blocking sockets). Each
request frame is parsed (request header v1/v2 + body via the protocol schemas) and handed to
``handler(conn, request)``; the default handler answers ApiVersions with ``api_versions`` and Metadata
with one broker (this server) and ``topics``. Handlers can answer normally (``conn.respond``), write raw
bytes, close the socket, or stay silent. Every request seen is recorded in ``requests``.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkafka.protocol.messages import API_BY_KEY, CLIENT_VERSIONS, ApiKey

DEFAULT_API_VERSIONS: dict[int, tuple[int, int]] = {int(k): v for k, v in CLIENT_VERSIONS.items()}


@dataclass
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: dict[str, Any] | None


@dataclass
class FakeConn:
    sock: socket.socket
    server: FakeBroker
    closed: bool = False

    def respond(
        self,
        request: Request,
        body: dict[str, Any],
        *,
        version: int | None = None,
        correlation_id: int | None = None,
    ) -> None:
        version = request.api_version if version is None else version
        spec = API_BY_KEY[request.api_key]
        payload = spec.encode_response(version, body)
        cid = request.correlation_id if correlation_id is None else correlation_id
        header = struct.pack(">i", cid)
        if spec.is_flexible(version) and request.api_key != ApiKey.API_VERSIONS:
            header += b"\x00"
        self.send_frame(header + payload)

    def send_frame(self, data: bytes) -> None:
        self.send_raw(struct.pack(">i", len(data)) + data)

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def close(self) -> None:
        self.closed = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


Handler = Callable[[FakeConn, Request], None]


@dataclass
class FakeBroker:
    handler: Handler | None = None
    api_versions: dict[int, tuple[int, int]] = field(default_factory=lambda: dict(DEFAULT_API_VERSIONS))
    topics: dict[str, int] = field(default_factory=dict)
    node_id: int = 0
    requests: list[Request] = field(default_factory=list)
    connections: int = 0

    def __post_init__(self) -> None:
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(16)
        self.host, self.port = self._listener.getsockname()
        self._conns: list[FakeConn] = []
        self._stopped = False
        self.eof = threading.Event()  # set when a client closes its side
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept_loop(self) -> None:
        while not self._stopped:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            self.connections += 1
            conn = FakeConn(sock, self)
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _recv_exact(self, sock: socket.socket, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            try:
                chunk = sock.recv(n - len(buf))
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def _serve(self, conn: FakeConn) -> None:
        while not conn.closed:
            head = self._recv_exact(conn.sock, 4)
            if head is None:
                self.eof.set()
                return
            (size,) = struct.unpack(">i", head)
            data = self._recv_exact(conn.sock, size)
            if data is None:
                self.eof.set()
                return
            request = self._parse(data)
            self.requests.append(request)
            try:
                (self.handler or self.default_handler)(conn, request)
            except OSError:
                return

    def _parse(self, data: bytes) -> Request:
        api_key, version, cid, cid_len = struct.unpack_from(">hhih", data, 0)
        pos = 10
        client_id = None
        if cid_len >= 0:
            client_id = data[pos : pos + cid_len].decode()
            pos += cid_len
        spec = API_BY_KEY.get(api_key)
        body = None
        if spec is not None:
            if spec.is_flexible(version):
                pos += 1  # empty tagged-field section of the request header
            try:
                body = spec.decode_request(version, data[pos:])
            except Exception:
                body = None
        return Request(api_key, version, cid, client_id, body)

    # ------------------------------------------------------------------ default behaviour
    def api_versions_body(self) -> dict[str, Any]:
        return {
            "error_code": 0,
            "api_keys": [
                {"api_key": k, "min_version": lo, "max_version": hi}
                for k, (lo, hi) in sorted(self.api_versions.items())
            ],
            "throttle_time_ms": 0,
        }

    def metadata_body(self) -> dict[str, Any]:
        return {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": self.node_id, "host": self.host, "port": self.port, "rack": None}],
            "cluster_id": "fake-cluster",
            "controller_id": self.node_id,
            "topics": [
                {
                    "error_code": 0,
                    "name": name,
                    "topic_id": bytes(16),
                    "is_internal": False,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition_index": p,
                            "leader_id": self.node_id,
                            "leader_epoch": 0,
                            "replica_nodes": [self.node_id],
                            "isr_nodes": [self.node_id],
                            "offline_replicas": [],
                        }
                        for p in range(count)
                    ],
                }
                for name, count in self.topics.items()
            ],
        }

    def default_handler(self, conn: FakeConn, request: Request) -> None:
        if request.api_key == ApiKey.API_VERSIONS:
            conn.respond(request, self.api_versions_body())
        elif request.api_key == ApiKey.METADATA:
            conn.respond(request, self.metadata_body())
        # anything else: silence

    def count(self, api_key: int) -> int:
        return sum(1 for r in self.requests if r.api_key == api_key)

    def close(self) -> None:
        self._stopped = True
        self._listener.close()
        for conn in self._conns:
            if not conn.closed:
                conn.close()


def free_port() -> int:
    """A loopback port with nothing listening (connections are refused)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()
    return port
