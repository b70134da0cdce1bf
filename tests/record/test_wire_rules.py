"""Wire rules of the record and protocol layers checked against Kafka's specs.

How it works: each test pins one rule from Kafka's JSON message specs or its record classes
(``DefaultRecord``, ``DefaultRecordBatch``, ``MemoryRecordsBuilder``) with hand-checked bytes, or
shows an input that must be refused before it can reach a batch header.
"""

from __future__ import annotations

import struct

import pytest

from sparkafka import errors
from sparkafka.producer.producer import KafkaProducer
from sparkafka.protocol.messages import METADATA, PRODUCE
from sparkafka.record import decode_batch, encode_batch

INT64_MAX = 2**63 - 1


@pytest.mark.parametrize("timestamp", [INT64_MAX + 1, 2**64])
def test_send_refuses_timestamps_outside_int64(timestamp: int) -> None:
    # A record timestamp is a Java long. One above Long.MAX cannot be written as baseTimestamp or
    # maxTimestamp (int64), so it must be refused in send(), like a negative one.
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 100})
    try:
        with pytest.raises(errors.InvalidRecordInputError, match=r"timestamp .* 2\*\*63-1"):
            producer.send("t", b"v", timestamp=timestamp)
    finally:
        producer.close(0)


def test_null_and_empty_keys_values_and_header_values() -> None:
    # DefaultRecord: length -1 (varint 01) is null, 0 (varint 00) is empty; a header value may be null.
    data = encode_batch([(5, b"", None, [("h", None), ("e", b"")]), (5, None, b"", None)])
    records = data[61:]
    # record 0: len, attrs 0, tsDelta 0, offsetDelta 0, key len 0, value -1, 2 headers
    assert records[1:7] == bytes([0, 0, 0, 0x00, 0x01, 0x04])
    assert records[7:].startswith(b"\x02h\x01\x02e\x00")
    batch = decode_batch(data)
    assert [(r.key, r.value, r.headers) for r in batch.records] == [
        (b"", None, [("h", None), ("e", b"")]), (None, b"", [])]
    attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count = struct.unpack_from(">hiqqqhii", data, 21)
    assert (attributes, last_delta, base_ts, max_ts, pid, epoch, seq, count) == (0, 1, 5, 5, -1, -1, -1, 2)


def test_produce_v10_current_leader_is_a_tagged_struct() -> None:
    # ProduceResponse.json: CurrentLeader is tag 0 of each partition (10+), NodeEndpoints tag 0 of the body.
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 6, "base_offset": -1, "current_leader": {"leader_id": 3, "leader_epoch": 7}}]}],
        "node_endpoints": [{"node_id": 3, "host": "h", "port": 9092, "rack": None}]}
    data = PRODUCE.encode_response(10, body)
    partition_tags = bytes.fromhex("01" "00" "09" "00000003" "00000007" "00")
    assert partition_tags in data
    assert data.endswith(bytes.fromhex("00000000" "01" "00" "0d" "02" "00000003" "0268" "00002384" "00" "00"))
    assert PRODUCE.decode_response(10, data)["responses"][0]["partition_responses"][0]["current_leader"] == {
        "leader_id": 3, "leader_epoch": 7}


def test_metadata_v12_null_topics_means_all() -> None:
    # MetadataRequest.json: Topics nullable from v1 (null = all topics), AllowAutoTopicCreation 4+ default
    # true, IncludeClusterAuthorizedOperations only 8-10.
    assert METADATA.encode_request(12, {"topics": None}) == bytes.fromhex("00" "01" "00" "00")
    assert METADATA.encode_request(10, {"topics": None}) == bytes.fromhex("00" "01" "00" "00" "00")
