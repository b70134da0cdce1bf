"""The Java producer as a benchmark peer: building ``benchmarks/java`` and running its two programs.

How it works: ``build()`` runs ``mvn -q -B package`` on ``benchmarks/java/pom.xml`` when its jar in
``.cache/bench-java`` is missing or older than the pom or a Java source (it compiles against the
kafka-clients and kafka-tools release of ``jvm/pom.xml``; nothing is bundled), and returns the jar.
Each run is one JVM on the classpath ``<jar>:.cache/kafka/lib/*`` (the jars ``make kafka`` copied, the
same release the benchmark's Apache Kafka broker runs), always with the heap of ``JVM_OPTIONS``:

* ``java``: ``KeyedProducerBench``, the worker's per-record loop through ``KafkaProducer.send`` with a
  callback per record, keyed (or keyless with key size 0), the same payload bytes as the worker (a
  file), ``warmup_records(n)`` records through the same producer before the timed run.
* ``java-perf``: ``PerfToolBench``, Kafka's own ``ProducerPerformance`` (the tool behind
  ``kafka-producer-perf-test``) for keyless workloads, its ``main()`` run twice in one JVM: a warm-up
  run, then the timed one; ``--payload-file`` holds the worker's one payload, so every client sends the
  same bytes.

Both print one JSON line with ``worker.py``'s fields; CPU seconds come from ``/proc/self/stat`` of the
JVM around the timed run, peak RSS from its ``VmHWM``. Settings as every client's: acks=all,
enable.idempotence=true, linger.ms 5, the workload's batch.size and compression.type.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PROJECT = HERE / "java"
JAR = ROOT / ".cache" / "bench-java" / "sparkafka-bench-java.jar"
LOG4J = PROJECT / "log4j2.properties"
JVM_OPTIONS = ("-Xms512m", "-Xmx512m", "-XX:+UseG1GC")
"""Every Java peer run gets this heap (fixed: -Xms = -Xmx) and collector."""
WARMUP_MAX = 500_000
"""JIT warm-up records before each timed run (at most this many, at most the run's own count)."""
LINGER_MS = 5
BUILD_TIMEOUT_S = 600
JAVA_CLIENTS = ("java", "java-perf")
_PR_SET_PDEATHSIG = 1

sys.path.insert(0, str(ROOT / "tests"))


class JavaPeerError(RuntimeError):
    """The Java peer could not be built or run (the message says what to install or what failed)."""


def kafka_lib() -> Path:
    """``.cache/kafka/lib`` (or ``$SPARKAFKA_KAFKA_LIB``), with a hint to run ``make kafka`` if absent."""
    from support.kafka_cluster import KafkaNotInstalledError, kafka_lib_dir

    try:
        return kafka_lib_dir()
    except KafkaNotInstalledError as exc:
        raise JavaPeerError(str(exc)) from exc


def warmup_records(records: int) -> int:
    return min(records, WARMUP_MAX)


def build() -> Path:
    """The peers' jar, built with Maven if it is missing or older than its sources."""
    sources = [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*.java"))]
    newest = max(p.stat().st_mtime for p in sources)
    if JAR.exists() and JAR.stat().st_mtime >= newest:
        return JAR
    if shutil.which("mvn") is None:
        raise JavaPeerError("the Java peers are built with Maven: install it (Debian: apt-get install maven)")
    done = subprocess.run(["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(PROJECT / "pom.xml"), "package"],
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False)
    if done.returncode != 0 or not JAR.exists():
        tail = (done.stdout + done.stderr).strip().splitlines()[-30:]
        raise JavaPeerError("mvn package of benchmarks/java failed:\n" + "\n".join(tail))
    JAR.touch()
    return JAR


def java_version() -> str:
    done = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60, check=False)
    first = (done.stderr or done.stdout).strip().splitlines()
    return first[0] if first else "java (version unknown)"


def settings_line() -> str:
    """The JVM peers' settings, for the report."""
    return (f"Java peers: {java_version()}, {' '.join(JVM_OPTIONS)} for every JVM run, up to {WARMUP_MAX:,} "
            "JIT warm-up records in the same JVM before each timed run (java: the same producer; java-perf: "
            "ProducerPerformance's main() once more), CPU from /proc/self/stat around the timed run only")


def _java(main: str, args: list[str]) -> list[str]:
    classpath = f"{JAR}{os.pathsep}{kafka_lib()}/*"
    return ["java", *JVM_OPTIONS, f"-Dlog4j2.configurationFile={LOG4J}", "-cp", classpath,
            f"io.sparkafka.bench.{main}", *args]


def command(client: str, *, bootstrap: str, topic: str, records: int, payload_file: str, key_size: int,
            compression: str, batch_size: int, sample_every: int | None = None,
            warmup: int | None = None) -> list[str]:
    """The JVM command line of one run of ``client`` (``java`` or ``java-perf``)."""
    warm = warmup_records(records) if warmup is None else warmup
    ticks = str(os.sysconf("SC_CLK_TCK"))
    if client == "java":
        args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--records", str(records),
                "--warmup-records", str(warm), "--payload-file", payload_file, "--key-size", str(key_size),
                "--compression", compression, "--batch-size", str(batch_size), "--linger-ms", str(LINGER_MS),
                "--clock-ticks", ticks, "--client", client]
        if sample_every is not None:
            args += ["--sample-every", str(sample_every)]
        return _java("KeyedProducerBench", args)
    if client == "java-perf":
        if key_size:
            raise JavaPeerError("java-perf (ProducerPerformance) runs the keyless workloads only: key size must be 0")
        value_size = os.path.getsize(payload_file)
        args = ["--records", str(records), "--warmup-records", str(warm), "--value-size", str(value_size),
                "--clock-ticks", ticks, "--client", client, "--",
                "--bootstrap-server", bootstrap, "--topic", topic, "--throughput", "-1",
                "--payload-file", payload_file, "--reporting-interval", "3600000",
                "--command-property", "acks=all", "enable.idempotence=true", f"linger.ms={LINGER_MS}",
                f"batch.size={batch_size}", f"compression.type={compression}"]
        return _java("PerfToolBench", args)
    raise JavaPeerError(f"unknown Java client {client!r} (one of {', '.join(JAVA_CLIENTS)})")


def _die_with_parent() -> None:
    """The JVM gets SIGKILL when its parent (the worker) dies, so a killed run leaves no JVM behind."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def run(client: str, *, bootstrap: str, topic: str, records: int, payload: bytes, key_size: int,
        compression: str, batch_size: int, sample_every: int | None = None, warmup: int | None = None,
        timeout: float = 600.0) -> dict[str, Any]:
    """One run of a Java peer: its JSON result, with the JVM options added."""
    build()
    with tempfile.TemporaryDirectory(prefix="sparkafka-java-peer-") as tmp:
        payload_file = os.path.join(tmp, "payload.bin")
        with open(payload_file, "wb") as f:
            f.write(payload)
        cmd = command(client, bootstrap=bootstrap, topic=topic, records=records, payload_file=payload_file,
                      key_size=key_size, compression=compression, batch_size=batch_size,
                      sample_every=sample_every, warmup=warmup)
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              preexec_fn=_die_with_parent)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-8:]
        raise JavaPeerError(f"{client} exited with {done.returncode}: " + " | ".join(tail))
    result: dict[str, Any] = json.loads(lines[-1])
    result["jvm_options"] = " ".join(JVM_OPTIONS)
    return result
