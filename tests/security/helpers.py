"""Shared constants and helpers of the security tests: credentials, client configs, read-back, secret scans.

How it works: every secret the tests use is listed in ``SECRETS`` so ``secrets_in`` can look for them in
any text (log records, exception chains, reprs). ``read_back`` reads a topic with confluent-kafka through
any listener (``conf`` carries its security settings), assigning every partition from offset 0.
"""

from __future__ import annotations

import time
import traceback
import uuid
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

USER = "alice"
PASSWORD = "alice-Pa55-s3cret"
WRONG_PASSWORD = "wrong-Pa55-s3cret"
UNKNOWN_USER = "mallory"
TOKEN = "oauth-t0ken-s3cret"
WRONG_TOKEN = "stale-t0ken-s3cret"
KEY_PASSWORD = "Key-Pa55word-for-tests"
SECRETS = (PASSWORD, WRONG_PASSWORD, TOKEN, WRONG_TOKEN, KEY_PASSWORD)
USERS = {USER: PASSWORD}


def sasl_conf(mechanism: str, *, tls: bool = False, user: str = USER, password: str = PASSWORD,
              ca: str | None = None) -> dict[str, Any]:
    """sparkafka (Java-named) settings for SASL over a plaintext or TLS listener."""
    conf: dict[str, Any] = {
        "security.protocol": "SASL_SSL" if tls else "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }
    if ca is not None:
        conf["ssl.ca.location"] = ca
    return conf


def exception_texts(exc: BaseException) -> str:
    """str, repr and the formatted traceback of ``exc`` and of every exception chained to it."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        parts += [str(current), repr(current)]
        current = current.__cause__ or current.__context__
    parts.append("".join(traceback.format_exception(exc)))
    return "\n".join(parts)


def secrets_in(text: str) -> list[str]:
    return [secret for secret in SECRETS if secret in text]


def read_back(bootstrap: str, topic: str, expected: int, conf: dict[str, Any] | None = None,
              timeout: float = 20.0) -> list[bytes | None]:
    """The values of ``topic`` (all partitions from offset 0), read with confluent-kafka."""
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": f"security-readback-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": "earliest",
        "fetch.wait.max.ms": 100,
        **(conf or {}),
    })
    values: list[tuple[int, int, bytes | None]] = []
    deadline = time.monotonic() + timeout
    try:
        metadata = consumer.list_topics(topic, timeout=10)
        partitions = sorted(metadata.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        while len(values) < expected:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"read {len(values)} of {expected} records of {topic!r} in {timeout}s")
            for message in consumer.consume(num_messages=500, timeout=0.5):
                error = message.error()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF or error.retriable():
                        continue
                    raise RuntimeError(f"read_back({topic!r}): {error}")
                partition, offset = message.partition(), message.offset()
                assert partition is not None and offset is not None
                value = message.value()
                values.append((partition, offset, value.encode() if isinstance(value, str) else value))
    finally:
        consumer.close()
    values.sort(key=lambda v: (v[0], v[1]))
    return [v[2] for v in values]
