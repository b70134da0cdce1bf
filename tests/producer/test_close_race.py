"""A graceful ``close()`` while another thread's ``send()`` is opening a new batch: the record is sent, not
left pending. The window (between the append's closed check under the partition queue's lock and the new
batch joining the queue) is widened with a slow batch builder; the I/O thread waits for every append that
passed the closed check (``RecordAccumulator.await_appends``) before its last look for work."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import sparkafka.producer.accumulator as accumulator_module
from sparkafka.producer.future import RecordFuture
from sparkafka.producer.producer import KafkaProducer
from support.mock_cluster import MockCluster


def test_a_record_whose_batch_is_being_opened_during_close_is_sent(mock_cluster: MockCluster,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    mock_cluster.create_topic("race", partitions=1, replication=1)
    producer = KafkaProducer({"bootstrap.servers": mock_cluster.bootstrap_servers, "linger.ms": 0})
    producer.send("race", b"warm-up", partition=0).result(10)  # metadata, connection, the first batch done
    real = accumulator_module.RecordBatchBuilder  # type: ignore[attr-defined]
    inside = threading.Event()

    def slow_builder(*args: Any, **kwargs: Any) -> Any:
        inside.set()
        time.sleep(0.5)  # the queue's lock is held here
        return real(*args, **kwargs)

    monkeypatch.setattr(accumulator_module, "RecordBatchBuilder", slow_builder)
    sent: list[RecordFuture] = []
    called: list[object] = []
    thread = threading.Thread(target=lambda: sent.append(
        producer.send("race", b"late", partition=0, callback=lambda m, e: called.append(e))))
    thread.start()
    assert inside.wait(10)
    producer.close(10)
    thread.join(10)
    assert sent[0].result(0).offset == 1 and called == [None]
