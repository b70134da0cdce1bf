"""The main KafkaProducer with kafka-python habits: one-argument serializers, headers as a dict,
and a clear error when a producer is pickled (its config pickles).

How it works: the serializer shape is checked on ``resolve_serializer`` directly (what the producer
calls once per config); the end-to-end tests send through Tansu and read back with confluent-kafka
(``support.consume``), checking the bytes, the headers and that the key's partition is murmur2 of the
serialized key.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
from typing import Any

import pytest

from sparkafka import KafkaProducer
from sparkafka.config import ProducerConfig
from sparkafka.errors import ConfigError, InvalidRecordInputError
from sparkafka.producer.murmur2 import partition_for_key
from sparkafka.serializers import resolve_serializer
from support.consume import consume_all, create_topic


def upper(value: str) -> bytes:
    return value.upper().encode()


def with_topic(topic: str, value: str) -> bytes:
    return f"{topic}/{value}".encode()


def optional_topic(value: Any, topic: str = "-") -> bytes:
    return f"{value}@{topic}".encode()


def star_args(*args: Any) -> bytes:
    return repr(args).encode()


# ------------------------------------------------------------------------------------ serializer shape


@pytest.mark.parametrize(("spec", "obj", "expected"), [
    (str.encode, "k", b"k"),                                     # (self, /, encoding=..., errors=...)
    (lambda v: v.encode(), "v", b"v"),
    (json.dumps, {"a": 1}, '{"a": 1}'),                           # one required, keyword-only rest
    (functools.partial(json.dumps, sort_keys=True), {"b": 1, "a": 2}, '{"a": 2, "b": 1}'),
    (upper, "x", b"X"),
    (optional_topic, 7, b"7@-"),                                 # one required: f(obj)
])
def test_one_required_parameter_is_called_with_the_object(spec: Any, obj: Any, expected: Any) -> None:
    serializer = resolve_serializer(spec, "value")
    assert serializer("the-topic", obj) == expected


@pytest.mark.parametrize(("spec", "expected"), [
    (with_topic, b"the-topic/v"),
    (lambda topic, value: f"{topic}:{value}".encode(), b"the-topic:v"),
    (star_args, b"('the-topic', 'v')"),                          # accepts two: Java's (topic, obj)
])
def test_two_parameters_are_called_with_topic_and_object(spec: Any, expected: bytes) -> None:
    assert resolve_serializer(spec, "key")("the-topic", "v") == expected


def test_a_serializer_that_cannot_take_one_or_two_arguments_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"'value\.serializer' .* needs 3 positional arguments") as info:
        resolve_serializer(lambda topic, headers, value: b"", "value")
    assert info.value.key == "value.serializer"
    with pytest.raises(ConfigError, match=r"'key\.serializer' .* takes no positional argument") as info:
        resolve_serializer(lambda: b"", "key")
    assert info.value.key == "key.serializer"


def test_the_shape_is_decided_once_not_per_record() -> None:
    calls: list[tuple[Any, ...]] = []

    def record(value: Any) -> bytes:
        calls.append((value,))
        return b"x"

    serializer = resolve_serializer(record, "value")
    for i in range(3):
        serializer("t", i)
    assert calls == [(0,), (1,), (2,)]


# --------------------------------------------------------------------------------------- end to end


def test_kafka_python_style_producer_sends_the_issue_example(tansu: Any, unique_topic: Any) -> None:
    topic = unique_topic("kp")
    create_topic(tansu.bootstrap_servers, topic, 5)
    keys = [f"key-{i}" for i in range(40)]
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, value_serializer=lambda v: v.encode(),
                       key_serializer=str.encode) as producer:
        futures = [producer.send(topic, value=f"value-{i}", key=key) for i, key in enumerate(keys)]
        producer.flush(30)
        for future in futures:
            future.result(0)
    records = consume_all(tansu.bootstrap_servers, topic, expected_count=len(keys))
    assert len(records) == len(keys)
    by_key = {r.key: r for r in records}
    for i, key in enumerate(keys):
        record = by_key[key.encode()]
        assert record.value == f"value-{i}".encode()
        assert record.partition == partition_for_key(key.encode(), 5)


def test_headers_as_a_dict_or_pairs(tansu: Any, unique_topic: Any) -> None:
    topic = unique_topic("hdr")
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers) as producer:
        producer.send(topic, b"dict", headers={"b": b"2", "a": "one", "n": None})
        producer.send(topic, b"pairs", headers=[("x", b"1"), ("x", b"2")])
        producer.send(topic, b"empty-dict", headers={})
        producer.flush(30)
    records = {r.value: r for r in consume_all(tansu.bootstrap_servers, topic, expected_count=3)}
    assert records[b"dict"].headers == [("b", b"2"), ("a", b"one"), ("n", None)]
    assert records[b"pairs"].headers == [("x", b"1"), ("x", b"2")]
    assert records[b"empty-dict"].headers == []


def test_bad_headers_name_the_problem() -> None:
    producer = KafkaProducer(bootstrap_servers="127.0.0.1:1", max_block_ms=1)
    try:
        with pytest.raises(InvalidRecordInputError, match=r"header 1 key must be a str, got int"):
            producer.send("t", b"v", headers={"ok": b"1", 2: b"x"})  # type: ignore[dict-item]
        with pytest.raises(InvalidRecordInputError, match=r"header 'h' value must be bytes, str or None"):
            producer.send("t", b"v", headers={"h": 5})  # type: ignore[dict-item]
        with pytest.raises(InvalidRecordInputError, match=r"sequence of \(str, bytes\) pairs or a dict"):
            producer.send("t", b"v", headers=5)  # type: ignore[arg-type]
    finally:
        producer.close(0)


# ------------------------------------------------------------------------------------------- pickling


def test_pickling_a_producer_is_a_clear_error_and_its_config_pickles(tansu: Any, unique_topic: Any) -> None:
    topic = unique_topic("pk")
    with KafkaProducer(bootstrap_servers=tansu.bootstrap_servers, value_serializer=upper,
                       key_serializer=str.encode) as producer:
        for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError, match=r"cannot pickle or copy a KafkaProducer .* Pickle producer\.config"):
                attempt(producer)
        config = pickle.loads(pickle.dumps(producer.config))
    assert isinstance(config, ProducerConfig)
    with KafkaProducer(config) as again:
        again.send(topic, "hello", key="k").result(30)
    [record] = consume_all(tansu.bootstrap_servers, topic, expected_count=1)
    assert (record.key, record.value) == (b"k", b"HELLO")
