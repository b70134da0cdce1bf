"""A TLS + SASL terminating gateway in front of a plaintext broker (Tansu), for the security tests.

Neither Tansu nor librdkafka's mock cluster terminates TLS or checks SASL credentials, so the security
tests put this gateway on loopback between the client and a Tansu broker.

How it works: ``Gateway.start()`` listens on ``host:0`` and serves each accepted connection in its own
thread with blocking sockets:

1. TLS (when ``tls`` is a server ``ssl.SSLContext``): a first byte that is not a TLS handshake record is
   answered with a TLS alert record and the connection is closed, as a JVM (Kafka) TLS listener does for a
   plaintext client; otherwise the handshake runs, and a failed one (untrusted or missing client
   certificate under mutual TLS) is closed gracefully (write side shut, input drained) so the client
   reads OpenSSL's alert instead of a reset; with ``tls_failure_reset`` it is reset (``SO_LINGER`` 0) right
   after the alert instead, as some TLS endpoints do, so a client writing before it reads sees the reset
   first while the alert waits unread in its receive buffer.
2. SASL (when ``users`` or ``oauth_tokens`` are given), like a Kafka SASL listener: ApiVersions is answered
   by the gateway itself (the upstream's API ranges plus SaslHandshake 0-1 and SaslAuthenticate 0-2; with
   ``legacy_sasl`` SaslAuthenticate is left out and SaslHandshake is v0 only, so clients must send raw
   length-framed tokens); SaslHandshake picks the mechanism (UNSUPPORTED_SASL_MECHANISM otherwise);
   SaslAuthenticate runs the server side of PLAIN, SCRAM-SHA-256/512 (``scramp``) or OAUTHBEARER and
   answers SASL_AUTHENTICATION_FAILED and closes on bad credentials. Any other request before
   authentication closes the connection. ``session_lifetime_ms`` is reported in SaslAuthenticate v1+ and
   enforced: a non-SASL request after the session expired closes the connection (KIP-368), while a
   SaslHandshake + SaslAuthenticate pair renews it.
3. Relay: every other request is written to a private upstream connection and its response read back
   (one request at a time, so ordering is trivially preserved; Produce with acks=0 gets no response).
   Metadata and FindCoordinator responses are decoded with ``sparkafka.protocol``, their broker
   host/port rewritten to the gateway's address (the upstream advertises its own), and re-encoded. The
   upstream is assumed to be a single broker.

``stats`` counts connections, TLS failures, successful (re-)authentications, rejections and expired
sessions so tests can assert on the server's view. ``make_certificates`` writes a throwaway PKI (CA,
server certificates for localhost/127.0.0.1 and for a wrong host name, an encrypted client key, and a
second CA that signs nothing the gateway trusts) with the ``cryptography`` package.
"""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
import struct
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sparkafka.broker.tansu import probe_api_versions
from sparkafka.protocol.framing import decode_request_header, decode_response_header, encode_response_header
from sparkafka.protocol.messages import API_BY_KEY, ApiKey
from sparkafka.protocol.primitives import Reader

__all__ = ["Certificates", "Gateway", "GatewayStats", "make_certificates"]

_SIZE = struct.Struct(">i")
_HEAD = struct.Struct(">hhi")
_MAX_FRAME = 64 * 1024 * 1024
# A fatal "unexpected_message" alert in a TLS 1.2 record: what a JVM TLS listener sends to a plaintext peer.
TLS_ALERT_RECORD = b"\x15\x03\x03\x00\x02\x02\x0a"
_TLS_HANDSHAKE_RECORD = 0x16
_UNSUPPORTED_VERSION = 35
_UNSUPPORTED_SASL_MECHANISM = 33
_ILLEGAL_SASL_STATE = 34
_SASL_AUTHENTICATION_FAILED = 58
_API_VERSIONS_MAX = API_BY_KEY[ApiKey.API_VERSIONS].max_version
DEFAULT_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


# ---------------------------------------------------------------------------------------------- certificates


@dataclass(frozen=True)
class Certificates:
    """PEM files of a throwaway PKI (see ``make_certificates``)."""

    directory: Path
    ca: Path
    server_cert: Path
    server_key: Path
    wrong_host_cert: Path
    wrong_host_key: Path
    client_cert: Path
    client_key: Path
    """Encrypted with ``client_key_password``."""
    client_key_password: str
    rogue_ca: Path
    """A CA that signed nothing the gateway presents (a client trusting only it must fail)."""
    rogue_client_cert: Path
    rogue_client_key: Path
    """A client certificate signed by the rogue CA (the gateway must reject it under mutual TLS)."""

    def server_context(self, *, wrong_host: bool = False, require_client_cert: bool = False) -> ssl.SSLContext:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        if wrong_host:
            ctx.load_cert_chain(self.wrong_host_cert, self.wrong_host_key)
        else:
            ctx.load_cert_chain(self.server_cert, self.server_key)
        if require_client_cert:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=str(self.ca))
        return ctx


def make_certificates(directory: Path, client_key_password: str = "Key-Pa55word-for-tests") -> Certificates:
    """Write a CA, server/client certificates and keys (EC P-256, valid for a day) into ``directory``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def new_key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def name(common_name: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])

    def usage(*, ca: bool) -> x509.KeyUsage:
        return x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=not ca, key_cert_sign=ca, crl_sign=ca,
            encipher_only=False, decipher_only=False,
        )

    def make_ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = new_key()
        cert = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(name(common_name))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(usage(ca=True), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return key, cert

    def make_leaf(
        common_name: str,
        issuer: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
        purpose: x509.ObjectIdentifier,
        sans: list[x509.GeneralName],
    ) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
        key = new_key()
        issuer_key, issuer_cert = issuer
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(common_name))
            .issuer_name(issuer_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(usage(ca=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()), critical=False
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        return key, builder.sign(issuer_key, hashes.SHA256())

    def write_cert(path: Path, cert: x509.Certificate) -> Path:
        path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return path

    def write_key(path: Path, key: ec.EllipticCurvePrivateKey, password: str | None = None) -> Path:
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(password.encode())
            if password else serialization.NoEncryption()
        )
        path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption))
        path.chmod(0o600)
        return path

    ca = make_ca("sparkafka test CA")
    rogue = make_ca("rogue CA")
    server_names: list[x509.GeneralName] = [
        x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))
    ]
    server = make_leaf("localhost", ca, ExtendedKeyUsageOID.SERVER_AUTH, server_names)
    wrong = make_leaf("wrong.example", ca, ExtendedKeyUsageOID.SERVER_AUTH, [x509.DNSName("wrong.example")])
    client = make_leaf("sparkafka-client", ca, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    rogue_client = make_leaf("rogue-client", rogue, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    d = directory
    return Certificates(
        directory=d,
        ca=write_cert(d / "ca.pem", ca[1]),
        server_cert=write_cert(d / "server.pem", server[1]),
        server_key=write_key(d / "server.key", server[0]),
        wrong_host_cert=write_cert(d / "wrong-host.pem", wrong[1]),
        wrong_host_key=write_key(d / "wrong-host.key", wrong[0]),
        client_cert=write_cert(d / "client.pem", client[1]),
        client_key=write_key(d / "client.key", client[0], client_key_password),
        client_key_password=client_key_password,
        rogue_ca=write_cert(d / "rogue-ca.pem", rogue[1]),
        rogue_client_cert=write_cert(d / "rogue-client.pem", rogue_client[1]),
        rogue_client_key=write_key(d / "rogue-client.key", rogue_client[0]),
    )


# ---------------------------------------------------------------------------------------------- SASL servers


class _Rejected(Exception):
    """Credentials refused; the message is what the broker tells the client."""


class _PlainServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self.user: str | None = None

    def step(self, data: bytes) -> tuple[bytes, bool]:
        parts = data.split(b"\x00")
        if len(parts) != 3:
            raise _Rejected("Invalid SASL/PLAIN request: expected 3 tokens")
        user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
        if user not in self._users or self._users[user] != password:
            raise _Rejected("Authentication failed: Invalid username or password")
        self.user = user
        return b"", True


class _ScramServer:
    def __init__(self, mechanism: str, credentials: Mapping[str, tuple[Any, ...]]) -> None:
        import scramp

        self._mechanism = mechanism
        self._credentials = credentials
        self._server = scramp.ScramMechanism(mechanism).make_server(self._lookup)
        self._stage = 0
        self.user: str | None = None

    def _lookup(self, username: str) -> tuple[Any, ...] | None:
        self.user = username
        return self._credentials.get(username)

    def step(self, data: bytes) -> tuple[bytes, bool]:
        import scramp

        failure = (f"Authentication failed during authentication due to invalid credentials with SASL "
                   f"mechanism {self._mechanism}")
        try:
            if self._stage == 0:
                self._stage = 1
                self._server.set_client_first(data.decode())
                return str(self._server.get_server_first()).encode(), False
            self._stage = 2
            self._server.set_client_final(data.decode())
            return str(self._server.get_server_final()).encode(), True
        except (scramp.ScramException, UnicodeDecodeError):
            raise _Rejected(failure) from None


class _OAuthServer:
    def __init__(self, tokens: Collection[str]) -> None:
        self._tokens = tokens
        self._stage = 0
        self.user: str | None = None

    def step(self, data: bytes) -> tuple[bytes, bool]:
        if self._stage == 1:
            raise _Rejected("Authentication failed: invalid_token")
        text = data.decode("utf-8", "replace")
        token = ""
        for part in text.split("\x01"):
            if part.startswith("auth=Bearer "):
                token = part[len("auth=Bearer "):]
        if not text.startswith("n,") or token not in self._tokens:
            self._stage = 1
            return b'{"status":"invalid_token"}', False
        self.user = "oauth"
        return b"", True


# ---------------------------------------------------------------------------------------------- the gateway


@dataclass
class GatewayStats:
    connections: int = 0
    tls_failures: int = 0
    authentications: int = 0
    reauthentications: int = 0
    auth_failures: int = 0
    unauthenticated_requests: int = 0
    expired_sessions: int = 0
    relayed: int = 0
    handshake_versions: list[int] = field(default_factory=list)
    authenticate_versions: list[int] = field(default_factory=list)


class _Session:
    def __init__(self) -> None:
        self.mechanism: str | None = None
        self.server: _PlainServer | _ScramServer | _OAuthServer | None = None
        self.authenticated = False
        self.expires_at: float | None = None
        self.upstream: socket.socket | None = None


class Gateway:
    """TLS/SASL gateway on ``host`` in front of the broker at ``upstream`` (see the module docstring)."""

    def __init__(
        self,
        upstream: str | tuple[str, int],
        *,
        host: str = "127.0.0.1",
        tls: ssl.SSLContext | None = None,
        users: Mapping[str, str] | None = None,
        mechanisms: Collection[str] = DEFAULT_MECHANISMS,
        oauth_tokens: Collection[str] = (),
        legacy_sasl: bool = False,
        session_lifetime_ms: int = 0,
        api_versions: Mapping[int, tuple[int, int]] | None = None,
        tls_failure_reset: bool = False,
    ) -> None:
        if isinstance(upstream, str):
            up_host, _, up_port = upstream.rpartition(":")
            upstream = (up_host.strip("[]"), int(up_port))
        self.upstream = upstream
        self.host = host
        self.port = 0
        self._tls = tls
        self._tls_failure_reset = tls_failure_reset
        self._users = dict(users or {})
        self._oauth_tokens = frozenset(oauth_tokens)
        self.sasl = users is not None or bool(oauth_tokens)
        self.mechanisms = tuple(mechanisms) + (("OAUTHBEARER",) if oauth_tokens else ())
        self.legacy_sasl = legacy_sasl
        self.session_lifetime_ms = session_lifetime_ms
        self._api_versions = dict(api_versions) if api_versions is not None else None
        self._scram: dict[str, dict[str, tuple[Any, ...]]] = {}
        self.stats = GatewayStats()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []

    # ------------------------------------------------------------------ lifecycle
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self) -> Gateway:
        if self.sasl:
            self._prepare_sasl()
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((self.host, 0))
        listener.listen(64)
        listener.settimeout(0.2)
        self.port = listener.getsockname()[1]
        self._listener = listener
        thread = threading.Thread(target=self._accept_loop, name=f"gateway-{self.port}", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stopped.set()
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.close()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            _hard_close(sock)
        for thread in list(self._threads):
            thread.join(timeout=2.0)

    def set_password(self, user: str, password: str) -> None:
        """Change (or add) a user's password for every later login (e.g. to revoke a client's access)."""
        with self._lock:
            self._users[user] = password
            for mechanism, table in self._scram.items():
                import scramp

                table[user] = tuple(
                    scramp.ScramMechanism(mechanism).make_auth_info(password, iteration_count=4096)
                )

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _prepare_sasl(self) -> None:
        if self._api_versions is None:
            self._api_versions = probe_api_versions(self.upstream[0], self.upstream[1], timeout_s=5.0)
        for mechanism in self.mechanisms:
            if mechanism.startswith("SCRAM-"):
                import scramp

                m = scramp.ScramMechanism(mechanism)
                self._scram[mechanism] = {
                    user: tuple(m.make_auth_info(password, iteration_count=4096))
                    for user, password in self._users.items()
                }

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def _untrack(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def _count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self.stats, name, getattr(self.stats, name) + amount)

    # ------------------------------------------------------------------ accepting
    def _accept_loop(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopped.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._count("connections")
            self._track(sock)
            thread = threading.Thread(target=self._handle, args=(sock,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _handle(self, raw: socket.socket) -> None:
        session = _Session()
        sock: socket.socket | None
        sock = raw  # a separate assignment, so mypy narrows it to socket
        try:
            raw.settimeout(30.0)
            if self._tls is not None:
                sock = self._accept_tls(raw)
                if sock is None:
                    return
                self._track(sock)
            self._serve(sock, session)
        except (OSError, ValueError, struct.error):
            pass
        finally:
            if session.upstream is not None:
                self._untrack(session.upstream)
                _hard_close(session.upstream)
            for s in {raw, sock}:
                if s is not None:
                    self._untrack(s)
                    with contextlib.suppress(OSError):
                        s.close()

    def _accept_tls(self, raw: socket.socket) -> ssl.SSLSocket | None:
        assert self._tls is not None
        first = raw.recv(1, socket.MSG_PEEK)
        if not first:
            return None
        if first[0] != _TLS_HANDSHAKE_RECORD:
            self._count("tls_failures")
            raw.sendall(TLS_ALERT_RECORD)
            _linger_close(raw)
            return None
        tls = self._tls.wrap_socket(raw, server_side=True, do_handshake_on_connect=False)
        self._track(tls)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError):
            self._count("tls_failures")
            if self._tls_failure_reset:
                _reset_close(tls)
            else:
                _linger_close(tls)
            return None
        return tls

    # ------------------------------------------------------------------ serving
    def _serve(self, sock: socket.socket, session: _Session) -> None:
        while not self._stopped.is_set():
            frame = _read_frame(sock)
            if frame is None:
                return
            api_key, version, correlation_id = _HEAD.unpack_from(frame, 0)
            if self.sasl:
                if api_key == ApiKey.API_VERSIONS:
                    self._answer_api_versions(sock, version, correlation_id)
                    continue
                if api_key == ApiKey.SASL_HANDSHAKE:
                    if not self._sasl_handshake(sock, session, frame, version, correlation_id):
                        return
                    continue
                if api_key == ApiKey.SASL_AUTHENTICATE:
                    if not self._sasl_authenticate(sock, session, frame, version, correlation_id):
                        return
                    continue
                if not session.authenticated:
                    self._count("unauthenticated_requests")
                    return
                if session.expires_at is not None and _now_ms() > session.expires_at:
                    self._count("expired_sessions")
                    return
            if not self._relay(sock, session, frame, api_key, version):
                return

    def _respond(self, sock: socket.socket, api_key: int, version: int, correlation_id: int,
                 body: dict[str, Any]) -> None:
        payload = encode_response_header(api_key, version, correlation_id) + \
            API_BY_KEY[api_key].encode_response(version, body)
        sock.sendall(_SIZE.pack(len(payload)) + payload)

    def _answer_api_versions(self, sock: socket.socket, version: int, correlation_id: int) -> None:
        table = dict(self._api_versions or {})
        if self.legacy_sasl:
            table.pop(int(ApiKey.SASL_AUTHENTICATE), None)
            table[int(ApiKey.SASL_HANDSHAKE)] = (0, 0)
        else:
            table[int(ApiKey.SASL_HANDSHAKE)] = (0, 1)
            table[int(ApiKey.SASL_AUTHENTICATE)] = (0, 2)
        keys = [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(table.items())]
        if version > _API_VERSIONS_MAX:
            self._respond(sock, ApiKey.API_VERSIONS, 0, correlation_id,
                          {"error_code": _UNSUPPORTED_VERSION, "api_keys": keys})
            return
        self._respond(sock, ApiKey.API_VERSIONS, version, correlation_id,
                      {"error_code": 0, "api_keys": keys, "throttle_time_ms": 0})

    def _decode_request(self, frame: bytes, api_key: int, version: int) -> dict[str, Any]:
        _, offset = decode_request_header(frame)
        return API_BY_KEY[api_key].decode_request(version, memoryview(frame)[offset:])

    def _sasl_handshake(self, sock: socket.socket, session: _Session, frame: bytes, version: int,
                        correlation_id: int) -> bool:
        mechanism = str(self._decode_request(frame, ApiKey.SASL_HANDSHAKE, version)["mechanism"])
        with self._lock:
            self.stats.handshake_versions.append(version)
        if mechanism not in self.mechanisms:
            self._respond(sock, ApiKey.SASL_HANDSHAKE, version, correlation_id,
                          {"error_code": _UNSUPPORTED_SASL_MECHANISM, "mechanisms": list(self.mechanisms)})
            self._count("auth_failures")
            return False
        self._respond(sock, ApiKey.SASL_HANDSHAKE, version, correlation_id,
                      {"error_code": 0, "mechanisms": list(self.mechanisms)})
        session.mechanism = mechanism
        session.server = self._new_server(mechanism)
        if version == 0:
            return self._legacy_exchange(sock, session)
        return True

    def _new_server(self, mechanism: str) -> _PlainServer | _ScramServer | _OAuthServer:
        if mechanism == "PLAIN":
            return _PlainServer(self._users)
        if mechanism == "OAUTHBEARER":
            return _OAuthServer(self._oauth_tokens)
        return _ScramServer(mechanism, self._scram[mechanism])

    def _authenticated(self, session: _Session, *, lifetime: bool) -> None:
        self._count("reauthentications" if session.authenticated else "authentications")
        session.authenticated = True
        session.server = None
        if lifetime and self.session_lifetime_ms > 0:
            session.expires_at = _now_ms() + self.session_lifetime_ms

    def _sasl_authenticate(self, sock: socket.socket, session: _Session, frame: bytes, version: int,
                           correlation_id: int) -> bool:
        token = bytes(self._decode_request(frame, ApiKey.SASL_AUTHENTICATE, version)["auth_bytes"])
        with self._lock:
            self.stats.authenticate_versions.append(version)
        server = session.server
        if server is None:
            self._respond(sock, ApiKey.SASL_AUTHENTICATE, version, correlation_id,
                          {"error_code": _ILLEGAL_SASL_STATE, "error_message": "SaslHandshake must come first",
                           "auth_bytes": b"", "session_lifetime_ms": 0})
            return False
        try:
            reply, done = server.step(token)
        except _Rejected as exc:
            self._count("auth_failures")
            self._respond(sock, ApiKey.SASL_AUTHENTICATE, version, correlation_id,
                          {"error_code": _SASL_AUTHENTICATION_FAILED, "error_message": str(exc),
                           "auth_bytes": b"", "session_lifetime_ms": 0})
            return False
        lifetime = self.session_lifetime_ms if done and version >= 1 else 0
        if done:
            self._authenticated(session, lifetime=version >= 1)
        self._respond(sock, ApiKey.SASL_AUTHENTICATE, version, correlation_id,
                      {"error_code": 0, "error_message": None, "auth_bytes": reply,
                       "session_lifetime_ms": lifetime})
        return True

    def _legacy_exchange(self, sock: socket.socket, session: _Session) -> bool:
        server = session.server
        assert server is not None
        while True:
            token = _read_frame(sock)
            if token is None:
                return False
            try:
                reply, done = server.step(token)
            except _Rejected:
                self._count("auth_failures")
                return False  # SaslHandshake v0: a rejected login is a closed connection
            sock.sendall(_SIZE.pack(len(reply)) + reply)
            if done:
                self._authenticated(session, lifetime=False)
                return True

    # ------------------------------------------------------------------ relaying
    def _relay(self, sock: socket.socket, session: _Session, frame: bytes, api_key: int, version: int) -> bool:
        upstream = session.upstream
        if upstream is None:
            upstream = socket.create_connection(self.upstream, timeout=30.0)
            upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            session.upstream = upstream
            self._track(upstream)
        upstream.sendall(_SIZE.pack(len(frame)) + frame)
        self._count("relayed")
        if api_key == ApiKey.PRODUCE and _produce_acks(frame, version) == 0:
            return True
        response = _read_frame(upstream)
        if response is None:
            return False
        if api_key in (ApiKey.METADATA, ApiKey.FIND_COORDINATOR):
            response = self._rewrite(api_key, version, response)
        sock.sendall(_SIZE.pack(len(response)) + response)
        return True

    def _rewrite(self, api_key: int, version: int, response: bytes) -> bytes:
        spec = API_BY_KEY[api_key]
        if not spec.min_version <= version <= spec.max_version:
            return response
        correlation_id, offset = decode_response_header(api_key, version, response)
        body = spec.decode_response(version, memoryview(response)[offset:])
        if api_key == ApiKey.METADATA:
            for broker in body.get("brokers") or ():
                broker["host"], broker["port"] = self.host, self.port
        elif version < 4:
            if int(body.get("node_id", -1)) >= 0:
                body["host"], body["port"] = self.host, self.port
        else:
            for coordinator in body.get("coordinators") or ():
                if int(coordinator.get("node_id", -1)) >= 0:
                    coordinator["host"], coordinator["port"] = self.host, self.port
        return encode_response_header(api_key, version, correlation_id) + spec.encode_response(version, body)

    def __repr__(self) -> str:
        mode = ("TLS+" if self._tls else "") + ("SASL" if self.sasl else "plain")
        return f"Gateway({self.bootstrap} -> {self.upstream[0]}:{self.upstream[1]}, {mode})"


# ---------------------------------------------------------------------------------------------- helpers


def _now_ms() -> float:
    import time

    return time.monotonic() * 1000.0


def _read_exact(sock: socket.socket, size: int) -> bytes | None:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return bytes(chunks)


def _read_frame(sock: socket.socket) -> bytes | None:
    head = _read_exact(sock, 4)
    if head is None:
        return None
    (size,) = _SIZE.unpack(head)
    if not 0 <= size <= _MAX_FRAME:
        return None
    return _read_exact(sock, size) if size else b""


def _produce_acks(frame: bytes, version: int) -> int:
    _, offset = decode_request_header(frame)
    reader = Reader(frame, offset)
    if version >= 9:
        length = reader.uvarint()
        if length > 0:
            reader.raw(length - 1)
    else:
        length = reader.int16()
        if length > 0:
            reader.raw(length)
    return reader.int16()


def _linger_close(sock: socket.socket) -> None:
    """Close without a reset: shut the write side, read what the peer still sends (briefly), close."""
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
    with contextlib.suppress(OSError, ValueError):
        sock.settimeout(1.0)
        for _ in range(64):
            if not sock.recv(4096):
                break
    with contextlib.suppress(OSError):
        sock.close()


def _reset_close(sock: socket.socket) -> None:
    """Close with a TCP reset (``SO_LINGER`` on with a zero timeout): what was sent before stays sent."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


def _hard_close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        sock.close()
