"""Apache Kafka itself for the tests and benchmarks: KRaft nodes started as child JVMs on loopback.

How it works: the broker's jars come from Maven Central through ``jvm/pom.xml`` (``make kafka`` copies
them into ``.cache/kafka/lib``; ``kafka_lib_dir`` finds them or says how to get them). ``KafkaCluster``
writes one ``server.properties`` per node into a work directory of its own: every node is a combined
broker and controller (``process.roles=broker,controller``) with static voters, listening on ports it
picked on 127.0.0.1:

    PLAINTEXT       no security (the inter-broker listener)
    SASL_PLAINTEXT  SASL PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512 without TLS
    SSL             TLS, server certificate only
    MTLS            TLS with client certificates required (``ssl.client.auth=required``)
    SASL_SSL        SASL PLAIN / SCRAM over TLS
    CONTROLLER      the KRaft quorum

TLS needs ``tls`` (a CA file and a server key and certificate chain, PEM, for 127.0.0.1 and localhost);
without it only the plaintext listeners exist. The storage of each node is formatted by Kafka's own
``StorageTool`` (the ``kafka-storage format`` command), which also writes the SCRAM credentials of
``scram_users`` and any ``features`` (``transaction.version=1`` gives a broker with the classic
transaction protocol; 4.x formats version 2 by default). The authorizer is Kafka's
``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=true``: nothing is refused until a test
puts an ACL on a resource, and the PLAINTEXT principal (``User:ANONYMOUS``) and ``admin`` are super
users. ``start()`` returns once every node logged that it started and a Metadata request on the
PLAINTEXT listener lists every broker. Each JVM is in its own session with ``PR_SET_PDEATHSIG`` so it
dies with the test process (every JVM is forked by one long-lived launcher thread: the "parent" whose death
kills the child is the thread that forked it, so a node a test restarts from a thread of its own would die
with that thread); ``stop()`` sends SIGTERM to each (a controlled shutdown) and SIGKILL after a
bound; ``kill(node)`` is a crash; ``stop_node``/``start_node`` restart a node on its own data and ports.
Node logs stay in the work directory; ``keep_logs`` copies them elsewhere (the fixtures do that for a
failed test) and ``stop(remove=True)`` deletes the work directory.
"""

from __future__ import annotations

import base64
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = [
    "LISTENERS",
    "KafkaCluster",
    "KafkaNotInstalledError",
    "KafkaStartError",
    "TlsFiles",
    "kafka_lib_dir",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT", "SSL", "MTLS", "SASL_SSL")
_TLS_LISTENERS = frozenset({"SSL", "MTLS", "SASL_SSL"})
_PROTOCOL_OF = {"PLAINTEXT": "PLAINTEXT", "SASL_PLAINTEXT": "SASL_PLAINTEXT", "SSL": "SSL", "MTLS": "SSL",
                "SASL_SSL": "SASL_SSL", "CONTROLLER": "PLAINTEXT"}
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_STARTED_LINE = "Kafka Server started"
_PR_SET_PDEATHSIG = 1
_LOG4J2 = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Logger:
      - name: kafka.server.KafkaConfig
        level: WARN
      - name: org.apache.kafka.common.config.AbstractConfig
        level: WARN
      - name: kafka.log.LogManager
        level: WARN
      - name: org.apache.kafka.storage.internals.log
        level: WARN
      - name: kafka.cluster.Partition
        level: WARN
    Root:
      level: INFO
      AppenderRef:
        - ref: STDOUT
"""


class KafkaNotInstalledError(RuntimeError):
    """Apache Kafka's jars (or Java) are not there: ``make kafka`` fetches them with Maven."""


class KafkaStartError(RuntimeError):
    """A node did not start or the cluster did not become ready in time (the message has the log's tail)."""


def kafka_lib_dir() -> Path:
    """The folder of Apache Kafka's jars: ``$SPARKAFKA_KAFKA_LIB`` or ``<repo>/.cache/kafka/lib``."""
    configured = os.environ.get("SPARKAFKA_KAFKA_LIB")
    lib = Path(configured) if configured else REPO_ROOT / ".cache" / "kafka" / "lib"
    if not any(lib.glob("kafka_2.13-*.jar")):
        raise KafkaNotInstalledError(
            f"Apache Kafka's jars are not in {lib}: run `make kafka` (it needs Java 17 and Maven: "
            "apt-get install openjdk-17-jdk-headless maven)")
    if shutil.which("java") is None:
        raise KafkaNotInstalledError("`java` is not on PATH: install Java 17 (apt-get install openjdk-17-jdk-headless)")
    return lib


@dataclass(frozen=True)
class TlsFiles:
    """PEM files for the TLS listeners: the CA clients trust, the server's key and its certificate."""

    ca: Path
    server_cert: Path
    server_key: Path
    """Unencrypted PKCS#8."""


@dataclass
class _Node:
    node_id: int
    ports: dict[str, int]
    directory: Path
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    @property
    def properties(self) -> Path:
        return self.directory / "server.properties"


def _free_ports(count: int) -> list[int]:
    """``count`` distinct ports that were free on 127.0.0.1 a moment ago."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind(("127.0.0.1", 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


_LAUNCHER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-launcher")
"""Forks every JVM. Its one thread lives as long as the test process: PR_SET_PDEATHSIG fires when the thread
that forked the child ends (prctl(2)), and a node restarted from a test's background thread was killed
without a word the moment that thread finished."""


def _die_with_parent() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass
class KafkaCluster:
    """``nodes`` combined KRaft nodes of Apache Kafka on loopback (see the module docstring)."""

    nodes: int = 1
    tls: TlsFiles | None = None
    scram_users: Mapping[str, str] = field(default_factory=dict)
    plain_users: Mapping[str, str] = field(default_factory=dict)
    features: Mapping[str, int] = field(default_factory=dict)
    """``--feature`` values at format time, e.g. ``{"transaction.version": 1}``."""
    config: Mapping[str, str] = field(default_factory=dict)
    """Extra broker settings, written into every node's ``server.properties``."""
    heap: str = "768m"
    name: str = "kafka"
    startup_timeout: float = 90.0
    lib: Path | None = None
    directory: Path = field(init=False)
    cluster_id: str = field(init=False)
    _nodes: dict[int, _Node] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.lib = self.lib or kafka_lib_dir()
        self.directory = Path(tempfile.mkdtemp(prefix=f"sparkafka-{self.name}-"))
        # A KRaft cluster id is 16 random bytes in URL-safe base64 without padding (Kafka's Uuid).
        self.cluster_id = "-"
        while self.cluster_id.startswith("-"):  # as Kafka's Uuid.randomUuid: "-..." reads as an option to the tool
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        listeners = [n for n in LISTENERS if self.tls is not None or n not in _TLS_LISTENERS] + ["CONTROLLER"]
        ports = _free_ports(len(listeners) * self.nodes)
        for index in range(self.nodes):
            node_id = index + 1
            mine = ports[index * len(listeners):(index + 1) * len(listeners)]
            directory = self.directory / f"node-{node_id}"
            (directory / "data").mkdir(parents=True)
            self._nodes[node_id] = _Node(node_id, dict(zip(listeners, mine)), directory)

    # -- addresses ------------------------------------------------------------------------------------

    @property
    def node_ids(self) -> list[int]:
        return sorted(self._nodes)

    def bootstrap_servers(self, listener: str = "PLAINTEXT", nodes: Iterable[int] | None = None) -> str:
        """``host:port,...`` of ``listener`` on the given nodes (all by default)."""
        chosen = self.node_ids if nodes is None else list(nodes)
        missing = [n for n in chosen if listener not in self._nodes[n].ports]
        if missing:
            raise KeyError(f"listener {listener!r} is not configured (TLS listeners need tls=)")
        return ",".join(f"127.0.0.1:{self._nodes[n].ports[listener]}" for n in chosen)

    @property
    def bootstrap(self) -> str:
        return self.bootstrap_servers()

    def port(self, node_id: int, listener: str = "PLAINTEXT") -> int:
        return self._nodes[node_id].ports[listener]

    def log_path(self, node_id: int) -> Path:
        return self._nodes[node_id].log_path

    def log_text(self, node_id: int) -> str:
        return self._nodes[node_id].log_path.read_text(errors="replace")

    # -- configuration ------------------------------------------------------------------------------

    def _properties(self, node: _Node) -> str:
        n = self.nodes
        voters = ",".join(f"{i}@127.0.0.1:{self._nodes[i].ports['CONTROLLER']}" for i in self.node_ids)
        listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in node.ports.items())
        advertised = ",".join(f"{name}://127.0.0.1:{port}" for name, port in node.ports.items()
                              if name != "CONTROLLER")
        protocol_map = ",".join(f"{name}:{_PROTOCOL_OF[name]}" for name in node.ports)
        props: dict[str, str] = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": listeners,
            "advertised.listeners": advertised,
            "listener.security.protocol.map": protocol_map,
            "inter.broker.listener.name": "PLAINTEXT",
            "controller.listener.names": "CONTROLLER",
            "log.dirs": str(node.directory / "data"),
            "num.partitions": "1",
            "default.replication.factor": str(n),
            "min.insync.replicas": str(min(2, n)),
            "offsets.topic.replication.factor": str(n),
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": str(n),
            "transaction.state.log.min.isr": str(min(2, n)),
            "transaction.state.log.num.partitions": "5",
            "group.initial.rebalance.delay.ms": "0",
            # Tests write records with fixed historic timestamps (the golden batch's is from 2023). Under the
            # 7-day default, the retention task (every 5 minutes, from 30 s after start) deletes such a
            # segment, active or not, between the Produce and the readback: the consumer then meets
            # OFFSET_OUT_OF_RANGE at 0 and an empty log. Nothing here is deleted by age.
            "log.retention.ms": "-1",
            "share.coordinator.state.topic.replication.factor": str(n),
            "share.coordinator.state.topic.min.isr": str(min(2, n)),
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS;User:admin",
            "allow.everyone.if.no.acl.found": "true",
            "sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS),
        }
        plain = " ".join(f'user_{user}="{password}"' for user, password in self.plain_users.items())
        for listener in ("SASL_PLAINTEXT", "SASL_SSL"):
            if listener not in node.ports:
                continue
            prefix = f"listener.name.{listener.lower()}"
            props[f"{prefix}.plain.sasl.jaas.config"] = (
                f"org.apache.kafka.common.security.plain.PlainLoginModule required {plain};")
            for mechanism in ("scram-sha-256", "scram-sha-512"):
                props[f"{prefix}.{mechanism}.sasl.jaas.config"] = (
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;")
        if self.tls is not None:
            keystore = node.directory / "server-keystore.pem"
            keystore.write_text(self.tls.server_key.read_text() + self.tls.server_cert.read_text())
            props.update({
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(self.tls.ca),
                "listener.name.mtls.ssl.client.auth": "required",
            })
        props.update(self.config)
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def _java(self, main: str, *args: str, heap: str | None = None) -> list[str]:
        assert self.lib is not None
        command = ["java"]
        if heap is not None:
            command += [f"-Xms{heap}", f"-Xmx{heap}"]
        command += [
            "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.yaml'}",
            "-cp", f"{self.lib}/*", main, *args,
        ]
        return command

    def _format(self, node: _Node) -> None:
        args = ["format", "-t", self.cluster_id, "-c", str(node.properties)]
        for user, password in self.scram_users.items():
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                args += ["--add-scram", f"{mechanism}=[name={user},password={password}]"]
        for feature, level in self.features.items():
            args += ["--feature", f"{feature}={level}"]
        done = subprocess.run(self._java("kafka.tools.StorageTool", *args), capture_output=True, text=True,
                              timeout=120, check=False)
        if done.returncode != 0:
            raise KafkaStartError(f"formatting node {node.node_id} failed ({done.returncode}):\n"
                                  f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")

    # -- lifecycle ------------------------------------------------------------------------------------

    def start(self) -> KafkaCluster:
        (self.directory / "log4j2.yaml").write_text(_LOG4J2)
        for node in self._nodes.values():
            node.properties.write_text(self._properties(node))
            self._format(node)
        try:
            for node_id in self.node_ids:
                self._launch(self._nodes[node_id])
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, node: _Node) -> None:
        if node.process is not None and node.process.poll() is None:
            raise RuntimeError(f"node {node.node_id} is running")
        node.starts += 1
        with node.log_path.open("ab") as log:
            log.write(f"\n===== start {node.starts} of node {node.node_id} =====\n".encode())
            log.flush()
            node.process = _LAUNCHER.submit(
                subprocess.Popen, self._java("kafka.Kafka", str(node.properties), heap=self.heap),
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True, preexec_fn=_die_with_parent, cwd=node.directory).result()

    def wait_ready(self, nodes: Iterable[int] | None = None, timeout: float | None = None) -> None:
        """Every node of ``nodes`` (default: all) started, and Metadata lists every running node."""
        chosen = self.node_ids if nodes is None else list(nodes)
        deadline = time.monotonic() + (timeout or self.startup_timeout)
        for node_id in chosen:
            node = self._nodes[node_id]
            marker = f"===== start {node.starts} of node {node_id} ====="
            while True:
                process = node.process
                if process is None or process.poll() is not None:
                    raise KafkaStartError(f"node {node_id} exited ({process and process.returncode}):\n"
                                          f"{_tail(node.log_path)}")
                text = node.log_path.read_text(errors="replace")
                if _STARTED_LINE in text[text.rfind(marker):]:
                    break
                if time.monotonic() > deadline:
                    raise KafkaStartError(f"node {node_id} did not start in time:\n{_tail(node.log_path)}")
                time.sleep(0.1)
        running = {n for n in self.node_ids if self.is_running(n)}
        self._wait_metadata(running, deadline)

    def _wait_metadata(self, expected: set[int], deadline: float) -> None:
        from confluent_kafka.admin import AdminClient

        bootstrap = self.bootstrap_servers(nodes=sorted(expected))
        admin = AdminClient({"bootstrap.servers": bootstrap})
        seen: set[int] = set()
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                seen = set(admin.list_topics(timeout=2).brokers)
                if expected <= seen:
                    return
            time.sleep(0.2)
        raise KafkaStartError(f"Metadata lists brokers {sorted(seen)}, expected {sorted(expected)}")

    def is_running(self, node_id: int) -> bool:
        process = self._nodes[node_id].process
        return process is not None and process.poll() is None

    def pid(self, node_id: int) -> int | None:
        process = self._nodes[node_id].process
        return process.pid if process is not None and process.poll() is None else None

    def kill(self, node_id: int) -> None:
        """A crash: SIGKILL, no controlled shutdown."""
        process = self._nodes[node_id].process
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)

    def stop_node(self, node_id: int, timeout: float = 30.0) -> None:
        """A controlled shutdown (SIGTERM), SIGKILL after ``timeout`` seconds."""
        process = self._nodes[node_id].process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)

    def start_node(self, node_id: int, wait: bool = True) -> None:
        """Start a stopped or killed node again, on its own data and ports."""
        self._launch(self._nodes[node_id])
        if wait:
            self.wait_ready([node_id])

    def stop(self, timeout: float = 20.0, remove: bool = False) -> None:
        """Stop every node (SIGTERM to all, then wait; SIGKILL past ``timeout``)."""
        processes = [n.process for n in self._nodes.values() if n.process is not None and n.process.poll() is None]
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for process in processes:
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGKILL)
                process.wait(timeout=30)
        if remove:
            shutil.rmtree(self.directory, ignore_errors=True)

    def keep_logs(self, destination: Path) -> Path:
        """Copy every node's log (and its properties) under ``destination``; returns the folder."""
        target = destination / f"{self.name}-{self.directory.name}"
        for node in self._nodes.values():
            folder = target / f"node-{node.node_id}"
            folder.mkdir(parents=True, exist_ok=True)
            for path in (node.log_path, node.properties):
                if path.exists():
                    shutil.copy2(path, folder / path.name)
        return target

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop(remove=True)

    # -- helpers for the tests ---------------------------------------------------------------------

    def leader_of(self, topic: str, partition: int = 0, timeout: float = 15.0) -> int:
        """The node id that leads ``topic``/``partition`` now (waits while it has no leader)."""
        from confluent_kafka.admin import AdminClient

        running = [n for n in self.node_ids if self.is_running(n)]
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers(nodes=running)})
        deadline = time.monotonic() + timeout
        while True:
            entry = admin.list_topics(topic=topic, timeout=5).topics.get(topic)
            if entry is not None and entry.error is None and partition in entry.partitions:
                leader = entry.partitions[partition].leader
                if leader >= 0:
                    return int(leader)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic}/{partition} has no leader after {timeout}s")
            time.sleep(0.1)
