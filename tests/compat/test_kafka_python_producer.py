"""The kafka-python compat producer: kafka-python's arguments, defaults, send() contract and futures.

How it works: the argument table is checked against the installed kafka-python's own ``DEFAULT_CONFIG``;
records go to Tansu (or the librdkafka mock cluster, to make a record fail or wait) and are read back with
confluent-kafka's consumer (``support.consume``), and compared with what the futures reported.
"""

from __future__ import annotations

import itertools
import json
import logging
import selectors
import socket
import threading
from collections.abc import Callable
from typing import Any

import kafka
import kafka.errors
import pytest
from kafka.partitioner.default import DefaultPartitioner
from kafka.serializer import JsonSerializer

from sparkafka.compat.kafka_python import KafkaProducer, RecordMetadata, TopicPartition
from sparkafka.compat.kafka_python import errors as compat_errors
from sparkafka.compat.kafka_python.config import ARGUMENTS, translate
from sparkafka.compat.kafka_python.errors import (
    BrokerResponseError,
    IllegalStateError,
    KafkaConfigurationError,
    KafkaError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
)
from sparkafka.config import INT32_MAX, ProducerConfig
from sparkafka.errors import DeliveryTimeoutError, RetriableError, error_class_for_code
from sparkafka.producer.murmur2 import partition_for_key
from support.consume import consume_all, create_topic
from support.mock_cluster import ApiKey, MockCluster
from transactions.raw_log import committed_view, read_log

pytestmark = [pytest.mark.timeout(120)]


def java(**configs: Any) -> ProducerConfig:
    return ProducerConfig.from_mapping(translate(configs).java)


# ----------------------------------------------------------------------------------------- arguments


def test_every_kafka_python_argument_is_in_the_table_with_its_default() -> None:
    theirs = kafka.KafkaProducer.DEFAULT_CONFIG
    assert set(theirs) <= set(ARGUMENTS)
    for name, default in theirs.items():
        if name in ("partitioner", "kafka_client"):
            continue  # objects: the default partitioner maps to the built-in one, the client cannot be given
        assert ARGUMENTS[name].default == default, name


def test_left_out_arguments_take_kafka_pythons_defaults() -> None:
    cfg = java()
    assert cfg.bootstrap_servers == ("localhost:9092",)
    assert cfg.linger_ms == 0 and cfg.retries == INT32_MAX and cfg.acks == -1 and cfg.enable_idempotence
    assert cfg.compression_type == "none" and cfg.send_buffer_bytes == -1 and cfg.receive_buffer_bytes == -1
    assert cfg.reconnect_backoff_max_ms == 30000 and cfg.delivery_timeout_ms == 120000
    assert cfg.client_id.startswith("kafka-python-producer-")
    assert java().client_id != cfg.client_id


@pytest.mark.parametrize(("configs", "attr", "expected"), [
    ({"bootstrap_servers": ["a", "b:19092"]}, "bootstrap_servers", ("a:9092", "b:19092")),
    ({"acks": "all"}, "acks", -1),
    ({"acks": 1}, "acks", 1),
    ({"compression_type": "gzip"}, "compression_type", "gzip"),
    ({"retries": 3}, "retries", 3),
    ({"linger_ms": 7, "batch_size": 0}, "batch_size", 1),
    ({"buffer_memory": 1 << 20}, "buffer_memory", 1 << 20),
    ({"ssl_check_hostname": False}, "ssl_endpoint_identification_algorithm", ""),
    ({"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "u",
      "sasl_plain_password": "p"}, "sasl_username", "u"),
    ({"max_in_flight_requests_per_connection": 1}, "max_in_flight_requests_per_connection", 1),
    ({"client_id": "mine"}, "client_id", "mine"),
])
def test_arguments_become_java_settings(configs: dict[str, Any], attr: str, expected: Any) -> None:
    assert getattr(java(**configs), attr) == expected


def test_oauth_token_provider_object() -> None:
    class Provider:
        def token(self) -> str:
            return "the-token"

    cfg = java(security_protocol="SASL_PLAINTEXT", sasl_mechanism="OAUTHBEARER", sasl_oauth_token_provider=Provider())
    provider = cfg.sasl_oauthbearer_token_provider
    assert provider is not None and provider() == "the-token"


@pytest.mark.parametrize(("name", "value", "reason"), [
    ("socks5_proxy", "socks5://p:1080", "SOCKS"),
    ("proxy_url", "socks5://p:1080", "SOCKS"),
    ("ssl_crlfile", "/x.crl", "ssl_context"),
    ("ssl_ciphers", "ECDHE", "ssl_context"),
    ("sasl_kerberos_service_name", "other", "GSSAPI"),
    ("metric_reporters", [object], "metrics"),
    ("allow_auto_create_topics", False, "auto-creation"),
    ("bootstrap_timeout_ms", 5000, "max_block_ms"),
    ("socket_options", [], "TCP_NODELAY"),
    ("selector", selectors.SelectSelector, "DefaultSelector"),
    ("kafka_client", object, "network client"),
])
def test_arguments_sparkafka_cannot_honour_are_errors_naming_them(name: str, value: Any, reason: str) -> None:
    with pytest.raises(KafkaConfigurationError, match=rf"kafka-python argument {name} \(other than its default\) "
                                                      rf"cannot be honoured by sparkafka: .*{reason}") as info:
        translate({name: value})
    assert info.value.key == name


def test_defaults_of_unsupported_arguments_and_api_version_are_accepted(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="sparkafka.compat"):
        translate({"socket_options": [(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)], "allow_auto_create_topics": True,
                   "selector": selectors.DefaultSelector, "api_version": (2, 8, 0), "bootstrap_timeout_ms": 30000})
    assert "api_version=(2, 8, 0) ignored" in caplog.text


def test_unknown_arguments_are_value_errors() -> None:
    with pytest.raises(ValueError, match=r"Unrecognized configs: 'linger' .* did you mean 'linger_ms'"):
        translate({"linger": 5})


# ------------------------------------------------------------------------------------------ end to end


def test_send_with_serializers_futures_and_callbacks(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("kp")
    create_topic(tansu.bootstrap_servers, topic, 4)
    succeeded: list[tuple[str, RecordMetadata]] = []
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, key_serializer=str.encode,
                             value_serializer=lambda v: json.dumps(v).encode())
    try:
        futures = []
        for i in range(20):
            future = producer.send(topic, {"n": i}, key=f"key-{i}", headers=[("h", str(i).encode())])
            future.add_callback(lambda tag, md: succeeded.append((tag, md)), "ok")
            futures.append(future)
        explicit = producer.send(topic, value={"explicit": True}, key="x", partition=3, timestamp_ms=1_650_000_000_000)
        producer.flush(30)
        assert producer.partitions_for(topic) == {0, 1, 2, 3}
        metrics = producer.metrics()
        assert metrics is not None and metrics["producer-metrics"]["record-send-total"] >= 21
    finally:
        producer.close()
    records = {(r.partition, r.offset): r for r in consume_all(tansu.bootstrap_servers, topic, expected_count=21)}
    for i, future in enumerate(futures):
        assert future.is_done and future.succeeded() and not future.failed() and future.exception is None
        md = future.get(timeout=0)
        assert future.value == md
        assert md.topic_partition == TopicPartition(topic, md.partition) and md.checksum is None
        assert md.partition == partition_for_key(f"key-{i}".encode(), 4)  # kafka-python's DefaultPartitioner
        record = records[(md.partition, md.offset)]
        assert (record.key, record.value) == (f"key-{i}".encode(), json.dumps({"n": i}).encode())
        assert record.headers == [("h", str(i).encode())]
        assert (md.serialized_key_size, md.serialized_value_size, md.serialized_header_size) == (
            len(record.key or b""), len(record.value or b""), 1 + len(str(i)))
        assert md.timestamp == record.timestamp
    assert sorted(md.offset for _, md in succeeded) == sorted(f.get().offset for f in futures)
    assert all(tag == "ok" for tag, _ in succeeded)
    md = explicit.get(0)
    assert md.partition == 3 and md.timestamp == 1_650_000_000_000 and md.serialized_key_size == 1


def test_send_raises_as_kafka_python_does(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("raise")
    create_topic(tansu.bootstrap_servers, topic, 2)
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, max_request_size=2000,
                             value_serializer=lambda v: v)
    try:
        with pytest.raises(ValueError, match="Need at least one: key or value"):
            producer.send(topic)
        with pytest.raises(TypeError, match="headers must be list-type"):
            producer.send(topic, b"v", headers={"h": b"1"})  # type: ignore[arg-type]
        with pytest.raises(TypeError, match=r"\(str, bytes\) tuples"):
            producer.send(topic, b"v", headers=[("h", "text")])  # type: ignore[list-item]
        with pytest.raises(TypeError, match="Unsupported type for serialized value: <class 'str'>"):
            producer.send(topic, "not bytes")
        with pytest.raises(ValueError, match=f"Unrecognized partition 2 for topic {topic}"):
            producer.send(topic, b"v", partition=2)
        with pytest.raises(MessageSizeTooLargeError) as too_large:
            producer.send(topic, b"x" * 5000)
        assert isinstance(too_large.value, BrokerResponseError) and too_large.value.code == 10  # as kafka-python's
        assert "max.request.size" in str(too_large.value)
    finally:
        producer.close()
    with pytest.raises(IllegalStateError, match="already closed"):
        producer.send(topic, b"v")


def test_send_argument_errors_follow_kafka_python(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    """kafka-python's exception types: TypeError for a str partition (its ``partition < 0`` fails), a float or
    bool timestamp_ms (its record builder wants exactly an int) and a topic that is None or not a str (sparkafka's
    own send() would raise ValueErrors); partition=True is partition 1 (a bool is an int there)."""
    topic = unique_topic("argtypes")
    create_topic(tansu.bootstrap_servers, topic, 2)
    theirs = kafka.KafkaProducer(bootstrap_servers=tansu.bootstrap_servers)
    ours = KafkaProducer(bootstrap_servers=tansu.bootstrap_servers)
    try:
        for producer in (theirs, ours):
            with pytest.raises(TypeError):
                producer.send(topic, b"v", partition="1")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match=r"^True$"):
                producer.send(topic, b"v", timestamp_ms=True)
            with pytest.raises(TypeError, match=r"^1\.5$"):
                producer.send(topic, b"v", timestamp_ms=1.5)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="All topics must be strings"):
                producer.send(5, b"v")  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="All topics must not be None"):
                producer.send(None, b"v")  # type: ignore[arg-type]
            assert producer.send(topic, b"v", timestamp_ms=1_600_000_000_000).get(30).timestamp == 1_600_000_000_000
            with pytest.raises(ValueError, match="partition must be >= 0"):
                producer.send(topic, b"v", partition=-1)
            assert producer.send(topic, b"v", partition=True).get(30).partition == 1
        # kafka-python writes timestamp_ms=-1 as the record's CreateTime; sparkafka's producer (Java's) takes
        # 0 .. 2**63-1 only: refused with a ValueError (kafka-python's type for a bad value) naming the argument
        assert theirs.send(topic, b"v", timestamp_ms=-1).get(30).timestamp == -1
        with pytest.raises(ValueError, match=r"timestamp_ms must be from 0 to 2\*\*63-1 .* got -1"):
            ours.send(topic, b"v", timestamp_ms=-1)
    finally:
        theirs.close(5)
        ours.close(5)


def _errback_recorder() -> tuple[list[BaseException], threading.Event, Callable[[BaseException], None]]:
    """An errback that records what it was given and sets the event."""
    failed: list[BaseException] = []
    done = threading.Event()

    def errback(exc: BaseException) -> None:
        failed.append(exc)
        done.set()

    return failed, done, errback


def test_a_failed_record_reaches_errbacks_and_get(mock_cluster: MockCluster, unique_topic: Callable[[str], str]
                                                  ) -> None:
    topic = unique_topic("fail")
    mock_cluster.create_topic(topic, 1, 1)
    producer = KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers)
    try:
        producer.send(topic, b"first").get(30)
        mock_cluster.push_request_errors(ApiKey.PRODUCE, [87])  # INVALID_RECORD: not retriable
        failed, done, errback = _errback_recorder()
        future = producer.send(topic, b"rejected")
        future.add_errback(errback)
        future.add_callback(lambda md: pytest.fail("the callback of a failed record ran"))
        with pytest.raises(KafkaError) as info:
            future.get(30)
        assert done.wait(30)
        assert future.failed() and not future.succeeded() and future.value is None
        assert failed == [future.exception] and info.value is future.exception
        late: list[BaseException] = []
        future.add_errback(late.append)  # already failed: runs at once
        assert late == [future.exception]
    finally:
        producer.close()


def test_an_expired_record_fails_retriable_as_kafka_pythons_timeout(mock_cluster: MockCluster,
                                                                    unique_topic: Callable[[str], str]) -> None:
    """kafka-python fails an expired record with KafkaTimeoutError, a RetriableError: e.retriable and
    future.retriable() are True; the compat future's error is the same object everywhere."""
    assert issubclass(kafka.errors.KafkaTimeoutError, kafka.errors.RetriableError)  # the reference
    assert kafka.errors.KafkaTimeoutError.retriable is True
    topic = unique_topic("expire")
    mock_cluster.create_topic(topic, 1, 1)
    producer = KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers, delivery_timeout_ms=2000,
                             request_timeout_ms=1000, retry_backoff_ms=100)
    try:
        producer.send(topic, b"warm").get(30)
        for broker in (1, 2, 3):
            mock_cluster.broker_set_down(broker)
        failed, done, errback = _errback_recorder()
        future = producer.send(topic, b"v")
        future.add_errback(errback)
        with pytest.raises(KafkaTimeoutError) as info:
            future.get(30)
        assert done.wait(30)
        error: BaseException = info.value
        assert "Expiring 1 record(s)" in str(error)
        assert getattr(error, "retriable", None) is True and isinstance(error, RetriableError)
        assert DeliveryTimeoutError in type(error).__mro__  # still sparkafka's class too
        assert future.failed() and future.retriable()
        assert future.exception is error and failed == [error]
    finally:
        for broker in (1, 2, 3):
            mock_cluster.broker_set_up(broker)
        producer.close(5)


def test_get_times_out_while_the_record_is_pending(mock_cluster: MockCluster, unique_topic: Callable[[str], str]
                                                   ) -> None:
    topic = unique_topic("pending")
    mock_cluster.create_topic(topic, 1, 1)
    mock_cluster.push_request_errors(ApiKey.INIT_PRODUCER_ID, [14] * 500)  # no producer id: nothing is sent
    producer = KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers)
    try:
        future = producer.send(topic, b"v")
        with pytest.raises(KafkaTimeoutError, match=r"Timeout after waiting for 0\.2 secs"):
            future.get(timeout=0.2)
        assert not future.is_done and future.value is None and future.exception is None
        with pytest.raises(KafkaTimeoutError):
            producer.flush(timeout=0.2)
        mock_cluster.clear_request_errors(ApiKey.INIT_PRODUCER_ID)
        assert future.get(timeout=30).offset == 0
    finally:
        producer.close()


class FirstPartition(kafka.partitioner.abc.Partitioner):  # type: ignore[misc]
    def partition(self, topic: str, key: Any, serialized_key: bytes | None, value: Any,
                  serialized_value: bytes | None, cluster: Any) -> int:
        assert topic in cluster.topics() and cluster.available_partitions_for_topic(topic) == {0, 1, 2}
        first: int = min(cluster.partitions_for_topic(topic))
        return first


def test_kafka_python_serializers_and_partitioners(tansu: Any, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("shapes")
    create_topic(tansu.bootstrap_servers, topic, 3)

    def last_partition(key_bytes: bytes | None, all_partitions: list[int], available: list[int]) -> int:
        return all_partitions[-1]  # kafka-python 1.x / 2.x shape

    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, value_serializer=JsonSerializer(),
                       partitioner=FirstPartition()) as first, \
            KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, partitioner=last_partition) as last, \
            KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, partitioner=DefaultPartitioner()) as default:
        assert first.send(topic, {"a": 1}, key=b"k").get(30).partition == 0
        assert last.send(topic, b"v", key=b"k").get(30).partition == 2
        assert default.send(topic, b"v", key=b"some-key").get(30).partition == partition_for_key(b"some-key", 3)
        assert default._producer.config.partitioner_class is None  # kafka-python's default: the built-in one
    values = {r.partition: r.value for r in consume_all(tansu.bootstrap_servers, topic, expected_count=3)}
    assert values[0] == b'{"a": 1}'


def test_transactions(mock_cluster: MockCluster, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("txn")
    mock_cluster.create_topic(topic, 2, 3)
    with KafkaProducer(bootstrap_servers=mock_cluster.bootstrap_servers, transactional_id=f"{topic}-id") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"committed", key=b"k")
        producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted", key=b"k")
        producer.flush()
        producer.abort_transaction()
        with pytest.raises(IllegalStateError, match="no transaction in progress"):  # after the abort
            producer.send_offsets_to_transaction({kafka.TopicPartition(topic, 0): kafka.OffsetAndMetadata(1, "", -1)},
                                                 "group")
    assert [r.value for r in committed_view(read_log(mock_cluster.bootstrap_servers, topic))] == [b"committed"]


def test_error_classes_relate_as_kafka_errors_do() -> None:
    """Every name the compat errors module shares with kafka.errors relates to the others as there (two
    known class-level differences, see below), and each broker error code sparkafka has a class for is
    exported under kafka-python's name, as that code's class."""
    names = [n for n in compat_errors.__all__ if hasattr(kafka.errors, n) and n != "as_kafka_python"]
    assert len(names) > 70
    known = {("KafkaTimeoutError", "RetriableError"),  # sparkafka's class is not; a record's timeout is
             ("CorruptRecordError", "RetriableError")}  # Java's CorruptRecordException is retriable
    for a, b in itertools.permutations(names, 2):
        if (a, b) not in known:
            theirs = issubclass(getattr(kafka.errors, a), getattr(kafka.errors, b))
            assert issubclass(getattr(compat_errors, a), getattr(compat_errors, b)) == theirs, (a, b)
    for cls in set(kafka.errors.kafka_errors.values()):
        code = cls.errno
        if code is None or code == 0:
            continue
        ours = getattr(compat_errors, cls.__name__, None)
        expected = error_class_for_code(code)
        if expected.code != code:  # no sparkafka class: a code a producer does not see
            assert ours is None, cls.__name__
        elif cls.__name__ == "MessageSizeTooLargeError":
            assert ours is not None and issubclass(ours, expected), cls.__name__
        else:
            assert ours is expected, cls.__name__


def test_a_dropped_producer_is_closed_as_kafka_pythons_del_closes_it(tansu: Any,
                                                                     unique_topic: Callable[[str], str]) -> None:
    """kafka-python's ``__del__`` closes a producer dropped unclosed (``close(timeout=1)``): its records are
    flushed and its I/O thread stops, instead of running (and reconnecting to a broker that may be gone) for
    the life of the process."""
    topic = unique_topic("kp-drop")
    create_topic(tansu.bootstrap_servers, topic, 2)
    client_id = unique_topic("kp-dropped")
    producer = KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, client_id=client_id, linger_ms=200)
    producer.send(topic, b"first").get(10)
    for i in range(20):
        producer.send(topic, f"v{i}".encode())
    name = f"kafka-producer-network-thread | {client_id}"
    assert any(t.name == name for t in threading.enumerate())
    del producer  # the last reference: collected here, closed with close(timeout=1)
    assert not any(t.name == name for t in threading.enumerate())
    assert len(consume_all(tansu.bootstrap_servers, topic, expected_count=21)) == 21
