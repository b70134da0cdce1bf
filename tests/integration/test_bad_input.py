"""Bad input to send() and the config: rejected at once (or after max.block.ms) with a typed error that
names the field, the limit or the topic. As in Java, what Java's ``send()`` throws raises (bad arguments,
serializers, config), and what it returns in a failed future (its ApiExceptions: a record too large, an
invalid topic name, metadata past max.block.ms, a topic not authorized) goes to the returned future and
to the callback, at once and in the sending thread. Tests that need no broker use an address nobody
listens on: every check here must happen before the producer would need one."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any, TypeVar, cast

import pytest

from sparkafka import errors
from sparkafka.producer.future import RecordMetadata
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all

from .conftest import Target

MAX_REQUEST = 10_000


def _dead_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def offline() -> Iterator[KafkaProducer]:
    """A producer whose broker does not exist, with a tiny max.block.ms."""
    producer = KafkaProducer({"bootstrap.servers": _dead_address(), "max.block.ms": 200,
                              "max.request.size": MAX_REQUEST, "buffer.memory": 50_000,
                              "batch.size": 1000})
    yield producer
    producer.close(0)


def _sizes_in(message: str) -> list[int]:
    return [int(n) for n in re.findall(r"\d+", message)]


E = TypeVar("E", bound=BaseException)


def _send_fails(producer: KafkaProducer, topic: str, expected: type[E], **kwargs: Any) -> E:
    """``send()`` does not raise: it returns a done future holding an ``expected`` error and has already
    called the callback with it, in this thread, with Java's metadata for a failed record (the topic and the
    partition given, else -1; -1 elsewhere); the error counts in record-error-total."""
    errors_before = producer.metrics()["record-error-total"]
    calls: list[tuple[RecordMetadata, BaseException | None, int]] = []
    future = producer.send(topic, callback=lambda md, exc: calls.append((md, exc, threading.get_ident())), **kwargs)
    assert future.done()
    error = future.exception(0)
    assert isinstance(error, expected), error
    with pytest.raises(expected):
        future.result(0)
    assert len(calls) == 1
    metadata, seen, thread = calls[0]
    assert seen is error and thread == threading.get_ident()
    partition = kwargs.get("partition")
    assert metadata == RecordMetadata(topic, partition if isinstance(partition, int) else -1, -1, -1, -1, -1)
    assert producer.metrics()["record-error-total"] == errors_before + 1
    return error


def test_record_larger_than_max_request_size(offline: KafkaProducer) -> None:
    message = str(_send_fails(offline, "topic-a", errors.RecordTooLargeError, value=b"x" * 20_000))
    assert "max.request.size" in message and str(MAX_REQUEST) in message
    assert any(n > 20_000 for n in _sizes_in(message)), message  # the record's own size
    assert "topic-a" in message


def test_record_larger_than_buffer_memory() -> None:
    producer = KafkaProducer({"bootstrap.servers": _dead_address(), "max.block.ms": 200,
                              "buffer.memory": 30_000, "batch.size": 1000})
    try:
        message = str(_send_fails(producer, "topic-b", errors.RecordTooLargeError, value=b"x" * 40_000,
                                  headers=[("h", b"v")], partition=3))
        assert "buffer.memory" in message and "30000" in message
        assert any(n > 40_000 for n in _sizes_in(message)), message
    finally:
        producer.close(0)


def test_large_headers_count_towards_the_limit(offline: KafkaProducer) -> None:
    _send_fails(offline, "topic-c", errors.RecordTooLargeError, value=b"small", headers=[("h", b"y" * 20_000)])


@pytest.mark.parametrize("topic", ["", "a b", "x" * 250, ".", "..", "na\u00efve", "tab\t", "semi;colon", "abc\n"])
def test_invalid_topic_names(offline: KafkaProducer, topic: str) -> None:
    started = time.monotonic()
    error = _send_fails(offline, topic, errors.InvalidTopicNameError, value=b"x")
    assert time.monotonic() - started < 0.2  # rejected before any metadata wait
    assert repr(topic)[:40] in str(error) or "characters" in str(error) or "empty" in str(error)


@pytest.mark.parametrize("topic", [None, 123, b"bytes-topic"])
def test_non_str_topic(offline: KafkaProducer, topic: Any) -> None:
    """Not a str at all: raised (Java's ProducerRecord refuses a null topic before send())."""
    with pytest.raises(errors.InvalidTopicNameError):
        offline.send(topic, value=b"x")


def test_non_bytes_without_serializer(offline: KafkaProducer) -> None:
    with pytest.raises(errors.SerializationError) as info:
        offline.send("topic-d", value="a str")
    assert "value" in str(info.value) and "topic-d" in str(info.value)
    assert "serializer" in str(info.value)
    with pytest.raises(errors.SerializationError) as info:
        offline.send("topic-d", value=b"ok", key=12345)
    assert "key" in str(info.value) and "topic-d" in str(info.value)


def test_serializer_failure_names_topic_and_field() -> None:
    def broken(topic: str, obj: object) -> bytes | None:
        if obj is None:
            return None
        raise ValueError("cannot encode this")

    producer = KafkaProducer({"bootstrap.servers": _dead_address(), "max.block.ms": 200,
                              "value.serializer": "json", "key.serializer": broken})
    try:
        with pytest.raises(errors.SerializationError) as info:  # raised, as Java's send() throws it
            producer.send("topic-e", value={"ok": 1}, key="k")
        assert producer.metrics()["record-error-total"] == 1  # and counted, as Java counts it
        message = str(info.value)
        assert "key" in message and "topic-e" in message and "cannot encode this" in message
        assert isinstance(info.value.__cause__, ValueError)
        with pytest.raises(errors.SerializationError) as info:
            producer.send("topic-e", value={1, 2}, key=None)  # a set is not JSON
        assert "value" in str(info.value) and "topic-e" in str(info.value)
    finally:
        producer.close(0)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"timestamp": -5}, "timestamp"),
    ({"timestamp": 1.5}, "timestamp"),
    ({"headers": [("k", 5)]}, "header"),
    ({"headers": [(b"k", b"v")]}, "header"),
    ({"headers": ["nope"]}, "header"),
    ({"headers": 7}, "headers"),
])
def test_bad_record_fields(mock_target: Target, kwargs: dict[str, Any], match: str) -> None:
    topic = mock_target.topic(1)
    producer = mock_target.producer({"max.block.ms": 2000})
    with pytest.raises(errors.InvalidRecordInputError, match=match):
        producer.send(topic, value=b"x", **kwargs)


def test_none_value_bytes_likes_and_str_header_value_are_allowed(mock_target: Target) -> None:
    topic = mock_target.topic(1)
    producer = mock_target.producer()
    assert producer.send(topic, value=None, key=b"k").result(10).offset == 0
    # str header values are accepted (encoded as UTF-8), as send()'s headers annotation says
    assert producer.send(topic, headers=[("s", "text")]).result(10).offset == 1
    m = producer.send(topic, value=memoryview(b"mv"), key=bytearray(b"ba")).result(10)
    assert (m.offset, m.serialized_key_size, m.serialized_value_size) == (2, 2, 2)
    records = consume_all(mock_target.bootstrap, topic, expected_count=3, timeout=15)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (b"k", None, []), (None, None, [("s", b"text")]), (b"ba", b"mv", [])]


@pytest.mark.broker
def test_unauthorized_topic_fails_fast(mock_target: Target) -> None:
    """A topic error the broker reports as final (not authorized) fails the record at once, not at
    max.block.ms (Java: a TopicAuthorizationException in the future)."""
    assert mock_target.mock is not None
    topic = mock_target._unique_topic("secret")
    mock_target.mock.topic_set_error(topic, errors.TOPIC_AUTHORIZATION_FAILED)
    producer = mock_target.producer({"max.block.ms": 10_000})
    started = time.monotonic()
    error = _send_fails(producer, topic, errors.BrokerError, value=b"x")
    assert time.monotonic() - started < 5
    assert error.code == errors.TOPIC_AUTHORIZATION_FAILED and topic in str(error)


@pytest.mark.broker
def test_partition_out_of_range(mock_target: Target) -> None:
    topic = mock_target.topic(3)
    producer = mock_target.producer({"max.block.ms": 300})
    assert producer.partitions_for(topic) == [0, 1, 2]
    started = time.monotonic()
    message = str(_send_fails(producer, topic, errors.MetadataTimeoutError, value=b"x", partition=3))
    assert time.monotonic() - started < 0.3 + 3.0
    assert "partition 3" in message and "partition count 3" in message and topic in message
    for bad in (-1, "0", 1.0):
        with pytest.raises(errors.InvalidRecordInputError):
            producer.send(topic, value=b"x", partition=cast(Any, bad))
    assert producer.send(topic, value=b"x", partition=2).result(10).partition == 2


@pytest.mark.broker
def test_unknown_topic_fails_after_max_block_ms(mock_target: Target) -> None:
    """The broker answers UNKNOWN_TOPIC_OR_PARTITION (as with auto-creation off): MetadataTimeoutError."""
    assert mock_target.mock is not None
    topic = mock_target._unique_topic("missing")
    mock_target.mock.topic_set_error(topic, errors.error_class_for_code(3).code)
    producer = mock_target.producer({"max.block.ms": 500})
    started = time.monotonic()
    error = _send_fails(producer, topic, errors.MetadataTimeoutError, value=b"x")
    elapsed = time.monotonic() - started
    assert 0.45 <= elapsed < 0.5 + 3.0, elapsed
    assert topic in str(error)
    assert "500" in str(error) or "max.block.ms" in str(error)
    with pytest.raises(errors.MetadataTimeoutError):
        producer.partitions_for(topic)


@pytest.mark.parametrize(("config", "key", "suggestion"), [
    ({"linger.msx": 5}, "linger.msx", "linger.ms"),
    ({"lingr_ms": 5}, "lingr", "linger.ms"),
    ({"bootstrap.server": "x:1"}, "bootstrap.server", "bootstrap.servers"),
    ({"compresion.type": "gzip"}, "compresion.type", "compression.type"),
])
def test_config_typos_suggest_the_right_key(config: dict[str, Any], key: str, suggestion: str) -> None:
    full = {"bootstrap.servers": "127.0.0.1:1", **config}
    with pytest.raises(errors.ConfigError) as info:
        KafkaProducer(full)
    assert key in str(info.value) and suggestion in str(info.value)


@pytest.mark.parametrize(("config", "key"), [
    ({"acks": "2"}, "acks"),
    ({"compression.type": "brotli"}, "compression.type"),
    ({"linger.ms": -1}, "linger.ms"),
    ({"acks": 0, "enable.idempotence": True}, "acks"),
    ({"batch.size": "big"}, "batch.size"),
])
def test_bad_config_values(config: dict[str, Any], key: str) -> None:
    with pytest.raises(errors.ConfigError) as info:
        KafkaProducer({"bootstrap.servers": "127.0.0.1:1", **config})
    assert key in str(info.value)
