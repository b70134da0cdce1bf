"""Byte-exact frames checked against known encodings.

The ApiVersions v3 request is what the Java client sends (KIP-511: client software name and version). The Metadata
v12 and Produce v9 frames were worked out by hand from the JSON specs and agree byte for byte with
kafka-python 3.0's independent encoder; the Produce batch is the one-record batch of ``support/golden.py``.
"""

from __future__ import annotations

from sparkafka.protocol.framing import KafkaProtocol, decode_request_header, encode_request_frame
from sparkafka.protocol.messages import API_VERSIONS, FETCH, METADATA, PRODUCE, ApiKey
from sparkafka.protocol.produce import encode_produce_request
from support.golden import ONE_RECORD_BATCH

APIVERSIONS_V3_FRAME = bytes.fromhex(
    "0000002e0012000300000001000a70726f64756365722d3100126170616368652d6b61666b612d6a61766106342e302e3000"
)

METADATA_V12_FRAME = bytes.fromhex(
    "00000025"  # size 37
    "0003"
    "000c"
    "00000007"
    "0001"
    "63"
    "00"  # header v2: key 3, v12, corr 7, client "c", no tags
    "02"  # topics: compact array of 1
    "00000000000000000000000000000000"  # topic_id: zero uuid
    "04"
    "666f6f"  # name "foo" (compact nullable string)
    "00"  # topic tagged fields
    "01"  # allow_auto_topic_creation
    "00"  # include_topic_authorized_operations
    "00"  # tagged fields
)


PRODUCE_V9_FRAME = (
    bytes.fromhex(
        "00000074"
        "0000"
        "0009"
        "00000003"
        "000a"
        "70726f64756365722d31"
        "00"  # header v2, client "producer-1"
        "00"  # transactional_id null (compact)
        "ffff"
        "00007530"  # acks -1, timeout 30000
        "02"
        "0274"  # 1 topic, name "t"
        "02"
        "00000000"
        "4d"  # 1 partition, index 0, records: 76 bytes (uvarint 77)
    )
    + ONE_RECORD_BATCH
    + bytes.fromhex("000000")
)  # partition, topic, top-level tagged fields


def test_apiversions_v3_request_frame() -> None:
    body = API_VERSIONS.encode_request(
        3, {"client_software_name": "apache-kafka-java", "client_software_version": "4.0.0"}
    )
    assert encode_request_frame(ApiKey.API_VERSIONS, 3, 1, "producer-1", body) == APIVERSIONS_V3_FRAME
    proto = KafkaProtocol("producer-1")
    proto.send_request(ApiKey.METADATA, 1, {"topics": None})  # correlation id 0
    corr, frame = proto.send_request(
        ApiKey.API_VERSIONS,
        3,
        {"client_software_name": "apache-kafka-java", "client_software_version": "4.0.0"},
    )
    assert corr == 1
    assert frame == APIVERSIONS_V3_FRAME


def test_metadata_v12_request_frame() -> None:
    body = METADATA.encode_request(12, {"topics": [{"name": "foo"}], "allow_auto_topic_creation": True})
    assert encode_request_frame(ApiKey.METADATA, 12, 7, "c", body) == METADATA_V12_FRAME
    header, offset = decode_request_header(METADATA_V12_FRAME[4:])
    assert header == (3, 12, 7, "c")
    decoded = METADATA.decode_request(12, METADATA_V12_FRAME[4 + offset :])
    assert decoded["topics"] == [{"topic_id": bytes(16), "name": "foo"}]
    assert decoded["allow_auto_topic_creation"] is True


def test_produce_v9_request_frame() -> None:
    fast = encode_produce_request(9, None, -1, 30000, [("t", [(0, ONE_RECORD_BATCH)])])
    generic = PRODUCE.encode_request(
        9,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": ONE_RECORD_BATCH}]}],
        },
    )
    assert fast == generic
    assert encode_request_frame(ApiKey.PRODUCE, 9, 3, "producer-1", fast) == PRODUCE_V9_FRAME
    proto = KafkaProtocol("producer-1")
    for _ in range(3):
        proto.send_request(ApiKey.METADATA, 1, {"topics": None})
    assert proto.send_request(ApiKey.PRODUCE, 9, memoryview(fast)) == (3, PRODUCE_V9_FRAME)


def test_produce_v3_request_classic_encoding() -> None:
    body = encode_produce_request(3, "txn", 1, 100, [("ab", [(2, b"XY")])])
    assert body == bytes.fromhex(
        "0003"
        "74786e"  # transactional_id "txn" (int16 length)
        "0001"
        "00000064"  # acks 1, timeout 100
        "00000001"
        "0002"
        "6162"  # 1 topic "ab"
        "00000001"
        "00000002"
        "00000002"
        "5859"  # 1 partition: index 2, records int32 len 2
    )


def test_txn_offset_commit_and_add_offsets_to_txn_match_kafka_pythons_encoder() -> None:
    """The KIP-447 requests (sendOffsetsToTransaction) encode byte for byte as kafka-python 3.0's
    independent, JSON-spec-driven encoder writes them, at every version the client may send."""
    from kafka.protocol.producer.transaction import AddOffsetsToTxnRequest, TxnOffsetCommitRequest

    from sparkafka.protocol.messages import ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT

    topic_cls = TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic
    partition_cls = topic_cls.TxnOffsetCommitRequestPartition
    for version in range(0, 6):
        ours = TXN_OFFSET_COMMIT.encode_request(version, {
            "transactional_id": "orders-tx", "group_id": "orders", "producer_id": 7_000_000_001, "producer_epoch": 3,
            "generation_id": 12, "member_id": "consumer-1-abc", "group_instance_id": None if version % 2 else "i-1",
            "topics": [{"name": "in", "partitions": [
                {"partition_index": 0, "committed_offset": 42, "committed_leader_epoch": 5, "committed_metadata": ""},
                {"partition_index": 2, "committed_offset": 7, "committed_leader_epoch": -1, "committed_metadata": None},
            ]}]})
        theirs = TxnOffsetCommitRequest(
            version=version, transactional_id="orders-tx", group_id="orders", producer_id=7_000_000_001,
            producer_epoch=3, generation_id=12, member_id="consumer-1-abc",
            group_instance_id=None if version % 2 else "i-1",
            topics=[topic_cls(name="in", partitions=[
                partition_cls(partition_index=0, committed_offset=42, committed_leader_epoch=5, committed_metadata=""),
                partition_cls(partition_index=2, committed_offset=7, committed_leader_epoch=-1,
                              committed_metadata=None)])])
        assert ours == theirs.encode(), version
    for version in range(0, 5):
        ours = ADD_OFFSETS_TO_TXN.encode_request(version, {
            "transactional_id": "orders-tx", "producer_id": 9, "producer_epoch": 0, "group_id": "orders"})
        theirs = AddOffsetsToTxnRequest(version=version, transactional_id="orders-tx", producer_id=9, producer_epoch=0,
                                        group_id="orders")
        assert ours == theirs.encode(), version


def test_fetch_requests_v4_and_v12() -> None:
    body = {"max_wait_ms": 1, "min_bytes": 0, "max_bytes": 65536,
            "topics": [{"topic": "t",
                        "partitions": [{"partition": 2, "fetch_offset": 7, "partition_max_bytes": 4096}]}]}
    assert FETCH.encode_request(4, body) == bytes.fromhex(
        "ffffffff"  # replica_id -1
        "00000001"
        "00000000"
        "00010000"  # max_wait_ms 1, min_bytes 0, max_bytes 65536
        "00"  # isolation_level read_uncommitted
        "00000001"
        "0001"
        "74"  # 1 topic "t"
        "00000001"
        "00000002"
        "0000000000000007"
        "00001000"  # 1 partition: 2, fetch_offset 7, partition_max_bytes 4096
    )
    assert FETCH.encode_request(12, body) == bytes.fromhex(
        "ffffffff"
        "00000001"
        "00000000"
        "00010000"
        "00"
        "00000000"
        "ffffffff"  # session_id 0, session_epoch -1 (v7+)
        "02"
        "0274"  # compact array of 1 topic, compact string "t"
        "02"
        "00000002"
        "ffffffff"  # current_leader_epoch -1 (v9+)
        "0000000000000007"
        "ffffffff"  # last_fetched_epoch -1 (v12+)
        "ffffffffffffffff"  # log_start_offset -1 (v5+)
        "00001000"
        "00"  # partition tagged fields
        "00"  # topic tagged fields
        "01"  # forgotten_topics_data: empty compact array (v7+)
        "01"  # rack_id "" (v11+, compact string)
        "00"  # tagged fields: cluster_id (tag 0) null is not written
    )
