"""``register``: the format is known afterwards, and the driver's accumulator server no longer prints a
traceback when the JVM hangs up on it (what stopping a streaming query mid-batch used to show).

How it works: ``pyspark.accumulators._start_update_server`` starts the same server a SparkContext runs;
the test authenticates to it as the JVM does and closes the connection before the next update, which is
what an interrupted query thread does. Unwrapped, PySpark prints the ``EOFError`` traceback to stderr;
wrapped by ``quiet_accumulator_hangups`` it logs one DEBUG line and prints nothing.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sparkafka.spark.registration import quiet_accumulator_hangups

pytestmark = pytest.mark.spark


@pytest.fixture
def accumulator_server() -> Iterator[Any]:
    from pyspark.accumulators import _start_update_server

    server = _start_update_server("a-token-for-the-test", False)
    try:
        yield server
    finally:
        server.shutdown()


def _hang_up(server: Any) -> None:
    """Authenticate as the JVM does, then close before sending an update."""
    host, port = server.server_address
    with socket.create_connection((host, port), timeout=10) as sock:
        sock.sendall(server.auth_token.encode())


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())
        self.seen.set()


def test_pyspark_prints_the_hangup_as_a_traceback(accumulator_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    _hang_up(accumulator_server)
    deadline = time.monotonic() + 30
    err = ""
    while "EOFError" not in err and time.monotonic() < deadline:
        err += capsys.readouterr().err
        time.sleep(0.05)  # polling for the server thread's output, bounded by the deadline
    assert "Traceback" in err and "EOFError" in err


def test_the_hangup_is_one_debug_line_once_quieted(accumulator_server: Any,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    quiet_accumulator_hangups(accumulator_server)
    quiet_accumulator_hangups(accumulator_server)  # idempotent: wrapped once
    lines = _Lines()
    logger = logging.getLogger("sparkafka.spark")
    logger.addHandler(lines)
    old_level = logger.level
    logger.setLevel(logging.DEBUG)
    try:
        _hang_up(accumulator_server)
        assert lines.seen.wait(30)
    finally:
        logger.removeHandler(lines)
        logger.setLevel(old_level)
    assert len(lines.lines) == 1 and "closed its accumulator-update connection" in lines.lines[0]
    assert capsys.readouterr().err == ""


def test_other_errors_still_reach_pyspark(accumulator_server: Any, capsys: pytest.CaptureFixture[str]) -> None:
    quiet_accumulator_hangups(accumulator_server)
    try:
        raise ValueError("The value of the provided token to the AccumulatorServer is not correct.")
    except ValueError:
        accumulator_server.handle_error(None, ("127.0.0.1", 1))
    err = capsys.readouterr().err
    assert "Traceback" in err and "ValueError" in err


def test_register_quiets_the_session_server(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    from sparkafka.spark import register

    register(spark)  # again: idempotent
    server = spark.sparkContext._accumulatorServer
    try:
        raise EOFError
    except EOFError:
        server.handle_error(None, ("127.0.0.1", 1))
    assert capsys.readouterr().err == ""
    df = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception, match=r"kafka\.bootstrap\.servers"):  # the format is known: its options are checked
        df.write.format("sparkafka").mode("append").save()
