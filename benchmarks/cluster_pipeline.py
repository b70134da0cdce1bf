"""The pipeline on a Spark standalone cluster whose executors lack sparkafka, next to ``local[2]``.

Usage: ``python benchmarks/cluster_pipeline.py`` (``--rows 500000``, ``--repeat 2`` rounds, ``--partitions 6``
topic partitions, ``--bootstrap-servers`` for a running broker, ``--out DIR``, default ``docs/bench/cluster``).

How it works: one embedded Tansu broker serves every run unless ``--bootstrap-servers`` is given. A standalone
cluster (``tests/support/spark_standalone.py``: pyspark's own Master and 2 Workers of 1 core each on 127.0.0.1)
runs executors whose Python is a venv with only pyarrow (``executor_python``), so ``register`` ships the
package to them and they run the pure-Python producer: what a user gets who installed sparkafka only where the
job is submitted. Each round runs ``sparkafka pipeline --rows N`` twice, in its own process, interleaved:
once with ``--master spark://...`` (``--conf spark.pyspark.python=`` the executors' venv) and once with
``--master local[2]`` (this interpreter, with the C accelerator when built). Each writes a fresh topic of
``--partitions`` partitions; the pipeline's own summary (``--summary-json``) gives rows/s (rows divided by
the wall time of the write) and checks the records against the topic's end offsets. Reported: the best
rows/s of each, the ratio cluster / local, and every run. The cluster's two executors and the local
threads use the same two cores of this machine, so the ratio shows the cost of the shipped pure-Python
path, not a cluster's scaling.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from support.spark_standalone import StandaloneCluster, executor_python  # noqa: E402

RUN_TIMEOUT_S = 900.0


@contextlib.contextmanager
def _broker(bootstrap: str | None) -> Iterator[str]:
    if bootstrap:
        yield bootstrap
        return
    from sparkafka.broker import EmbeddedBroker

    broker = EmbeddedBroker().start()
    try:
        yield broker.bootstrap_servers
    finally:
        broker.stop()


def _pipeline(master: str, bootstrap: str, rows: int, partitions: int, conf: dict[str, str],
              work: Path) -> dict[str, Any]:
    summary = work / f"summary-{uuid.uuid4().hex[:8]}.json"
    command = [str(Path(sys.executable).parent / "sparkafka"), "pipeline", "--rows", str(rows), "--master", master,
               "--bootstrap-servers", bootstrap, "--topic", f"bench-cluster-{uuid.uuid4().hex[:8]}",
               "--partitions", str(partitions), "--no-progress", "--summary-json", str(summary)]
    for key, value in conf.items():
        command += ["--conf", f"{key}={value}"]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, cwd=work)
    if done.returncode != 0 or not summary.exists():
        raise RuntimeError(f"pipeline on {master} failed ({done.returncode}):\n{done.stdout[-3000:]}\n"
                           f"{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(summary.read_text())
    if result.get("acknowledged") != rows:
        raise RuntimeError(f"pipeline on {master} acknowledged {result.get('acknowledged')} of {rows} rows")
    result["process_seconds"] = time.monotonic() - started
    result["rows_per_s"] = rows / float(result["seconds"])
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--bootstrap-servers")
    parser.add_argument("--out", default=str(ROOT / "docs" / "bench" / "cluster"))
    args = parser.parse_args(argv)

    python = executor_python()
    runs: dict[str, list[dict[str, Any]]] = {"cluster": [], "local": []}
    with tempfile.TemporaryDirectory(prefix="sparkafka-bench-cluster-") as tmp, _broker(args.bootstrap_servers) as bs:
        work = Path(tmp)
        cluster = StandaloneCluster(work / "spark").start()
        try:
            cluster_conf = {**cluster.spark_conf(python), "spark.cores.max": "2"}
            for round_no in range(1, args.repeat + 1):
                for name, master, conf in (("cluster", cluster.master_url, cluster_conf),
                                           ("local", "local[2]", {"spark.ui.enabled": "false"})):
                    result = _pipeline(master, bs, args.rows, args.partitions, conf, work)
                    runs[name].append(result)
                    print(f"round {round_no} {name:8s} {result['rows_per_s']:>10,.0f} rows/s "
                          f"({result['seconds']:.1f} s write, {result['process_seconds']:.1f} s process)",
                          flush=True)
        finally:
            cluster.stop()

    best = {name: max(r["rows_per_s"] for r in rs) for name, rs in runs.items()}
    load = os.getloadavg()
    lines = [
        f"sparkafka pipeline --rows {args.rows:,}, {args.partitions} topic partitions, best of {args.repeat} "
        f"interleaved rounds (load average at the end {load[0]:.1f} {load[1]:.1f} {load[2]:.1f})",
        "",
        "| master | executors | rows/s (best) | every run |",
        "|---|---|---:|---|",
        f"| standalone, 2 workers x 1 core | shipped by register (pure Python) | {best['cluster']:,.0f} | "
        + ", ".join(f"{r['rows_per_s']:,.0f}" for r in runs["cluster"]) + " |",
        f"| local[2] | installed (C accelerator if built) | {best['local']:,.0f} | "
        + ", ".join(f"{r['rows_per_s']:,.0f}" for r in runs["local"]) + " |",
        "",
        f"cluster / local[2]: {best['cluster'] / best['local']:.2f}x",
    ]
    print("\n".join(lines))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.md").write_text("\n".join(lines) + "\n")
    (out / "results.json").write_text(json.dumps({"rows": args.rows, "runs": runs, "best": best}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
