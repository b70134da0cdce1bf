"""Every request and response schema round-trips at every version; the API table is consistent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sparkafka.errors import ProtocolError, UnsupportedVersionError
from sparkafka.protocol import codec
from sparkafka.protocol.messages import (
    ALL_APIS,
    API_BY_KEY,
    CLIENT_VERSIONS,
    METADATA,
    PRODUCE,
    ApiKey,
    ApiSpec,
)
from sparkafka.protocol.schema import Schema

from .strategies import body_strategy, expected_decode

CASES = [
    pytest.param(spec, kind, version, id=f"{spec.name}{kind.capitalize()}-v{version}")
    for spec in ALL_APIS
    for kind in ("request", "response")
    for version in range(spec.min_version, spec.max_version + 1)
]

ROUNDTRIP = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)


def _schema(spec: ApiSpec, kind: str) -> Schema:
    return spec.request if kind == "request" else spec.response


@pytest.mark.parametrize(("spec", "kind", "version"), CASES)
@ROUNDTRIP
@given(data=st.data())
def test_roundtrip_every_message_every_version(
    spec: ApiSpec, kind: str, version: int, data: st.DataObject
) -> None:
    schema = _schema(spec, kind)
    body = data.draw(body_strategy(schema, version), label="body")
    encode = spec.encode_request if kind == "request" else spec.encode_response
    decode = spec.decode_request if kind == "request" else spec.decode_response

    wire = encode(version, body)
    decoded = decode(version, wire)
    assert decoded == expected_decode(schema, version, body)
    # decoding is lossless for this version: re-encoding gives the same bytes
    assert encode(version, decoded) == wire
    # decoding from a memoryview at an offset works the same
    assert decode(version, memoryview(b"xx" + wire)[2:]) == decoded


@pytest.mark.parametrize(("spec", "kind", "version"), CASES)
def test_missing_keys_take_defaults(spec: ApiSpec, kind: str, version: int) -> None:
    schema = _schema(spec, kind)
    assert codec.encode(schema, {}, version) == codec.encode(schema, schema.default_body(), version)
    decoded = codec.decode(schema, codec.encode(schema, {}, version), version)
    assert decoded == schema.default_body()


@pytest.mark.parametrize(("spec", "kind", "version"), CASES[::3])
@settings(max_examples=10, deadline=None, database=None)
@given(data=st.data())
def test_every_truncation_is_a_protocol_error(
    spec: ApiSpec, kind: str, version: int, data: st.DataObject
) -> None:
    schema = _schema(spec, kind)
    wire = codec.encode(schema, data.draw(body_strategy(schema, version)), version)
    for cut in range(len(wire)):
        try:
            codec.decode(schema, wire[:cut], version)
        except ProtocolError:
            continue
        # a prefix can only decode if the rest was optional trailing data, which never happens here
        raise AssertionError(f"prefix of {cut}/{len(wire)} bytes decoded without error")


@settings(max_examples=300, deadline=None, database=None)
@given(
    st.sampled_from(
        [(s, k, v) for s in ALL_APIS for k in ("request", "response") for v in (s.min_version, s.max_version)]
    ),
    st.binary(max_size=64),
)
def test_garbage_raises_only_protocol_error(case: tuple[ApiSpec, str, int], garbage: bytes) -> None:
    spec, kind, version = case
    try:
        codec.decode(_schema(spec, kind), garbage, version)
    except ProtocolError:
        pass


def test_api_table() -> None:
    assert set(API_BY_KEY) == {int(k) for k in ApiKey}
    for spec in ALL_APIS:
        assert API_BY_KEY[spec.api_key] is spec
        lo, hi = CLIENT_VERSIONS[spec.api_key]
        assert spec.min_version <= lo <= hi <= spec.max_version, spec
        assert spec.request.valid_versions.lo == spec.min_version
        assert spec.response.valid_versions.hi == spec.max_version
        if spec.flexible_min is not None:
            assert spec.is_flexible(spec.flexible_min)
            assert not spec.is_flexible(spec.flexible_min - 1)
    assert (PRODUCE.min_version, PRODUCE.max_version, PRODUCE.flexible_min) == (3, 13, 9)
    assert (METADATA.min_version, METADATA.max_version) == (0, 13)
    assert CLIENT_VERSIONS[ApiKey.PRODUCE] == (3, 13)
    assert API_BY_KEY[ApiKey.SASL_HANDSHAKE].flexible_min is None


def test_undefined_version_is_rejected() -> None:
    with pytest.raises(
        UnsupportedVersionError,
        match=r"Produce \(api key 0\) version 2 is not defined \(known versions 3-13\)",
    ):
        PRODUCE.encode_request(2, {})
    with pytest.raises(UnsupportedVersionError, match="version 14"):
        PRODUCE.decode_response(14, b"")


def test_produce_v13_uses_topic_id_instead_of_name() -> None:
    tid = bytes(range(16))
    body: dict[str, Any] = {
        "acks": -1,
        "timeout_ms": 1000,
        "topic_data": [{"name": "ignored", "topic_id": tid, "partition_data": []}],
    }
    v13 = PRODUCE.decode_request(13, PRODUCE.encode_request(13, body))
    assert v13["topic_data"][0]["topic_id"] == tid
    assert v13["topic_data"][0]["name"] == ""  # not on the wire at v13: default
    v12 = PRODUCE.decode_request(12, PRODUCE.encode_request(12, body))
    assert v12["topic_data"][0]["name"] == "ignored"
    assert v12["topic_data"][0]["topic_id"] == bytes(16)


def test_metadata_v13_top_level_error_code_and_null_topics() -> None:
    wire = METADATA.encode_response(13, {"error_code": 29, "topics": []})
    assert wire.endswith(b"\x00\x1d\x00")  # error_code then the empty tagged-field section
    assert METADATA.decode_response(13, wire)["error_code"] == 29
    assert METADATA.decode_response(12, METADATA.encode_response(12, {"error_code": 29}))["error_code"] == 0
    # null topics = all topics (v1+), not allowed in v0
    assert METADATA.decode_request(1, METADATA.encode_request(1, {"topics": None}))["topics"] is None
    with pytest.raises(ProtocolError, match=r"MetadataRequest.topics \(v0\): null is not allowed"):
        METADATA.encode_request(0, {"topics": None})
