"""``sparkafka.spark.shipping`` without a cluster: the zip, the probe pickled by value, and the decisions.

How it works: the zip is imported by a fresh interpreter that has nothing but the standard library on
its path, which must see the same sources (same digest) and no compiled module; the probe is pickled as
Spark pickles it and run by an interpreter that cannot import sparkafka. The decisions of
``ensure_executors_can_import`` run on a stand-in session whose executors' answers are given (the real
ones are asked on a standalone cluster and a Spark Connect server in ``test_cluster.py``).
"""

from __future__ import annotations

import itertools
import json
import logging
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sparkafka import __version__
from sparkafka.spark import shipping
from sparkafka.spark.shipping import ExecutorEnvironmentError, ExecutorReport, build_zip, source_digest

pytestmark = pytest.mark.spark


def test_zip_holds_the_pure_python_package(tmp_path: Path) -> None:
    path, files, size = build_zip(str(tmp_path))
    assert Path(path).name == f"sparkafka-{__version__}-{source_digest()}.zip"
    with zipfile.ZipFile(path) as zf:
        names = zf.namelist()
    assert len(names) == files and Path(path).stat().st_size == size
    assert "sparkafka/__init__.py" in names and "sparkafka/spark/shipping.py" in names
    assert "sparkafka/py.typed" in names
    assert all(n.startswith("sparkafka/") and (n.endswith(".py") or n.endswith("py.typed")) for n in names)
    assert not any("__pycache__" in n for n in names)
    again, _, _ = build_zip(str(tmp_path))  # same sources, same bytes, same file
    assert again == path and Path(again).read_bytes() == Path(path).read_bytes()


def test_the_zip_imports_alone_and_runs_pure_python(tmp_path: Path) -> None:
    path, _, _ = build_zip(str(tmp_path))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sparkafka, sparkafka.accel, sparkafka.record; "
            "print(sparkafka.__file__, sparkafka.accel.ACCEL, sparkafka.record.crc.HAVE_C_CRC32C)")
    # -S: no site-packages, so neither the editable install nor crc32c, pyspark or pyarrow is there
    done = subprocess.run([sys.executable, "-S", "-c", code, path], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    where, accel, c_crc = done.stdout.split()
    assert where.startswith(path) and accel == "None" and c_crc == "False"


def test_digest_read_from_the_zip_matches(tmp_path: Path) -> None:
    """What the probe computes on an executor that imports the shipped zip equals the driver's digest."""
    path, _, _ = build_zip(str(tmp_path))
    code = ("import sys; sys.path.insert(0, sys.argv[1]); import sparkafka.spark.shipping as s; "
            "print(s.__file__, s.source_digest())")
    done = subprocess.run([sys.executable, "-c", code, path], capture_output=True, text=True, timeout=120,
                          check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    where, digest = done.stdout.split()
    assert where.startswith(path) and digest == source_digest()


def test_probe_is_pickled_by_value_and_runs_without_sparkafka(tmp_path: Path) -> None:
    from pyspark import cloudpickle

    blob = cloudpickle.dumps(shipping._by_value(shipping._probe))  # type: ignore[no-untyped-call]
    (tmp_path / "probe.pkl").write_bytes(blob)
    # an interpreter that cannot import sparkafka unpickles it only if it was pickled by value
    code = ("import pickle, sys; sys.modules['sparkafka'] = None; "
            "print(pickle.loads(open(sys.argv[1], 'rb').read())(0))")
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "probe.pkl")], capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    report = ExecutorReport.from_json(done.stdout)
    assert report.sparkafka is None and report.error is not None and "sparkafka" in report.error
    assert report.executable == sys.executable and report.pyarrow and report.crc32c


def test_probe_in_this_interpreter_sees_this_sparkafka() -> None:
    report = ExecutorReport.from_json(shipping._probe(0))
    assert report.has_this_sparkafka(source_digest()) and report.error is None


_APP_IDS = itertools.count()


class _Context:
    def __init__(self, master: str, python: str) -> None:
        # unique per context: ensure_executors_can_import decides once per application id, and an id()
        # is reused once the previous test's context is freed (the next test then got its answer)
        self.applicationId = f"app-{next(_APP_IDS)}"
        self.master = master
        self.pythonExec = python
        self.defaultParallelism = 2
        self.added: list[str] = []

    def addPyFile(self, path: str) -> None:
        self.added.append(path)


class _Session:
    """Enough of a classic SparkSession for the decisions (the executors' answers are patched in)."""

    def __init__(self, master: str = "spark://127.0.0.1:7077", python: str = "/opt/py/bin/python") -> None:
        self.sparkContext = _Context(master, python)


def _report(**changes: Any) -> ExecutorReport:
    fields: dict[str, Any] = {"executable": "/opt/py/bin/python", "python": (3, 11, 7), "pyarrow": True,
                              "crc32c": False, "codecs": {"cramjam": False, "lz4": False, "zstandard": True},
                              "sparkafka": None, "digest": None, "accel": False,
                              "error": "ModuleNotFoundError: No module named 'sparkafka'"}
    fields.update(changes)
    return ExecutorReport(**fields)


def _shipping_records(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """This module's log records: caplog also holds any other logger's (a producer another test left
    reconnecting to a stopped broker logs WARNINGs from its own thread)."""
    return [r for r in caplog.records if r.name.startswith("sparkafka.spark")]


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[list[list[ExecutorReport]]]:
    """Each ``check_executors`` call pops the next list of reports; zips go to tmp_path."""
    queue: list[list[ExecutorReport]] = []
    monkeypatch.setattr(shipping, "check_executors", lambda spark: queue.pop(0))
    real_build = shipping.build_zip
    monkeypatch.setattr(shipping, "build_zip", lambda directory=None: real_build(str(tmp_path)))
    yield queue


def test_executors_without_sparkafka_get_it_once(answers: list[list[ExecutorReport]],
                                                 caplog: pytest.LogCaptureFixture) -> None:
    spark = _Session()
    answers.append([_report(), _report(sparkafka=__version__, digest=source_digest(), accel=True)])
    with caplog.at_level(logging.WARNING, "sparkafka.spark"):
        first = shipping.ensure_executors_can_import(spark)
        second = shipping.ensure_executors_can_import(spark)  # asked once: no second check, no second zip
    assert first is second and first.shipped is not None
    assert spark.sparkContext.added == [first.shipped]
    assert "1 of 2 executor Pythons cannot import this sparkafka (ModuleNotFoundError" in first.reason
    (record,) = _shipping_records(caplog)
    text = record.getMessage()
    assert "shipped a pure-Python copy" in text and "SparkContext.addPyFile" in text
    assert "CRC-32C in pure Python" in text and "cramjam, lz4" in text and "zstandard" not in text.split("needs")[1]


def test_executors_with_this_sparkafka_keep_theirs(answers: list[list[ExecutorReport]],
                                                   caplog: pytest.LogCaptureFixture) -> None:
    spark = _Session()
    answers.append([_report(sparkafka=__version__, digest=source_digest(), accel=True, error=None)] * 2)
    with caplog.at_level(logging.WARNING, "sparkafka.spark"):
        result = shipping.ensure_executors_can_import(spark)
    assert result.shipped is None and spark.sparkContext.added == [] and not _shipping_records(caplog)


def test_other_sources_of_the_same_version_are_replaced(answers: list[list[ExecutorReport]]) -> None:
    spark = _Session()
    answers.append([_report(sparkafka=__version__, digest="0" * 16, error=None)])
    result = shipping.ensure_executors_can_import(spark)
    assert result.shipped is not None and "from other sources (digest 0000000000000000)" in result.reason


def test_executors_without_pyarrow_are_an_error_naming_it(answers: list[list[ExecutorReport]]) -> None:
    answers.append([_report(pyarrow=False)])
    with pytest.raises(ExecutorEnvironmentError, match=r"cannot import pyarrow.*pip install pyarrow"):
        shipping.ensure_executors_can_import(_Session())


def test_ship_true_ships_without_asking_and_false_never(answers: list[list[ExecutorReport]]) -> None:
    spark = _Session()
    assert shipping.ensure_executors_can_import(spark, ship=False).shipped is None
    result = shipping.ensure_executors_can_import(spark, ship=True)  # answers is empty: asking would fail
    assert result.shipped is not None and spark.sparkContext.added == [result.shipped]
    assert result.reason == "ship=True"


def test_local_master_running_this_interpreter_is_not_asked(answers: list[list[ExecutorReport]]) -> None:
    for master in ("local[2]", "local", "local-cluster[2,1,1024]"):
        result = shipping.ensure_executors_can_import(_Session(master, sys.executable))
        assert result.shipped is None and "local master" in result.reason
    answers.append([_report()])  # a local master with another Python is asked
    assert shipping.ensure_executors_can_import(_Session("local[2]", "/opt/py/bin/python")).shipped is not None


def test_report_json_roundtrip() -> None:
    report = _report()
    text = json.dumps({"executable": report.executable, "python": list(report.python), "pyarrow": True,
                       "crc32c": False, "codecs": report.codecs, "error": report.error})
    assert ExecutorReport.from_json(text) == report
