"""Soak test: minutes of continuous sending while random faults hit the brokers; nothing may be lost,
duplicated or reordered.

How it works: the brokers run in another process (so the memory measured is the producer's): by default
the librdkafka mock cluster (3 brokers, driven over a pipe), or with ``--target tansu`` a Tansu broker
behind the fault proxy of ``tests/faults/proxy.py``. The main thread sends keyed records whose value is
``"<key>:<per-key sequence>:<index>"`` for ``--seconds``; each record's callback stores its outcome in a
bytearray (no future is kept, so the ledger costs one byte per record). A fault thread injects a random
fault every 0.5-3 s:

* mock: bursts of retriable Produce errors (NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT,
  NOT_ENOUGH_REPLICAS(_AFTER_APPEND), UNKNOWN_TOPIC_OR_PARTITION, dropped connections), partition leaders
  moved, one broker down for 0.3-2 s. The producer is transactional (a commit every 20,000 records):
  the mock checks sequence numbers only for transactional producers.
* tansu: round-trip time above request.timeout.ms for 1-2 s, every connection cut, the broker unreachable
  for 0.3-2 s. The producer is the plain idempotent one; Tansu rejects duplicates and gaps.

Then the producer is flushed and closed, its peak RSS read (``VmHWM`` / ``ru_maxrss``), and the topic
read back with confluent-kafka, streaming (a new topic every 300,000 records: the mock keeps at most
5 MB per partition and silently drops older data): a record seen twice counts as duplicated, a record whose index
is not above the previous one in its partition as reordered, an acknowledged record never seen as lost.
Run by hand (not in CI): ``python benchmarks/soak.py --seconds 180``.
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing as mp
import os
import random
import resource
import sys
import threading
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

_TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(_TESTS))

PENDING, ACKED, FAILED = 0, 1, 2
RETRIABLE = [6, 7, 19, 20, 3]
TRANSPORT_ERROR = -195
PRODUCE = 0
TOPIC_RECORDS = 300_000


# ---------------------------------------------------------------------------------------------- brokers
def _mock_server(conn: Connection, partitions: int, topic: str) -> None:
    """Child process: owns the mock cluster, applies the fault commands it receives."""
    from support.mock_cluster import MockCluster

    cluster = MockCluster(3)
    cluster.create_topic(topic, partitions=partitions, replication=3)
    conn.send(cluster.bootstrap_servers)
    while True:
        command, *args = conn.recv()
        if command == "close":
            cluster.close()
            conn.send("closed")
            return
        getattr(cluster, command)(*args)
        if command == "create_topic":
            conn.send("created")


class MockTarget:
    transactional = True

    def __init__(self, partitions: int, topic: str, rng: random.Random) -> None:
        self.rng = rng
        self.topic = topic
        self.partitions = partitions
        self.down: set[int] = set()
        self._conn, child = mp.Pipe()
        self._proc = mp.get_context("spawn").Process(target=_mock_server, args=(child, partitions, topic),
                                                     daemon=True)
        self._proc.start()
        self.bootstrap: str = self._conn.recv()
        self._lock = threading.Lock()

    def new_topic(self, name: str) -> None:
        with self._lock:
            self._conn.send(("create_topic", name, self.partitions, 3))
            assert self._conn.recv() == "created"
        self.topic = name

    def _do(self, *command: Any) -> None:
        with self._lock:
            self._conn.send(command)


    def fault(self) -> str:
        kind = self.rng.choice(["burst", "burst", "leaders", "bounce"])
        if kind == "burst":
            codes = [self.rng.choice([*RETRIABLE, TRANSPORT_ERROR]) for _ in range(self.rng.randint(3, 15))]
            self._do("push_request_errors", PRODUCE, codes)
        elif kind == "leaders":
            for partition in range(self.partitions):
                self._do("partition_set_leader", self.topic, partition, self.rng.randint(1, 3))
        else:
            broker = self.rng.randint(1, 3)
            self._do("broker_set_down", broker)
            time.sleep(self.rng.uniform(0.3, 2.0))
            self._do("broker_set_up", broker)
        return kind

    def close(self) -> None:
        self._do("close")
        self._conn.recv()
        self._proc.join(10)


class TansuTarget:
    transactional = False

    def __init__(self, partitions: int, topic: str, rng: random.Random) -> None:
        from faults.proxy import FaultProxy, ProxiedTansu

        self.rng = rng
        self.proxy = FaultProxy()
        self.broker = ProxiedTansu(self.proxy.address)
        self.broker.start()
        self.proxy.target = (self.broker.host, self.broker.port or 0)
        self.bootstrap = self.proxy.address
        self.partitions = partitions
        self.new_topic(topic)

    def new_topic(self, name: str) -> None:
        from support.consume import create_topic

        create_topic(self.bootstrap, name, partitions=self.partitions)

    def fault(self) -> str:
        kind = self.rng.choice(["latency", "cut", "down"])
        if kind == "latency":
            # opens on the next Produce request, so a request is on the wire when answers slow down
            window = self.proxy.slow_window(1500, self.rng.uniform(1.0, 2.0))
            if not window.wait(30):
                kind = "latency (window never opened)"
        elif kind == "cut":
            self.proxy.cut()
        else:
            self.proxy.down()
            time.sleep(self.rng.uniform(0.3, 2.0))
            self.proxy.up()
        return kind

    def close(self) -> None:
        self.proxy.close()
        self.broker.stop()


# ---------------------------------------------------------------------------------------------- ledger
class Outcomes:
    """One byte per record (pending / acknowledged / failed) and a count of failure types."""

    def __init__(self) -> None:
        self.state = bytearray()
        self.failures: Counter[str] = Counter()

    def callback(self, index: int, metadata: Any, error: BaseException | None) -> None:
        if error is None:
            self.state[index] = ACKED
        else:
            self.state[index] = FAILED
            self.failures[type(error).__name__] += 1


def peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def read_back(bootstrap: str, topics: list[str], outcomes: Outcomes, partitions: int) -> dict[str, int]:
    seen = bytearray(len(outcomes.state))
    duplicated = reordered = 0
    for topic in topics:
        d, r = _read_topic(bootstrap, topic, partitions, seen)
        duplicated += d
        reordered += r
    lost = sum(1 for i, s in enumerate(outcomes.state) if s == ACKED and not seen[i])
    return {"in_log": sum(seen), "duplicated": duplicated, "reordered": reordered, "lost": lost}


def _read_topic(bootstrap: str, topic: str, partitions: int, seen: bytearray) -> tuple[int, int]:
    """Stream one topic: marks ``seen``; returns (duplicated, reordered)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    last: dict[int, int] = {}
    duplicated = reordered = 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"soak-{os.getpid()}",
                             "enable.auto.commit": False, "enable.partition.eof": True,
                             "auto.offset.reset": "error", "fetch.wait.max.ms": 100})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    at_end: set[int] = set()
    idle_since = time.monotonic()
    try:
        while len(at_end) < partitions and time.monotonic() - idle_since < 60:
            for message in consumer.consume(num_messages=5000, timeout=0.5):
                error = message.error()
                partition = message.partition()
                if error is not None:
                    if error.code() == KafkaError._PARTITION_EOF and partition is not None:
                        at_end.add(partition)
                        continue
                    raise RuntimeError(f"reading {topic} back: {error}")  # e.g. the log was truncated
                assert partition is not None
                idle_since = time.monotonic()
                at_end.discard(partition)
                value = message.value()
                assert isinstance(value, bytes)
                index = int(value.rsplit(b":", 1)[1])
                if seen[index]:
                    duplicated += 1
                seen[index] = 1
                previous = last.get(partition, -1)
                if index <= previous:
                    reordered += 1
                last[partition] = index
    finally:
        consumer.close()
    return duplicated, reordered


# ---------------------------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=180.0)
    parser.add_argument("--target", choices=["mock", "tansu"], default="mock")
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none",
                        help="compression.type of the producer")
    args = parser.parse_args()

    from sparkafka.producer.producer import KafkaProducer

    rng = random.Random(args.seed)
    topic = f"soak-{args.seed}-{int(time.time())}"
    target: MockTarget | TansuTarget = (MockTarget if args.target == "mock" else TansuTarget)(
        args.partitions, topic, rng)
    config: dict[str, Any] = {"bootstrap.servers": target.bootstrap, "linger.ms": 5, "batch.size": 16384,
                              "request.timeout.ms": 1000, "retry.backoff.ms": 20, "retry.backoff.max.ms": 200,
                              "reconnect.backoff.ms": 20, "reconnect.backoff.max.ms": 200,
                              "compression.type": args.compression}
    if target.transactional:
        config["transactional.id"] = f"{topic}-txn"
    producer = KafkaProducer(config)
    if target.transactional:
        producer.init_transactions(timeout=30)
    outcomes = Outcomes()
    faults: Counter[str] = Counter()
    stop = threading.Event()

    def inject() -> None:
        while not stop.wait(rng.uniform(0.5, 3.0)):
            faults[target.fault()] += 1

    injector = threading.Thread(target=inject, name="faults", daemon=True)
    started = time.monotonic()
    injector.start()
    key_seq = [0] * args.keys
    state = outcomes.state
    commit_failures = 0
    topics = [topic]
    while time.monotonic() - started < args.seconds:
        if len(state) >= len(topics) * TOPIC_RECORDS:
            # the mock keeps at most 5 MB / 100,000 batches per partition: move to a fresh topic in time
            topics.append(f"{topic}-{len(topics)}")
            target.new_topic(topics[-1])
        current = topics[-1]
        if target.transactional:
            producer.begin_transaction()
        for _ in range(20_000):
            index = len(state)
            k = index % args.keys
            seq = key_seq[k]
            key_seq[k] = seq + 1
            state.append(PENDING)
            producer.send(current, b"%d:%d:%d" % (k, seq, index), key=b"key-%d" % k,
                          callback=functools.partial(outcomes.callback, index))
        if target.transactional:
            try:
                producer.commit_transaction(timeout=120)
            except Exception as exc:  # counted and reported; a failed commit is aborted
                commit_failures += 1
                print(f"commit failed: {exc!r}", flush=True)
                producer.abort_transaction(timeout=120)
    stop.set()
    injector.join()
    producer.flush(timeout=120)
    sent_seconds = time.monotonic() - started
    producer.close(timeout=30)
    rss = peak_rss_mb()
    pending = state.count(PENDING)
    result = read_back(target.bootstrap, topics, outcomes, args.partitions)
    target.close()

    sent = len(state)
    print(f"target: {args.target} ({'transactional' if target.transactional else 'idempotent'} producer), "
          f"{args.partitions} partitions, {args.keys} keys, seed {args.seed}")
    print(f"ran for {sent_seconds:.0f} s over {len(topics)} topics; faults injected: {dict(faults)}")
    print(f"records sent:         {sent}")
    print(f"acknowledged:         {state.count(ACKED)}")
    print(f"failed:               {state.count(FAILED)} {dict(outcomes.failures) or ''}")
    print(f"still pending:        {pending}")
    print(f"failed commits:       {commit_failures}")
    print(f"in the log:           {result['in_log']}")
    print(f"duplicated:           {result['duplicated']}")
    print(f"reordered:            {result['reordered']}")
    print(f"acknowledged but lost: {result['lost']}")
    print(f"throughput:           {sent / sent_seconds:,.0f} records/s")
    print(f"producer peak RSS:    {rss:.0f} MiB")
    clean = result["duplicated"] == 0 and result["reordered"] == 0 and result["lost"] == 0 and pending == 0
    print("RESULT:", "PASS" if clean else "FAIL")
    return 0 if clean else 1


if __name__ == "__main__":
    sys.exit(main())
