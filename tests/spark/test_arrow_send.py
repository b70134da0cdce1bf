"""send_arrow and the shared column checks, against a fake producer (no broker, no Spark)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from sparkafka import errors
from sparkafka.errors import (
    BufferExhaustedError,
    InvalidRecordInputError,
    InvalidTopicNameError,
    KafkaTimeoutError,
    RecordTooLargeError,
)
from sparkafka.producer.arrow.bulk import BulkAppend
from sparkafka.producer.arrow.report import ArrowSendResult, OffsetRange
from sparkafka.producer.arrow.send import plan_columns, send_arrow
from sparkafka.producer.future import ProduceRequestResult

if TYPE_CHECKING:  # pytest puts tests/spark on sys.path; mypy names the module from tests/
    from spark.spark_fakes import FakeProducer
else:
    from spark_fakes import FakeProducer

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(**columns: pa.Array) -> pa.RecordBatch:
    return pa.record_batch(list(columns.values()), names=list(columns))


# ----------------------------------------------------------------------------------------- schema


def test_missing_value_column_is_named() -> None:
    with pytest.raises(InvalidRecordInputError, match=r"no 'value' column .*columns: key"):
        plan_columns(pa.schema([("key", pa.string())]), topic="t")


def test_a_sink_column_given_twice_is_named() -> None:
    with pytest.raises(InvalidRecordInputError, match=r"2 columns named 'key'"):
        plan_columns(pa.schema([("key", pa.string()), ("value", pa.string()), ("key", pa.binary())]), topic="t")


@pytest.mark.parametrize(
    ("column", "arrow_type", "wanted"),
    [
        ("value", pa.int64(), "string or binary"),
        ("key", pa.float64(), "string or binary"),
        ("topic", pa.binary(), "string"),
        ("partition", pa.string(), "int"),
        ("headers", pa.list_(pa.string()), "array<struct<key: string, value: binary>>"),
        ("headers", pa.list_(pa.struct([("k", pa.string()), ("value", pa.binary())])), "array<struct"),
    ],
)
def test_wrong_column_type_is_named(column: str, arrow_type: pa.DataType, wanted: str) -> None:
    fields = {"value": pa.binary(), "topic": pa.string()}
    fields[column] = arrow_type
    with pytest.raises(InvalidRecordInputError, match=rf"column '{column}' has type .*needs {wanted}"):
        plan_columns(pa.schema(list(fields.items())))


def test_a_topic_option_overrides_a_topic_column_of_any_type() -> None:
    # As Spark's Kafka sink: with the option set the column is neither read nor type-checked.
    plan = plan_columns(pa.schema([("value", pa.binary()), ("topic", pa.int64())]), topic="t")
    assert (plan.topic, plan.topic_column) == ("t", None)
    with pytest.raises(InvalidRecordInputError, match="column 'topic' has type"):
        plan_columns(pa.schema([("value", pa.binary()), ("topic", pa.int64())]))


def test_no_topic_anywhere() -> None:
    with pytest.raises(InvalidRecordInputError, match="no topic: set the 'topic' option"):
        plan_columns(pa.schema([("value", pa.string())]))


def test_bad_fixed_topic_name() -> None:
    with pytest.raises(InvalidTopicNameError, match="topic option"):
        plan_columns(pa.schema([("value", pa.string())]), topic="bad topic")


def test_plan_uses_present_columns_only_and_option_overrides_column() -> None:
    schema = pa.schema([("value", pa.string()), ("topic", pa.string()), ("extra", pa.int8())])
    plan = plan_columns(schema, topic="fixed")
    assert (plan.value, plan.key, plan.topic, plan.topic_column, plan.partition, plan.headers) == (
        "value", None, "fixed", None, None, None)
    assert plan_columns(schema).topic_column == "topic"


# ----------------------------------------------------------------------------------------- sending


def test_strings_and_binary_become_bytes_with_offsets_reported() -> None:
    producer = FakeProducer(partitions=2)
    b = batch(value=pa.array(["é", None, "c"]), key=pa.array([b"k1", b"k2", None]))
    result = send_arrow(producer, "t", b)
    report = result.wait()
    assert [(s.topic, s.value, s.key) for s in producer.sent] == [
        ("t", "é".encode(), b"k1"), ("t", None, b"k2"), ("t", b"c", None)]
    assert (report.records, report.acknowledged, report.failed) == (3, 3, 0)
    assert report.bytes == 2 + 1 + 2 + 2
    ranges = report.offset_ranges()
    assert {tp: (r.first, r.last, r.count) for tp, r in ranges.items()} == {
        ("t", 0): (0, 1, 2), ("t", 1): (0, 0, 1)}


def test_partitions_headers_and_topic_column() -> None:
    producer = FakeProducer(partitions=4)
    headers = pa.array([[{"key": "a", "value": b"1"}, {"key": "b", "value": None}], None, [],
                        [{"key": "c", "value": b"3"}]], HEADERS)
    b = batch(value=pa.array([b"v0", b"v1", b"v2", b"v3"]), topic=pa.array(["x", "y", "x", "y"]),
              partition=pa.array([3, None, 0, 1], pa.int32()), headers=headers)
    report = send_arrow(producer, None, b).wait()
    # one bulk call per topic, rows in their original order within it
    assert [(s.topic, s.partition, s.headers) for s in producer.sent] == [
        ("x", 3, [("a", b"1"), ("b", None)]), ("x", 0, []), ("y", None, None), ("y", 1, [("c", b"3")])]
    assert report.acknowledged == 4
    assert report.bytes == 8 + 3 + 2  # values, header keys, header values


def test_sliced_batch_headers_line_up() -> None:
    headers = pa.array([[{"key": "h0", "value": b"0"}], [{"key": "h1", "value": b"1"}],
                        [{"key": "h2", "value": b"2"}, {"key": "h2b", "value": b"2b"}]], HEADERS)
    b = batch(value=pa.array(["a", "b", "c"]), headers=headers).slice(1, 2)
    producer = FakeProducer()
    send_arrow(producer, "t", b).wait()
    assert [(s.value, s.headers) for s in producer.sent] == [
        (b"b", [("h1", b"1")]), (b"c", [("h2", b"2"), ("h2b", b"2b")])]


def test_dictionary_and_large_types_are_accepted() -> None:
    producer = FakeProducer()
    b = batch(value=pa.array(["a", "b"]).dictionary_encode(), key=pa.array(["k", "l"], pa.large_string()))
    send_arrow(producer, "t", b).wait()
    assert [(s.value, s.key) for s in producer.sent] == [(b"a", b"k"), (b"b", b"l")]


def test_option_topic_overrides_topic_column() -> None:
    producer = FakeProducer()
    send_arrow(producer, "fixed", batch(value=pa.array(["a"]), topic=pa.array(["other"]))).wait()
    assert producer.sent[0].topic == "fixed"


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        ({"topic": pa.array(["t", None, "t"])}, r"row 1 of the batch has a null 'topic'"),
        ({"topic": pa.array(["t", "bad name", "t"])}, r"invalid topic name 'bad name' in column 'topic' at row 1"),
        ({"topic": pa.array(["t", "abc\n", "t"])}, r"invalid topic name 'abc\\n' in column 'topic' at row 1"),
        ({"topic": pa.array(["t"] * 3), "partition": pa.array([0, -2, 1])}, r"partition -2 at row 1"),
        # -1 is the producer's internal "let the partitioner choose": a column must say that with null
        ({"topic": pa.array(["t"] * 3), "partition": pa.array([0, -1, 1])}, r"partition -1 at row 1"),
        ({"topic": pa.array(["t"] * 3), "partition": pa.array([0, 7, 1])}, r"partition 7 for topic 't' at row 1"),
        ({"topic": pa.array(["t", "u", "t"]), "partition": pa.array([0, 7, 7])},
         r"partition 7 for topic 't' at row 2"),
        ({"topic": pa.array(["t"] * 3),
          "headers": pa.array([[], [{"key": None, "value": b"x"}], None], HEADERS)}, r"null key at row 1"),
        ({"topic": pa.array(["t"] * 3),
          "headers": pa.array([[], [{"key": "k", "value": b"x"}], [None]], HEADERS)}, r"null key at row 2"),
    ],
)
def test_bad_values_fail_before_anything_is_sent(columns: dict[str, pa.Array], message: str) -> None:
    producer = FakeProducer(partitions=3)
    b = batch(value=pa.array(["a", "b", "c"]), **columns)
    with pytest.raises(InvalidRecordInputError, match=message):
        send_arrow(producer, None, b)
    assert producer.sent == []


def test_failed_records_are_counted_with_first_error() -> None:
    producer = FakeProducer(fail_when=lambda s: s.key in (b"2", b"4"))
    b = batch(value=pa.array(["v"] * 5), key=pa.array([str(i) for i in range(5)]))
    report = send_arrow(producer, "t", b).wait()
    assert (report.acknowledged, report.failed, report.errors) == (3, 2, {"KafkaError": 2})
    assert "b'2'" in str(report.first_error)


def test_poll_is_incremental_and_wait_times_out() -> None:
    producer = FakeProducer(complete=False)
    result = send_arrow(producer, "t", batch(value=pa.array(["a", "b", "c"])))
    assert not result.poll()
    producer.futures[0].complete()
    assert not result.poll()
    assert result.report.acknowledged == 1
    with pytest.raises(KafkaTimeoutError, match="2 records still not acknowledged"):
        result.wait(timeout=0)
    producer.flush()
    assert result.poll() and result.report.acknowledged == 3


def test_empty_batch_sends_nothing() -> None:
    producer = FakeProducer()
    result = send_arrow(producer, "t", batch(value=pa.array([], pa.string())))
    assert result.done() and result.records == 0 and producer.sent == []


def test_result_of_finished_batches_and_unsent_rows() -> None:
    ok, bad = ProduceRequestResult("t", 0), ProduceRequestResult("t", 1)
    ok.done(100, -1)
    bad.done(-1, -1, ValueError("boom"))
    result = ArrowSendResult(payload_bytes=5)
    result._add(6, BulkAppend([(ok, 2, 3), (bad, 0, 1)], 2, BufferExhaustedError("no memory")))
    report = result.wait()
    assert (report.records, report.acknowledged, report.failed, report.bytes) == (6, 3, 3, 5)
    assert report.errors == {"ValueError": 1, "BufferExhaustedError": 2}
    assert {tp: (r.first, r.last, r.count) for tp, r in report.offset_ranges().items()} == {("t", 0): (102, 104, 3)}


def test_a_split_batch_is_followed_record_by_record() -> None:
    big, left, right = ProduceRequestResult("t", 0), ProduceRequestResult("t", 0), ProduceRequestResult("t", 0)
    big.set_redirect([0, 2], [left, right])
    big.done(-1, -1, RecordTooLargeError("split"))
    result = ArrowSendResult()
    result._add(4, BulkAppend([(big, 0, 4)], 0, None))
    left.done(10, -1)
    assert not result.poll()  # records 2 and 3 live in the right half, still in flight
    right.done(20, -1, None, {1: errors.error_for_code(87, "bad record")})
    report = result.wait(1)
    assert (report.acknowledged, report.failed) == (3, 1)
    assert report.errors == {"InvalidRecordError": 1}
    assert report.offset_ranges()[("t", 0)] == OffsetRange(10, 20, 3)


@pytest.mark.parametrize("kind", ["binary", "large_binary", "string", "large_string", "binary_view", "dict"])
@pytest.mark.parametrize("nulls", [False, True])
def test_report_bytes_of_sliced_columns(kind: str, nulls: bool) -> None:
    """``report.bytes`` counts the bytes of the rows sent (read from a slice's offsets when it has no
    nulls), for every column layout."""
    items: list[bytes | None] = [b"x" * i for i in range(12)]
    if nulls:
        items[5] = None
    if kind == "dict":
        arr = pa.array(items, pa.binary()).dictionary_encode()
    else:
        typ = getattr(pa, kind)()
        arr = pa.array([None if x is None else (x.decode() if "string" in kind else x) for x in items], typ)
    producer = FakeProducer()
    result = send_arrow(producer, "t", batch(value=arr.slice(3, 6), key=arr.slice(1, 6)))
    assert result.report.bytes == sum(len(x or b"") for x in items[3:9] + items[1:7])
