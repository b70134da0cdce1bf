"""``sparkafka pipeline`` end to end: generator, input files, value formats, embedded broker."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sparkafka.cli import main
from support.consume import consume_all

if TYPE_CHECKING:  # pytest puts tests/spark on sys.path; mypy names the module from tests/
    from spark.avro_decode import decode_record
else:
    from avro_decode import decode_record

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ORDER_FIELDS = {"order_id", "customer_id", "amount", "currency", "status", "created_at", "items"}


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def test_pipeline_on_its_own_embedded_broker(spark: Any, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "summary.json"
    code = main(["pipeline", "--rows", "20000", "--topic", "orders", "--partitions", "3",
                 "--summary-json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["embedded_broker"] is True
    assert (result["rows"], result["acknowledged"]) == (20000, 20000)
    assert sum(result["partition_counts"].values()) == 20000
    assert len(result["partition_counts"]) == 3
    after, before = result["offsets_after"], result["offsets_before"]
    assert set(before.values()) == {0}
    for p, count in result["partition_counts"].items():
        assert result["acked_offsets"][p] == [0, count - 1]  # a fresh topic: offsets 0..count-1, no gaps
    # exact although Tansu's ListOffsets reports the base offset of a partition's last batch (plus one)
    assert after == result["partition_counts"]
    text = capsys.readouterr()
    assert "records acknowledged          20,000" in text.out
    assert "end offsets grew by 20,000 in total" in text.out and "note:" not in text.out
    assert "records/s" in text.err or "waiting for the first records" in text.err  # the progress line


def test_pipeline_generator_json_records(spark: Any, broker: Any, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    topic = topic_name("orders")
    out = tmp_path / "summary.json"
    assert main(["pipeline", "--bootstrap-servers", broker.bootstrap_servers, "--rows", "5000", "--topic",
                 topic, "--partitions", "4", "--no-progress", "--summary-json", str(out),
                 "-X", "linger.ms=20"]) == 0
    result = json.loads(out.read_text())
    assert result["acknowledged"] == 5000 and result["embedded_broker"] is False
    # the summary's end offsets are exact on both brokers (Tansu's ListOffsets lags; a Fetch corrects it)
    assert set(result["offsets_before"].values()) == {0}
    assert result["offsets_after"] == result["partition_counts"]
    assert "note: that is not" not in capsys.readouterr().out
    records = consume_all(broker.bootstrap_servers, topic, 5000)
    assert len(records) == 5000 and {r.partition for r in records} == {0, 1, 2, 3}
    keys = set()
    for r in records:
        order = json.loads(r.value or b"")
        assert set(order) == ORDER_FIELDS
        assert r.key == order["order_id"].encode()
        assert 1 <= order["items"] <= 10 and order["currency"] in {"USD", "EUR", "GBP", "JPY", "CHF", "CAD"}
        assert dict(r.headers) == {"source": b"sparkafka-generator", "schema": b"sparkafka.orders.v1",
                                   "content-type": b"application/json"}
        keys.add(r.key)
    assert keys == {f"ord-{n:010d}".encode() for n in range(5000)}


def test_pipeline_avro_values_decode(spark: Any, broker: Any, tmp_path: Path) -> None:
    topic = topic_name("avro")
    out = tmp_path / "summary.json"
    assert main(["pipeline", "--bootstrap-servers", broker.bootstrap_servers, "--rows", "300", "--topic",
                 topic, "--partitions", "1", "--no-progress", "--value-format", "avro",
                 "--summary-json", str(out)]) == 0
    result = json.loads(out.read_text())
    schema = json.loads(result["avro_schema"])
    assert result["avro_encoder"] == "built-in"
    records = consume_all(broker.bootstrap_servers, topic, 300)
    decoded = {r.key: decode_record(schema, r.value or b"") for r in records}
    first = decoded[b"ord-0000000000"]
    assert set(first) == ORDER_FIELDS
    assert isinstance(first["amount"], decimal.Decimal) and first["amount"] > 0
    assert isinstance(first["created_at"], datetime.datetime)
    assert first["created_at"].year == 2025


def test_pipeline_reads_parquet_input_with_raw_values(spark: Any, broker: Any, tmp_path: Path) -> None:
    path = tmp_path / "events.parquet"
    pq.write_table(pa.table({"user": [f"u{n % 7}" for n in range(500)],
                             "payload": [f"event {n}" for n in range(500)]}), path)
    topic = topic_name("raw")
    assert main(["pipeline", "--bootstrap-servers", broker.bootstrap_servers, "--input", str(path),
                 "--key-column", "user", "--value-format", "raw", "--value-column", "payload",
                 "--topic", topic, "--partitions", "2", "--no-progress"]) == 0
    records = consume_all(broker.bootstrap_servers, topic, 500)
    assert sorted(r.value or b"" for r in records) == sorted(f"event {n}".encode() for n in range(500))
    assert all(r.key == f"u{int((r.value or b'')[6:]) % 7}".encode() for r in records)
    assert dict(records[0].headers)["schema"] == b"events"


def test_pipeline_bad_arguments_exit_2(spark: Any, broker: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "--bootstrap-servers", broker.bootstrap_servers, "--rows", "10",
                 "--key-column", "nope", "--no-progress"]) == 2
    assert "key column 'nope'" in capsys.readouterr().err
    assert main(["pipeline", "--bootstrap-servers", broker.bootstrap_servers, "--rows", "10",
                 "-X", "lnger.ms=1", "--no-progress", "--topic", topic_name("x")]) == 2
    assert "did you mean 'linger.ms'" in capsys.readouterr().err


def test_pipeline_exactly_once_on_apache_kafka(spark: Any, kafka: Any, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    topic, sink_id = topic_name("orders-eo"), f"pipeline-test-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "summary.json"
    args = ["pipeline", "--bootstrap-servers", kafka.bootstrap, "--rows", "6000", "--topic", topic, "--partitions",
            "3", "--input-partitions", "3", "--no-progress", "--summary-json", str(out), "--exactly-once",
            "--sink-id", sink_id]
    assert main(args) == 0
    result = json.loads(out.read_text())
    assert (result["guarantee"], result["transactions"], result["status"], result["sink_id"]) == (
        "exactly_once", 3, "committed", sink_id)
    assert f"exactly-once (sink id {sink_id}): 3 transactions committed" in capsys.readouterr().out
    records = consume_all(kafka.bootstrap, topic, 6000, isolation_level="read_committed")
    assert sorted(r.key or b"" for r in records) == [f"ord-{n:010d}".encode() for n in range(6000)]
    # the same write again: committed already, nothing is sent
    assert main(args) == 0
    assert json.loads(out.read_text())["status"] == "skipped"
    assert "committed by an earlier run, nothing written again" in capsys.readouterr().out
    assert len(consume_all(kafka.bootstrap, topic, 6000, isolation_level="read_committed")) == 6000


def test_pipeline_exactly_once_needs_apache_kafka(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["pipeline", "--rows", "10", "--exactly-once"]) == 2
    assert "--exactly-once needs Apache Kafka (--bootstrap-servers)" in capsys.readouterr().err
    assert main(["pipeline", "--rows", "10", "--sink-id", "x", "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "--sink-id needs --exactly-once" in capsys.readouterr().err
