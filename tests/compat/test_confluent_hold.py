"""``MetadataHold`` alone, with a metadata stand-in and a ``send`` that blocks: the order it sends in, and that
``close()`` does not wait for a ``send`` stuck on memory (the confluent layer closes the producer, which ends
such a ``send``, before it joins the hold's thread)."""

from __future__ import annotations

import threading
import time
from typing import Any

from sparkafka._clock import SYSTEM_CLOCK
from sparkafka.compat.confluent_hold import MetadataHold


class _Cluster:
    def __init__(self) -> None:
        self.counts: dict[str, int] = {}

    def partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)


class _Metadata:
    """What MetadataHold reads of ``Metadata``: the snapshot's partition counts, a topic to fetch."""

    def __init__(self) -> None:
        self.cluster = _Cluster()

    def fetch(self) -> _Cluster:
        return self.cluster

    def add_topic(self, topic: str, now: float) -> None:
        pass

    def request_update(self) -> int:
        return 0

    def wait_for_topic(self, topic: str, partition: int | None, max_block_ms: float, **kw: Any) -> _Cluster:
        if self.cluster.partition_count(topic) is None:
            from sparkafka.errors import MetadataTimeoutError
            raise MetadataTimeoutError(f"topic {topic!r} not present")
        return self.cluster


def test_held_records_go_in_order_and_close_does_not_wait_for_a_blocked_send() -> None:
    metadata = _Metadata()
    sent: list[str] = []
    unblock = threading.Event()

    def send(record: str) -> None:
        if record == "stuck":
            unblock.wait(30)  # a send() blocked on memory until the producer closes
        sent.append(record)

    hold: MetadataHold[str] = MetadataHold(metadata, lambda: None, SYSTEM_CLOCK, 60_000,  # type: ignore[arg-type]
                                           send=send, fail=lambda record, error: None)
    for record in ("a1", "a2", "stuck", "a3"):
        assert hold.take("a", record)
    assert len(hold) == 4 and sent == []
    metadata.cluster.counts["a"] = 1  # the metadata arrives
    deadline = time.monotonic() + 10
    while sent != ["a1", "a2"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sent == ["a1", "a2"]  # in produce order, then stuck in the third
    assert hold.take("a", "a4")  # the topic has records held: a4 queues behind them
    started = time.monotonic()
    failed: list[str] = []
    hold._fail = lambda record, error: failed.append(record)
    hold.close(RuntimeError("closed"))
    assert time.monotonic() - started < 1  # does not wait for the blocked send
    assert failed == ["a3", "a4"]  # the rest fail; the one being sent is the send's to finish
    unblock.set()  # the producer's close ends the blocked send
    hold.join(5)
    assert sent == ["a1", "a2", "stuck"] and len(hold) == 0
