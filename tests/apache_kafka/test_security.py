"""Security against Apache Kafka itself: TLS (server verification, host names, mutual TLS), SASL (PLAIN,
SCRAM-SHA-256/512) and ACLs enforced by Kafka's ``StandardAuthorizer``.

How it works: the shared ``kafka`` node has a listener per protocol (``support.kafka_cluster``), the
users of ``KAFKA_USERS`` (``admin`` is a super user, as is the PLAINTEXT principal; the tests take their
passwords from the cluster object, ``scram_users``) and a server
certificate for 127.0.0.1 and localhost signed by the ``kafka_certs`` CA. What sparkafka produces is read
back by confluent-kafka, over the same listener with the same credentials where the point is the
listener, over PLAINTEXT where the point is an ACL. ACLs are created by confluent-kafka's admin client
logged in as ``admin`` and are waited for until the broker's authorizer lists them. The shared node lets
everyone do anything on a resource without ACLs (``allow.everyone.if.no.acl.found=true``), so every test
puts its ACLs on topics and transactional ids of its own. Whether an idempotent producer may get a
producer id can only be refused where that default is off: ``kafka_strict``, a second node of this
module, built like ``kafka`` and started by the first test that needs it. An autouse fixture fails any test
that logs a password.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient as ConfluentAdmin
from confluent_kafka.admin._acl import AclBinding, AclBindingFilter, AclOperation, AclPermissionType
from confluent_kafka.admin._resource import ResourcePatternType, ResourceType

from security.helpers import KEY_PASSWORD, SECRETS, exception_texts, read_back
from sparkafka import KafkaProducer, errors
from support.consume import consume_all, create_topic
from support.gateway import Certificates
from support.kafka_cluster import REPO_ROOT, KafkaCluster

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
SASL_LISTENERS = ("SASL_PLAINTEXT", "SASL_SSL")
WRONG_PASSWORD = "wrong-Pa55-s3cret"
UNKNOWN_USER = "mallory"
FAST_FAIL_S = 5.0
"""Generous: each rejection below takes one connection (Kafka delays a failed login by 100 ms); the
producers are given max.block.ms=60 s, so a client that retried instead of failing would blow it."""


_secrets: set[str] = {*SECRETS, WRONG_PASSWORD}
"""Every password in play (the cluster's users are added by ``no_secret_in_logs``)."""


def _secrets_in(text: str) -> list[str]:
    return [secret for secret in _secrets if secret in text]


@pytest.fixture(autouse=True)
def no_secret_in_logs(kafka: KafkaCluster, caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """Every log record of the test, at DEBUG, with its traceback: none may carry a password."""
    _secrets.update(kafka.scram_users.values(), kafka.plain_users.values())
    caplog.set_level(logging.DEBUG)
    yield
    formatter = logging.Formatter()
    leaks = []
    for when in ("setup", "call", "teardown"):
        for record in caplog.get_records(when):
            text = record.getMessage() + (formatter.formatException(record.exc_info) if record.exc_info else "")
            if _secrets_in(text):
                leaks.append(f"{record.name}: {text[:300]}")
    assert not leaks, f"secrets in log records: {leaks}"


# -- helpers --------------------------------------------------------------------------------------------


def _values(count: int, tag: str = "v") -> list[bytes]:
    return [f"{tag}{i}".encode() for i in range(count)]


def _produce(bootstrap: str, conf: dict[str, Any], topic: str, count: int) -> None:
    """Send ``count`` records and check every future; the producer's repr, config and metrics stay secret-free."""
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0, **conf}) as producer:
        futures = [producer.send(topic, value, key=str(i).encode()) for i, value in enumerate(_values(count))]
        producer.flush(timeout=30)
        for future in futures:
            assert future.result(timeout=5).offset >= 0
        assert not _secrets_in(repr(producer.config) + str(producer.config) + str(producer.metrics()) + repr(producer))


def _tls(certs: Certificates, *, client_cert: bool = False) -> dict[str, Any]:
    conf: dict[str, Any] = {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca)}
    if client_cert:
        conf.update({"ssl.certificate.location": str(certs.client_cert),
                     "ssl.key.location": str(certs.client_key), "ssl.key.password": KEY_PASSWORD})
    return conf


def _sasl(cluster: KafkaCluster, listener: str, mechanism: str, user: str = "alice",
          password: str | None = None, *, confluent: bool = False) -> dict[str, Any]:
    """sparkafka's (or confluent-kafka's) settings for ``user`` (by default with the password the cluster
    has for that user) on a SASL listener of ``cluster``."""
    conf: dict[str, Any] = {
        "security.protocol": listener, "sasl.mechanisms" if confluent else "sasl.mechanism": mechanism,
        "sasl.username": user, "sasl.password": cluster.scram_users[user] if password is None else password}
    if listener == "SASL_SSL":
        assert cluster.tls is not None
        conf["ssl.ca.location"] = str(cluster.tls.ca)
    return conf


def _expect_fast_failure(bootstrap: str, conf: dict[str, Any], topic: str, error_type: type[Exception],
                         limit_s: float = FAST_FAIL_S) -> Exception:
    """``send()`` must fail with ``error_type`` well before max.block.ms (60 s), in the future it returns
    (Java's contract); returns the error."""
    producer = KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 60_000, **conf})
    try:
        started = time.monotonic()
        error = producer.send(topic, b"never delivered").exception(0)
        assert isinstance(error, error_type), repr(error)
        elapsed = time.monotonic() - started
        assert elapsed < limit_s, f"{error_type.__name__} after {elapsed:.1f} s"
        assert not _secrets_in(repr(producer.config) + str(producer.metrics()) + repr(producer))
    finally:
        producer.close(timeout=5)
    assert not _secrets_in(exception_texts(error))
    return error


def _admin(cluster: KafkaCluster) -> ConfluentAdmin:
    """confluent-kafka's admin client logged in as the super user ``admin`` (SCRAM-SHA-512)."""
    return ConfluentAdmin({"bootstrap.servers": cluster.bootstrap_servers("SASL_PLAINTEXT"),
                           **_sasl(cluster, "SASL_PLAINTEXT", "SCRAM-SHA-512", "admin", confluent=True)})


def _grant(cluster: KafkaCluster, *rules: tuple[ResourceType, str, str, AclOperation]) -> None:
    """ALLOW ACLs ``(resource type, literal name, user, operation)``, created as ``admin``; returns once the
    broker's authorizer lists every one of them (DescribeAcls is answered by the broker's authorizer)."""
    admin = _admin(cluster)
    bindings = [AclBinding(kind, name, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                           AclPermissionType.ALLOW) for kind, name, user, operation in rules]
    for future in admin.create_acls(bindings).values():
        future.result(timeout=15)
    deadline = time.monotonic() + 15
    for b in bindings:
        query = AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                 b.permission_type)
        while not admin.describe_acls(query).result(timeout=15):
            assert time.monotonic() < deadline, f"the broker does not list the ACL {b}"
            time.sleep(0.05)


def _sorted_values(bootstrap: str, topic: str, count: int, conf: dict[str, Any] | None = None) -> list[bytes]:
    return sorted(cast("list[bytes]", read_back(bootstrap, topic, count, conf)))


# -- TLS --------------------------------------------------------------------------------------------------


def test_tls_verifies_the_broker_by_host_name_and_ip_and_records_read_back(
    kafka: KafkaCluster, kafka_certs: Certificates, unique_topic: Callable[[str], str]
) -> None:
    """The bootstrap connection checks the certificate for "localhost" (a DNS name in it), the connection to
    the advertised 127.0.0.1 checks it for the address (an IP address in it)."""
    topic = unique_topic("tls")
    port = kafka.port(1, "SSL")
    _produce(f"localhost:{port}", _tls(kafka_certs), topic, 20)
    assert _sorted_values(kafka.bootstrap_servers("SSL"), topic, 20, _tls(kafka_certs)) == sorted(_values(20))


def test_a_certificate_from_an_untrusted_ca_fails_at_once(
    kafka: KafkaCluster, kafka_certs: Certificates, unique_topic: Callable[[str], str]
) -> None:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(kafka_certs.rogue_ca)}
    error = _expect_fast_failure(kafka.bootstrap_servers("SSL"), conf, unique_topic("rogue"),
                                 errors.AuthenticationError)
    assert "not signed by a trusted CA" in str(error) and "ssl.ca.location" in str(error)


def test_the_host_name_is_checked_unless_the_check_is_turned_off(
    kafka: KafkaCluster, kafka_certs: Certificates, unique_topic: Callable[[str], str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """"127.1" is 127.0.0.1 in inet_aton's short form: the same listener under a name its certificate does
    not carry. With ssl.endpoint.identification.algorithm="" the name is not checked (a warning says so);
    the certificate still has to come from a trusted CA."""
    bootstrap = f"127.1:{kafka.port(1, 'SSL')}"
    error = _expect_fast_failure(bootstrap, _tls(kafka_certs), unique_topic("wrong-name"), errors.AuthenticationError)
    assert "not valid for '127.1'" in str(error) and "ssl.endpoint.identification.algorithm" in str(error)

    topic = unique_topic("unchecked-name")
    _produce(bootstrap, {**_tls(kafka_certs), "ssl.endpoint.identification.algorithm": ""}, topic, 5)
    assert _sorted_values(kafka.bootstrap_servers("SSL"), topic, 5, _tls(kafka_certs)) == sorted(_values(5))
    assert any("NOT checked" in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records)

    rogue = {"security.protocol": "SSL", "ssl.ca.location": str(kafka_certs.rogue_ca),
             "ssl.endpoint.identification.algorithm": ""}
    _expect_fast_failure(bootstrap, rogue, unique_topic("rogue-unchecked"), errors.AuthenticationError)


def test_mutual_tls_with_a_client_certificate(
    kafka: KafkaCluster, kafka_certs: Certificates, unique_topic: Callable[[str], str]
) -> None:
    """The MTLS listener requires a client certificate from the CA; the client key is encrypted."""
    topic = unique_topic("mtls")
    bootstrap = kafka.bootstrap_servers("MTLS")
    _produce(bootstrap, _tls(kafka_certs, client_cert=True), topic, 15)
    assert _sorted_values(bootstrap, topic, 15, _tls(kafka_certs, client_cert=True)) == sorted(_values(15))


def test_mutual_tls_without_a_client_certificate_fails_on_the_first_connection(
    kafka: KafkaCluster, kafka_certs: Certificates, unique_topic: Callable[[str], str]
) -> None:
    """Kafka's TLS 1.3 listener rejects the missing certificate with an alert after the client's handshake
    is complete: the client sees it only when it reads, after it wrote ApiVersions. A failed write must not
    hide it (tests/security/test_tls.py has a listener that resets right after the alert)."""
    error = _expect_fast_failure(kafka.bootstrap_servers("MTLS"), _tls(kafka_certs), unique_topic("no-cert"),
                                 errors.AuthenticationError, limit_s=2.0)
    assert "ssl.certificate.location" in str(error)


# -- SASL -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", SASL_LISTENERS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_sasl_login_produce_and_read_back(
    mechanism: str, listener: str, kafka: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    """alice's SCRAM credentials were written at format time, her PLAIN password is in the listener's JAAS
    configuration; confluent-kafka reads the records back with the same mechanism on the same listener."""
    topic = unique_topic(f"{mechanism}-{listener}")
    bootstrap = kafka.bootstrap_servers(listener)
    _produce(bootstrap, _sasl(kafka, listener, mechanism), topic, 12)
    confluent = _sasl(kafka, listener, mechanism, confluent=True)
    assert _sorted_values(bootstrap, topic, 12, confluent) == sorted(_values(12))


_REFUSED = {"wrong_password": ("alice", WRONG_PASSWORD), "unknown_user": (UNKNOWN_USER, "alice")}
"""case: (user, password); a password that is a user's name means that user's real password."""


@pytest.mark.parametrize("listener", SASL_LISTENERS)
@pytest.mark.parametrize("mechanism", MECHANISMS)
@pytest.mark.parametrize("case", sorted(_REFUSED))
def test_a_refused_login_fails_at_once_without_the_secret(
    case: str, mechanism: str, listener: str, kafka: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    user, password = _REFUSED[case]
    password = kafka.scram_users.get(password, password)
    conf = _sasl(kafka, listener, mechanism, user, password)
    error = _expect_fast_failure(kafka.bootstrap_servers(listener), conf, unique_topic("refused"),
                                 errors.AuthenticationError)
    text = str(error)
    assert "SASL_AUTHENTICATION_FAILED" in text and mechanism in text and repr(user) in text
    assert password not in exception_texts(error)


# -- ACLs -------------------------------------------------------------------------------------------------


def test_a_topic_without_write_fails_its_records_while_other_topics_keep_working(
    kafka: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    """bob may write ``guarded``; alice may only read it (so she sees it in Metadata), and Kafka refuses
    her Produce: those records' futures fail with TopicAuthorizationFailedError, as in Java, while her
    records to ``open`` (no ACLs) in the same producer, before and after, are written."""
    guarded, open_topic = unique_topic("guarded"), unique_topic("open")
    plaintext = kafka.bootstrap_servers("PLAINTEXT")
    for topic in (guarded, open_topic):
        create_topic(plaintext, topic)
    _grant(kafka, (ResourceType.TOPIC, guarded, "bob", AclOperation.WRITE),
           (ResourceType.TOPIC, guarded, "alice", AclOperation.READ))

    conf = {"bootstrap.servers": kafka.bootstrap_servers("SASL_SSL"), "linger.ms": 0,
            **_sasl(kafka, "SASL_SSL", "SCRAM-SHA-256")}
    with KafkaProducer(conf) as producer:
        refused = [producer.send(guarded, b"alice's") for _ in range(3)]
        written = [producer.send(open_topic, value) for value in _values(5)]
        producer.flush(timeout=30)
        for future in refused:
            error = future.exception(timeout=5)
            assert isinstance(error, errors.TopicAuthorizationFailedError), repr(error)
            assert repr(guarded) in str(error)
        assert all(future.result(timeout=5).offset >= 0 for future in written)
        later = [producer.send(open_topic, value) for value in _values(5, "later")]
        assert all(future.result(timeout=30).offset >= 0 for future in later)

    _produce(kafka.bootstrap_servers("SASL_SSL"), _sasl(kafka, "SASL_SSL", "SCRAM-SHA-256", "bob"),
             guarded, 4)
    assert [r.value for r in consume_all(plaintext, guarded, expected_count=4)] == _values(4)
    assert sorted(cast(bytes, r.value) for r in consume_all(plaintext, open_topic, expected_count=10)) \
        == sorted(_values(5) + _values(5, "later"))


def test_a_topic_alice_may_not_even_describe_is_refused_by_send(
    kafka: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    """With no ACL of hers on the topic, Kafka's Metadata answer says TOPIC_AUTHORIZATION_FAILED for it.
    sparkafka's send() raises the error at once (Java returns a future that fails with it); the producer
    goes on with the other topic."""
    hidden, open_topic = unique_topic("hidden"), unique_topic("open")
    plaintext = kafka.bootstrap_servers("PLAINTEXT")
    for topic in (hidden, open_topic):
        create_topic(plaintext, topic)
    _grant(kafka, (ResourceType.TOPIC, hidden, "bob", AclOperation.WRITE))

    conf = _sasl(kafka, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    error = _expect_fast_failure(kafka.bootstrap_servers("SASL_PLAINTEXT"), conf, hidden,
                                 errors.TopicAuthorizationFailedError)
    assert repr(hidden) in str(error)
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers("SASL_PLAINTEXT"), **conf}) as producer:
        assert isinstance(producer.send(hidden, b"x").exception(0), errors.TopicAuthorizationFailedError)
        assert producer.send(open_topic, b"after").result(timeout=30).offset == 0
    assert consume_all(plaintext, hidden) == []
    assert [r.value for r in consume_all(plaintext, open_topic, expected_count=1)] == [b"after"]


def test_a_transactional_id_without_write_fails_init_transactions(
    kafka: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    """bob may use ``txn-guarded``, alice may not: her init_transactions() fails with
    TransactionalIdAuthorizationFailedError, and the producer stays failed (Java's error is fatal too). A
    transactional.id she may use works: the committed records are what a read_committed consumer sees."""
    guarded = f"txn-guarded-{uuid.uuid4().hex[:8]}"
    _grant(kafka, (ResourceType.TRANSACTIONAL_ID, guarded, "bob", AclOperation.WRITE))
    base = {"bootstrap.servers": kafka.bootstrap_servers("SASL_PLAINTEXT"),
            **_sasl(kafka, "SASL_PLAINTEXT", "SCRAM-SHA-256")}

    producer = KafkaProducer({**base, "transactional.id": guarded})
    try:
        started = time.monotonic()
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError) as info:
            producer.init_transactions(timeout=60)
        assert time.monotonic() - started < FAST_FAIL_S
        assert repr(guarded) in str(info.value)
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError):
            producer.init_transactions(timeout=60)
        with pytest.raises(errors.TransactionalIdAuthorizationFailedError):
            producer.begin_transaction()
    finally:
        producer.close(timeout=5)

    topic = unique_topic("txn-allowed")
    mine = f"txn-alice-{uuid.uuid4().hex[:8]}"
    _grant(kafka, (ResourceType.TRANSACTIONAL_ID, mine, "alice", AclOperation.WRITE))
    with KafkaProducer({**base, "transactional.id": mine}) as producer:
        producer.init_transactions(timeout=30)
        producer.begin_transaction()
        for value in _values(6):
            producer.send(topic, value)
        producer.commit_transaction(timeout=30)
    records = consume_all(kafka.bootstrap_servers("PLAINTEXT"), topic, expected_count=6,
                          isolation_level="read_committed")
    assert sorted(cast(bytes, r.value) for r in records) == sorted(_values(6))


# -- idempotence and its permission -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kafka_strict(kafka: KafkaCluster, request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """A node like ``kafka`` (same certificates and users) that refuses what no ACL allows
    (``allow.everyone.if.no.acl.found=false``); its logs are kept under test-logs/ if a test failed."""
    cluster = KafkaCluster(nodes=1, name="kafka-strict", tls=kafka.tls, scram_users=kafka.scram_users,
                           plain_users=kafka.plain_users, config={"allow.everyone.if.no.acl.found": "false"})
    failed_before = request.session.testsfailed
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
        if request.session.testsfailed > failed_before:
            print(f"\nApache Kafka logs of {cluster.name} kept in {cluster.keep_logs(REPO_ROOT / 'test-logs')}")
        cluster.stop(remove=True)


def test_write_on_a_topic_is_all_an_idempotent_producer_needs(
    kafka_strict: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    """Kafka grants a producer id (InitProducerId without a transactional id) to a principal with
    IDEMPOTENT_WRITE on the cluster or, since Kafka 3.0 (KIP-679), WRITE on any topic. alice has WRITE on
    one topic and nothing on the cluster: the idempotent producer works as Java's does."""
    topic = unique_topic("idempotent")
    create_topic(kafka_strict.bootstrap_servers("PLAINTEXT"), topic)
    _grant(kafka_strict, (ResourceType.TOPIC, topic, "alice", AclOperation.WRITE))
    conf = {"enable.idempotence": True, **_sasl(kafka_strict, "SASL_SSL", "SCRAM-SHA-512")}
    _produce(kafka_strict.bootstrap_servers("SASL_SSL"), conf, topic, 10)
    records = consume_all(kafka_strict.bootstrap_servers("PLAINTEXT"), topic, expected_count=10)
    assert sorted(cast(bytes, r.value) for r in records) == sorted(_values(10))


def test_idempotence_without_any_write_permission_fails_as_in_java(
    kafka_strict: KafkaCluster, unique_topic: Callable[[str], str]
) -> None:
    """bob may only read the topic. Kafka refuses the idempotent producer's InitProducerId with
    CLUSTER_AUTHORIZATION_FAILED; Java 4.4's producer (idempotent by default) treats it as fatal: no silent
    fall-back to a non-idempotent producer, every record fails with ClusterAuthorizationException. sparkafka
    does the same with ClusterAuthorizationFailedError (send() raises it once it is known). Without
    idempotence the broker checks only the topic: TopicAuthorizationFailedError on the record's future."""
    topic = unique_topic("read-only")
    plaintext = kafka_strict.bootstrap_servers("PLAINTEXT")
    create_topic(plaintext, topic)
    _grant(kafka_strict, (ResourceType.TOPIC, topic, "bob", AclOperation.READ))
    conf = {"bootstrap.servers": kafka_strict.bootstrap_servers("SASL_PLAINTEXT"), "linger.ms": 0,
            **_sasl(kafka_strict, "SASL_PLAINTEXT", "SCRAM-SHA-256", "bob")}

    with KafkaProducer(conf) as producer:  # enable.idempotence is on by default, as in Java
        started = time.monotonic()
        try:
            first: BaseException | None = producer.send(topic, b"first").exception(timeout=FAST_FAIL_S)
        except errors.ClusterAuthorizationFailedError as raised:  # the refusal came before the append
            first = raised
        assert isinstance(first, errors.ClusterAuthorizationFailedError), repr(first)
        assert time.monotonic() - started < FAST_FAIL_S
        assert "enable.idempotence" in str(first) and "WRITE" in str(first)
        for _ in range(2):
            with pytest.raises(errors.ClusterAuthorizationFailedError):
                producer.send(topic, b"later")

    with KafkaProducer({**conf, "enable.idempotence": False}) as producer:
        error = producer.send(topic, b"plain").exception(timeout=30)
        assert isinstance(error, errors.TopicAuthorizationFailedError), repr(error)
    assert consume_all(plaintext, topic) == []
