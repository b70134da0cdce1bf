"""Shipping sparkafka to executors that do not have it: ``register(spark, ship=...)``'s other half.

How it works: ``ensure_executors_can_import`` runs before the data source is registered (Spark captures
a session's Python includes when a Python data source is registered). With ``ship=None`` (the default)
it asks the executors once per SparkContext (classic) or session (Spark Connect) what they have: a one-
partition-per-core Spark job runs ``_probe`` in their Python workers (a function pickled by value, so it
needs nothing of sparkafka there), which reports the Python, whether pyarrow, crc32c and the codec
packages can be imported, and the version and ``source_digest`` of the sparkafka they import, if any.
Executors without pyarrow are an ``ExecutorEnvironmentError`` (the sink receives Arrow batches). If
every executor imports a sparkafka with the driver's source digest they keep it (with its C
accelerator); otherwise ``package_zip.build_zip`` writes a pure-Python zip of the driver's installed
package (every ``.py`` file and ``py.typed``, no compiled module) named by its digest, and ``ship_zip``
adds it to the session: ``SparkContext.addPyFile`` (classic) or ``spark.addArtifacts(path,
pyfile=True)`` (Spark Connect). Spark puts it ahead of the site-packages of every Python worker of the
session, so the executors then run sparkafka's pure-Python path; one WARNING says so, with what the
executors lack. ``ship=True`` ships without asking, ``ship=False`` never ships. A local master whose
Python workers run this very interpreter (``spark.pyspark.python`` = ``sys.executable``) is not asked.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sparkafka._version import __version__
from sparkafka.errors import ExecutorEnvironmentError
from sparkafka.spark.package_zip import build_zip, source_digest

__all__ = [
    "ExecutorEnvironmentError",
    "ExecutorReport",
    "ShipResult",
    "build_zip",
    "check_executors",
    "ensure_executors_can_import",
    "ship_zip",
    "source_digest",
]

log = logging.getLogger("sparkafka.spark")

_lock = threading.Lock()
_done: dict[str, ShipResult] = {}
"""Per SparkContext (``app:<id>``) or Connect session (``session:<id>``): what was decided."""


@dataclass(frozen=True)
class ExecutorReport:
    """What one executor Python worker could import (``_probe``'s answer)."""

    executable: str
    python: tuple[int, ...]
    pyarrow: bool
    crc32c: bool
    codecs: dict[str, bool]
    sparkafka: str | None
    """The version it imports, None if it cannot import sparkafka."""
    digest: str | None
    accel: bool
    error: str | None = None

    @classmethod
    def from_json(cls, text: str) -> ExecutorReport:
        data = json.loads(text)
        return cls(executable=data["executable"], python=tuple(data["python"]), pyarrow=data["pyarrow"],
                   crc32c=data["crc32c"], codecs=dict(data["codecs"]), sparkafka=data.get("sparkafka"),
                   digest=data.get("digest"), accel=bool(data.get("accel")), error=data.get("error"))

    def has_this_sparkafka(self, digest: str) -> bool:
        return self.sparkafka == __version__ and self.digest == digest


@dataclass(frozen=True)
class ShipResult:
    """What ``ensure_executors_can_import`` did for one SparkContext or session."""

    shipped: str | None
    """The zip added to the session, or None."""
    reports: tuple[ExecutorReport, ...] = ()
    """The executors' answers (empty when they were not asked)."""
    reason: str = ""
    notes: list[str] = field(default_factory=list)


def _probe(_: Any) -> str:
    """Runs in an executor's Python worker (pickled by value): what can it import? One JSON line."""
    import importlib.util
    import json
    import sys

    info: dict[str, Any] = {
        "executable": sys.executable,
        "python": list(sys.version_info[:3]),
        "pyarrow": importlib.util.find_spec("pyarrow") is not None,
        "crc32c": importlib.util.find_spec("crc32c") is not None,
        "codecs": {name: importlib.util.find_spec(name) is not None for name in ("cramjam", "lz4", "zstandard")},
    }
    try:
        from sparkafka._version import __version__ as version

        info["sparkafka"] = version
        from sparkafka.accel import ACCEL
        from sparkafka.spark.package_zip import source_digest

        info["accel"] = ACCEL is not None
        info["digest"] = source_digest()
    except Exception as exc:  # not installed, or a version without this module
        info["error"] = f"{type(exc).__name__}: {exc}"
    return json.dumps(info)


def _by_value(fn: Callable[..., Any]) -> types.FunctionType:
    """A copy of ``fn`` that cloudpickle pickles by value (its module is not importable anywhere)."""
    assert isinstance(fn, types.FunctionType)
    copy = types.FunctionType(fn.__code__, {"__builtins__": __builtins__}, fn.__name__)
    copy.__module__ = "sparkafka_executor_probe"
    copy.__qualname__ = fn.__qualname__
    return copy


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _session_key(spark: Any) -> str:
    if _is_connect(spark):
        return f"session:{spark.session_id}"
    return f"app:{spark.sparkContext.applicationId}"


def _parallelism(spark: Any) -> int:
    if _is_connect(spark):
        return 2
    return max(1, min(int(spark.sparkContext.defaultParallelism), 64))


def check_executors(spark: Any) -> list[ExecutorReport]:
    """Run ``_probe`` in one task per core (up to 64) of the session's executors."""
    from pyspark.sql.functions import udf

    n = _parallelism(spark)
    probe = udf(_by_value(_probe), "string", useArrow=False)  # plain pickled rows: no pyarrow needed there
    try:
        rows = spark.range(0, n, 1, n).select(probe("id").alias("report")).collect()
    except Exception as exc:
        raise ExecutorEnvironmentError(
            f"could not run the check of the executors' Python (register(spark, ship=...) asks what they can "
            f"import): {str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__}") from exc
    return [ExecutorReport.from_json(row["report"]) for row in rows]


def _same_interpreter_locally(spark: Any) -> bool:
    if _is_connect(spark):
        return False
    sc = spark.sparkContext
    master = str(sc.master)
    local = master == "local" or master.startswith(("local[", "local-cluster["))
    return local and os.path.abspath(str(sc.pythonExec)) == os.path.abspath(sys.executable)


def ship_zip(spark: Any, path: str) -> None:
    """Add the zip to the session's Python path: ``addPyFile`` (classic) or ``addArtifacts`` (Connect)."""
    if _is_connect(spark):
        spark.addArtifacts(path, pyfile=True)
    else:
        spark.sparkContext.addPyFile(path)


def _describe_lacks(reports: list[ExecutorReport]) -> list[str]:
    notes = ["no C accelerator"]
    if not all(r.crc32c for r in reports):
        notes.append("CRC-32C in pure Python (no crc32c package there)")
    missing = sorted({name for r in reports for name, ok in r.codecs.items() if not ok})
    if missing:
        notes.append(f"compression needs {', '.join(missing)} there for the codecs that use them")
    return notes


def ensure_executors_can_import(spark: Any, ship: bool | None = None) -> ShipResult:
    """Make sure the executors can import this sparkafka (see the module docstring). Once per session."""
    if ship is False:
        return ShipResult(None, reason="ship=False")
    key = _session_key(spark)
    with _lock:
        done = _done.get(key)
        if done is not None:
            return done
        result = _decide(spark, ship)
        _done[key] = result
        return result


def _decide(spark: Any, ship: bool | None) -> ShipResult:
    reports: list[ExecutorReport] = []
    if ship is None:
        if _same_interpreter_locally(spark):
            return ShipResult(None, reason="local master: the Python workers run this interpreter")
        reports = check_executors(spark)
        lacking = [r for r in reports if not r.pyarrow]
        if lacking:
            raise ExecutorEnvironmentError(
                f"the executors' Python ({lacking[0].executable}) cannot import pyarrow, which the sparkafka "
                "sink needs (Spark hands it Arrow batches) as does Spark's own Arrow support: install pyarrow "
                "there (pip install pyarrow)")
        digest = source_digest()
        without = [r for r in reports if not r.has_this_sparkafka(digest)]
        if not without:
            return ShipResult(None, tuple(reports), reason="the executors import this sparkafka")
        first = without[0]
        why = (first.error if first.sparkafka is None
               else f"they import sparkafka {first.sparkafka} from other sources (digest {first.digest})")
        reason = f"{len(without)} of {len(reports)} executor Pythons cannot import this sparkafka ({why})"
    else:
        reason = "ship=True"
    path, files, size = build_zip()
    ship_zip(spark, path)
    how = "spark.addArtifacts(pyfile=True)" if _is_connect(spark) else "SparkContext.addPyFile"
    notes = _describe_lacks(reports) if reports else ["no C accelerator"]
    log.warning(
        "sparkafka %s: %s; shipped a pure-Python copy (%s, %d files, %d KB) with %s, so the executors run "
        "sparkafka's pure-Python path (%s). Installing sparkafka on every node (or in a packed environment "
        "given with spark.archives) keeps the C accelerator.",
        __version__, reason, path, files, size // 1024, how, "; ".join(notes))
    return ShipResult(path, tuple(reports), reason=reason, notes=notes)
