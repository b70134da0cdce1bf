"""Security settings, the TLS context, SASL mechanisms and auth-failure handling, without a broker.

The gateway used here answers ApiVersions and SASL itself (``api_versions`` given), so a failed login
never needs the upstream broker.
"""

from __future__ import annotations

import logging
import pickle
import random
import ssl
import time
from collections.abc import Callable

import pytest
import scramp

from sparkafka import errors
from sparkafka._clock import ManualClock
from sparkafka.config import ProducerConfig
from sparkafka.net.client import NetworkClient
from sparkafka.net.connection import ConnectionState
from sparkafka.net.sasl import SaslAuthenticator, oauthbearer_initial_response, plain_initial_response
from sparkafka.net.security import SecuritySettings, resolve_security
from sparkafka.net.tls import build_ssl_context
from sparkafka.protocol.messages import CLIENT_VERSIONS
from support.gateway import Certificates, Gateway

from .helpers import KEY_PASSWORD, PASSWORD, TOKEN, USER, USERS, WRONG_PASSWORD, exception_texts, sasl_conf, secrets_in

API_VERSIONS = {int(k): v for k, v in CLIENT_VERSIONS.items()}


def _token() -> str:
    return TOKEN


# ------------------------------------------------------------------ settings


def test_repr_str_and_pickle_hide_every_secret(certs: Certificates) -> None:
    settings = resolve_security({
        **sasl_conf("SCRAM-SHA-512", tls=True, ca=str(certs.ca)),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
        "ssl.key.password": KEY_PASSWORD,
    })
    for text in (repr(settings), str(settings), f"{settings}"):
        assert not secrets_in(text), text
        assert "sasl.password='[hidden]'" in text and "ssl.key.password='[hidden]'" in text
        assert "SCRAM-SHA-512" in text and USER in text
    with pytest.raises(TypeError, match="not picklable"):
        pickle.dumps(settings)
    oauth = resolve_security({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                              "sasl.oauthbearer.token.provider": _token})
    assert "token.provider='[hidden]'" in repr(oauth) and "_token" not in repr(oauth)


def test_producer_config_dump_masks_secrets() -> None:
    cfg = ProducerConfig.from_mapping({"bootstrap.servers": "h:1", **sasl_conf("PLAIN")})
    assert not secrets_in(repr(cfg) + str(cfg) + str(cfg.to_properties()))
    assert resolve_security(cfg).sasl_password == PASSWORD  # the value itself is still usable


@pytest.mark.parametrize(
    ("conf", "key"),
    [
        ({"security.protocol": "SASL_SSL"}, "sasl.mechanism"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "u"},
         "sasl.password"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"},
         "sasl.oauthbearer.token.provider"),
        ({"security.protocol": "TLS"}, "security.protocol"),
        ({"security.protocol": "SSL", "ssl.key.location": "k.pem"}, "ssl.key.location"),
    ],
)
def test_bad_settings_are_config_errors_naming_the_key(conf: dict[str, str], key: str) -> None:
    with pytest.raises(errors.ConfigError) as info:
        resolve_security(conf)
    assert info.value.key == key


def test_duck_typed_settings_are_validated_too() -> None:
    class Cfg:
        security_protocol = "SASL_SSL"

    with pytest.raises(errors.ConfigError) as info:
        NetworkClient("h:1", security=Cfg())
    assert info.value.key == "sasl.mechanism"
    NetworkClient("h:1", security=object()).close()  # no security attributes at all: PLAINTEXT


# ------------------------------------------------------------------ TLS context


def test_default_context_verifies_certificates_and_host_names(certs: Certificates) -> None:
    ctx = build_ssl_context(resolve_security({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}))
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_empty_endpoint_identification_turns_the_host_check_off_with_a_warning(
    certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    settings = resolve_security({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca),
                                 "ssl.endpoint.identification.algorithm": ""})
    ctx = build_ssl_context(settings)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and not ctx.check_hostname
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and "NOT checked" in r.getMessage()]
    assert warnings


def test_user_context_is_used_as_given() -> None:
    ctx = ssl.create_default_context()
    assert build_ssl_context(resolve_security({"security.protocol": "SSL", "ssl.context": ctx})) is ctx


@pytest.mark.parametrize(
    ("extra", "key", "fragment"),
    [
        ({"ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location", "does not exist"),
        ({"key.password": None}, "ssl.key.password", "is encrypted"),
        ({"key.password": WRONG_PASSWORD}, "ssl.key.password", "does not decrypt"),
    ],
)
def test_tls_file_problems_are_config_errors(
    certs: Certificates, extra: dict[str, str | None], key: str, fragment: str
) -> None:
    conf: dict[str, str | None] = {
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs.ca),
        "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key),
        "ssl.key.password": KEY_PASSWORD,
    }
    if "key.password" in extra:
        conf["ssl.key.password"] = extra["key.password"]
    else:
        conf.update(extra)
    with pytest.raises(errors.ConfigError) as info:
        NetworkClient("h:1", security={k: v for k, v in conf.items() if v is not None})
    assert info.value.key == key
    assert fragment in str(info.value)
    assert not secrets_in(exception_texts(info.value))


def test_a_ca_file_that_is_no_certificate_is_a_config_error(certs: Certificates) -> None:
    with pytest.raises(errors.ConfigError) as info:
        build_ssl_context(resolve_security({"security.protocol": "SSL", "ssl.ca.location": str(certs.client_key)}))
    assert info.value.key == "ssl.ca.location"


# ------------------------------------------------------------------ SASL mechanisms


def test_plain_and_oauthbearer_initial_responses() -> None:
    assert plain_initial_response("u", "p") == b"\x00u\x00p"
    assert oauthbearer_initial_response("abc.def") == b"n,,\x01auth=Bearer abc.def\x01\x01"


def _authenticator(conf: dict[str, object]) -> SaslAuthenticator:
    return SaslAuthenticator(resolve_security(conf), clock=ManualClock(), rng=random.Random(3))


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_a_scramp_server(mechanism: str) -> None:
    server_mech = scramp.ScramMechanism(mechanism)
    info = server_mech.make_auth_info(PASSWORD, iteration_count=4096)
    server = server_mech.make_server(lambda user: info if user == USER else None)
    client = _authenticator(sasl_conf(mechanism)).new_mechanism()
    server.set_client_first(client.first_message().decode())
    final = client.respond(server.get_server_first().encode())
    assert final is not None
    server.set_client_final(final.decode())
    assert client.respond(server.get_server_final().encode()) is None
    assert client.failure() is None


def test_scram_client_rejects_a_server_that_does_not_know_the_password() -> None:
    server_mech = scramp.ScramMechanism("SCRAM-SHA-256")
    forged = server_mech.make_auth_info(WRONG_PASSWORD, iteration_count=4096)
    server = server_mech.make_server(lambda user: forged)
    client = _authenticator(sasl_conf("SCRAM-SHA-256")).new_mechanism()
    server.set_client_first(client.first_message().decode())
    final = client.respond(server.get_server_first().encode())
    assert final is not None
    with pytest.raises(scramp.ScramException):
        server.set_client_final(final.decode())  # the proof does not match the forged keys either
    # A forged server final message (signature from other keys) must be refused by the client.
    bogus = "v=" + "QUJD" * 11
    with pytest.raises(errors.AuthenticationError) as info:
        client.respond(bogus.encode())
    assert not secrets_in(exception_texts(info.value))


def test_oauthbearer_error_challenge_is_answered_and_reported() -> None:
    client = _authenticator({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                             "sasl.oauthbearer.token.provider": _token}).new_mechanism()
    assert client.first_message() == oauthbearer_initial_response(TOKEN)
    assert client.respond(b'{"status":"invalid_token"}') == b"\x01"
    failure = client.failure()
    assert failure is not None and "invalid_token" in failure
    assert client.respond(b"") is None


def test_a_failing_token_provider_is_an_authentication_error() -> None:
    def broken() -> str:
        raise RuntimeError("identity provider down")

    with pytest.raises(errors.AuthenticationError, match="RuntimeError"):
        _authenticator({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER",
                        "sasl.oauthbearer.token.provider": broken}).new_mechanism()


# ------------------------------------------------------------------ the client after a rejection


def _poll_until(client: NetworkClient, cond: Callable[[], bool], timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        client.ready(-1, client.clock.monotonic_ms())
        client.poll(20, client.clock.monotonic_ms())


def test_rejected_login_backs_off_to_the_maximum_and_is_remembered() -> None:
    clock = ManualClock()
    with Gateway(("127.0.0.1", 9), users=USERS, api_versions=API_VERSIONS) as gw, NetworkClient(
        gw.bootstrap, clock=clock, reconnect_backoff_ms=10, reconnect_backoff_max_ms=5000,
        security=sasl_conf("PLAIN", password=WRONG_PASSWORD), rng=random.Random(1),
    ) as client:
        assert not client.ready(-1, clock.monotonic_ms())
        _poll_until(client, lambda: client.authentication_error(-1) is not None)
        error = client.authentication_error(-1)
        assert isinstance(error, errors.AuthenticationError)
        assert "SASL_AUTHENTICATION_FAILED" in str(error) and not secrets_in(exception_texts(error))
        assert client.authentication_error() is error  # the only node: every node rejected us
        assert client.connection_delay(-1, clock.monotonic_ms()) == 5000  # not reconnect.backoff.ms
        clock.advance(4999)
        assert not client.ready(-1, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.DISCONNECTED  # still backing off
        clock.advance(1)
        client.ready(-1, clock.monotonic_ms())
        assert client.connection_state(-1) is not ConnectionState.DISCONNECTED
        _poll_until(client, lambda: client.connection_state(-1) is ConnectionState.DISCONNECTED)
        assert gw.stats.connections == 2 and gw.stats.auth_failures == 2


def test_sessions_are_renewed_between_requests_before_they_expire() -> None:
    clock = ManualClock()
    with Gateway(("127.0.0.1", 9), users=USERS, api_versions=API_VERSIONS, session_lifetime_ms=60_000) as gw, \
            NetworkClient(gw.bootstrap, clock=clock, security=sasl_conf("SCRAM-SHA-256")) as client:
        _poll_until(client, lambda: client.is_ready(-1))
        assert gw.stats.authentications == 1
        clock.advance(50_000)  # below 85% of the lifetime: nothing to do
        assert client.ready(-1, clock.monotonic_ms())
        clock.advance(7_100)  # past 95% of it: renew first
        assert not client.ready(-1, clock.monotonic_ms())
        assert client.connection_state(-1) is ConnectionState.AUTHENTICATING
        _poll_until(client, lambda: client.is_ready(-1))
        assert gw.stats.reauthentications == 1 and gw.stats.connections == 1


def test_settings_objects_pass_through_unchanged() -> None:
    settings = SecuritySettings("SASL_PLAINTEXT", sasl_mechanism="PLAIN", sasl_username=USER, sasl_password=PASSWORD)
    assert resolve_security(settings) is settings
    with NetworkClient("h:1", security=settings) as client:
        assert client.security is settings
