"""``benchmarks/run.py`` stops before starting a broker when a chosen Python peer is not installed, and says
how to install it, instead of printing a failed row for that peer in every round."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.benchmarks import load_benchmark

run = load_benchmark("run")


@pytest.fixture
def aiokafka_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    peers = dict(run.PEER_MODULES)
    peers["aiokafka"] = ("sparkafka_test_no_such_module", "aiokafka")
    monkeypatch.setattr(run, "PEER_MODULES", peers)


@pytest.mark.usefixtures("aiokafka_missing")
def test_missing_peers_names_only_the_missing_packages() -> None:
    assert run.missing_peers(["sparkafka", "sparkafka-py", "java", "ceiling", "confluent"]) == []
    assert run.missing_peers(["aiokafka", "confluent", "aiokafka"]) == ["aiokafka"]


@pytest.mark.usefixtures("aiokafka_missing")
def test_run_stops_before_the_broker_with_the_install_command(capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    def no_broker(*args: object, **kwargs: object) -> None:
        raise AssertionError("a broker was started")

    monkeypatch.setattr(run, "Broker", no_broker)
    with pytest.raises(SystemExit) as exited:
        run.main(["--broker", "mock", "--clients", "sparkafka", "aiokafka", "--workloads", "keyed-100"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "aiokafka not installed" in err and "pip install --group bench" in err and "--clients" in err


@pytest.mark.usefixtures("aiokafka_missing")
def test_a_run_without_the_missing_peer_is_not_stopped(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    class Started(Exception):
        pass

    def broker(*args: object, **kwargs: object) -> None:
        raise Started

    monkeypatch.setattr(run, "Broker", broker)
    with pytest.raises(Started):
        run.main(["--broker", "mock", "--clients", "sparkafka", "confluent", "--workloads", "keyed-100",
                  "--out", str(tmp_path)])
