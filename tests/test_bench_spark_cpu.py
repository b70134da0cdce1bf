"""``benchmarks/spark_sinks.py`` counts the CPU a Spark job used even when a Python worker leaves mid-run.

pyspark's worker daemon ignores SIGCHLD, so the kernel reaps a worker Spark stops without adding its time to
the daemon's cutime. The benchmark reads the process tree's ticks before and after a write; the test builds
that situation for real: a "daemon" process ignoring SIGCHLD with a "worker" child that has used CPU before
the first reading and exits between the readings, then the daemon works after it. The CPU between the two
readings is the daemon's work only; a difference of the tree's sums would come out lower by the worker's
earlier CPU (here below zero).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from support.benchmarks import load_benchmark

_DAEMON = textwrap.dedent("""
    import os, signal, sys, time

    def burn(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # as pyspark's daemon.py
    pid = os.fork()
    if pid == 0:  # the worker: CPU before the first reading, then idle until stopped
        burn(0.6)
        print("worker-ready", flush=True)
        time.sleep(3600)
        os._exit(0)
    sys.stdin.readline()  # the first reading was taken: stop the worker (as Spark stops an idle one)
    os.kill(pid, signal.SIGTERM)
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    burn(0.3)
    print("daemon-done", flush=True)
    sys.stdin.readline()
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_worker_reaped_without_accounting_does_not_take_its_earlier_cpu_away() -> None:
    bench = load_benchmark("spark_sinks")
    daemon = subprocess.Popen([sys.executable, "-c", _DAEMON], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert daemon.stdin is not None and daemon.stdout is not None
    try:
        assert daemon.stdout.readline().strip() == "worker-ready"
        before = bench.tree_cpu_ticks(daemon.pid)
        assert len(before) == 2, before  # the daemon and its worker
        daemon.stdin.write("\n")  # the worker is stopped (SIGCHLD ignored: reaped by the kernel), the daemon works
        daemon.stdin.flush()
        assert daemon.stdout.readline().strip() == "daemon-done"
        after = bench.tree_cpu_ticks(daemon.pid)
        assert list(after) == [daemon.pid]
        used = bench.cpu_seconds_since(before, after)
        ticks = os.sysconf("SC_CLK_TCK")
        sums = (sum(after.values()) - sum(before.values())) / ticks
        assert 0.2 <= used <= 1.5, used  # the daemon's 0.3 s (and its own start-up), nothing of the worker's
        assert sums < used - 0.4, (sums, used)  # the old count lost the worker's 0.6 s of earlier CPU
    finally:
        daemon.stdin.close()
        daemon.wait(timeout=30)
