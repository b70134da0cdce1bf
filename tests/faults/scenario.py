"""Shared plumbing of the fault scenarios: producer settings, chunked (optionally transactional) sending,
read-back and the final assertions.

How it works: ``Scenario`` owns one producer and one ``Ledger``. ``send`` sends keyed records, each
``chunk`` records in its own transaction when the producer is transactional (the mock cluster validates
sequences and drops duplicates only for transactional producers, see ``docs``/report), calling ``hook(i)``
every ``every`` records so a test can inject a fault mid-stream. ``finish`` flushes with a deadline (a
hang fails the test instead of blocking it), closes the producer, reads the topic back with
confluent-kafka and returns the ``Report``; ``assert_clean`` fails with the report's problems.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from faults.ledger import Ledger, Report, verify_records
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all

__all__ = ["BASE_CONFIG", "Scenario", "assert_clean"]

RECORDS = 100_000
BASE_CONFIG: dict[str, Any] = {
    "linger.ms": 5,
    "batch.size": 16384,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "metadata.max.age.ms": 5000,
}


class Scenario:
    """One producer, one topic, one ledger."""

    def __init__(self, bootstrap: str, topic: str, transactional_id: str | None = None, keys: int = 500,
                 **config: Any) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        conf = dict(BASE_CONFIG, **{"bootstrap.servers": bootstrap})
        if transactional_id is not None:
            conf["transactional.id"] = transactional_id
        conf.update({k.replace("_", "."): v for k, v in config.items()})
        self.producer = KafkaProducer(conf)
        self.ledger = Ledger(keys)
        self.transactional = transactional_id is not None
        self.commit_errors: list[BaseException] = []
        if self.transactional:
            self.producer.init_transactions(timeout=30)

    def send(self, count: int, every: int = 0, hook: Callable[[int], None] | None = None,
             chunk: int = 10_000) -> None:
        if not self.transactional:
            self.ledger.send(self.producer, self.topic, count, every, hook)
            return
        left = count
        while left > 0:
            n = min(chunk, left)
            self.producer.begin_transaction()
            self.ledger.send(self.producer, self.topic, n, every, hook)
            try:
                self.producer.commit_transaction(timeout=60)
            except Exception as exc:  # the test decides whether a failed commit is acceptable
                self.commit_errors.append(exc)
                self.producer.abort_transaction(timeout=60)
            left -= n

    def finish(self, flush_timeout: float = 60.0, consume_timeout: float = 60.0,
               only: Callable[[int], bool] | None = None) -> Report:
        self.producer.flush(timeout=flush_timeout)
        pending = self.ledger.wait_all(timeout=5.0)
        assert pending == 0, f"{pending} futures still pending after flush()"
        started = time.monotonic()
        self.producer.close(timeout=10)
        assert time.monotonic() - started < 15, "close() hung"
        # at least every acknowledged record (that must be there), not only each partition's end: right after a
        # leadership moves (a node back, the preferred leader elected again) a new leader can answer a fetch
        # below the high watermark the old one acknowledged up to, and the consumer saw a partition's "end"
        # before its last records (kafka_faults/stream.py reads the same way; seen here once: 358 of 3,000
        # acknowledged records "missing", all at the end of one partition, after a follower came back)
        expected = sum(1 for index in range(len(self.ledger))
                       if self.ledger.outcome(index) is None and (only is None or only(index)))
        records = consume_all(self.bootstrap, self.topic, expected_count=expected, timeout=consume_timeout)
        return verify_records(self.ledger, records, only=only)

    def close(self) -> None:
        self.producer.close(timeout=5)


def assert_clean(report: Report, *, all_acknowledged: bool = False, log_kept: bool = True) -> None:
    """The guarantees every scenario must keep (see ``faults.ledger``); ``log_kept=False`` when the
    broker lost data (a Tansu restart)."""
    problems = report.problems()
    assert not problems, f"{report.summary()}; problems: {problems}"
    if all_acknowledged:
        assert report.failed == 0, f"records failed: {report.summary()}"
        assert report.acknowledged == report.sent
    if log_kept:
        assert report.in_log >= report.acknowledged, report.summary()
