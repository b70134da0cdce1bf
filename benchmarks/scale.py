"""Scale: keyed records/s, CPU per record, memory and batch sizes against 6 to 6,000 partitions over 3 brokers.

Usage: ``python benchmarks/scale.py`` (``--broker mock kafka``, ``--partitions 6 60 600 6000``, ``--clients
sparkafka confluent java``, ``--records 1000000``, ``--repeat 2``, ``--kafka-nodes 3``, ``--kafka-heap 512m``,
``--replication 1``, ``--batch-size 16384`` for every client, ``--quick`` for a tenth of the records, ``--out DIR``,
default ``docs/bench/scale``).

How it works: the suite's keyed workload (``keyed-100``: 8-byte keys from a pool of 65,536, 100-byte values,
a callback per record, acks=all, idempotence, linger.ms 5, batch.size 16384, default buffer.memory) is sent
by each client into a fresh topic of P partitions, for every P of ``--partitions``, on two kinds of
cluster of 3 brokers:

* ``mock``: the librdkafka mock cluster (``mock_broker.py``, C, in memory, its own process, a new one per
  run), cheap enough for 6,000 partitions on 2 cores. Kafka's Java client does not talk to it (it gets
  no usable ApiVersions answer), so the Java producer runs on Apache Kafka only.
* ``kafka``: Apache Kafka (``tests/support/kafka_cluster.py``, KRaft, ``--kafka-nodes`` combined nodes
  with ``-Xms/-Xmx --kafka-heap`` each, logs on disk) for the whole run, P up to ``KAFKA_MAX_PARTITIONS``
  unless named; topics have ``--replication`` replicas (1 by default, with ``min.insync.replicas`` 1, so
  the 2 shared cores go to the producers rather than to replication) and leaders spread over the
  nodes; each topic is deleted after its run. The brokers' JIT is warmed by an untimed ``ceiling`` run,
  and every fresh topic gets one too before its timed run (``TOPIC_WARMUP_RECORDS``: a new topic of
  hundreds of partitions is several times slower for its first few MB).

Each run is one ``worker.py --batch-stats`` process (its docstring: the same loop for every client), so
CPU and peak RSS are the client's own; ``--repeat`` interleaved rounds (every P and client once per
round), the best records/s kept. Reported per (cluster, P, client): acknowledged records/s, CPU seconds
per million records, peak RSS, the RSS right before the send loop and the growth between the two next
to the client's memory bound (buffer.memory; librdkafka's queue.buffering.max.kbytes), the mean records
per batch and bytes per batch (sparkafka and confluent-kafka count them; the Java producer's is its
``batch-size-avg`` over the size of one record, marked ``~``), and p99 latency; then, per client, how
records/s, CPU per record and peak RSS changed from the smallest P to the largest. Writes
``results.md``, ``results.json`` and ``scale.png`` (records/s, CPU per record, records per batch and
peak RSS against P) under ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "src"))
sys.path.insert(0, os.path.join(ROOT, "tests"))

CLIENTS = ("sparkafka", "confluent", "java")
BROKERS = ("mock", "kafka")
PARTITIONS = (6, 60, 600, 6000)
KAFKA_MAX_PARTITIONS = 600
"""Apache Kafka runs up to this many partitions unless ``--kafka-partitions`` names more."""
RECORDS = 1_000_000
BROKER_WARMUP_RECORDS = 2_000_000
TOPIC_WARMUP_RECORDS = 300_000
"""Records of the untimed ``ceiling`` run into every fresh Apache Kafka topic before the timed run (at least
``TOPIC_WARMUP_PER_PARTITION`` per partition)."""
TOPIC_WARMUP_PER_PARTITION = 200
RUN_TIMEOUT_S = 900
TOPIC_TIMEOUT_S = 180.0
MB = 1024 * 1024


# ------------------------------------------------------------------------------------------- clusters
class Cluster:
    """A mock cluster per run (``mock_broker.py``) or one Apache Kafka cluster for every run."""

    def __init__(self, kind: str, nodes: int, heap: str, replication: int) -> None:
        self.kind = kind
        self.nodes = nodes
        self.heap = heap
        self.replication = replication
        self.kafka: Any = None
        self.mock: subprocess.Popen[str] | None = None
        self.servers = ""

    @contextlib.contextmanager
    def running(self) -> Iterator[Cluster]:
        if self.kind == "mock":
            try:
                yield self
            finally:
                self._stop_mock()
            return
        from support.kafka_cluster import KafkaCluster

        config = {"min.insync.replicas": str(min(2, self.replication))}
        with KafkaCluster(nodes=self.nodes, name="bench-scale", heap=self.heap, config=config) as cluster:
            self.kafka = cluster
            self.servers = cluster.bootstrap
            yield self

    def describe(self) -> str:
        if self.kind == "mock":
            return "librdkafka mock cluster (3 brokers, in memory, its own process, a new one per run)"
        from run import kafka_version

        return (f"Apache Kafka {kafka_version()} ({self.nodes} KRaft node{'s' if self.nodes > 1 else ''}, "
                f"-Xms{self.heap} -Xmx{self.heap} each, logs on disk), topics with replication factor "
                f"{self.replication} and min.insync.replicas {min(2, self.replication)}")

    def _stop_mock(self) -> None:
        if self.mock is not None:
            assert self.mock.stdin is not None
            self.mock.stdin.close()
            self.mock.wait(60)
            self.mock = None

    def fresh_topic(self, partitions: int) -> str:
        topic = f"scale-{partitions}-{uuid.uuid4().hex[:6]}"
        if self.kind == "mock":
            self._stop_mock()
            self.mock = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "mock_broker.py"), "--topic", topic,
                 "--partitions", str(partitions), "--brokers", "3"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            assert self.mock.stdout is not None
            self.servers = self.mock.stdout.readline().strip()
            if not self.servers:
                raise RuntimeError("the mock cluster did not start (benchmarks/mock_broker.py)")
            return topic
        from broker_ceiling import run_ceiling

        from support.consume import create_topic

        create_topic(self.servers, topic, partitions, self.replication, timeout=TOPIC_TIMEOUT_S)
        # Untimed: the first few MB written into a new topic of hundreds of partitions take Apache Kafka
        # seconds (100,000 records into 600 partitions: 4-14 s, then 0.4-1.4 s into the same topic), and
        # the Java peer's JIT warm-up writes into the topic before its timed run: every client gets the
        # topic in that state.
        run_ceiling(self.servers, topic, max(TOPIC_WARMUP_RECORDS, TOPIC_WARMUP_PER_PARTITION * partitions),
                    16384, 8, 100)
        return topic

    def done(self, topic: str) -> None:
        if self.kind == "mock":
            self._stop_mock()
            return
        from confluent_kafka.admin import AdminClient

        futures = AdminClient({"bootstrap.servers": self.servers}).delete_topics([topic], operation_timeout=60)
        for future in futures.values():
            with contextlib.suppress(Exception):
                future.result(120)


def run_one(cluster: Cluster, partitions: int, client: str, records: int, batch_size: int = 16384) -> dict[str, Any]:
    topic = cluster.fresh_topic(partitions)
    cmd = [sys.executable, os.path.join(HERE, "worker.py"), "--client", client, "--bootstrap-servers",
           cluster.servers, "--topic", topic, "--records", str(records), "--key-size", "8",
           "--value-size", "100", "--batch-size", str(batch_size), "--batch-stats"]
    if client == "ceiling":
        cmd.remove("--batch-stats")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return {"client": client, "partitions": partitions, "error": f"timed out after {RUN_TIMEOUT_S} s"}
    finally:
        cluster.done(topic)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"client": client, "partitions": partitions, "error": f"exit {proc.returncode}: " + " | ".join(tail)}
    result: dict[str, Any] = json.loads(lines[-1])
    result["partitions"] = partitions
    if result.get("errors"):
        result["error"] = f"{result['errors']} records failed: {result.get('first_error')}"
    return result


# ------------------------------------------------------------------------------------------- reporting
def _num(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(kind: str, description: str, rows: list[dict[str, Any]]) -> str:
    out = [f"### {kind}: {description}", "",
           "| partitions | client | records/s | CPU s / M records | peak RSS MB | RSS before send MB "
           "| growth MB | memory bound MB | records / batch | bytes / batch | p99 ms | sparkafka / client |",
           "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['partitions']:,} | {r['client']} | failed: {r['error'][:150]} ||||||||||")
            continue
        ours = next((o for o in rows if o["client"] == "sparkafka" and o["partitions"] == r["partitions"]
                     and "error" not in o), None)
        ratio = (f"{ours['records_per_second'] / r['records_per_second']:.2f}x"
                 if ours is not None and ours is not r and r["records_per_second"] else "")
        before = r.get("rss_before_mb")
        growth = None if before is None else r["peak_rss_mb"] - before
        bound = r.get("buffer_memory")
        per_batch = _num(r.get("records_per_batch"), 1)
        if r.get("records_per_batch_estimated") and per_batch != "-":
            per_batch = "~" + per_batch
        p99 = (r.get("percentiles_ms") or {}).get("p99")
        out.append(f"| {r['partitions']:,} | {r['client']} | {_num(r['records_per_second'])} "
                   f"| {_num(r['cpu_seconds_per_million'], 2)} | {_num(r['peak_rss_mb'])} | {_num(before)} "
                   f"| {_num(growth)} | {_num(None if bound is None else bound / MB)} | {per_batch} "
                   f"| {_num(r.get('batch_size_avg'))} | {_num(p99, 1)} | {ratio} |")
    return "\n".join(out)


def growth_lines(kind: str, rows: list[dict[str, Any]]) -> list[str]:
    """Per client: records/s, CPU per record and peak RSS at the largest P against the smallest."""
    lines = []
    for client in dict.fromkeys(r["client"] for r in rows):
        mine = sorted((r for r in rows if r["client"] == client and "error" not in r), key=lambda r: r["partitions"])
        if len(mine) < 2:
            continue
        low, high = mine[0], mine[-1]
        factor = high["partitions"] / low["partitions"]
        lines.append(
            f"{kind}, {client}: {low['partitions']:,} -> {high['partitions']:,} partitions ({factor:,.0f}x): "
            f"records/s {high['records_per_second'] / low['records_per_second']:.2f}x, CPU per record "
            f"{high['cpu_seconds_per_million'] / low['cpu_seconds_per_million']:.2f}x, peak RSS "
            f"{high['peak_rss_mb'] / low['peak_rss_mb']:.2f}x, records per batch "
            f"{_num(low.get('records_per_batch'), 1)} -> {_num(high.get('records_per_batch'), 1)}")
    return lines


def chart(results: dict[str, list[dict[str, Any]]], path: str) -> bool:
    """Four panels against the partition count (log scale): one line per (cluster, client)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    panels = (("records_per_second", "thousand records/s", 1e-3, "linear"),
              ("cpu_seconds_per_million", "CPU s / M records (log)", 1, "log"),
              ("records_per_batch", "records per batch (log)", 1, "log"), ("peak_rss_mb", "peak RSS MB", 1, "linear"))
    colors = {"sparkafka": "#d62728", "confluent": "#1f77b4", "java": "#ff7f0e"}
    styles = {"mock": "--", "kafka": "-"}
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for ax, (field, label, factor, yscale) in zip(axes.flat, panels):
        for kind, rows in results.items():
            for client in dict.fromkeys(r["client"] for r in rows):
                points = sorted((r["partitions"], float(r[field])) for r in rows
                                if r["client"] == client and "error" not in r and r.get(field) is not None)
                if points:
                    ax.plot([p for p, _ in points], [v * factor for _, v in points], styles.get(kind, "-"),
                            marker="o", color=colors.get(client), label=f"{client} ({kind})")
        ax.set_xscale("log")
        ax.set_yscale(yscale)
        ax.set_xlabel("partitions")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("Keyed 100-byte records against the partition count, 3 brokers "
                 "(acks=all, idempotence, linger 5 ms, batch 16 KB)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------- main
def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--broker", nargs="+", choices=BROKERS, default=list(BROKERS))
    parser.add_argument("--partitions", nargs="+", type=int, default=list(PARTITIONS))
    parser.add_argument("--kafka-partitions", nargs="+", type=int, default=None,
                        help=f"partition counts on Apache Kafka (default: those of --partitions up to "
                             f"{KAFKA_MAX_PARTITIONS})")
    parser.add_argument("--clients", nargs="+", choices=CLIENTS, default=list(CLIENTS),
                        help="java runs on Apache Kafka only")
    parser.add_argument("--records", type=int, default=RECORDS, help="records per run")
    parser.add_argument("--quick", action="store_true", help="a tenth of the records (smoke test)")
    parser.add_argument("--batch-size", type=int, default=16384, help="batch.size for every client")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved rounds; the best run is kept")
    parser.add_argument("--kafka-nodes", type=int, default=3)
    parser.add_argument("--kafka-heap", default="512m")
    parser.add_argument("--replication", type=int, default=1, help="replication factor of the Kafka topics")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "bench", "scale"))
    args = parser.parse_args(argv)
    if args.replication > args.kafka_nodes:
        parser.error("--replication cannot exceed --kafka-nodes")
    records = max(1000, args.records // 10 if args.quick else args.records)
    if "java" in args.clients and "kafka" in args.broker:
        import java_peer

        java_peer.build()

    started = time.monotonic()
    results: dict[str, list[dict[str, Any]]] = {}
    runs: list[dict[str, Any]] = []
    descriptions: dict[str, str] = {}
    for kind in args.broker:
        counts = (args.partitions if kind == "mock" else
                  args.kafka_partitions or [p for p in args.partitions if p <= KAFKA_MAX_PARTITIONS])
        clients = [c for c in args.clients if kind == "kafka" or c != "java"]
        cluster = Cluster(kind, args.kafka_nodes, args.kafka_heap, args.replication)
        descriptions[kind] = cluster.describe()
        best: dict[tuple[int, str], dict[str, Any]] = {}
        with cluster.running():
            if kind == "kafka":  # the brokers are JVMs: JIT their produce path before the first timed run
                warm = run_one(cluster, max(counts), "ceiling", max(records, BROKER_WARMUP_RECORDS // 10))
                state = warm.get("error") or f"{warm['records_per_second']:,.0f} rec/s"
                print(f"kafka broker warm-up (ceiling, not reported): {state}", file=sys.stderr, flush=True)
            for attempt in range(args.repeat):
                for partitions in counts:
                    for client in clients:
                        result = run_one(cluster, partitions, client, records, args.batch_size)
                        result.update(attempt=attempt + 1, broker=kind)
                        runs.append(result)
                        if "error" in result:
                            print(f"{kind:5s} {partitions:6,d} {client:10s} FAILED {result['error']}",
                                  file=sys.stderr, flush=True)
                        else:
                            print(f"{kind:5s} {partitions:6,d} {client:10s} {result['records_per_second']:>10,.0f} "
                                  f"rec/s {result['cpu_seconds_per_million']:6.2f} CPU s/M "
                                  f"{result['peak_rss_mb']:6.0f} MB  {_num(result.get('records_per_batch'), 1)} "
                                  "rec/batch", file=sys.stderr, flush=True)
                        kept = best.get((partitions, client))
                        if kept is None or "error" in kept or (
                                "error" not in result and result["records_per_second"] > kept["records_per_second"]):
                            best[(partitions, client)] = result
        results[kind] = [best[(p, c)] for p in counts for c in clients if (p, c) in best]
    elapsed = time.monotonic() - started

    from run import machine

    header = (f"Machine: {machine()}. Keyed 100-byte records (8-byte keys from a pool of 65,536), acks=all, "
              f"idempotence, linger.ms 5, batch.size {args.batch_size}, default buffer.memory, a callback per record; "
              f"{records:,} records per run, best of {args.repeat} interleaved runs. Run took {elapsed:.0f} s.")
    blocks = [header]
    for kind, rows in results.items():
        blocks.append(table(kind, descriptions[kind], rows))
        blocks.extend(growth_lines(kind, rows))
    text = "\n\n".join(blocks)
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.md"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump({"machine": machine(), "clusters": descriptions, "records": records, "seconds": elapsed,
                   "results": results, "runs": runs}, f, indent=1)
    png = os.path.join(args.out, "scale.png")
    if chart(results, png):
        print(f"\nchart: {os.path.relpath(png, ROOT)}")
    failed = sum(1 for rows in results.values() for r in rows if "error" in r)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
