"""``sparkafka pipeline``'s Spark options: ``--conf`` as spark-submit reads it, and ``spark.pyspark.python``
pinned to this interpreter only for local masters (on a cluster that path means nothing to other hosts)."""

from __future__ import annotations

import io
import sys

import pytest

from sparkafka.cli.pipeline import is_local_master, parse_spark_conf, session_conf, set_worker_python
from sparkafka.errors import ConfigError


def test_conf_pairs_as_spark_submit() -> None:
    err = io.StringIO()
    conf = parse_spark_conf(["spark.executor.memory=2g", "spark.a=x=y", "spark.executor.memory=4g",
                             "hadoop.tmp=/x", " spark.b = 1"], err)
    assert conf == {"spark.executor.memory": "4g", "spark.a": "x=y", "spark.b": " 1"}
    assert err.getvalue() == "sparkafka pipeline: ignoring non-Spark config property: hadoop.tmp\n"
    for bad in ("spark.x", "=1", ""):
        with pytest.raises(ConfigError, match="--conf expects KEY=VALUE") as info:
            parse_spark_conf([bad])
        assert info.value.key == "conf"


@pytest.mark.parametrize(("master", "local"), [
    ("local", True), ("local[2]", True), ("local[2,4]", True), ("local[*]", True), ("local-cluster[2,1,1024]", True),
    ("spark://127.0.0.1:7077", False), ("yarn", False), ("k8s://https://h:443", False), ("localhost", False),
])
def test_python_is_pinned_only_for_local_masters(master: str, local: bool) -> None:
    assert is_local_master(master) is local
    conf = session_conf(master, {"spark.executor.cores": "1"})
    assert conf.get("spark.pyspark.python") == (sys.executable if local else None)
    assert conf["spark.executor.cores"] == "1" and conf["spark.app.name"] == "sparkafka-pipeline"


def test_conf_overrides_the_defaults() -> None:
    conf = session_conf("local[2]", {"spark.pyspark.python": "/opt/py/bin/python", "spark.app.name": "mine"},
                        quiet_console=True)
    assert conf["spark.pyspark.python"] == "/opt/py/bin/python" and conf["spark.app.name"] == "mine"
    assert conf["spark.ui.showConsoleProgress"] == "false"


def test_summary_notes_only_a_real_discrepancy() -> None:
    from sparkafka.cli.pipeline import PipelineResult, format_summary

    def result(after: dict[int, int]) -> PipelineResult:
        return PipelineResult(topic="t", bootstrap_servers="h:1", embedded_broker=False, rows=30, acknowledged=30,
                              bytes=300, seconds=1.0, value_format="json", partition_counts={0: 10, 1: 20},
                              acked_offsets={0: [5, 14], 1: [0, 19]}, offsets_before={0: 5, 1: 0},
                              offsets_after=after)

    exact = format_summary(result({0: 15, 1: 20}))
    assert "end offsets grew by 30 in total" in exact and "note:" not in exact
    assert "          0         10                  5..14                             5 -> 15" in exact
    other_writers = format_summary(result({0: 15, 1: 27}))
    assert "end offsets grew by 37 in total" in other_writers
    assert "note: that is not the 30 records acknowledged: other writers" in other_writers


def test_worker_python_reaches_the_variable_pyspark_reads() -> None:
    """A SparkContext started from Python reads PYSPARK_PYTHON only; --conf spark.pyspark.python wins over it."""
    env: dict[str, str] = {"PYSPARK_PYTHON": "/usr/bin/python3"}
    assert set_worker_python("spark://h:7077", {"spark.pyspark.python": "/opt/py/bin/python"}, env) == \
        "/opt/py/bin/python"
    env = {}
    assert set_worker_python("spark://h:7077", {}, env) is None and env == {}  # the cluster's default
    assert set_worker_python("local[2]", {}, env) == sys.executable
    env = {"PYSPARK_PYTHON": "/usr/bin/python3"}
    assert set_worker_python("local[2]", None, env) == "/usr/bin/python3"  # a variable the user set stays


@pytest.mark.parametrize(("options", "says"), [
    (["--partitions", "0"], "--partitions must be >= 1, got 0"),
    (["--input-partitions", "0"], "--input-partitions must be >= 1, got 0"),
    (["-X", "lingr.ms=5"], "-X: option 'kafka.lingr.ms': unknown config 'lingr.ms'; did you mean 'linger.ms'?"),
    (["--summary-json", "/no-such-dir/summary.json"], "--summary-json '/no-such-dir/summary.json' cannot be written"),
    (["-X", "kafka.bootstrap.servers=127.0.0.1:1"], "-X bootstrap.servers: give the cluster as --bootstrap-servers"),
])
def test_option_errors_come_before_the_broker_and_spark_start(
        options: list[str], says: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """These were checked in ``run_pipeline``, after the embedded broker and the Spark JVM had started (the
    summary file only after the whole job had run: a traceback then); ``-X`` was named as ``kafka.``."""
    import sparkafka.broker
    import sparkafka.cli.broker  # imported before the patch: it binds EmbeddedBroker when imported
    from sparkafka import cli
    from sparkafka.cli import pipeline

    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("started before the options were checked")

    monkeypatch.setattr(sparkafka.broker, "EmbeddedBroker", started)
    monkeypatch.setattr(pipeline, "_spark_session", started)
    assert cli.main(["pipeline", "--no-progress", *options]) == 2
    assert says in capsys.readouterr().err
