"""Fencing on a real coordinator (Tansu): a second producer with the same transactional.id fences the
first, whose next transactional call raises ProducerFencedError."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sparkafka import errors
from sparkafka.broker import EmbeddedBroker
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all, create_topic

pytestmark = [pytest.mark.timeout(60)]


def test_a_second_producer_with_the_same_transactional_id_fences_the_first(
        tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    topic = unique_topic("fence")
    create_topic(tansu.bootstrap_servers, topic, partitions=2)
    conf = {"bootstrap.servers": tansu.bootstrap_servers, "transactional.id": f"{topic}-id", "linger.ms": 5}
    first = KafkaProducer(conf)
    second = KafkaProducer(conf)
    try:
        first.init_transactions(timeout=10)
        with first.transaction():
            first.send(topic, b"first-1", key=b"k")
        second.init_transactions(timeout=10)  # bumps the epoch: the first producer is now a zombie
        first.begin_transaction()
        late = first.send(topic, b"first-2", key=b"k")
        with pytest.raises(errors.ProducerFencedError):
            first.commit_transaction(timeout=10)
        assert isinstance(late.exception(10), errors.KafkaError)
        for call in (first.begin_transaction, first.abort_transaction):
            with pytest.raises(errors.ProducerFencedError):
                call()
        assert isinstance(first.send(topic, b"first-3").exception(0), errors.ProducerFencedError)
        with second.transaction():
            second.send(topic, b"second-1", key=b"k")
        values = sorted(r.value or b"" for r in consume_all(tansu.bootstrap_servers, topic, expected_count=2))
        assert values == [b"first-1", b"second-1"]
    finally:
        first.close(timeout=5)
        second.close(timeout=5)
