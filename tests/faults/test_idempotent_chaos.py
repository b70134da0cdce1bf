"""Seeded chaos for the idempotent producer on the librdkafka mock cluster (3 brokers, 6 partitions).

How it works: one producer (idempotence on, acks=all, 5 requests in flight, small batches and linger
so many Produce requests go out) sends keyed records in small paced chunks (values encode key, per-key
sequence and send index, see ``faults.ledger``) while a fault thread, driven by ``random.Random(seed)``,
pushes random runs of retriable Produce errors (6, 7, 13, 19, 20; 45 and 59 in the transactional run
only, see ``IDENTITY_RESETS``), moves partition leaders,
takes a broker down for a moment (in the transactional run never the transaction coordinator's, see
``COORDINATOR``) and adds RTT spikes (always below ``request.timeout.ms``). Then
``flush()`` and ``close()`` must return within their timeouts and the topic is read back with
confluent-kafka and checked by ``verify_records``.

Which checks hold on the mock: librdkafka's mock validates sequences only for *transactional* producers
(``rd_kafka_mock_validate_records`` returns at once without a transactional id), so for a plain
idempotent producer it appends a batch that overtook a failed one (a real broker answers
OUT_OF_ORDER_SEQUENCE_NUMBER) and the log shows a reordering the producer cannot prevent. So the plain
idempotent run asserts what holds on any broker (every acknowledged record at the offset its future
reported, every failure typed, no record written under two producer id/sequence identities: copies of one
resend after a lost response are what a real broker deduplicates; no hang), and the
transactional run (one transaction per chunk, where the mock enforces sequences) also asserts
per-partition send order and that exactly the committed records are visible. It reads the raw log
(``transactions.raw_log``) rather than a read_committed consumer: the mock answers such a Fetch with
LastStableOffset = high watermark and no aborted transactions, so a consumer returns aborted (and open)
records too. Instead it checks where our batches landed: each is followed, in its partition, by a marker of
its producer id and epoch, COMMIT for a committed transaction and ABORT for an aborted one.
confluent-kafka's read_committed view (an independent decoder) must still hold every committed
record once and in order. Both views leave out the copies ``raw_log.mock_reappends`` lists: after answering
a resend as a duplicate of an older batch, the mock appends the resend of the next batch again under the
same producer id, epoch and sequence (a batch a broker deduplicates; it happens when a broker is taken down
with two Produce requests of a partition unanswered), and the producer was told the copy's offset. A record
written again under another identity is still a duplicate here.
"""

from __future__ import annotations

import functools
import os
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from faults.ledger import Ledger, decode_value, verify_records
from sparkafka import errors
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all
from support.mock_cluster import ApiKey, MockCluster
from transactions.raw_log import LogBatch, committed_view, mock_reappends, read_log

pytestmark = [pytest.mark.faults, pytest.mark.timeout(120)]

PARTITIONS = 6
BROKERS = 3
CODES = [6, 7, 13, 19, 20, 45, 59]
"""NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT, NETWORK_EXCEPTION, NOT_ENOUGH_REPLICAS,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID."""
IDENTITY_RESETS = {45, 59}
"""Injected, these are lies (the mock saw no gap and knows the producer): an idempotent producer answers them
by taking a new identity and renumbering its waiting batches, as Java bumps the epoch, and a batch whose
earlier attempt was written with its answer lost (a broker taken down) is then written again under the new
identity, which no broker can deduplicate. So the plain idempotent run, which asserts that no record is
written under two identities, does not inject them; the transactional run does."""
REQUEST_TIMEOUT_MS = 4000
COORDINATOR = 1
"""The transactional run's coordinator, a broker never taken down: when an InitProducerId that bumps the epoch
(after an abort) loses its answer, the producer asks again with the same expected epoch; Kafka's coordinator
knows that retry (its last epoch) and answers with the bumped one, the mock answers PRODUCER_FENCED
(``rd_kafka_mock_pid_bump``), a fatal error. Coordinator loss is tested on Apache Kafka
(``kafka_faults/test_broker_faults.py``: kill -9 of the coordinator)."""

CONFIG: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "max.in.flight.requests.per.connection": 5,
    "batch.size": 1024,
    "linger.ms": 2,
    "delivery.timeout.ms": 12000,
    "request.timeout.ms": REQUEST_TIMEOUT_MS,
    "retry.backoff.ms": 10,
    "retry.backoff.max.ms": 100,
    "reconnect.backoff.ms": 10,
    "reconnect.backoff.max.ms": 100,
    "metadata.max.age.ms": 1000,
}


class Chaos:
    """The fault thread: one random fault every 20-120 ms until stopped; every change is undone at the end."""

    def __init__(self, cluster: MockCluster, topic: str, rng: random.Random, down: bool = True,
                 codes: list[int] = CODES, spare: int | None = None) -> None:
        self.cluster, self.topic, self.rng, self.down, self.codes = cluster, topic, rng, down, codes
        self.can_go_down = [b for b in range(1, BROKERS + 1) if b != spare]
        self.stop = threading.Event()
        self.log: list[str] = []
        self.errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="chaos", daemon=True)

    def _run(self) -> None:
        rng, cluster = self.rng, self.cluster
        restore: list[tuple[float, Callable[[], None]]] = []
        try:
            while not self.stop.is_set():
                now = time.monotonic()
                for item in [r for r in restore if r[0] <= now]:
                    restore.remove(item)
                    item[1]()
                kind = rng.choices(["errors", "leader", "down", "rtt"], [5, 3, 1 if self.down else 0, 2])[0]
                if kind == "errors":
                    codes = [rng.choice([*self.codes, 0]) for _ in range(rng.randint(1, 6))]
                    cluster.push_request_errors(ApiKey.PRODUCE, codes)
                    self.log.append(f"errors {codes}")
                elif kind == "leader":
                    partition, broker = rng.randrange(PARTITIONS), rng.randint(1, BROKERS)
                    cluster.partition_set_leader(self.topic, partition, broker)
                    self.log.append(f"leader p{partition}->{broker}")
                elif kind == "down":
                    broker = rng.choice(self.can_go_down)
                    cluster.broker_set_down(broker)
                    restore.append((now + rng.uniform(0.05, 0.4), functools.partial(cluster.broker_set_up, broker)))
                    self.log.append(f"down {broker}")
                else:
                    broker, rtt = rng.randint(1, BROKERS), rng.randint(50, REQUEST_TIMEOUT_MS // 4)
                    cluster.broker_set_rtt(broker, rtt)
                    restore.append((now + rng.uniform(0.1, 0.6), functools.partial(cluster.broker_set_rtt, broker, 0)))
                    self.log.append(f"rtt {broker} {rtt}")
                self.stop.wait(rng.uniform(0.02, 0.12))
        except BaseException as exc:  # surfaced by finish()
            self.errors.append(exc)
        finally:
            for _, undo in restore:
                undo()
            cluster.clear_request_errors(ApiKey.PRODUCE)
            for broker in range(1, BROKERS + 1):
                cluster.broker_set_up(broker)
                cluster.broker_set_rtt(broker, 0)

    def finish(self) -> None:
        self.stop.set()
        self.thread.join(10)
        assert not self.thread.is_alive() and not self.errors, self.errors


def run_chaos(cluster: MockCluster, topic: str, seed: int, records: int, transactional: bool,
              chunk: int = 250, pause: float = 0.04) -> dict[str, Any]:
    cluster.create_topic(topic, partitions=PARTITIONS, replication=BROKERS)
    rng = random.Random(seed)
    conf = dict(CONFIG, **{"bootstrap.servers": cluster.bootstrap_servers})
    if transactional:
        conf["transactional.id"] = f"{topic}-txn"
        cluster.coordinator_set("transaction", conf["transactional.id"], COORDINATOR)
    producer = KafkaProducer(conf)
    ledger = Ledger(keys=97)
    committed: set[int] = set()
    commit_errors: list[BaseException] = []
    if transactional:
        producer.init_transactions(timeout=30)
    chaos = Chaos(cluster, topic, rng, down=True,
                  codes=CODES if transactional else [c for c in CODES if c not in IDENTITY_RESETS],
                  spare=COORDINATOR if transactional else None)
    chaos.thread.start()
    try:
        while len(ledger) < records:
            start, faults = len(ledger), len(chaos.log)
            if transactional:
                producer.begin_transaction()
            ledger.send(producer, topic, min(chunk, records - start))
            if transactional:
                try:
                    producer.commit_transaction(timeout=30)
                    committed.update(range(start, len(ledger)))
                except errors.KafkaError as exc:
                    commit_errors.append(exc)
                    producer.abort_transaction(timeout=30)
            time.sleep(pause)
            # at least one fault per chunk: the transactional run's 16 chunks can pass between a few faults
            # (9 in one run of seed 29, then "the fault thread did not run")
            deadline = time.monotonic() + 1.0
            while len(chaos.log) == faults and time.monotonic() < deadline:
                time.sleep(0.005)
    finally:
        chaos.finish()
    started = time.monotonic()
    try:
        producer.flush(timeout=30)
    finally:
        flushed = time.monotonic() - started
        pending = ledger.wait_all(timeout=2.0)
        started = time.monotonic()
        producer.close(timeout=10)
        closed = time.monotonic() - started
    assert flushed < 32 and closed < 12, (flushed, closed)
    assert pending == 0, f"{pending} futures pending after flush()"
    raw: dict[int, list[LogBatch]] = {}
    copies: dict[tuple[int, int], tuple[int, int]] = {}
    if transactional:
        # the mock answers a read_committed Fetch with LastStableOffset = high watermark and no aborted
        # transactions, so a consumer would also return aborted records: read the raw log (control batches
        # included) and apply the read_committed rule ourselves; without the batches the mock appended
        # twice under one identity (see the module docstring)
        raw = read_log(cluster.bootstrap_servers, topic)
        copies = mock_reappends(raw)
        log: list[Any] = [r for r in committed_view(raw) if (r.partition, r.offset) not in copies]
    else:
        log = consume_all(cluster.bootstrap_servers, topic, timeout=30)
    only = committed.__contains__ if transactional else None
    report = verify_records(ledger, log, only=only, offset_aliases=copies)
    independent = None
    if transactional:
        # and confluent-kafka's view (an independent decoder): every committed record, once, in order
        consumed = [r for r in consume_all(cluster.bootstrap_servers, topic, timeout=30,
                                           isolation_level="read_committed")
                    if (r.partition, r.offset) not in copies]
        independent = verify_records(ledger, consumed, only=only, offset_aliases=copies)
    return {"report": report, "independent": independent, "chaos": chaos.log, "commit_errors": commit_errors,
            "ledger": ledger, "committed": committed, "log": log, "raw": raw, "copies": copies,
            "bootstrap": cluster.bootstrap_servers, "topic": topic}


def _check(result: dict[str, Any], transactional: bool) -> None:
    report = result["report"]
    context = f"{report.summary()}; faults: {len(result['chaos'])}; mock re-appends: {len(result['copies'])}"
    assert report.pending == 0 and report.lost == 0, context + f" {report.examples}"
    assert report.offset_mismatches == 0 and report.untyped_failures == 0, context
    assert report.callback_mismatches == 0, context + f" {report.examples}"
    if transactional:
        assert report.duplicated == 0, context + f" {report.examples}"
    else:
        # A broker taken down can drop a response after the append; the resend carries the same producer id
        # and sequence (a real broker deduplicates it, the mock appends it again). A record written under
        # two different (producer id, sequence) pairs would be a real duplicate.
        assert _resent_under_new_identity(result) == [], context
        # ... which only means something if every record has an identity (the mock checks no sequence: it
        # appends a batch whose predecessor failed with an injected error, so order is not asserted here;
        # a real broker's answer to that gap is the Kafka fault tests' business)
        assert _without_identity(result) == [], context
    if transactional:
        assert report.reordered == 0, context + f" {report.examples}"
        assert _misplaced_batches(result["raw"], result["committed"]) == [], context
        # the committed view holds every committed record once (lost/duplicated above) and nothing else
        assert report.in_log == len(result["committed"]), context
        seen = result["independent"]
        assert seen.lost == 0 and seen.duplicated == 0 and seen.reordered == 0, seen.summary()
        assert seen.in_log >= len(result["committed"]), seen.summary()
    assert len(result["chaos"]) > 10, "the fault thread did not run"


def _misplaced_batches(raw: dict[int, list[LogBatch]], committed: set[int]) -> list[str]:
    """Data batches not closed by the right marker: the next control batch of the batch's producer id in its
    partition must carry the batch's epoch and be COMMIT if its records were committed, ABORT if not (a batch
    appended after its transaction's ABORT, written to a partition never added to the transaction, or under a
    stale epoch shows up here)."""
    bad: list[str] = []
    for partition, batches in raw.items():
        following: dict[int, LogBatch] = {}  # producer id -> its next control batch
        for batch in reversed(batches):
            if batch.is_control:
                following[batch.producer_id] = batch
                continue
            indexes = {decode_value(record.value)[2] for record in batch.records}
            wanted = "COMMIT" if indexes <= committed else "ABORT" if indexes.isdisjoint(committed) else "mixed"
            marker = following.get(batch.producer_id)
            found = "none" if marker is None else "COMMIT" if marker.control_type == 1 else "ABORT"
            if not batch.is_transactional or found != wanted \
                    or (marker is not None and marker.producer_epoch != batch.producer_epoch):
                bad.append(f"partition {partition} offsets {batch.base_offset}-{batch.last_offset} (producer "
                           f"{batch.producer_id}/{batch.producer_epoch}, sequence {batch.base_sequence}): {wanted} "
                           f"records, next marker {found}"
                           + ("" if marker is None else f" at {marker.base_offset} epoch {marker.producer_epoch}"))
    return bad[:5]


def _resent_under_new_identity(result: dict[str, Any]) -> list[tuple[int, set[tuple[int, int]]]]:
    identities: dict[int, set[tuple[int, int]]] = {}
    for batches in read_log(result["bootstrap"], result["topic"]).values():
        for batch in batches:
            for i, record in enumerate(batch.records):
                index = decode_value(record.value)[2]
                identities.setdefault(index, set()).add((batch.producer_id, batch.base_sequence + i))
    return [(index, ids) for index, ids in identities.items() if len(ids) > 1][:5]


def _without_identity(result: dict[str, Any]) -> list[str]:
    """Data batches written without a producer id or sequence (the producer was not idempotent)."""
    return [f"partition {partition} offset {batch.base_offset}: producer {batch.producer_id}, sequence "
            f"{batch.base_sequence}"
            for partition, batches in read_log(result["bootstrap"], result["topic"]).items()
            for batch in batches if batch.producer_id < 0 or batch.base_sequence < 0][:5]


SEEDS = [int(s) for s in os.environ.get("CHAOS_SEEDS", "1,2").split(",")]
RECORDS = int(os.environ.get("CHAOS_RECORDS", "20000"))


@pytest.mark.parametrize("seed", SEEDS)
def test_idempotent_producer_under_chaos(mock_cluster: MockCluster, unique_topic: Callable[[str], str],
                                         seed: int) -> None:
    result = run_chaos(mock_cluster, unique_topic("chaos"), seed, RECORDS, transactional=False)
    _check(result, transactional=False)


@pytest.mark.parametrize("seed", SEEDS)
def test_transactional_producer_under_chaos(mock_cluster: MockCluster, unique_topic: Callable[[str], str],
                                            seed: int) -> None:
    result = run_chaos(mock_cluster, unique_topic("chaostx"), seed, RECORDS // 5, transactional=True)
    _check(result, transactional=True)
