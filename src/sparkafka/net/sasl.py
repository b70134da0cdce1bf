"""SASL authentication of a broker connection: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER.

How it works: ``SaslAuthenticator`` is a ``HandshakeStep`` (see ``connection.py``) that the network client
puts first in every connection's AUTHENTICATING phase. Each run creates one ``_Exchange``:

1. ``SaslHandshake`` names the mechanism; UNSUPPORTED_SASL_MECHANISM (with the broker's list) or any
   other error code fails the connection with ``AuthenticationError``.
2. Tokens go back and forth until the client mechanism has nothing more to say: inside
   ``SaslAuthenticate`` requests (SaslHandshake v1, Kafka >= 1.0), or, when the broker's ApiVersions does
   not list SaslAuthenticate, as raw int32-length-framed tokens after SaslHandshake v0 (a broker closing
   the connection there is how old brokers reject a login). A SaslAuthenticate error code fails the
   connection with ``AuthenticationError`` carrying the broker's message.
3. A ``session_lifetime_ms`` in the last SaslAuthenticate answer (KIP-368) schedules re-authentication on
   the same connection at a random 85-95% of the lifetime; the network client runs this step again
   between requests once the connection has nothing in flight.

Mechanisms: PLAIN sends ``\\0user\\0password``; SCRAM follows Kafka's ``ScramSaslClient`` (client-first,
client-final with the password's raw UTF-8 bytes, no SASLprep; the server nonce must extend ours, at least
4096 iterations, then the server signature is verified, so a broker that does not know the password is
caught too); OAUTHBEARER sends the GS2 header ``n,,\\x01auth=Bearer <token>\\x01\\x01`` with a token from the
user's provider (called for every authentication), and answers an error challenge with ``\\x01`` as
RFC 7628 requires. Secrets never reach logs or errors: messages name the mechanism and user only, text
from the broker is scrubbed of the password/token, and no SCRAM failure chains an exception.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import random
from collections.abc import Callable
from secrets import token_urlsafe
from typing import TYPE_CHECKING, Any, Protocol

from .. import errors
from .._clock import Clock
from ..protocol.messages import ApiKey
from .security import HIDDEN, SecuritySettings

if TYPE_CHECKING:
    from .connection import BrokerConnection, HandshakeDone
    from .response import ClientResponse

__all__ = ["SaslAuthenticator", "oauthbearer_initial_response", "plain_initial_response"]

log = logging.getLogger("sparkafka.net.sasl")

_REAUTH_MIN_FRACTION = 0.85
_REAUTH_MAX_FRACTION = 0.95
_SCRAM_MIN_ITERATIONS = 4096  # ScramMechanism.minIterations() for SHA-256 and SHA-512


def plain_initial_response(username: str, password: str) -> bytes:
    """RFC 4616: ``authzid \\0 authcid \\0 passwd`` with an empty authzid."""
    return b"\x00" + username.encode() + b"\x00" + password.encode()


def oauthbearer_initial_response(token: str) -> bytes:
    """RFC 7628 client initial response as Kafka expects it (no authzid, no extensions)."""
    return b"n,,\x01auth=Bearer " + token.encode() + b"\x01\x01"


class _Mechanism(Protocol):
    def first_message(self) -> bytes: ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next client message for a server message, or None when the client side is complete."""
        ...

    def failure(self) -> str | None:
        """Why the exchange must fail even if the broker answers without an error code."""
        ...

    def secrets(self) -> tuple[str, ...]: ...


class _Plain:
    __slots__ = ("_password", "_sent", "_username")

    def __init__(self, username: str, password: str) -> None:
        self._username = username
        self._password = password
        self._sent = False

    def first_message(self) -> bytes:
        self._sent = True
        return plain_initial_response(self._username, self._password)

    def respond(self, challenge: bytes) -> bytes | None:
        return None

    def failure(self) -> str | None:
        return None

    def secrets(self) -> tuple[str, ...]:
        return (self._password,) if self._password else ()


class _Scram:
    """RFC 5802 client as Kafka's ``ScramSaslClient``: the user name only escapes ``=``/``,`` and the
    password is hashed as raw UTF-8 (no SASLprep, which would lock out passwords Kafka accepts); the server
    nonce must extend ours, at least 4096 iterations, and the server signature is checked."""

    __slots__ = ("_auth_message", "_client_first_bare", "_digest", "_nonce", "_password", "_salted", "_stage")

    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self._digest = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
        self._password = password
        self._stage = 0
        self._nonce = token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self._client_first_bare = f"n={name},r={self._nonce}"
        self._auth_message = b""
        self._salted = b""

    def first_message(self) -> bytes:
        return ("n,," + self._client_first_bare).encode()

    def respond(self, challenge: bytes) -> bytes | None:
        try:
            message = challenge.decode("utf-8")
        except UnicodeDecodeError:
            raise errors.AuthenticationError("the broker sent a SCRAM message that is not UTF-8") from None
        fields: dict[str, str] = {}
        for part in message.split(","):
            key, sep, value = part.partition("=")
            if sep and len(key) == 1 and key not in fields:
                fields[key] = value
        if "e" in fields:
            detail = _scrub(fields["e"], (self._password,))
            raise errors.AuthenticationError(f"the SCRAM exchange failed: the broker answered e={detail}")
        if self._stage == 0:
            self._stage = 1
            return self._client_final(message, fields)
        if self._stage == 1:
            self._stage = 2
            try:
                signature = base64.b64decode(fields.get("v", ""), validate=True)
            except ValueError:
                signature = b""
            server_key = hmac.new(self._salted, b"Server Key", self._digest).digest()
            expected = hmac.new(server_key, self._auth_message, self._digest).digest()
            if not signature or not hmac.compare_digest(signature, expected):
                raise errors.AuthenticationError(
                    "the SCRAM exchange failed: invalid server signature (the broker does not know the password)"
                )
            return None
        raise errors.AuthenticationError("the broker continued the SCRAM exchange after its final message")

    def _client_final(self, server_first: str, fields: dict[str, str]) -> bytes:
        if "m" in fields:
            raise errors.AuthenticationError("the SCRAM exchange failed: unsupported mandatory extension (m=)")
        nonce = fields.get("r", "")
        if not nonce.startswith(self._nonce):
            raise errors.AuthenticationError("the SCRAM exchange failed: invalid server nonce")
        try:
            salt = base64.b64decode(fields["s"], validate=True)
            iterations = int(fields["i"])
        except (KeyError, ValueError):
            raise errors.AuthenticationError("the SCRAM exchange failed: malformed server-first message") from None
        if iterations < _SCRAM_MIN_ITERATIONS:
            raise errors.AuthenticationError(
                f"the SCRAM exchange failed: the broker asked for {iterations} iterations, fewer than the "
                f"minimum {_SCRAM_MIN_ITERATIONS}"
            )
        digest = self._digest
        self._salted = hashlib.pbkdf2_hmac(digest, self._password.encode(), salt, iterations)
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        client_key = hmac.new(self._salted, b"Client Key", digest).digest()
        stored_key = hashlib.new(digest, client_key).digest()
        signature = hmac.new(stored_key, self._auth_message, digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def failure(self) -> str | None:
        return None  # respond() returns None only after verifying the server's final message

    def secrets(self) -> tuple[str, ...]:
        return (self._password,) if self._password else ()


class _OAuthBearer:
    __slots__ = ("_error", "_token")

    def __init__(self, provider: Callable[..., Any]) -> None:
        try:
            value = provider()
        except Exception as exc:
            raise errors.AuthenticationError(
                f"sasl.oauthbearer.token.provider raised {type(exc).__name__}"
            ) from exc
        if isinstance(value, tuple) and value:
            value = value[0]  # (token, expiry) as confluent-kafka's oauth_cb returns
        if isinstance(value, (bytes, bytearray)):
            value = bytes(value).decode("utf-8", "replace")
        if not isinstance(value, str) or not value.strip():
            raise errors.AuthenticationError(
                "sasl.oauthbearer.token.provider must return a non-empty token string, "
                f"got {type(value).__name__}"
            )
        if "\x01" in value:
            raise errors.AuthenticationError("the OAUTHBEARER token must not contain \\x01")
        self._token = value.strip()
        self._error: str | None = None

    def first_message(self) -> bytes:
        return oauthbearer_initial_response(self._token)

    def respond(self, challenge: bytes) -> bytes | None:
        if not challenge:
            return None
        if self._error is not None:
            return None
        # RFC 7628 §3.2.2: an error challenge is answered with a lone %x01, then the server fails.
        self._error = _scrub(challenge.decode("utf-8", "replace"), (self._token,))
        return b"\x01"

    def failure(self) -> str | None:
        return None if self._error is None else f"the broker rejected the token: {self._error}"

    def secrets(self) -> tuple[str, ...]:
        return (self._token,)


def _scrub(text: str, secrets: tuple[str, ...]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, HIDDEN)
    return text


class SaslAuthenticator:
    """The SASL ``HandshakeStep`` of one client (stateless between runs; one ``_Exchange`` per run)."""

    __slots__ = ("_clock", "_rng", "_settings", "mechanism")

    def __init__(self, settings: SecuritySettings, *, clock: Clock, rng: random.Random | None = None) -> None:
        if not settings.uses_sasl or settings.sasl_mechanism is None:
            raise errors.ConfigError(
                f"SASL is not enabled by security.protocol {settings.protocol}", "security.protocol"
            )
        self._settings = settings
        self._clock = clock
        self._rng = rng if rng is not None else random.Random()
        self.mechanism: str = settings.sasl_mechanism

    def new_mechanism(self) -> _Mechanism:
        s = self._settings
        if self.mechanism == "PLAIN":
            return _Plain(s.sasl_username or "", s.sasl_password or "")
        if self.mechanism.startswith("SCRAM-"):
            return _Scram(self.mechanism, s.sasl_username or "", s.sasl_password or "")
        provider = s.token_provider
        assert provider is not None
        return _OAuthBearer(provider)

    @property
    def username(self) -> str | None:
        return self._settings.sasl_username if self.mechanism != "OAUTHBEARER" else None

    def reauth_delay_ms(self, session_lifetime_ms: float) -> float:
        return session_lifetime_ms * self._rng.uniform(_REAUTH_MIN_FRACTION, _REAUTH_MAX_FRACTION)

    def now(self) -> float:
        return self._clock.monotonic_ms()

    def __call__(self, conn: BrokerConnection, done: HandshakeDone) -> None:
        _Exchange(self, conn, done).start()

    def __repr__(self) -> str:
        user = f", user={self.username!r}" if self.username else ""
        return f"SaslAuthenticator({self.mechanism}{user})"


class _Exchange:
    """One SASL authentication (or re-authentication) on one connection."""

    __slots__ = ("_auth", "_conn", "_done", "_finished", "_legacy", "_mech", "_version")

    def __init__(self, auth: SaslAuthenticator, conn: BrokerConnection, done: HandshakeDone) -> None:
        self._auth = auth
        self._conn = conn
        self._done = done
        self._mech: _Mechanism | None = None
        self._legacy = False
        self._version = 0
        self._finished = False

    def _who(self) -> str:
        user = self._auth.username
        who = f" of user {user!r}" if user else ""
        return f"SASL {self._auth.mechanism} authentication{who} with node {self._conn.node_id} " \
               f"({self._conn.host}:{self._conn.port})"

    def _fail(self, message: str) -> None:
        if self._finished:
            return
        self._finished = True
        secrets = self._mech.secrets() if self._mech is not None else ()
        text = _scrub(message, secrets + self._auth._settings.secrets())
        log.debug("%s", text)
        self._done(errors.AuthenticationError(text))

    def _succeed(self, session_lifetime_ms: int) -> None:
        if self._finished:
            return
        self._finished = True
        conn = self._conn
        if session_lifetime_ms > 0:
            at = self._auth.now() + self._auth.reauth_delay_ms(session_lifetime_ms)
            conn.schedule_reauthentication(at, self._auth)
            log.debug("%s succeeded; session lifetime %d ms, re-authenticating in %.0f ms",
                      self._who(), session_lifetime_ms, at - self._auth.now())
        else:
            conn.schedule_reauthentication(None, self._auth)
            log.debug("%s succeeded", self._who())
        self._done(None)

    # ------------------------------------------------------------------ SaslHandshake
    def start(self) -> None:
        conn = self._conn
        versions = conn.versions
        if versions is None or versions.get(ApiKey.SASL_HANDSHAKE) is None:
            self._fail(f"{self._who()} is impossible: the broker does not offer SaslHandshake; "
                       "is it a SASL listener? (security.protocol)")
            return
        handshake_max = versions.get(ApiKey.SASL_HANDSHAKE)
        assert handshake_max is not None
        self._legacy = versions.get(ApiKey.SASL_AUTHENTICATE) is None or handshake_max[1] < 1
        handshake_version = 0 if self._legacy else 1
        if not self._legacy:
            try:
                self._version = conn.api_version(ApiKey.SASL_AUTHENTICATE)
            except errors.UnsupportedVersionError:
                self._legacy, handshake_version = True, 0
        conn.send_internal(
            ApiKey.SASL_HANDSHAKE, handshake_version, {"mechanism": self._auth.mechanism}, self._on_handshake
        )

    def _on_handshake(self, resp: ClientResponse) -> None:
        if resp.error is not None:
            return  # the connection is closing with this error
        body = resp.body or {}
        code = int(body.get("error_code", 0))
        offered = [str(m) for m in body.get("mechanisms") or ()]
        if code == errors.UNSUPPORTED_SASL_MECHANISM:
            self._fail(f"{self._who()} failed: the broker does not enable {self._auth.mechanism}; "
                       f"it offers {', '.join(offered) or 'none'} (sasl.mechanism)")
            return
        if code:
            self._fail(f"{self._who()} failed: SaslHandshake answered {errors.error_name(code)}")
            return
        try:
            self._mech = self._auth.new_mechanism()
            token = self._mech.first_message()
        except errors.AuthenticationError as exc:
            self._fail(f"{self._who()} failed: {exc}")
            return
        self._send(token)

    # ------------------------------------------------------------------ tokens
    def _send(self, token: bytes) -> None:
        if self._legacy:
            self._conn.send_raw_token(token, self._on_raw)
        else:
            self._conn.send_internal(
                ApiKey.SASL_AUTHENTICATE, self._version, {"auth_bytes": token}, self._on_authenticate
            )

    def _on_authenticate(self, resp: ClientResponse) -> None:
        if resp.error is not None:
            return
        body = resp.body or {}
        code = int(body.get("error_code", 0))
        if code:
            message = body.get("error_message") or ""
            detail = self._mech.failure() if self._mech is not None else None
            extra = f" ({detail})" if detail else ""
            self._fail(f"{self._who()} failed: {errors.error_name(code)}: {message or 'no message'}{extra}")
            return
        self._advance(bytes(body.get("auth_bytes") or b""), int(body.get("session_lifetime_ms", 0) or 0))

    def _on_raw(self, data: bytes) -> None:
        self._advance(data, 0)

    def _advance(self, server_message: bytes, session_lifetime_ms: int) -> None:
        mech = self._mech
        assert mech is not None
        try:
            reply = mech.respond(server_message)
        except errors.AuthenticationError as exc:
            self._fail(f"{self._who()} failed: {exc}")
            return
        if reply is not None:
            self._send(reply)
            return
        failure = mech.failure()
        if failure is not None:
            self._fail(f"{self._who()} failed: {failure}")
            return
        self._succeed(session_lifetime_ms)
