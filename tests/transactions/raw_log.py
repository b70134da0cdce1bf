"""Read a topic's raw log (data and control batches) and apply the read_committed rule to it.

Why: neither test broker filters aborted transactions for an ordinary consumer. The librdkafka mock
(2.16) writes COMMIT/ABORT control batches but answers Fetch with an empty aborted-transactions list
and LastStableOffset = high watermark; Tansu never lists aborted transactions. So a confluent-kafka
consumer with isolation.level=read_committed still returns aborted records on both.

How it works: ``read_log`` asks each partition's leader (from confluent-kafka's metadata; asked again while
a leader moves, as after a cluster restart: NOT_LEADER_OR_FOLLOWER and the like, for up to 30 s) with raw Fetch
v4 requests (``support.wire``) for every batch from offset 0 to the high watermark, and decodes them
(``sparkafka.record.reader`` for data batches; control batches are parsed here because the mock
writes them with a zero CRC; the mock returns one batch per Fetch). ``committed_view`` then does what a
read_committed consumer does: records of a transactional batch are held per producer id until that
producer's next control batch: COMMIT releases them, ABORT drops them; batches still open at the end are
not visible; non-transactional records are visible at once.

``mock_reappends`` finds the copies the mock appends of a resent batch it should have deduplicated: when a
resend matches an older batch of its duplicate window, ``rd_kafka_mock_validate_records`` acknowledges it
without appending but still moves its expected next sequence back to that batch's end, so the resend of the
following batch, already written, is appended again under the same producer id, epoch and sequence (two
Produce requests of a partition whose answers were lost when a broker went down are enough; see
``tests/transactions/test_transactions_mock.py``). A broker keeps the metadata of each producer's last 5 batches
per partition and answers such a resend with the first copy's offset.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from sparkafka.record.reader import decode_batches
from support.wire import RawConnection, string

__all__ = ["LogBatch", "LogRecord", "committed_view", "control_markers", "mock_reappends", "read_log"]

FETCH = 1
_CONTROL_ABORT, _CONTROL_COMMIT = 0, 1
_LEADER_MOVING = {3: "UNKNOWN_TOPIC_OR_PARTITION", 5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER"}
"""Fetch errors of a partition whose leadership is moving: ask the metadata for the leader again."""
_LEADER_WAIT_S = 30.0
BATCHES_TO_RETAIN = 5
"""A broker deduplicates a resend that matches one of a producer's last 5 batches on the partition (Kafka's
``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``)."""


class LeaderMoving(Exception):
    """A Fetch answered with one of ``_LEADER_MOVING``."""


@dataclass(frozen=True)
class LogRecord:
    partition: int
    offset: int
    value: bytes | None


def _fetch_once(conn: RawConnection, topic: str, partition: int, offset: int) -> tuple[int, bytes]:
    body = (struct.pack(">iiiib", -1, 50, 1, 8 << 20, 0) + struct.pack(">i", 1) + string(topic)
            + struct.pack(">iiqi", 1, partition, offset, 8 << 20))
    data = conn.request(FETCH, 4, body)
    pos = 4 + 4  # throttle, topics count
    (name_len,) = struct.unpack_from(">h", data, pos)
    pos += 2 + name_len + 4  # name, partitions count
    _index, error, high_watermark, _lso = struct.unpack_from(">ihqq", data, pos)
    pos += 4 + 2 + 8 + 8
    if error in _LEADER_MOVING:
        raise LeaderMoving(f"Fetch {topic}-{partition}@{offset}: {_LEADER_MOVING[error]}")
    assert error == 0, f"Fetch {topic}-{partition}@{offset}: error {error}"
    (aborted,) = struct.unpack_from(">i", data, pos)
    pos += 4 + max(aborted, 0) * 16
    (size,) = struct.unpack_from(">i", data, pos)
    pos += 4
    return high_watermark, data[pos:pos + max(size, 0)]


@dataclass(frozen=True)
class LogBatch:
    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    is_transactional: bool
    is_control: bool
    control_type: int
    """0 = ABORT, 1 = COMMIT (control batches only)."""
    records: list[LogRecord]


_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _split_batches(raw: bytes, partition: int) -> list[LogBatch]:
    """Split concatenated batches. Control batches are parsed here (the mock writes them with a zero
    CRC); data batches are decoded, CRC checked, by ``decode_batches``."""
    out: list[LogBatch] = []
    pos = 0
    while pos + _HEADER.size <= len(raw):
        (base, length, _epoch, _magic, _crc, attributes, delta, _ts, _max_ts, producer_id, producer_epoch,
         base_sequence, _count) = _HEADER.unpack_from(raw, pos)
        end = pos + 12 + length
        if end > len(raw):
            break  # a partial batch at the end of the response
        control = bool(attributes & 0x20)
        transactional = bool(attributes & 0x10)
        if control:
            rpos = pos + _HEADER.size
            _len, rpos = _varint(raw, rpos)
            rpos += 1  # record attributes
            _ts_delta, rpos = _varint(raw, rpos)
            _off_delta, rpos = _varint(raw, rpos)
            _key_len, rpos = _varint(raw, rpos)
            _version, kind = struct.unpack_from(">hh", raw, rpos)
            out.append(LogBatch(base, base + delta, producer_id, producer_epoch, base_sequence, transactional,
                                True, kind, []))
        else:
            (decoded,) = decode_batches(raw[pos:end])
            records = [LogRecord(partition, r.offset, r.value) for r in decoded.records]
            out.append(LogBatch(base, base + delta, producer_id, producer_epoch, base_sequence, transactional,
                                False, -1, records))
        pos = end
    return out


def read_log(bootstrap: str, topic: str) -> dict[int, list[LogBatch]]:
    """Every batch of every partition, in offset order."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = sorted(admin.list_topics(topic=topic, timeout=10).topics[topic].partitions)
    return {partition: _read_partition(admin, topic, partition) for partition in partitions}


def _read_partition(admin: AdminClient, topic: str, partition: int) -> list[LogBatch]:
    batches: list[LogBatch] = []
    offset = 0
    deadline = time.monotonic() + _LEADER_WAIT_S
    while True:
        metadata = admin.list_topics(topic=topic, timeout=10)
        leader = metadata.topics[topic].partitions[partition].leader
        broker = metadata.brokers.get(leader)
        try:
            if broker is None:
                raise LeaderMoving(f"{topic}-{partition} has no leader (metadata says {leader})")
            with RawConnection(str(broker.host), int(broker.port)) as conn:
                while True:
                    high_watermark, raw = _fetch_once(conn, topic, partition, offset)
                    if offset >= high_watermark or not raw:
                        return batches
                    for batch in _split_batches(raw, partition):
                        if batch.last_offset >= offset:
                            batches.append(batch)
                        offset = batch.last_offset + 1
        except (LeaderMoving, ConnectionError):  # ConnectionError: the leader named a moment ago is down
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def control_markers(log: dict[int, list[LogBatch]]) -> list[tuple[int, int, str]]:
    """(partition, producer id, "COMMIT" | "ABORT") for every control batch."""
    return [(partition, b.producer_id, "COMMIT" if b.control_type == _CONTROL_COMMIT else "ABORT")
            for partition, batches in log.items() for b in batches if b.is_control]


def committed_view(log: dict[int, list[LogBatch]]) -> list[LogRecord]:
    """What a read_committed consumer must see, in (partition, offset) order."""
    visible: list[LogRecord] = []
    for batches in log.values():
        pending: dict[int, list[LogRecord]] = {}
        for batch in batches:
            if batch.is_control:
                held = pending.pop(batch.producer_id, [])
                if batch.control_type == _CONTROL_COMMIT:
                    visible.extend(held)
                continue
            records = batch.records
            if batch.is_transactional:
                pending.setdefault(batch.producer_id, []).extend(records)
            else:
                visible.extend(records)
    visible.sort(key=lambda r: (r.partition, r.offset))
    return visible


def mock_reappends(log: dict[int, list[LogBatch]]) -> dict[tuple[int, int], tuple[int, int]]:
    """The records of data batches the mock appended twice, as {(partition, offset of the copy): (partition,
    offset of the same record in the first copy)}: a copy has the producer id, epoch, base sequence and the
    very records (values) of a batch appended before it, among the last ``BATCHES_TO_RETAIN`` batches of that
    producer id and epoch on the partition (copies not counted). A broker deduplicates exactly these;
    records written again under another producer id, epoch or sequence, or with other contents, or a
    resend of an older batch, are not listed."""
    copies: dict[tuple[int, int], tuple[int, int]] = {}
    for partition, batches in log.items():
        recent: dict[tuple[int, int], list[LogBatch]] = {}  # (producer id, epoch) -> its last batches
        for batch in batches:
            if batch.is_control or batch.producer_id < 0 or batch.base_sequence < 0:
                continue
            mine = recent.setdefault((batch.producer_id, batch.producer_epoch), [])
            values = [r.value for r in batch.records]
            first = next((b for b in mine if b.base_sequence == batch.base_sequence
                          and [r.value for r in b.records] == values), None)
            if first is None:
                mine.append(batch)
                del mine[:-BATCHES_TO_RETAIN]
                continue
            for copy, original in zip(batch.records, first.records):
                copies[(partition, copy.offset)] = (partition, original.offset)
    return copies
