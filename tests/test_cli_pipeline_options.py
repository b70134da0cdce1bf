"""``sparkafka pipeline``: option errors come before the embedded broker and the Spark JVM start.

How it works: ``cli.main`` runs in-process with ``EmbeddedBroker`` and the job's Spark session replaced by
stubs that fail the test if called; an option error must end the run first with exit code 2 and one line
on stderr naming the option.
"""

from __future__ import annotations

import pytest

import sparkafka.broker
from sparkafka import cli
from sparkafka.cli import pipeline


def _started(*args: object, **kwargs: object) -> None:
    raise AssertionError("started before the options were checked")


@pytest.mark.parametrize(("options", "says"), [
    (["--topic", "a%b"], "invalid topic name 'a%b' in --topic: it has illegal characters"),
    (["--topic", ""], "invalid topic name '' in --topic: it is empty"),
    (["--rows", "99999999999999999999"], "--rows must be in 0..4610818173598"),
    (["--exactly-once", "--sink-id", "bad/id", "--bootstrap-servers", "127.0.0.1:1"],
     "--sink-id: option 'sparkafka.sink.id' must be 1-200 letters, digits, '.', '_' or '-', got 'bad/id'"),
    (["--bootstrap-servers", "garbage"], "--bootstrap-servers: 'bootstrap.servers' entries must be host:port, "
                                         "got 'garbage'"),
    (["--input", "/nonexistent/orders.parquet"], "input '/nonexistent/orders.parquet' does not exist"),
    (["--input", __file__], "cannot tell the format of"),
])
def test_option_errors_are_found_before_the_broker_and_spark_start(
        options: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The topic and the sink id were checked by the sink or ``run_pipeline``, after Spark had started (an
    illegal topic ended in a 23-line PYTHON_DATA_SOURCE_ERROR, exit 1); --rows beyond a Java long reached
    Spark (NumberFormatException, exit 1); a bad --bootstrap-servers was reported as ``-X: option
    'kafka.bootstrap.servers'``; a missing --input, or one of no known format, was found once Spark's JVM had
    started (seconds later)."""
    cli.build_parser()  # imports every command first: sparkafka.cli.broker must not bind the stub for good
    monkeypatch.setattr(sparkafka.broker, "EmbeddedBroker", _started)
    monkeypatch.setattr(pipeline, "_spark_session", _started)
    assert cli.main(["pipeline", "--no-progress", *options]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sparkafka pipeline: ") and says in err
