"""One Spark session for the whole test run (local[2,4]: two threads, up to 4 attempts per task).

How it works: starting a JVM costs several seconds, so every Spark test shares the session-scoped
``spark`` fixture. The Python workers use this interpreter (``spark.pyspark.python``) so they see
the editable sparkafka install and pyarrow. ``local[2,4]`` rather than ``local[2]`` because plain
local mode never retries a failed task, and the sink's retry behaviour is under test. The UI is off
and shuffles use 2 partitions to keep the suite fast.

Spark finds a Python data source through the JVM's active session, which is per JVM thread; starting an
Apache Kafka node (a fixture of the same test) was seen to leave the test thread without one, and the
write then failed with DATA_SOURCE_NOT_FOUND. So every test that uses ``spark`` runs with it made active
after all its fixtures are set up (``pytest_runtest_call``), as ``sparkafka pipeline`` does for itself.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    session = getattr(item, "funcargs", {}).get("spark")
    jvm = getattr(session, "_jvm", None)
    if jvm is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(session._jsparkSession)  # type: ignore[union-attr]


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java (no java on PATH and no JAVA_HOME)")
    from pyspark.sql import SparkSession

    from sparkafka.spark import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[2,4]").appName("sparkafka-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.default.parallelism", "2")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.sql.session.timeZone", "UTC")
               .config("spark.python.worker.reuse", "true")
               .getOrCreate())
    session.sparkContext.setLogLevel("OFF")
    register(session)
    yield session
    session.stop()
