"""Idempotence is on by default, end to end on Tansu: the batches in the broker's log carry a producer id,
its epoch and per-partition sequences that advance by the record count; Java's rules switch it off
silently only when the user did not ask for it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sparkafka import errors
from sparkafka.broker import EmbeddedBroker
from sparkafka.producer.producer import KafkaProducer
from support.consume import create_topic
from transactions.raw_log import read_log

pytestmark = [pytest.mark.timeout(60)]


def _send(bootstrap: str, topic: str, **config: object) -> None:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 1024}
    conf.update({k.replace("_", "."): v for k, v in config.items()})
    producer = KafkaProducer(conf)
    try:
        futures = [producer.send(topic, b"v%05d" % i, key=b"k%d" % (i % 7)) for i in range(2000)]
        producer.flush(timeout=30)
        assert all(f.exception(0) is None for f in futures)
    finally:
        producer.close(timeout=5)


def test_the_default_producer_is_idempotent(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("idem")
    create_topic(tansu.bootstrap_servers, topic, partitions=3)
    _send(tansu.bootstrap_servers, topic)
    log = read_log(tansu.bootstrap_servers, topic)
    producer_ids = set()
    for batches in log.values():
        assert batches
        expected = 0
        for batch in batches:
            assert batch.producer_id >= 0 and not batch.is_transactional
            assert batch.base_sequence == expected
            expected += len(batch.records)
            producer_ids.add((batch.producer_id, batch.producer_epoch))
    assert len(producer_ids) == 1


def test_acks_1_turns_default_idempotence_off(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("noidem")
    create_topic(tansu.bootstrap_servers, topic, partitions=1)
    _send(tansu.bootstrap_servers, topic, acks=1)
    batches = read_log(tansu.bootstrap_servers, topic)[0]
    assert batches and all(b.producer_id == -1 and b.base_sequence == -1 for b in batches)


def test_explicit_idempotence_with_acks_1_is_a_config_error() -> None:
    with pytest.raises(errors.ConfigError, match="acks"):
        KafkaProducer({"bootstrap.servers": "127.0.0.1:9", "enable.idempotence": True, "acks": 1})
