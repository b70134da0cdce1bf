"""Header versions and the sans-I/O ``KafkaProtocol`` state machine."""

from __future__ import annotations

from typing import Any

import pytest

from sparkafka.errors import (
    CorrelationIdMismatchError,
    FrameTooLargeError,
    ProtocolError,
    UnsupportedVersionError,
    error_for_code,
)
from sparkafka.protocol.framing import (
    InFlight,
    KafkaProtocol,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_frame,
    encode_response_header,
    request_header_version,
    response_header_version,
)
from sparkafka.protocol.messages import API_BY_KEY, API_VERSIONS, METADATA, PRODUCE, ApiKey
from sparkafka.protocol.primitives import INT32


def response_frame(api_key: int, version: int, corr: int, body: dict[str, Any]) -> bytes:
    return encode_response_frame(api_key, version, corr, API_BY_KEY[api_key].encode_response(version, body))


PRODUCE_OK = {
    "responses": [{"name": "t", "partition_responses": [{"index": 0, "error_code": 0, "base_offset": 42}]}]
}


@pytest.mark.parametrize(
    ("api_key", "version", "req", "resp"),
    [
        (ApiKey.PRODUCE, 8, 1, 0),
        (ApiKey.PRODUCE, 9, 2, 1),
        (ApiKey.METADATA, 8, 1, 0),
        (ApiKey.METADATA, 9, 2, 1),
        (ApiKey.API_VERSIONS, 2, 1, 0),
        (ApiKey.API_VERSIONS, 3, 2, 0),  # KIP-511: ApiVersions responses always use header v0
        (ApiKey.API_VERSIONS, 4, 2, 0),
        (ApiKey.SASL_HANDSHAKE, 1, 1, 0),  # never flexible
        (ApiKey.SASL_AUTHENTICATE, 2, 2, 1),
        (ApiKey.INIT_PRODUCER_ID, 2, 2, 1),
    ],
)
def test_header_versions(api_key: int, version: int, req: int, resp: int) -> None:
    assert request_header_version(api_key, version) == req
    assert response_header_version(api_key, version) == resp
    header = encode_request_header(api_key, version, 5, "cid")
    # ClientId keeps its int16 length in v2; v2 only adds the empty tagged-field section
    assert header == INT32.pack((api_key << 16) | version) + INT32.pack(5) + b"\x00\x03cid" + (
        b"\x00" if req == 2 else b""
    )
    assert decode_request_header(header) == ((api_key, version, 5, "cid"), len(header))
    rh = encode_response_header(api_key, version, 9)
    assert rh == INT32.pack(9) + (b"\x00" if resp == 1 else b"")
    assert decode_response_header(api_key, version, rh + b"body") == (9, len(rh))


def test_null_client_id() -> None:
    assert encode_request_header(ApiKey.METADATA, 1, 0, None).endswith(b"\xff\xff")
    proto = KafkaProtocol(None)
    _, frame = proto.send_request(ApiKey.METADATA, 1, {"topics": None})
    assert decode_request_header(frame[4:])[0].client_id is None


def test_send_assigns_increasing_correlation_ids_and_tracks_in_flight() -> None:
    proto = KafkaProtocol("c")
    c0, f0 = proto.send_request(ApiKey.METADATA, 12, {"topics": []})
    c1, _ = proto.send_request(ApiKey.PRODUCE, 9, b"raw", expect_response=False)
    c2, _ = proto.send_request(ApiKey.PRODUCE, 9, b"raw")
    assert (c0, c1, c2) == (0, 1, 2)
    assert INT32.unpack_from(f0)[0] == len(f0) - 4
    assert proto.pending == (InFlight(0, ApiKey.METADATA, 12), InFlight(2, ApiKey.PRODUCE, 9))
    assert proto.in_flight_count() == 2
    assert proto.oldest_pending() == InFlight(0, ApiKey.METADATA, 12)


def test_raw_body_is_used_as_is() -> None:
    proto = KafkaProtocol("c")
    _, frame = proto.send_request(ApiKey.PRODUCE, 3, b"\x01\x02\x03")
    assert frame.endswith(b"\x00\x01c\x01\x02\x03")


def test_body_pieces_are_joined_in_order_with_the_right_size() -> None:
    proto = KafkaProtocol("c")
    _, whole = proto.send_request(ApiKey.PRODUCE, 9, b"\x01\x02\x03\x04\x05")
    wide = memoryview(bytearray(b"\x00\x03\x00\x04")).cast("H")  # nbytes 4, len 2: counted in bytes
    _, joined = proto.send_request(ApiKey.PRODUCE, 9, (b"\x01", memoryview(b"\x02\x03"), bytearray(b"\x04\x05")))
    assert joined[:8] == whole[:8] and joined[12:] == whole[12:]  # same size, header and body (not correlation id)
    _, frame = proto.send_request(ApiKey.PRODUCE, 9, (b"\x01", wide))
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4 and frame.endswith(b"\x01\x00\x03\x00\x04")


def test_correlation_id_wraps_at_int32_max() -> None:
    proto = KafkaProtocol("c")
    proto._next_correlation_id = 0x7FFFFFFF
    assert proto.send_request(ApiKey.METADATA, 1, {})[0] == 0x7FFFFFFF
    assert proto.send_request(ApiKey.METADATA, 1, {})[0] == 0


def test_send_rejects_unknown_api_and_version() -> None:
    proto = KafkaProtocol("c")
    with pytest.raises(UnsupportedVersionError, match="api key 99"):
        proto.send_request(99, 0, b"")
    with pytest.raises(UnsupportedVersionError, match="Produce"):
        proto.send_request(ApiKey.PRODUCE, 2, b"")
    with pytest.raises(ProtocolError, match="acks"):
        proto.send_request(ApiKey.PRODUCE, 9, {"acks": 1 << 20})
    assert proto.in_flight_count() == 0


def test_partial_frames_fed_byte_by_byte() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(ApiKey.PRODUCE, 9, b"x")
    frame = response_frame(ApiKey.PRODUCE, 9, corr, PRODUCE_OK)
    for i in range(len(frame) - 1):
        assert proto.receive_data(frame[i : i + 1]) == []
        assert proto.buffered_bytes() == i + 1
    [resp] = proto.receive_data(frame[-1:])
    assert (resp.correlation_id, resp.api_key, resp.api_version) == (corr, ApiKey.PRODUCE, 9)
    assert resp.body["responses"][0]["partition_responses"][0]["base_offset"] == 42
    assert proto.in_flight_count() == 0
    assert proto.buffered_bytes() == 0


def test_two_frames_in_one_chunk_and_a_split_third() -> None:
    proto = KafkaProtocol("c")
    c0, _ = proto.send_request(ApiKey.METADATA, 12, {"topics": None})
    c1, _ = proto.send_request(ApiKey.PRODUCE, 8, b"x")
    c2, _ = proto.send_request(ApiKey.PRODUCE, 10, b"x")
    md = {"brokers": [{"node_id": 1, "host": "h", "port": 9092}], "topics": []}
    data = (
        response_frame(ApiKey.METADATA, 12, c0, md)
        + response_frame(ApiKey.PRODUCE, 8, c1, PRODUCE_OK)
        + response_frame(ApiKey.PRODUCE, 10, c2, PRODUCE_OK)
    )
    split = len(data) - 3
    first = proto.receive_data(data[:split])
    assert [r.correlation_id for r in first] == [c0, c1]
    assert first[0].body["brokers"][0]["host"] == "h"
    assert first[1].api_version == 8
    assert proto.pending == (InFlight(c2, ApiKey.PRODUCE, 10),)
    [last] = proto.receive_data(data[split:])
    assert last.correlation_id == c2
    assert last.body["responses"][0]["partition_responses"][0]["current_leader"] == {
        "leader_id": -1,
        "leader_epoch": -1,
    }


@pytest.mark.parametrize("size", [-1, 101])
def test_frame_size_out_of_bounds(size: int) -> None:
    proto = KafkaProtocol("c", max_frame_size=100)
    proto.send_request(ApiKey.METADATA, 1, {})
    with pytest.raises(FrameTooLargeError, match=rf"size {size} is outside \[0, 100\]"):
        proto.receive_data(INT32.pack(size))
    # the connection stays broken until reset
    with pytest.raises(FrameTooLargeError):
        proto.receive_data(b"")
    assert proto.reset() == [InFlight(0, ApiKey.METADATA, 1)]
    assert proto.receive_data(b"") == []


def test_wrong_correlation_id() -> None:
    proto = KafkaProtocol("c")
    proto.send_request(ApiKey.PRODUCE, 9, b"x")
    proto.send_request(ApiKey.PRODUCE, 9, b"x")
    with pytest.raises(
        CorrelationIdMismatchError, match=r"correlation id 1 does not match .*Produce v9, correlation id 0"
    ):
        proto.receive_data(response_frame(ApiKey.PRODUCE, 9, 1, PRODUCE_OK))
    assert proto.in_flight_count() == 2


def test_response_without_request() -> None:
    proto = KafkaProtocol("c")
    with pytest.raises(CorrelationIdMismatchError, match="no request is in flight"):
        proto.receive_data(response_frame(ApiKey.PRODUCE, 9, 0, PRODUCE_OK))


def test_truncated_body_names_api_and_version() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(ApiKey.PRODUCE, 9, b"x")
    frame = response_frame(ApiKey.PRODUCE, 9, corr, PRODUCE_OK)
    short = INT32.pack(len(frame) - 4 - 3) + frame[4:-3]
    with pytest.raises(ProtocolError, match=r"cannot decode Produce v9 response: .*ProduceResponse"):
        proto.receive_data(short)


def test_error_after_good_frame_puts_its_request_back() -> None:
    proto = KafkaProtocol("c")
    c0, _ = proto.send_request(ApiKey.PRODUCE, 9, b"x")
    c1, _ = proto.send_request(ApiKey.PRODUCE, 9, b"x")
    good = response_frame(ApiKey.PRODUCE, 9, c0, PRODUCE_OK)
    bad = INT32.pack(5) + INT32.pack(c1) + b"\x07"
    with pytest.raises(ProtocolError):
        proto.receive_data(good + bad)
    # nothing from the failed call was delivered, so both requests are still owed a response
    assert [p.correlation_id for p in proto.reset()] == [c0, c1]


def test_frame_shorter_than_correlation_id() -> None:
    proto = KafkaProtocol("c")
    proto.send_request(ApiKey.PRODUCE, 9, b"x")
    with pytest.raises(ProtocolError, match="too short"):
        proto.receive_data(INT32.pack(2) + b"\x00\x00")


def test_unknown_error_code_survives_decode() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(ApiKey.PRODUCE, 11, b"x")
    body = {
        "responses": [
            {"name": "t", "partition_responses": [{"index": 3, "error_code": 31999, "base_offset": -1}]}
        ]
    }
    [resp] = proto.receive_data(response_frame(ApiKey.PRODUCE, 11, corr, body))
    code = resp.body["responses"][0]["partition_responses"][0]["error_code"]
    assert code == 31999
    assert "unknown error code 31999" in str(error_for_code(code))


def test_response_header_tagged_fields_are_skipped() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(ApiKey.PRODUCE, 9, b"x")
    body = PRODUCE.encode_response(9, PRODUCE_OK)
    header = INT32.pack(corr) + b"\x01\x05\x02ab"  # one unknown tag (5) with 2 bytes
    [resp] = proto.receive_data(INT32.pack(len(header) + len(body)) + header + body)
    assert resp.body["responses"][0]["name"] == "t"


def test_produce_unknown_tagged_fields_in_body_are_skipped() -> None:
    wire = bytearray(PRODUCE.encode_response(10, PRODUCE_OK))
    assert wire[-1] == 0
    endpoint = bytes.fromhex("02000000030268000023840000")  # [{3, "h", 9092, rack null}]
    wire[-1:] = b"\x02" + b"\x00" + bytes([len(endpoint)]) + endpoint + b"\x07\x03xyz"  # tag 0, unknown tag 7
    decoded = PRODUCE.decode_response(10, bytes(wire))
    assert decoded["node_endpoints"] == [{"node_id": 3, "host": "h", "port": 9092, "rack": None}]
    assert decoded["responses"][0]["name"] == "t"


# ---- ApiVersions fallback (KIP-511)

APIV_KEYS = [
    {"api_key": 0, "min_version": 3, "max_version": 11},
    {"api_key": 18, "min_version": 0, "max_version": 2},
]


def test_apiversions_unsupported_version_reparsed_as_v0() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(
        ApiKey.API_VERSIONS, 4, {"client_software_name": "x", "client_software_version": "1"}
    )
    v0_body = API_VERSIONS.encode_response(0, {"error_code": 35, "api_keys": APIV_KEYS})
    [resp] = proto.receive_data(encode_response_frame(ApiKey.API_VERSIONS, 0, corr, v0_body))
    assert resp.api_version == 0
    assert resp.body["error_code"] == 35
    assert resp.body["api_keys"] == APIV_KEYS


def test_apiversions_unparseable_at_requested_version_reparsed_as_v0() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}
    )
    v0_body = API_VERSIONS.encode_response(0, {"error_code": 0, "api_keys": APIV_KEYS})
    with pytest.raises(ProtocolError):
        API_VERSIONS.decode_response(3, v0_body)
    [resp] = proto.receive_data(encode_response_frame(ApiKey.API_VERSIONS, 3, corr, v0_body))
    assert (resp.api_version, resp.body["api_keys"]) == (0, APIV_KEYS)


def test_apiversions_v3_response_uses_header_v0() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "x", "client_software_version": "1"}
    )
    body = API_VERSIONS.encode_response(3, {"api_keys": APIV_KEYS, "finalized_features_epoch": 7})
    frame = INT32.pack(4 + len(body)) + INT32.pack(corr) + body  # no tagged fields after the correlation id
    [resp] = proto.receive_data(frame)
    assert resp.api_version == 3
    assert resp.body["finalized_features_epoch"] == 7
    assert resp.body["api_keys"] == APIV_KEYS


def test_metadata_response_roundtrip_through_protocol() -> None:
    proto = KafkaProtocol("c")
    corr, _ = proto.send_request(ApiKey.METADATA, 9, {"topics": [{"name": "t"}]})
    md = {
        "topics": [
            {
                "name": "t",
                "partitions": [
                    {
                        "partition_index": 0,
                        "leader_id": 1,
                        "replica_nodes": [1, 2],
                        "isr_nodes": [1],
                        "offline_replicas": [2],
                    }
                ],
            }
        ]
    }
    [resp] = proto.receive_data(response_frame(ApiKey.METADATA, 9, corr, md))
    part = resp.body["topics"][0]["partitions"][0]
    assert (part["leader_id"], part["replica_nodes"], part["offline_replicas"]) == (1, [1, 2], [2])
    assert resp.body == METADATA.decode_response(9, METADATA.encode_response(9, md))


def test_answer_to_an_unanswered_request_is_skipped() -> None:
    """Some brokers (Tansu) answer acks=0 Produce requests; the answer must be skipped, not break the stream."""
    from sparkafka.protocol.framing import KafkaProtocol, encode_response_frame
    from sparkafka.protocol.messages import API_BY_KEY, ApiKey

    def enc(key: int, v: int, cid: int, body: dict[str, object]) -> bytes:
        return encode_response_frame(key, v, cid, API_BY_KEY[key].encode_response(v, body))

    proto = KafkaProtocol("c")
    cid0, _ = proto.send_request(ApiKey.PRODUCE, 9, b"\x00" * 3, expect_response=False)
    cid1, _ = proto.send_request(ApiKey.METADATA, 12, {"topics": []})
    stray = enc(ApiKey.PRODUCE, 9, cid0, {"responses": []})
    real = enc(ApiKey.METADATA, 12, cid1, {"brokers": [], "topics": []})
    responses = proto.receive_data(stray + real)
    assert [r.correlation_id for r in responses] == [cid1]
    # an id that was never sent is still a mismatch
    proto.send_request(ApiKey.METADATA, 12, {"topics": []})
    import pytest as _pytest

    from sparkafka.errors import CorrelationIdMismatchError
    with _pytest.raises(CorrelationIdMismatchError):
        proto.receive_data(enc(ApiKey.METADATA, 12, 999, {"brokers": [], "topics": []}))
