"""Timeouts beyond what ``threading`` can wait: Java takes ``max.block.ms`` = Long.MAX_VALUE (or a huge
close/flush timeout) as "wait forever"; Python's waits raise OverflowError past ``threading.TIMEOUT_MAX``.
Every blocking wait of the producer goes through ``_clock.wait_seconds``, which cuts such a timeout to the
longest one ``threading`` takes."""

from __future__ import annotations

import threading

from sparkafka._clock import SYSTEM_CLOCK, wait_seconds
from sparkafka.net.metadata import Metadata
from sparkafka.producer.buffer_pool import BufferPool
from sparkafka.producer.future import ProduceRequestResult
from sparkafka.producer.producer import KafkaProducer

LONG_MAX = 2**63 - 1


def test_wait_seconds_cuts_only_what_threading_cannot_wait() -> None:
    assert wait_seconds(None) is None and wait_seconds(1.5) == 1.5
    assert wait_seconds(LONG_MAX / 1000) == threading.TIMEOUT_MAX


def test_a_memory_wait_of_long_max_ms_waits_until_memory_is_freed() -> None:
    pool = BufferPool(32768, 16384, SYSTEM_CLOCK)
    held = [pool.allocate(16384, 0), pool.allocate(16384, 0)]
    got: list[bytearray] = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(16384, LONG_MAX)))
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive() and not got  # blocked, not OverflowError
    pool.deallocate(held.pop())
    waiter.join(10)
    assert not waiter.is_alive() and len(got) == 1 and len(got[0]) == 16384


def test_a_metadata_wait_of_long_max_ms_returns_with_the_topic() -> None:
    md = Metadata("h:1", clock=SYSTEM_CLOCK)

    def sender() -> None:
        md.update({"brokers": [{"node_id": 1, "host": "h", "port": 1, "rack": None}], "cluster_id": "c",
                   "controller_id": 1, "topics": [{"error_code": 0, "name": "t", "is_internal": False, "partitions": [
                       {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                        "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]}]},
                  SYSTEM_CLOCK.monotonic_ms())

    cluster = md.wait_for_topic("t", None, LONG_MAX, wakeup=lambda: threading.Timer(0.05, sender).start())
    assert cluster.partition_count("t") == 1


def test_waits_on_results_and_close_take_huge_timeouts() -> None:
    result = ProduceRequestResult("t", 0)
    result.done(0, -1)
    assert result.wait(1e300) is True
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": LONG_MAX})
    producer.flush(1e300)
    producer.close(1e300)
    assert not producer._io_thread.is_alive()
