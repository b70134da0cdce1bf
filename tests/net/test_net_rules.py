"""Network-layer rules checked against the Java client's behaviour (NetworkClient, SASL, DNS).

How it works: each test drives one piece of ``sparkafka.net`` directly (a SASL mechanism, the bootstrap
address resolution) and checks the exact bytes or addresses Java's client would produce.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket

import pytest

from sparkafka import errors
from sparkafka._clock import ManualClock
from sparkafka.net.backoff import ExponentialBackoff
from sparkafka.net.client import NetworkClient
from sparkafka.net.connection import ConnectionState
from sparkafka.net.sasl import _Scram


def _java_scram_server(
    mechanism: str, password: str, client_first: bytes, iterations: int = 4096
) -> tuple[bytes, bytes, bytes]:
    """Kafka's ScramSaslServer side: (server-first, the expected client proof, the server signature).

    Kafka hashes the password's raw UTF-8 bytes (ScramFormatter.normalize does no SASLprep)."""
    digest = "sha256" if mechanism.endswith("256") else "sha512"
    first = client_first.decode()
    assert first.startswith("n,,")
    bare = first[3:]
    fields = dict(part.split("=", 1) for part in bare.split(","))
    nonce = fields["r"] + "SERVERPART"
    salt = b"0123456789abcdef"
    server_first = f"r={nonce},s={base64.b64encode(salt).decode()},i={iterations}"
    salted = hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    stored = hashlib.new(digest, client_key).digest()
    auth_message = f"{bare},{server_first},c=biws,r={nonce}".encode()
    signature = hmac.new(stored, auth_message, digest).digest()
    proof = bytes(a ^ b for a, b in zip(client_key, signature))
    server_key = hmac.new(salted, b"Server Key", digest).digest()
    server_signature = hmac.new(server_key, auth_message, digest).digest()
    return server_first.encode(), proof, server_signature


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_hashes_the_raw_password_like_java(mechanism: str) -> None:
    # A password Kafka accepts as is (kafka-configs stores its raw UTF-8 hash): SASLprep would map the
    # no-break space to a space and reject the tab, so a SASLprep client could never log in.
    password = "pa\tss\u00a0w\u00f6rd"
    mech = _Scram(mechanism, "alice", password)
    first = mech.first_message()
    server_first, proof, server_signature = _java_scram_server(mechanism, password, first)
    final = mech.respond(server_first)
    assert final is not None
    fields = dict(part.split("=", 1) for part in final.decode().split(","))
    assert fields["c"] == "biws"
    assert base64.b64decode(fields["p"]) == proof
    assert mech.respond(b"v=" + base64.b64encode(server_signature)) is None


def test_scram_user_name_is_escaped_not_normalised() -> None:
    mech = _Scram("SCRAM-SHA-256", "a,b=c\u00a0d", "secret")
    bare = mech.first_message().decode()[3:]
    assert bare.split(",r=")[0] == "n=a=2Cb=3Dc\u00a0d"


def test_scram_rejects_too_few_iterations() -> None:
    # Java's ScramSaslClient refuses fewer than 4096 iterations (a downgrade by a hostile server).
    mech = _Scram("SCRAM-SHA-256", "alice", "secret")
    server_first, _, _ = _java_scram_server("SCRAM-SHA-256", "secret", mech.first_message(), iterations=1024)
    with pytest.raises(errors.AuthenticationError, match="iterations"):
        mech.respond(server_first)


def test_scram_rejects_a_foreign_nonce_and_a_wrong_server_signature() -> None:
    mech = _Scram("SCRAM-SHA-256", "alice", "secret")
    mech.first_message()
    with pytest.raises(errors.AuthenticationError, match="nonce"):
        mech.respond(b"r=someoneelse,s=MDEyMzQ1Njc4OWFiY2RlZg==,i=4096")
    mech = _Scram("SCRAM-SHA-256", "alice", "secret")
    server_first, _, signature = _java_scram_server("SCRAM-SHA-256", "secret", mech.first_message())
    assert mech.respond(server_first) is not None
    bad = bytes([signature[0] ^ 1]) + signature[1:]
    with pytest.raises(errors.AuthenticationError, match="signature") as info:
        mech.respond(b"v=" + base64.b64encode(bad))
    assert "secret" not in str(info.value)


def test_backoff_initial_above_max_is_capped_like_java() -> None:
    # Java's ExponentialBackoff uses min(initial, max): retry.backoff.ms=2000 with the default
    # retry.backoff.max.ms=1000, or socket.connection.setup.timeout.ms=60000 with its max 30000, give the max.
    assert ExponentialBackoff(2000, 1000).backoff(0) == 1000
    assert ExponentialBackoff(60_000, 30_000).backoff(3) == 30_000
    assert ExponentialBackoff(60_000, 30_000).initial_ms == 30_000


def test_connection_setup_timeout_is_capped_by_its_max() -> None:
    clock = ManualClock()
    with socket.create_server(("127.0.0.1", 0)) as listener:  # accepts the TCP connect, never answers
        port = listener.getsockname()[1]
        client = NetworkClient(
            f"127.0.0.1:{port}", clock=clock, socket_connection_setup_timeout_ms=60_000,
            socket_connection_setup_timeout_max_ms=30_000,
        )
        try:
            client.ready(-1, clock.monotonic_ms())
            assert client.connection_state(-1) in (ConnectionState.CONNECTING, ConnectionState.API_VERSIONS)
            assert client.connection_delay(-1, clock.monotonic_ms()) == 30_000
        finally:
            client.close()
