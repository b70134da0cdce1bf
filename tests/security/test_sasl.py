"""SASL end to end: PLAIN, SCRAM-SHA-256/512 and OAUTHBEARER through a SASL gateway in front of Tansu,
the SaslHandshake v0 style, KIP-368 re-authentication, and rejected logins failing fast and quietly."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import pytest

from sparkafka import KafkaProducer, errors
from sparkafka.broker import EmbeddedBroker
from sparkafka.net.admin import AdminClient
from support.consume import consume_all
from support.gateway import Certificates, Gateway

from .helpers import (
    PASSWORD,
    SECRETS,
    TOKEN,
    UNKNOWN_USER,
    USER,
    USERS,
    WRONG_PASSWORD,
    WRONG_TOKEN,
    exception_texts,
    read_back,
    sasl_conf,
    secrets_in,
)

FAST_FAIL_S = 10.0
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


def _token() -> str:
    return TOKEN


def _wrong_token() -> str:
    return WRONG_TOKEN


def _produce(bootstrap: str, conf: dict[str, Any], topic: str, count: int) -> KafkaProducer:
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf})
    try:
        futures = [producer.send(topic, f"v{i}".encode(), key=str(i).encode()) for i in range(count)]
        producer.flush(timeout=20)
        for future in futures:
            assert future.result(timeout=5).offset >= 0
    finally:
        producer.close(timeout=10)
    return producer


def _expected(count: int) -> list[bytes]:
    return sorted(f"v{i}".encode() for i in range(count))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_plaintext_produce_and_read_back(
    mechanism: str, gateway: Callable[..., Gateway], tansu: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    gw = gateway(users=USERS)
    topic = unique_topic(mechanism)
    producer = _produce(gw.bootstrap, sasl_conf(mechanism), topic, 15)
    records = consume_all(tansu.bootstrap_servers, topic, expected_count=15)
    assert sorted(cast(bytes, r.value) for r in records) == _expected(15)
    assert gw.stats.authentications >= 1 and gw.stats.auth_failures == 0
    assert gw.stats.handshake_versions and set(gw.stats.handshake_versions) == {1}
    shown = repr(producer.config) + str(producer.config) + str(producer.metrics()) + repr(producer)
    assert not secrets_in(shown)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_sasl_ssl_scram_read_back_with_confluent_through_the_gateway(
    mechanism: str, gateway: Callable[..., Gateway], certs: Certificates, unique_topic: Callable[[str], str]
) -> None:
    gw = gateway(users=USERS, tls=certs.server_context())
    topic = unique_topic("sasl-ssl")
    _produce(gw.bootstrap, sasl_conf(mechanism, tls=True, ca=str(certs.ca)), topic, 12)
    confluent = {"security.protocol": "SASL_SSL", "sasl.mechanisms": mechanism, "sasl.username": USER,
                 "sasl.password": PASSWORD, "ssl.ca.location": str(certs.ca)}
    assert sorted(cast("list[bytes]", read_back(gw.bootstrap, topic, 12, confluent))) == _expected(12)
    assert gw.stats.tls_failures == 0 and gw.stats.auth_failures == 0


def test_confluent_is_rejected_by_the_gateway_too(gateway: Callable[..., Gateway], certs: Certificates) -> None:
    """The gateway checks credentials for other clients as well (it is not lenient towards sparkafka only)."""
    from confluent_kafka.admin import AdminClient as ConfluentAdmin

    gw = gateway(users=USERS, tls=certs.server_context())
    admin = ConfluentAdmin({"bootstrap.servers": gw.bootstrap, "security.protocol": "SASL_SSL",
                            "sasl.mechanisms": "SCRAM-SHA-256", "sasl.username": USER,
                            "sasl.password": WRONG_PASSWORD, "ssl.ca.location": str(certs.ca)})
    with pytest.raises(Exception):  # noqa: B017 - librdkafka reports it as a KafkaException
        admin.list_topics(timeout=1.5)
    assert gw.stats.auth_failures >= 1 and gw.stats.relayed == 0


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_sasl_handshake_v0_with_raw_tokens(
    mechanism: str, gateway: Callable[..., Gateway], tansu: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    gw = gateway(users=USERS, legacy_sasl=True)
    topic = unique_topic("legacy")
    _produce(gw.bootstrap, sasl_conf(mechanism), topic, 5)
    assert sorted(cast(bytes, r.value) for r in consume_all(tansu.bootstrap_servers, topic, expected_count=5)) \
        == _expected(5)
    assert set(gw.stats.handshake_versions) == {0} and gw.stats.authenticate_versions == []
    assert gw.stats.authentications >= 1


def test_oauthbearer_token_provider(
    gateway: Callable[..., Gateway], tansu: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    gw = gateway(oauth_tokens=[TOKEN], mechanisms=())
    topic = unique_topic("oauth")
    conf = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.provider": _token}
    _produce(gw.bootstrap, conf, topic, 5)
    assert len(consume_all(tansu.bootstrap_servers, topic, expected_count=5)) == 5
    with pytest.raises(errors.AuthenticationError) as info, AdminClient(
        gw.bootstrap, security={**conf, "sasl.oauthbearer.token.provider": _wrong_token}
    ) as admin:
        admin.metadata([])
    assert "invalid_token" in str(info.value)
    assert not secrets_in(exception_texts(info.value))


def test_sessions_are_renewed_before_they_expire(
    gateway: Callable[..., Gateway], tansu: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    """The gateway closes a connection used after its session lifetime; the producer never lets that happen."""
    gw = gateway(users=USERS, session_lifetime_ms=800)
    topic = unique_topic("reauth")
    count = 24
    with KafkaProducer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0,
                        **sasl_conf("SCRAM-SHA-256")}) as producer:
        for i in range(count):
            producer.send(topic, f"v{i}".encode()).result(timeout=10)
            time.sleep(0.1)  # 2.4 s in all: three session lifetimes
    assert sorted(cast(bytes, r.value) for r in consume_all(tansu.bootstrap_servers, topic, expected_count=count)) \
        == _expected(count)
    assert gw.stats.reauthentications >= 2
    assert gw.stats.expired_sessions == 0


# ------------------------------------------------------------------ rejections

_REJECTIONS = {
    "wrong_password_plain": ("PLAIN", USER, WRONG_PASSWORD, MECHANISMS, ["SASL_AUTHENTICATION_FAILED"]),
    "wrong_password_scram": ("SCRAM-SHA-512", USER, WRONG_PASSWORD, MECHANISMS, ["SASL_AUTHENTICATION_FAILED"]),
    "unknown_user_scram": ("SCRAM-SHA-256", UNKNOWN_USER, PASSWORD, MECHANISMS, ["SASL_AUTHENTICATION_FAILED"]),
    "mechanism_not_enabled": ("SCRAM-SHA-256", USER, PASSWORD, ["PLAIN"],
                              ["does not enable SCRAM-SHA-256", "offers PLAIN"]),
}


@pytest.mark.parametrize("tls", [False, True], ids=["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("case", sorted(_REJECTIONS))
def test_rejected_logins_fail_fast_with_a_typed_error(
    case: str, tls: bool, gateway: Callable[..., Gateway], certs: Certificates,
    unique_topic: Callable[[str], str],
) -> None:
    mechanism, user, password, enabled, words = _REJECTIONS[case]
    gw = gateway(users=USERS, mechanisms=enabled, tls=certs.server_context() if tls else None)
    conf = sasl_conf(mechanism, tls=tls, user=user, password=password, ca=str(certs.ca) if tls else None)

    started = time.monotonic()
    with pytest.raises(errors.AuthenticationError) as admin_info, AdminClient(gw.bootstrap, security=conf) as admin:
        admin.metadata([])
    assert time.monotonic() - started < FAST_FAIL_S

    producer = KafkaProducer({"bootstrap.servers": gw.bootstrap, "max.block.ms": 60_000, **conf})
    try:
        started = time.monotonic()
        send_error = producer.send(unique_topic("rejected"), b"never delivered").exception(0)  # failed at once
        assert isinstance(send_error, errors.AuthenticationError)
        assert time.monotonic() - started < FAST_FAIL_S  # not max.block.ms
    finally:
        producer.close(timeout=5)
    for error in (admin_info.value, send_error):
        for word in [*words, mechanism]:
            assert word in str(error)
        assert not secrets_in(exception_texts(error))
        assert password not in exception_texts(error)
    assert gw.stats.relayed == 0 and gw.stats.authentications == 0


def test_a_rejected_client_does_not_hammer_the_broker(gateway: Callable[..., Gateway]) -> None:
    gw = gateway(users=USERS)
    producer = KafkaProducer({"bootstrap.servers": gw.bootstrap, "reconnect.backoff.ms": 20,
                              "reconnect.backoff.max.ms": 2000, **sasl_conf("PLAIN", password=WRONG_PASSWORD)})
    try:
        assert isinstance(producer.send("never-created", b"x").exception(0), errors.AuthenticationError)
        time.sleep(2.5)  # with reconnect.backoff.ms alone this would be 6+ attempts (20, 40, 80, ... ms)
    finally:
        producer.close(timeout=5)
    assert 1 <= gw.stats.auth_failures <= 3
    assert gw.stats.connections == gw.stats.auth_failures


def test_revoked_credentials_fail_pending_records_quickly(
    gateway: Callable[..., Gateway], unique_topic: Callable[[str], str]
) -> None:
    gw = gateway(users=USERS, session_lifetime_ms=600)
    topic = unique_topic("revoked")
    with KafkaProducer({"bootstrap.servers": gw.bootstrap, "linger.ms": 0, "request.timeout.ms": 3000,
                        "delivery.timeout.ms": 3000, **sasl_conf("PLAIN")}) as producer:
        producer.send(topic, b"first").result(timeout=10)
        gw.set_password(USER, "rotated-elsewhere")  # the next login (the re-authentication) fails
        time.sleep(0.7)  # the session expires; the next request needs a (failing) re-authentication
        future = producer.send(topic, b"second")
        error = future.exception(timeout=10)
    assert isinstance(error, errors.AuthenticationError), error


def test_secrets_never_reach_logs_or_errors_end_to_end(
    gateway: Callable[..., Gateway], certs: Certificates, caplog: pytest.LogCaptureFixture
) -> None:
    """Belt and braces for the autouse log scan: the secrets are really in play here."""
    gw = gateway(users=USERS, tls=certs.server_context())
    conf = sasl_conf("SCRAM-SHA-256", tls=True, ca=str(certs.ca), password=WRONG_PASSWORD)
    with pytest.raises(errors.AuthenticationError) as info, AdminClient(gw.bootstrap, security=conf) as admin:
        admin.metadata([])
    texts = exception_texts(info.value) + repr(admin.client.security) + str(admin.client.security)
    assert caplog.records, "DEBUG logging was captured"
    assert any("SASL" in r.getMessage() for r in caplog.records)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for secret in SECRETS:
        assert secret not in texts and secret not in logged
