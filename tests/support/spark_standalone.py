"""A Spark standalone cluster on loopback for the tests, and a Python for its executors without sparkafka.

How it works: ``executor_python`` makes (once, then reuses) a venv under ``.cache/`` in the repository
with nothing but pyarrow, at the driver's pyarrow version, from pip (its cache is warm): the Python of
executors on nodes where sparkafka is not installed. It sees neither this repository nor the test venv,
and gets pyspark as every executor does, from the ``python/lib`` zips Spark puts on its path.

``StandaloneCluster`` starts pyspark's own daemons with ``bin/spark-class``: a
``org.apache.spark.deploy.master.Master`` and ``workers`` ``org.apache.spark.deploy.worker.Worker``s of
``cores`` cores each, all on 127.0.0.1 (``SPARK_LOCAL_IP``) on ports picked free, or each worker (and the
executors it starts, which take the worker's host) on its own loopback address of ``worker_hosts`` (127.0.0.2,
127.0.0.3, ...: Linux routes all of 127.0.0.0/8 to ``lo``), so that Spark counts them as different hosts (a
speculative copy of a task only runs on a host that runs no attempt of it); each JVM in a session
of its own and with ``PR_SET_PDEATHSIG`` so it dies with the test process. ``start()`` returns once the
master's JSON status (its web UI's ``/json/``) lists every worker ALIVE. ``submit`` runs a Python job
with pyspark's ``bin/spark-submit`` against it; ``connect_server`` runs a Spark Connect server
(``spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``) on it. ``stop()``
sends SIGTERM to each process it started, by process id (a worker stops its executors), and SIGKILL to
what is left of each process group (whose id is the daemon's own) after a bound. Logs stay in the work
directory; ``log_tail`` shows them in assertion messages.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["JobResult", "StandaloneCluster", "clean_env", "executor_python", "free_port", "python_workers_of",
           "read_result"]

REPO_ROOT = Path(__file__).resolve().parents[2]
_PR_SET_PDEATHSIG = 1
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
CONNECT_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def executor_python(cache: Path | None = None) -> Path:
    """The interpreter of a venv holding only pyarrow (the driver's version); created on first use."""
    import pyarrow

    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    root = (cache or REPO_ROOT / ".cache") / f"spark-executor-py{version}-pyarrow{pyarrow.__version__}"
    python = root / "bin" / "python"
    ready = root / ".ready"
    if ready.exists():
        return python
    shutil.rmtree(root, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    # pip from the test venv installs into the new one (--python needs pip >= 22.3), from its cache
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", "--python", str(python), "install",
         "--quiet", f"pyarrow=={pyarrow.__version__}"],
        capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"could not install pyarrow into {root}: {done.stderr[-2000:]}")
    ready.write_text("pyarrow only\n")
    return python


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment without anything that would show the executors this repository."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV", "SPARK_HOME")}
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1"})
    env.update(extra or {})
    return env


@dataclass
class JobResult:
    returncode: int
    result: dict[str, Any] | None
    """The JSON the job wrote to its result file (None: no file, or no file asked for)."""
    seconds: float
    log: Path

    def tail(self, lines: int = 60) -> str:
        return _tail(self.log, lines)


def read_result(path: Path) -> dict[str, Any] | None:
    """The JSON object a job wrote whole to ``path`` (write then rename), or None when it wrote none."""
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    return data


def _tail(path: Path, lines: int = 60) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"(no log at {path})"
    keep = [line for line in text if not line.lstrip().startswith("at ")]  # JVM stack frames
    return "\n".join(keep[-lines:])


@dataclass
class StandaloneCluster:
    directory: Path
    workers: int = 2
    cores: int = 1
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    webui_port: int = field(default_factory=free_port)
    worker_hosts: Sequence[str] = ()
    """One loopback address per worker; empty: all on 127.0.0.1."""
    _processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _spawn(self, name: str, args: Sequence[str], env: Mapping[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        try:
            process = subprocess.Popen(list(args), stdout=log, stderr=subprocess.STDOUT, env=clean_env(env),
                                       cwd=cwd or self.directory, start_new_session=True,
                                       preexec_fn=_die_with_parent)
        finally:
            log.close()
        self._processes[name] = process
        return process

    def start(self, timeout: float = 180.0) -> StandaloneCluster:
        self.directory.mkdir(parents=True, exist_ok=True)
        spark_class = str(spark_home() / "bin" / "spark-class")
        small = {"SPARK_DAEMON_MEMORY": "256m"}  # the master's and workers' heaps (not the executors')
        self._spawn("master", [spark_class, MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.master_port),
                               "--webui-port", str(self.webui_port)], small)
        if self.worker_hosts and len(self.worker_hosts) != self.workers:
            raise ValueError(f"{self.workers} workers but worker_hosts {list(self.worker_hosts)}")
        for n in range(self.workers):
            work = self.directory / f"worker{n}"
            work.mkdir(exist_ok=True)
            host = self.worker_hosts[n] if self.worker_hosts else "127.0.0.1"
            self._spawn(f"worker{n}", [spark_class, WORKER_CLASS, "--host", host, "--cores", str(self.cores),
                                       "--memory", self.worker_memory, "--webui-port", str(free_port()),
                                       "--work-dir", str(work), self.master_url], {**small, "SPARK_LOCAL_IP": host})
        deadline = time.monotonic() + timeout
        while True:
            for name, process in self._processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"Spark {name} exited with {process.returncode}:\n{self.log_tail(name)}")
            status = self.status()
            if status is not None and status.get("aliveworkers") == self.workers:
                return self
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{self.workers} workers not ALIVE within {timeout}s: {status}\n"
                                   f"{self.log_tail('master')}")
            time.sleep(0.5)  # polling the master's status, bounded by the deadline

    def status(self) -> dict[str, object] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=5) as answer:
                data: dict[str, object] = json.loads(answer.read())
                return data
        except (OSError, ValueError):
            return None

    def worker_pids(self) -> list[int]:
        return [p.pid for name, p in self._processes.items() if name.startswith("worker")]

    def log_tail(self, name: str, lines: int = 60) -> str:
        return _tail(self.directory / f"{name}.log", lines)

    def spark_conf(self, executor_python: Path) -> dict[str, str]:
        """What every job and server of the tests sets: executors with the given Python, small memory."""
        return {
            "spark.pyspark.python": str(executor_python),
            "spark.pyspark.driver.python": sys.executable,
            "spark.executor.memory": "512m",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
        }

    def submit(self, name: str, script: Path, args: Sequence[str], conf: Mapping[str, str],
               timeout: float = 900.0, env: Mapping[str, str] | None = None,
               result_file: Path | None = None) -> JobResult:
        """Run ``spark-submit --master <this cluster> --conf ... script args``; wait for it."""
        process = self.submit_async(name, script, args, conf, env)
        return self.wait_job(name, process, timeout, result_file)

    def submit_async(self, name: str, script: Path, args: Sequence[str], conf: Mapping[str, str],
                     env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
        command = [str(spark_home() / "bin" / "spark-submit"), "--master", self.master_url]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        return self._spawn(name, [*command, str(script), *args], env)

    def wait_job(self, name: str, process: subprocess.Popen[bytes], timeout: float = 900.0,
                 result_file: Path | None = None) -> JobResult:
        """Wait for a submitted job; its result is the JSON it wrote to ``result_file``.

        Not a line of its log: spark-submit copies a Python driver's output through a JVM thread in chunks,
        and a log line of Spark's, written to the same file, can land inside the job's line."""
        started = time.monotonic()
        try:
            process.wait(timeout)
        finally:
            self._stop_process(name)
        result = read_result(result_file) if result_file is not None else None
        return JobResult(process.returncode, result, time.monotonic() - started, self.directory / f"{name}.log")

    @contextlib.contextmanager
    def connect_server(self, conf: Mapping[str, str], executor_python: Path, timeout: float = 180.0,
                       extra_args: Sequence[str] = ()) -> Iterator[str]:
        """A Spark Connect server on this cluster for the block; yields its ``sc://`` address.

        Its Python workers run ``executor_python``: the server takes them from its PYSPARK_PYTHON
        environment variable (Spark Connect's planner ignores ``spark.pyspark.python``)."""
        port = free_port()
        command = [str(spark_home() / "bin" / "spark-submit"), "--class", CONNECT_CLASS, "--name",
                   "sparkafka-connect-test", "--master", self.master_url,
                   "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                   "--conf", f"spark.connect.grpc.binding.port={port}"]
        for key, value in conf.items():
            command += ["--conf", f"{key}={value}"]
        process = self._spawn("connect", [*command, *extra_args, "spark-internal"],
                              env={"PYSPARK_PYTHON": str(executor_python)})
        try:
            deadline = time.monotonic() + timeout
            log = self.directory / "connect.log"
            while "Spark Connect server started" not in log.read_text(errors="replace"):
                if process.poll() is not None:
                    raise RuntimeError(f"the Connect server exited with {process.returncode}:\n"
                                       f"{self.log_tail('connect')}")
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"the Connect server did not start within {timeout}s:\n"
                                       f"{self.log_tail('connect')}")
                time.sleep(0.5)  # polling its log, bounded by the deadline
            yield f"sc://127.0.0.1:{port}"
        finally:
            self._stop_process("connect")

    def _stop_process(self, name: str, timeout: float = 30.0) -> None:
        process = self._processes.pop(name, None)
        if process is None:
            return
        if process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                process.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # the group is the process's own: what it left behind

    def stop(self) -> None:
        for name in [n for n in self._processes if n.startswith("worker")]:  # workers first: they stop executors
            self._stop_process(name)
        for name in list(self._processes):
            self._stop_process(name)


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[1])


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def python_workers_of(executor_python: Path, ancestors: Sequence[int]) -> list[int]:
    """Python worker processes forked by a ``pyspark.daemon`` running ``executor_python`` that descend from
    one of ``ancestors`` (the cluster's workers): the processes that run tasks' Python."""
    wanted = str(executor_python)
    candidates = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            cmd = _cmdline(int(entry.name))
            if cmd and cmd[0] == wanted and "pyspark.daemon" in cmd:
                candidates.add(int(entry.name))
    result = []
    for pid in candidates:
        if _ppid(pid) not in candidates:
            continue  # a daemon itself, not one of its forked workers
        up: int | None = pid
        while up is not None and up > 1:
            if up in ancestors:
                result.append(pid)
                break
            up = _ppid(up)
    return sorted(result)
