"""The leak check of ``conftest.no_leaked_threads`` (``support/thread_leaks.py``) finds a producer left running
and lets one that was closed, or only dropped, pass."""

from __future__ import annotations

import gc
import threading

from sparkafka.compat.confluent import Producer
from sparkafka.producer.producer import KafkaProducer
from support.thread_leaks import leaked_threads, wait_for_leaks


def test_a_producer_left_running_is_found_and_a_closed_one_is_not() -> None:
    before = set(threading.enumerate())
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:9", "client.id": "leak-check"})
    try:
        leaked = wait_for_leaks(before, grace_s=0.3)
        assert [t.name for t in leaked] == ["kafka-producer-network-thread | leak-check"]
    finally:
        producer.close(5)
    assert wait_for_leaks(before, grace_s=5) == []


def test_a_dropped_confluent_producer_is_collected_within_the_grace() -> None:
    """The confluent layer closes a Producer dropped without close() when it is collected (as confluent-kafka
    does): the check collects garbage while it waits."""
    before = set(threading.enumerate())
    producer = Producer({"bootstrap.servers": "127.0.0.1:9"})
    assert leaked_threads(before)
    gc.disable()  # only the check's own gc.collect() may find the cycle
    try:
        del producer
        assert wait_for_leaks(before, grace_s=5) == []
    finally:
        gc.enable()
