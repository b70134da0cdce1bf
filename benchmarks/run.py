"""Producer benchmark: sparkafka vs confluent-kafka, aiokafka, kafka-python and the Java producer, in one run.

Usage: ``python benchmarks/run.py`` (about 8 minutes on 2 cores; 12 with ``--repeat 3``). Options:
``--quick`` (a tenth of the records, for a smoke test), ``--scale X`` (multiply every record count),
``--repeat N`` (runs per client and workload, default 2, the best is reported: other load on the
machine only ever slows a run down), ``--thread-rounds N`` (rounds of the threads block, default 5),
``--clients``, ``--workloads``, ``--bootstrap-servers`` (an external broker instead of the embedded
Tansu), ``--broker mock`` (a librdkafka mock cluster instead), ``--broker kafka`` (one Apache Kafka
node, with the Java producer as a peer), ``--out DIR`` (default ``docs/bench``).

How it works: one broker serves the whole run (an embedded Tansu unless ``--bootstrap-servers`` is
given). Before each (workload, client) run the embedded broker is restarted, so every run starts
with an empty in-memory log, and a fresh 6-partition topic is created. Each run is a separate
``benchmarks/worker.py`` process (its docstring describes the send loop, identical for all clients)
that prints one JSON result: acknowledged records/s and MB/s (first send to last acknowledgement),
the rate of the send loop alone, CPU seconds per million records and peak RSS of that process,
latency percentiles. Record counts are fixed per (workload, client) so each run lasts a few seconds;
rates do not depend on the count once batches are flowing.

Workloads: ``keyed-100`` (8-byte keys, 100-byte values), ``keyed-100-lz4``, ``keyed-1k`` (1 KB
values), ``keyless-100`` (sticky partitioning), ``keyless-100-lz4``, ``threads-1/2/4/8`` (keyed-100
from N threads sharing one producer; sparkafka and confluent-kafka; the four run in interleaved
rounds, and thread scaling is the median over rounds of N threads' records/s divided by one thread's
in the same round, so it compares runs made under the same machine load; the ratio of the best runs
and the CPython reference from ``gil_reference.py`` are printed next to it), ``arrow`` (10,000-row
Arrow batches: ``send_arrow`` for sparkafka, ``to_pylist`` + ``produce`` for confluent-kafka),
``arrow-256k`` (the same with batch.size 262144 for both clients: with 16 KB batches the embedded
Tansu spends about as much CPU per batch as the bulk path itself, so the broker, not the client, sets
the pace), ``keyed-100-256k`` (keyed-100 per-record at batch.size 262144: the per-record run with
arrow-256k's settings). Both Arrow workloads also run the ``ceiling`` (``broker_ceiling.py``): not a
client but pre-built Produce requests of full batches sent as fast as the broker answers, the most any
producer can reach against that broker at that batch.size on this machine.

``sparkafka-py`` is sparkafka without its C accelerator (the worker runs with ``SPARKAFKA_NO_ACCEL=1``, half
the accelerated record count) on keyed-100, keyless-100 and arrow: the pure-Python line compares it with
kafka-python and with the accelerated build of the same run.

Brokers: ``--broker mock`` runs the workloads against a librdkafka mock cluster instead (3 brokers, C,
a new one per run, ``mock_broker.py``), which needs far less CPU per batch than Tansu. ``--broker
kafka`` starts one Apache Kafka node (KRaft, ``tests/support/kafka_cluster.py``, the release of
``jvm/pom.xml``) for the whole run; each run gets a fresh topic, deleted afterwards, into which an
untimed ``ceiling`` run writes ``TOPIC_WARMUP_RECORDS`` records first. With it the Java
producer joins as a peer (``java_peer.py``; name them in ``--clients`` to run them on another broker):
``java``, Kafka's ``KafkaProducer`` in the worker's loop (a callback per record) on the keyed
workloads, and ``java-perf``, Kafka's own ``ProducerPerformance`` on the keyless ones, each in a JVM
with the same fixed heap and a JIT warm-up run before the timed one. Settings for every client:
acks=all, idempotence on (aiokafka: only on Apache Kafka, Tansu refuses it), linger.ms=5, batch size
16384 (unless named), compression none (lz4 where named).

Output: a table per workload with each client's numbers and the ratio of sparkafka to each peer (and a
line of the ratios to the Java producer), saved with the raw results under ``--out``
(``results.json``, ``results.md``) and a PNG chart (``throughput.png``).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))

PARTITIONS = 6
CLIENTS = ("sparkafka", "confluent", "aiokafka", "kafka-python")
PURE = "sparkafka-py"
"""sparkafka without its C accelerator (the worker runs with ``SPARKAFKA_NO_ACCEL=1``)."""
CEILING = "ceiling"
"""Not a client: ``broker_ceiling.py``, the broker's limit (run with the bulk workloads)."""
JAVA = "java"
"""Kafka's KafkaProducer in the worker's loop (``java/KeyedProducerBench.java``, via ``java_peer.py``)."""
JAVA_PERF = "java-perf"
"""Kafka's own ProducerPerformance (kafka-tools), keyless workloads only (``java_peer.py``)."""
JAVA_CLIENTS = (JAVA, JAVA_PERF)
ALL_CLIENTS = (*CLIENTS, PURE, *JAVA_CLIENTS, CEILING)
SLOW = ("aiokafka", "kafka-python")
RUN_TIMEOUT_S = 240
KAFKA_HEAP = "1g"
"""Heap of the Apache Kafka node of ``--broker kafka`` (-Xms = -Xmx)."""
BROKER_WARMUP_RECORDS = 3_000_000
"""Records of the untimed warm-up of the Apache Kafka node (times ``--scale``, at least a tenth)."""
TOPIC_WARMUP_RECORDS = 100_000
"""Records of the untimed ``ceiling`` run into each fresh topic on Apache Kafka before its timed run: a new
topic is slower for its first few MB (seconds with 600 partitions, ``scale.py``), and the Java peers'
warm-up writes into their topic before their timed run, so every client gets a topic in that state."""


@dataclass(frozen=True)
class Workload:
    name: str
    description: str
    value_size: int = 100
    key_size: int = 8
    compression: str = "none"
    threads: int = 1
    arrow: bool = False
    batch_size: int = 16384
    clients: tuple[str, ...] = CLIENTS
    group: str = ""
    """Workloads of one group run in interleaved rounds (round 1 of each, then round 2, ...)."""
    records_fast: int = 2_000_000
    """Records for sparkafka and confluent-kafka."""
    records_slow: int = 200_000
    """Records for aiokafka and kafka-python (several times slower)."""

    def records(self, client: str, scale: float) -> int:
        base = self.records_slow if client in SLOW else self.records_fast
        if client == PURE:  # about a third of the accelerated rate
            base = self.records_fast // 2
        return max(1000, int(base * scale))


WORKLOADS: tuple[Workload, ...] = (
    Workload("keyed-100", "8-byte keys, 100-byte values", clients=(*CLIENTS, PURE, JAVA)),
    Workload("keyed-100-lz4", "8-byte keys, 100-byte values, lz4", compression="lz4", clients=(*CLIENTS, JAVA)),
    Workload("keyed-1k", "8-byte keys, 1 KB values", value_size=1024, records_fast=600_000,
             records_slow=100_000, clients=(*CLIENTS, JAVA)),
    Workload("keyless-100", "no key (sticky partitioner), 100-byte values", key_size=0,
             clients=(*CLIENTS, PURE, JAVA_PERF)),
    Workload("keyless-100-lz4", "no key (sticky partitioner), 100-byte values, lz4", key_size=0,
             compression="lz4", clients=("sparkafka", "confluent", JAVA_PERF)),
    Workload("threads-1", "keyed-100 from 1 thread, in the same rounds as threads-2/4/8 (their baseline)",
             clients=("sparkafka", "confluent"), group="threads"),
    Workload("threads-2", "keyed-100 from 2 threads", threads=2, clients=("sparkafka", "confluent"), group="threads"),
    Workload("threads-4", "keyed-100 from 4 threads", threads=4, clients=("sparkafka", "confluent"), group="threads"),
    Workload("threads-8", "keyed-100 from 8 threads", threads=8, clients=("sparkafka", "confluent"), group="threads"),
    Workload("arrow", "keyed-100 from 10,000-row Arrow batches", arrow=True,
             clients=("sparkafka", PURE, "confluent", CEILING)),
    Workload("arrow-256k", "keyed-100 from 10,000-row Arrow batches, batch.size 262144 for both clients",
             arrow=True, batch_size=262144, clients=("sparkafka", PURE, "confluent", CEILING), records_fast=4_000_000),
    Workload("keyed-100-256k", "keyed-100 with batch.size 262144 (the per-record run at arrow-256k's settings)",
             batch_size=262144, clients=("sparkafka", "confluent", JAVA)),
)
PER_RECORD_BASELINE = {"arrow": "keyed-100", "arrow-256k": "keyed-100-256k"}
"""The per-record workload with the same settings as each bulk workload (same batch.size)."""


# ------------------------------------------------------------------------------------------- broker
class Broker:
    """The embedded Tansu broker (restarted before each run), a librdkafka mock cluster (a new one per
    run, ``mock_broker.py``), one Apache Kafka node for the whole run (``tests/support/kafka_cluster.py``;
    a fresh topic per run, deleted after it) or an external broker."""

    def __init__(self, servers: str | None, kind: str = "tansu") -> None:
        self.external = servers
        self.kind = kind
        self.embedded: Any = None
        self.kafka: Any = None
        self.mock: subprocess.Popen[str] | None = None
        self.mock_servers = ""

    @contextlib.contextmanager
    def running(self) -> Iterator[Broker]:
        if self.external or self.kind == "mock":
            try:
                yield self
            finally:
                self._stop_mock()
            return
        if self.kind == "kafka":
            sys.path.insert(0, os.path.join(ROOT, "tests"))
            from support.kafka_cluster import KafkaCluster

            with KafkaCluster(nodes=1, name="bench", heap=KAFKA_HEAP) as cluster:
                self.kafka = cluster
                yield self
            return
        from sparkafka.broker import EmbeddedBroker

        with EmbeddedBroker() as broker:
            self.embedded = broker
            yield self

    @property
    def servers(self) -> str:
        if self.external:
            return self.external
        if self.kind == "mock":
            return self.mock_servers
        if self.kafka is not None:
            return str(self.kafka.bootstrap)
        return str(self.embedded.bootstrap_servers)

    def done(self, topic: str) -> None:
        """After a run on Apache Kafka: delete its topic (its log is on disk; the next run has its own)."""
        if self.kafka is None:
            return
        from confluent_kafka.admin import AdminClient

        futures = AdminClient({"bootstrap.servers": self.servers}).delete_topics([topic], operation_timeout=30)
        for future in futures.values():
            with contextlib.suppress(Exception):
                future.result(60)

    def _stop_mock(self) -> None:
        if self.mock is not None:
            assert self.mock.stdin is not None
            self.mock.stdin.close()
            self.mock.wait(30)
            self.mock = None

    def fresh_topic(self, name: str) -> str:
        """Restart the embedded broker (empty log) or start a new mock cluster, and create a new topic."""
        topic = f"bench-{name}-{uuid.uuid4().hex[:6]}"
        if self.kind == "mock" and not self.external:
            self._stop_mock()
            self.mock = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "mock_broker.py"), "--topic", topic,
                 "--partitions", str(PARTITIONS)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert self.mock.stdout is not None
            self.mock_servers = self.mock.stdout.readline().strip()
            if not self.mock_servers:
                raise RuntimeError("the mock cluster did not start (benchmarks/mock_broker.py)")
            return topic
        if self.embedded is not None:
            self.embedded.restart()
        from sparkafka.net.admin import AdminClient

        with AdminClient(self.servers) as admin:
            admin.create_topics([(topic, PARTITIONS, 1)], exist_ok=True)
        if self.kafka is not None:  # untimed, as the Java peers' warm-up writes into their topic first
            from broker_ceiling import run_ceiling

            run_ceiling(self.servers, topic, TOPIC_WARMUP_RECORDS, 16384, 8, 100)
        return topic


# ------------------------------------------------------------------------------------------- running
def run_one(broker: Broker, workload: Workload, client: str, scale: float) -> dict[str, Any]:
    topic = broker.fresh_topic(workload.name)
    cmd = [sys.executable, os.path.join(HERE, "worker.py"), "--client", client,
           "--bootstrap-servers", broker.servers, "--topic", topic,
           "--records", str(workload.records(client, scale)), "--value-size", str(workload.value_size),
           "--key-size", str(workload.key_size), "--compression", workload.compression,
           "--threads", str(workload.threads), "--batch-size", str(workload.batch_size)]
    if workload.arrow:
        cmd.append("--arrow")
    if client == "aiokafka" and broker.kind == "kafka" and not broker.external:
        cmd.append("--aiokafka-idempotence")  # Apache Kafka grants aiokafka's InitProducerId (Tansu does not)
    env = {**os.environ, "SPARKAFKA_NO_ACCEL": "1"} if client == PURE else None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False, env=env)
    except subprocess.TimeoutExpired:
        return {"client": client, "error": f"timed out after {RUN_TIMEOUT_S} s"}
    finally:
        broker.done(topic)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"client": client, "error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    if result.get("errors"):
        result["error"] = f"{result['errors']} records failed: {result.get('first_error')}"
    return result


def warm_up_broker(broker: Broker, scale: float) -> None:
    """Runs before the first measured run on Apache Kafka, not reported: the ``ceiling`` run (pre-built
    Produce requests, next to no client CPU) for ``BROKER_WARMUP_RECORDS`` records, so the broker's JIT
    has compiled its produce path before any client is timed."""
    warm = Workload("broker-warmup", "not reported", clients=(CEILING,),
                    records_fast=BROKER_WARMUP_RECORDS, records_slow=BROKER_WARMUP_RECORDS)
    result = run_one(broker, warm, CEILING, max(scale, 0.1))
    state = result.get("error") or f"{result['records_per_second']:,.0f} rec/s"
    print(f"{'broker warm-up':14s} {CEILING:13s} {state} (not reported)", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------- reporting
def _fmt(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def _ratio(ours: dict[str, Any], theirs: dict[str, Any], field: str) -> str:
    """``ours[field] / theirs[field]`` as ``1.23x``; ``-`` when either is missing (ProducerPerformance
    reports no send-loop rate)."""
    a, b = ours.get(field), theirs.get(field)
    return "-" if a is None or not b else _fmt(a / b, 2) + "x"


def table(workload: Workload, results: list[dict[str, Any]]) -> str:
    """A Markdown table: one row per client, ratios of sparkafka to each peer."""
    ours = next((r for r in results if r["client"] == "sparkafka" and "error" not in r), None)
    head = (f"### {workload.name}: {workload.description}\n\n"
            "| client | records/s | MB/s | send() loop rec/s | CPU s / M records | peak RSS MB "
            "| p50 ms | p99 ms | sparkafka / client (records/s) | (send loop) | (CPU per record, lower = better) |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    rows = [head]
    for r in results:
        if "error" in r:
            rows.append(f"| {r['client']} | failed: {r['error'][:120]} |||||||||")
            continue
        pct = r.get("percentiles_ms") or {}
        if ours is not None and r is not ours:
            ratio = _ratio(ours, r, "records_per_second")
            send_ratio = _ratio(ours, r, "send_records_per_second")
            cpu_ratio = _ratio(ours, r, "cpu_seconds_per_million")
        else:
            ratio = send_ratio = cpu_ratio = ""
        rows.append(
            f"| {r['client']} | {_fmt(r['records_per_second'], 0)} | {_fmt(r['mb_per_second'], 2)} "
            f"| {_fmt(r.get('send_records_per_second'), 0)} | {_fmt(r['cpu_seconds_per_million'], 2)} "
            f"| {_fmt(r['peak_rss_mb'], 0)} | {_fmt(pct.get('p50'))} | {_fmt(pct.get('p99'))} "
            f"| {ratio} | {send_ratio} | {cpu_ratio} |")
    return "\n".join(rows)


def scaling_line(all_results: dict[str, list[dict[str, Any]]], client: str,
                 rounds: dict[str, list[dict[str, Any]]] | None = None) -> str | None:
    """Records/s from N threads as a multiple of the one-thread run: the median over rounds of the
    ratio within each round (threads-1 and threads-N run within a minute of each other, so both saw
    about the same machine load), then the ratio of the best runs. keyed-100 is the baseline if
    threads-1 did not run."""
    def rate(name: str) -> float | None:
        for r in all_results.get(name, []):
            if r["client"] == client and "error" not in r:
                return float(r["records_per_second"])
        return None

    def per_round(name: str) -> dict[int, float]:
        return {r["attempt"]: float(r["records_per_second"]) for r in (rounds or {}).get(name, [])
                if r["client"] == client and "error" not in r}

    baseline = "threads-1" if rate("threads-1") else "keyed-100"
    one = rate(baseline)
    if not one:
        return None
    parts = []
    for n in (2, 4, 8):
        best = rate(f"threads-{n}")
        if not best:
            continue
        ones, ns = per_round(baseline), per_round(f"threads-{n}")
        ratios = sorted(ns[a] / ones[a] for a in ns if a in ones) if baseline == "threads-1" else []
        if ratios:
            median = statistics.median(ratios)
            each = "/".join(f"{x:.2f}" for x in ratios)
            parts.append(f"{n} threads {median:.2f}x (rounds {each}; best runs {best / one:.2f}x)")
        else:
            parts.append(f"{n} threads {best / one:.2f}x")
    if not parts:
        return None
    how = ("median of the per-round ratios; each round runs 1, 2, 4 and 8 threads one after another"
           if baseline == "threads-1" and rounds else "best runs")
    return f"{client}: " + ", ".join(parts) + f" of its 1-thread records/s ({baseline}; {how})"


def gil_reference_line(thread_counts: Sequence[int]) -> str | None:
    """The same ratio for plain Python work (``gil_reference.py``), measured now on this machine."""
    parts = []
    for n in thread_counts:
        out = subprocess.run([sys.executable, os.path.join(HERE, "gil_reference.py"), "--threads", str(n)],
                             capture_output=True, text=True, timeout=300)
        if out.returncode == 0:
            parts.append(f"{n} threads {json.loads(out.stdout)['median_ratio']:.2f}x")
    if not parts:
        return None
    return ("CPython reference (benchmarks/gil_reference.py, same machine, median of 7): pure-Python work split over "
            + ", ".join(parts) + " of one thread's rate; the GIL lets one thread run at a time, so this is "
            "the ceiling for a pure-Python send() loop")


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (rates differ between machines; ratios within a run less)."""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def machine() -> str:
    model = cpu_model()
    versions = []
    for mod, label in (("confluent_kafka", "confluent-kafka"), ("aiokafka", "aiokafka"), ("kafka", "kafka-python")):
        with contextlib.suppress(Exception):
            versions.append(f"{label} {__import__(mod).__version__}")
    return (f"{os.cpu_count()} CPUs ({model}), Python {platform.python_version()}, "
            + ", ".join(versions))


def kafka_version() -> str:
    """The Apache Kafka release of ``jvm/pom.xml`` (the broker and the Java peers)."""
    with open(os.path.join(ROOT, "jvm", "pom.xml"), encoding="utf-8") as f:
        text = f.read()
    start = text.find("<kafka.version>") + len("<kafka.version>")
    return text[start:text.find("</kafka.version>", start)]


def java_line(all_results: dict[str, list[dict[str, Any]]]) -> str:
    """sparkafka against the Java producer, workload by workload: records/s and CPU per record."""
    parts = []
    for workload in WORKLOADS:
        rs = {r["client"]: r for r in all_results.get(workload.name, []) if "error" not in r}
        ours = rs.get("sparkafka")
        for client, label in ((JAVA, "KafkaProducer"), (JAVA_PERF, "ProducerPerformance")):
            theirs = rs.get(client)
            if ours is None or theirs is None:
                continue
            parts.append(f"{workload.name} {_ratio(ours, theirs, 'records_per_second')} {label}'s records/s at "
                         f"{_ratio(ours, theirs, 'cpu_seconds_per_million')} its CPU per record")
    return ("sparkafka / the Java producer (same run, same broker): " + "; ".join(parts)) if parts else ""


LABELS = {JAVA: "java (KafkaProducer)", JAVA_PERF: "java-perf (ProducerPerformance)",
          CEILING: "broker ceiling", PURE: "sparkafka-py (no C accelerator)"}


def chart(all_results: dict[str, list[dict[str, Any]]], path: str, broker_name: str) -> bool:
    """Grouped bars of records/s per workload and client (False if matplotlib is missing)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [w for w in all_results if all_results[w]]
    clients = [c for c in ALL_CLIENTS if any(r["client"] == c for rs in all_results.values() for r in rs)]
    colors = {"sparkafka": "#d62728", PURE: "#e377c2", "confluent": "#1f77b4", "aiokafka": "#2ca02c",
              "kafka-python": "#9467bd", "java": "#ff7f0e", "java-perf": "#8c564b", "ceiling": "#bbbbbb"}
    fig, ax = plt.subplots(figsize=(12, 5.5))
    width = 0.8 / max(1, len(clients))
    for ci, client in enumerate(clients):
        xs, ys = [], []
        for wi, name in enumerate(names):
            for r in all_results[name]:
                if r["client"] == client and "error" not in r:
                    xs.append(wi + (ci - (len(clients) - 1) / 2) * width)
                    ys.append(r["records_per_second"] / 1000.0)
        bars = ax.bar(xs, ys, width, label=LABELS.get(client, client), color=colors.get(client))
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ax.set_xticks(range(len(names)), names, rotation=15)
    ax.set_ylabel("thousand records/s (acknowledged)")
    ax.set_title(f"Producer throughput: acks=all, idempotence, linger 5 ms, batch 16 KB unless named; {broker_name}",
                 fontsize=9)
    ax.legend()
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def bulk_line(all_results: dict[str, list[dict[str, Any]]]) -> str:
    """The bulk Arrow path against confluent-kafka: its row loop over the same Arrow batches at the same
    batch.size, its per-record run at the same batch.size (``PER_RECORD_BASELINE``) and, for the larger
    batches, also its keyed-100 per-record run at the default 16 KB; and the broker's ceiling."""
    def rate(workload: str, client: str) -> float | None:
        for r in all_results.get(workload, []):
            if r["client"] == client and "error" not in r:
                return float(r["records_per_second"])
        return None

    default_run = rate("keyed-100", "confluent")
    parts = []
    for workload, baseline in PER_RECORD_BASELINE.items():
        ours, loop, ceiling = rate(workload, "sparkafka"), rate(workload, "confluent"), rate(workload, "ceiling")
        if ours is None:
            continue
        same = rate(baseline, "confluent")
        bits = []
        if loop:
            bits.append(f"{ours / loop:.2f}x its row loop over the same batches")
        if same:
            bits.append(f"{ours / same:.2f}x its {baseline} per-record run (same batch.size)")
        if default_run and baseline != "keyed-100":
            bits.append(f"{ours / default_run:.2f}x its keyed-100 per-record run (16 KB batches)")
        if ceiling:
            limit = f"{ceiling:,.0f} rows/s"
            if same:
                limit += f" = {ceiling / same:.2f}x confluent-kafka's {baseline} per-record run"
            bits.append(f"{ours / ceiling:.0%} of the broker's ceiling at this batch.size ({limit})")
        if bits:
            parts.append(f"{workload} {ours:,.0f} rows/s = " + ", ".join(bits))
    return ("Bulk Arrow path vs confluent-kafka: " + "; ".join(parts)) if parts else ""


def pure_python_line(all_results: dict[str, list[dict[str, Any]]]) -> str:
    """sparkafka without the C accelerator against kafka-python (per record) and against itself with it
    (per record and the bulk Arrow path), from this run; issue 22's targets in brackets."""
    def rate(workload: str, client: str) -> float | None:
        for r in all_results.get(workload, []):
            if r["client"] == client and "error" not in r:
                return float(r["records_per_second"])
        return None

    parts = []
    for workload in ("keyed-100", "keyless-100", "arrow", "arrow-256k"):
        pure = rate(workload, PURE)
        if pure is None:
            continue
        bits = []
        theirs = rate(workload, "kafka-python")
        if theirs:
            bits.append(f"{pure / theirs:.2f}x kafka-python (target >= 3x)")
        accelerated = rate(workload, "sparkafka")
        if accelerated:
            target = " (target >= 0.5x)" if workload == "arrow" else ""
            bits.append(f"{pure / accelerated:.2f}x the accelerated build{target}")
        parts.append(f"{workload} {pure:,.0f} rec/s" + (" = " + ", ".join(bits) if bits else ""))
    return ("Pure Python (sparkafka-py: SPARKAFKA_NO_ACCEL=1, what an executor without the compiled accelerator "
            "runs): " + "; ".join(parts)) if parts else ""


# ------------------------------------------------------------------------------------------- main
PEER_MODULES = {"confluent": ("confluent_kafka", "confluent-kafka"), "aiokafka": ("aiokafka", "aiokafka"),
                "kafka-python": ("kafka", "kafka-python")}
"""The Python peers' modules and the packages that provide them (the ``bench`` dependency group)."""


def missing_peers(clients: Iterable[str]) -> list[str]:
    """The packages of the chosen Python peers this interpreter cannot import, in a stable order: the run
    stops before the clock rather than print a row of failures per round."""
    wanted = {PEER_MODULES[c] for c in clients if c in PEER_MODULES}
    return sorted(package for module, package in wanted if importlib.util.find_spec(module) is None)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default=None, help="default: an embedded Tansu broker")
    parser.add_argument("--broker", choices=("tansu", "mock", "kafka"), default="tansu",
                        help="without --bootstrap-servers: the embedded Tansu (default), a librdkafka "
                             "mock cluster of 3 brokers in its own process, or one Apache Kafka node "
                             "(make kafka fetches it)")
    parser.add_argument("--clients", nargs="+", default=None, choices=ALL_CLIENTS,
                        help="default: all; the Java peers only with --broker kafka unless named")
    parser.add_argument("--workloads", nargs="+", default=[w.name for w in WORKLOADS],
                        choices=[w.name for w in WORKLOADS])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every record count")
    parser.add_argument("--quick", action="store_true", help="a tenth of the records (smoke test)")
    parser.add_argument("--repeat", type=int, default=2,
                        help="runs per (workload, client), interleaved; the best is reported (default 2)")
    parser.add_argument("--thread-rounds", type=int, default=5,
                        help="rounds of the threads-1/2/4/8 block (at least --repeat; default 5): thread "
                             "scaling is a median of per-round ratios, which needs a few rounds")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "bench"), help="output directory")
    args = parser.parse_args(argv)
    scale = args.scale * (0.1 if args.quick else 1.0)
    if args.clients is None:
        java = args.broker == "kafka" and not args.bootstrap_servers
        args.clients = [c for c in ALL_CLIENTS if java or c not in JAVA_CLIENTS]
    chosen = [w for w in WORKLOADS if w.name in args.workloads]
    missing = missing_peers(c for w in chosen for c in w.clients if c in args.clients)
    if missing:
        parser.error(f"{', '.join(missing)} not installed: `{sys.executable} -m pip install --group bench` "
                     "(pip >= 25.1; `make bench-kafka` does it), or leave them out with --clients")
    java_settings = ""
    if any(c in args.clients for w in chosen for c in w.clients if c in JAVA_CLIENTS):
        import java_peer

        java_peer.build()  # once, before the clock: `mvn -q package` when the jar is missing or stale
        java_settings = java_peer.settings_line()
    os.makedirs(args.out, exist_ok=True)

    started = time.monotonic()
    all_results: dict[str, list[dict[str, Any]]] = {}
    rounds: dict[str, list[dict[str, Any]]] = {}  # every run, not only the best (for per-round ratios)
    broker = Broker(args.bootstrap_servers, args.broker)
    with broker.running():
        blocks_to_run: list[list[Workload]] = []
        for workload in chosen:  # consecutive workloads of one group form one interleaved block
            if blocks_to_run and workload.group and blocks_to_run[-1][0].group == workload.group:
                blocks_to_run[-1].append(workload)
            else:
                blocks_to_run.append([workload])
        if broker.kafka is not None:  # the broker is a JVM too: JIT its produce path before the first run
            warm_up_broker(broker, scale)
        for block in blocks_to_run:
            best: dict[tuple[str, str], dict[str, Any]] = {}
            repeat = max(args.repeat, args.thread_rounds) if block[0].group == "threads" else args.repeat
            for attempt in range(repeat):  # rounds interleave workloads and clients; the best run is kept
                for workload in block:
                    for client in [c for c in workload.clients if c in args.clients]:
                        result = run_one(broker, workload, client, scale)
                        result["attempt"] = attempt + 1
                        rounds.setdefault(workload.name, []).append(result)
                        if "error" in result:
                            print(f"{workload.name:14s} {client:13s} FAILED {result['error']}", file=sys.stderr)
                        else:
                            print(f"{workload.name:14s} {client:13s} {result['records_per_second']:>10,.0f} rec/s "
                                  f"{result['cpu_seconds_per_million']:6.2f} CPU s/M  "
                                  f"{result['peak_rss_mb']:5.0f} MB", file=sys.stderr, flush=True)
                        kept = best.get((workload.name, client))
                        if kept is None or "error" in kept or (
                                "error" not in result
                                and result["records_per_second"] > kept["records_per_second"]):
                            best[(workload.name, client)] = result
            for workload in block:
                all_results[workload.name] = [best[(workload.name, c)] for c in workload.clients
                                              if (workload.name, c) in best]
    elapsed = time.monotonic() - started

    short_name = {"kafka": f"one Apache Kafka {kafka_version()} node", "mock": "librdkafka mock cluster",
                  "tansu": "one embedded Tansu broker"}[args.broker]
    if args.bootstrap_servers:
        broker_name = short_name = "external " + args.bootstrap_servers
    elif args.broker == "mock":
        broker_name = "librdkafka mock cluster (3 brokers, in-memory, its own process)"
    elif args.broker == "kafka":
        broker_name = (f"Apache Kafka {kafka_version()} (one KRaft node, its own JVM with -Xms{KAFKA_HEAP} "
                       f"-Xmx{KAFKA_HEAP}, log on disk, a fresh topic per run)")
    else:
        broker_name = "embedded Tansu (in-memory)"
    header = (f"Machine: {machine()}. Broker: {broker_name}. "
              f"Best of {args.repeat} runs per row"
              + (f" ({max(args.repeat, args.thread_rounds)} for threads-N)" if "threads-1" in rounds else "")
              + f". Run took {elapsed:.0f} s.")
    blocks = [header]
    if java_settings:
        blocks.append(java_settings)
    for workload in WORKLOADS:
        if all_results.get(workload.name):
            blocks.append(table(workload, all_results[workload.name]))
    for client in ("sparkafka", "confluent"):
        line = scaling_line(all_results, client, rounds)
        if line:
            blocks.append("Thread scaling: " + line)
    for line in (bulk_line(all_results), java_line(all_results), pure_python_line(all_results)):
        if line:
            blocks.append(line)
    reference = gil_reference_line([n for n in (2, 4, 8) if all_results.get(f"threads-{n}")])
    if reference:
        blocks.append(reference)
    text = "\n\n".join(blocks)
    print(text)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"machine": machine(), "seconds": elapsed, "results": all_results, "runs": rounds}, f, indent=1)
    png = os.path.join(args.out, "throughput.png")
    if chart(all_results, png, short_name):
        print(f"\nchart: {os.path.relpath(png, ROOT)}")
    failed = sum(1 for rs in all_results.values() for r in rs if "error" in r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
