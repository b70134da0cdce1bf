"""Edge cases of the bulk Arrow path (``send_arrow``) on Tansu, read back with confluent-kafka.

How it works: each test builds an Arrow input of an unusual but valid shape (sliced batches whose null
bitmaps start mid-byte, large/view/dictionary columns, empty strings next to nulls, multibyte UTF-8
keys, partition columns of every integer type, headers with null lists and null values, a chunked
``pa.Table``), sends it with ``KafkaProducer.send_arrow`` and compares what an independent consumer reads
with the expectation computed from the plain Python rows: bytes, null vs empty, Java's murmur2
partition, order within a partition and the ``DeliveryReport``. The "pure" parameter switches the C
encoder and C murmur2 off, so both paths are checked against the same broker output. Tests marked
"defect" failed before the fix next to them; the others guard behaviour that was already correct.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from sparkafka.errors import InvalidRecordInputError
from sparkafka.producer import murmur2
from sparkafka.producer.arrow import bulk, tails
from sparkafka.producer.murmur2 import partition_for_key_py
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all, create_topic

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]

Header = tuple[str, bytes | None]
HEADER_ITEM = pa.struct([("key", pa.string()), ("value", pa.binary())])

KEYS: list[str | None] = ["k\u00e9y-\u65e5\u672c", None, "", "plain", None, "\U0001f600", "", "k7", "z" * 300,
                          "last"]
VALUES: list[bytes | None] = [b"v0", b"", None, b"v3", b"v4" * 9000, b"", None, b"v7", b"v8", b"v9"]
HEADERS: list[list[Header] | None] = [[("a", b"1")], None, [], [("\u00e9", None), ("", b"")], [("h", b"x" * 20000)],
                                      None, [("n", None)], [], [("a", b"")], [("z", b"9")]]
PARTS: list[int | None] = [None, 2, None, 0, None, None, 1, None, 3, None]


@pytest.fixture(params=["accel", "pure"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "pure":
        monkeypatch.setattr(tails, "_c_tails", None)
        monkeypatch.setattr(bulk, "_c_partitions", None)
        monkeypatch.setattr(murmur2, "ACCEL", None)
    elif tails._c_tails is None:
        pytest.skip("the C accelerator is not built")
    return str(request.param)


@pytest.fixture
def new_topic(broker: Any, unique_topic: Callable[[str], str]) -> Callable[[int], str]:
    def make(partitions: int) -> str:
        name = unique_topic("edge")
        create_topic(broker.bootstrap_servers, name, partitions)
        return name
    return make


@pytest.fixture
def producer(broker: Any) -> Any:
    p = KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    yield p
    p.close(5)


def _headers_array(rows: list[list[Header] | None], list_type: Callable[[pa.DataType], pa.DataType],
                   key_type: pa.DataType, value_type: pa.DataType) -> pa.Array:
    plain = pa.array([None if r is None else [{"key": k, "value": v} for k, v in r] for r in rows],
                     pa.list_(HEADER_ITEM))
    return plain.cast(list_type(pa.struct([("key", key_type), ("value", value_type)])))


def _read_back(bootstrap: str, topic: str, count: int) -> dict[bytes | None, Any]:
    records = consume_all(bootstrap, topic, expected_count=count, timeout=30)
    assert len(records) == count
    return {r.value: r for r in records}


def _check(bootstrap: str, topic: str, partitions: int, rows: range, report: Any,
           explicit: list[int | None] | None = None) -> None:
    """Rows ``rows`` of the module's columns, each tagged by a unique value suffix, read back exactly."""
    records = consume_all(bootstrap, topic, expected_count=len(rows), timeout=30)
    assert len(records) == len(rows)
    assert report.acknowledged == len(rows) and report.failed == 0 and report.first_error is None
    by_tag = {}
    for r in records:
        assert r.value is not None
        by_tag[int(r.value.split(b"|", 1)[0])] = r
    assert sorted(by_tag) == list(rows)
    for i in rows:
        r = by_tag[i]
        value = VALUES[i]
        assert r.value == (b"%d|" % i) + (b"<null>" if value is None else value)
        key = KEYS[i]
        assert r.key == (None if key is None else key.encode())
        assert r.headers == (HEADERS[i] or [])
        if explicit is not None and explicit[i] is not None:
            assert r.partition == explicit[i]
        elif key is not None:
            assert r.partition == partition_for_key_py(key.encode(), partitions), f"row {i}"
    ranges = {p: [r.offset for r in records if r.partition == p] for p in {r.partition for r in records}}
    assert {tp[1]: (o.first, o.last, o.count) for tp, o in report.offset_ranges().items()} == {
        p: (min(o), max(o), len(o)) for p, o in ranges.items()}


def _values() -> pa.Array:
    # a null value cannot carry the row tag, so such rows send b"<null>" behind it; nulls are
    # covered by the pure-Arrow comparison test below
    return pa.array([(b"%d|" % i) + (b"<null>" if v is None else v) for i, v in enumerate(VALUES)], pa.binary())


@pytest.mark.parametrize(("key_type", "value_type", "list_type", "hkey", "hvalue"), [
    (pa.string(), pa.binary(), pa.list_, pa.string(), pa.binary()),
    (pa.large_string(), pa.large_binary(), pa.large_list, pa.large_string(), pa.large_binary()),
    (pa.string_view(), pa.binary_view(), pa.list_, pa.string_view(), pa.binary_view()),
    ("dict", "dict", pa.list_, pa.string(), pa.string()),
])
@pytest.mark.parametrize("window", [(0, 10), (1, 7), (3, 6), (9, 1)])
def test_column_types_and_slices_round_trip(path: str, broker: Any, new_topic: Callable[[int], str],
                                            producer: KafkaProducer, key_type: Any, value_type: Any,
                                            list_type: Any, hkey: pa.DataType, hvalue: pa.DataType,
                                            window: tuple[int, int]) -> None:
    """Guard: every key/value/header layout, sliced at offsets that are not byte-aligned in the null
    bitmaps, explicit partitions of a sliced column, empty vs null keys and header values."""
    keys = pa.array(KEYS, pa.string())
    values = _values()
    keys = keys.dictionary_encode() if key_type == "dict" else keys.cast(key_type)
    values = values.dictionary_encode() if value_type == "dict" else values.cast(value_type)
    batch = pa.record_batch({"key": keys, "value": values,
                             "headers": _headers_array(HEADERS, list_type, hkey, hvalue),
                             "partition": pa.array(PARTS, pa.int32())}).slice(*window)
    topic = new_topic(4)
    report = producer.send_arrow(topic, batch).wait(30)
    _check(broker.bootstrap_servers, topic, 4, range(window[0], window[0] + window[1]), report, PARTS)


@pytest.mark.parametrize("int_type", [pa.int8(), pa.uint8(), pa.int16(), pa.uint16(), pa.int32(), pa.uint32(),
                                      pa.int64(), pa.uint64()])
def test_partition_column_of_every_integer_type(broker: Any, new_topic: Callable[[int], str],
                                                producer: KafkaProducer, int_type: pa.DataType) -> None:
    """Guard: explicit partitions win over the key for every integer type; nulls use the key."""
    topic = new_topic(4)
    batch = pa.record_batch({"key": pa.array(KEYS, pa.string()), "value": _values(),
                             "headers": _headers_array(HEADERS, pa.list_, pa.string(), pa.binary()),
                             "partition": pa.array(PARTS, int_type)})
    report = producer.send_arrow(topic, batch).wait(30)
    _check(broker.bootstrap_servers, topic, 4, range(10), report, PARTS)
    too_big = pa.record_batch({"value": pa.array([b"x"]), "partition": pa.array([4], int_type)})
    with pytest.raises(InvalidRecordInputError, match="partition 4 for topic"):
        producer.send_arrow(topic, too_big)


def test_null_header_key_inside_a_dictionary_is_refused(broker: Any, new_topic: Callable[[int], str],
                                                        producer: KafkaProducer) -> None:
    """Defect (fixed): a dictionary-encoded header key whose dictionary holds a null has null_count 0,
    so the check let it through and the record went out with a header key of length -1."""
    keys = pa.DictionaryArray.from_arrays(pa.array([0, 1], pa.int8()), pa.array(["h", None]))
    items = pa.StructArray.from_arrays([keys, pa.array([b"1", b"2"])], names=["key", "value"])
    headers = pa.ListArray.from_arrays(pa.array([0, 1, 2], pa.int32()), items)
    topic = new_topic(1)
    batch = pa.record_batch({"value": pa.array([b"a", b"b"]), "headers": headers})
    with pytest.raises(InvalidRecordInputError, match="'headers' has a header with a null key"):
        producer.send_arrow(topic, batch)
    # a slice without that header is fine
    producer.send_arrow(topic, batch.slice(0, 1)).wait(30)
    records = consume_all(broker.bootstrap_servers, topic, expected_count=1, timeout=30)
    assert [(r.value, r.headers) for r in records] == [(b"a", [("h", b"1")])]


def test_a_null_key_inside_a_dictionary_goes_to_the_sticky_partitioner(
        path: str, broker: Any, new_topic: Callable[[int], str], producer: KafkaProducer) -> None:
    """Defect (fixed): a dictionary-encoded key column whose dictionary holds a null has null_count 0, so
    the rows with that key kept partition -1 from the key hash and were queued there: never sent, they
    failed at delivery.timeout.ms (120 s by default). A null key is the sticky partitioner's, as in send()."""
    keys = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1, 0], pa.int8()), pa.array([b"k", None]))
    topic = new_topic(3)
    report = producer.send_arrow(topic, pa.record_batch({"value": pa.array([b"a", b"b", b"c", b"d"]),
                                                         "key": keys})).wait(30)
    assert (report.acknowledged, report.failed, report.first_error) == (4, 0, None)
    records = consume_all(broker.bootstrap_servers, topic, expected_count=4, timeout=30)
    assert sorted((r.value, r.key) for r in records) == [(b"a", b"k"), (b"b", None), (b"c", None), (b"d", b"k")]
    keyed = {r.partition for r in records if r.key is not None}
    assert keyed == {partition_for_key_py(b"k", 3)}


def test_a_chunked_table_is_sent_like_its_rows(path: str, broker: Any, new_topic: Callable[[int], str],
                                               producer: KafkaProducer) -> None:
    """Defect (fixed): a ``pa.Table`` (chunked columns) failed with AttributeError ('ChunkedArray' object
    has no attribute 'buffers'); it is now sent as the concatenation of its chunks."""
    whole = pa.record_batch({"key": pa.array(KEYS, pa.string()), "value": _values(),
                             "headers": _headers_array(HEADERS, pa.list_, pa.string(), pa.binary())})
    table = pa.Table.from_batches([whole.slice(0, 3), whole.slice(3, 4), whole.slice(7)])
    assert table.column("key").num_chunks == 3
    topic = new_topic(3)
    report = producer.send_arrow(topic, table).wait(30)
    _check(broker.bootstrap_servers, topic, 3, range(10), report)


def test_keyless_rows_over_many_batches_and_a_row_above_batch_size(path: str, broker: Any,
                                                                   new_topic: Callable[[int], str]) -> None:
    """Guard: keyless rows (sticky partitioner) spanning many batches, one row larger than batch.size,
    empty and null values; every row once, row order per partition, report == what was read."""
    producer = KafkaProducer({"bootstrap.servers": broker.bootstrap_servers, "batch.size": 2048,
                              "linger.ms": 5})
    try:
        n = 3000
        values: list[bytes | None] = [b"%05d" % i + (b"y" * 5000 if i == 1234 else b"") for i in range(n)]
        topic = new_topic(3)
        batch = pa.record_batch({"value": pa.array(values, pa.binary()),
                                 "key": pa.array([None] * n, pa.string())}).slice(1)
        report = producer.send_arrow(topic, batch).wait(30)
    finally:
        producer.close(5)
    records = consume_all(broker.bootstrap_servers, topic, expected_count=n - 1, timeout=30)
    assert report.acknowledged == n - 1 and report.failed == 0
    assert sorted(r.value for r in records if r.value is not None) == values[1:]
    assert all(r.key is None for r in records)
    assert len({r.partition for r in records}) > 1
    for p in {r.partition for r in records}:
        tags = [int(r.value[:5]) for r in records if r.partition == p and r.value is not None]
        assert tags == sorted(tags)
    assert sum(o.count for o in report.offset_ranges().values()) == n - 1


def test_null_and_empty_values_and_keys_read_back_distinctly(path: str, broker: Any,
                                                             new_topic: Callable[[int], str],
                                                             producer: KafkaProducer) -> None:
    """Guard: null vs empty for keys, values and header values survive the wire on both paths."""
    topic = new_topic(1)
    keys = pa.array([None, "", "k", None], pa.large_string())
    values = pa.array([b"", None, None, b"v"], pa.binary_view())
    headers = pa.array([[{"key": "e", "value": b""}], [{"key": "n", "value": None}], None, []],
                       pa.list_(HEADER_ITEM))
    batch = pa.record_batch({"key": keys, "value": values, "headers": headers}).slice(0)
    assert producer.send_arrow(topic, batch).wait(30).acknowledged == 4
    records = consume_all(broker.bootstrap_servers, topic, expected_count=4, timeout=30)
    assert [(r.key, r.value, r.headers) for r in records] == [
        (None, b"", [("e", b"")]), (b"", None, [("n", None)]), (b"k", None, []), (None, b"v", [])]
