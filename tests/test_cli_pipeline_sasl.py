"""``sparkafka pipeline`` against a SASL listener: the topic creation and the ListOffsets calls before
and after use the security settings given with ``-X``, as the sink's producers do.

How it works: a SASL/PLAIN gateway (``support.gateway``) stands in front of the shared Tansu broker;
the job runs in-process (``cli.main``, its own Spark session unless one is active) with ``-X``
security settings, and the records are read back from Tansu directly.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from sparkafka.cli import main
from support.consume import consume_all

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_pipeline_through_a_sasl_listener(tansu: Any, unique_topic: Any, tmp_path: Path) -> None:
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java")
    from support.gateway import Gateway

    topic = unique_topic("orders")
    out = tmp_path / "summary.json"
    gateway = Gateway(tansu.bootstrap_servers, users={"alice": "alice-secret"}).start()
    try:
        code = main(["pipeline", "--bootstrap-servers", gateway.bootstrap, "--rows", "300", "--topic", topic,
                     "--partitions", "2", "--input-partitions", "1", "--no-progress", "--summary-json", str(out),
                     "-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanism=PLAIN",
                     "-X", "sasl.username=alice", "-X", "sasl.password=alice-secret"])
    finally:
        gateway.stop()
    assert code == 0
    result = json.loads(out.read_text())
    assert result["acknowledged"] == 300 and sum(result["offsets_after"].values()) > 0
    assert len(consume_all(tansu.bootstrap_servers, topic, 300)) == 300
