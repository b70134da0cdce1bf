"""Version negotiation from an ApiVersions answer."""

from __future__ import annotations

import pytest

from sparkafka.errors import BrokerError, ProtocolError, UnsupportedVersionError
from sparkafka.protocol.messages import API_VERSIONS, ApiKey
from sparkafka.protocol.versions import ApiVersionsTable


def table(*entries: tuple[int, int, int]) -> ApiVersionsTable:
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in entries],
    }
    # go through the wire so the table is built from a real decoded response
    return ApiVersionsTable.from_response(
        API_VERSIONS.decode_response(3, API_VERSIONS.encode_response(3, body))
    )


def test_highest_common_version() -> None:
    t = table((0, 0, 11), (3, 0, 12), (18, 0, 3))
    assert t.pick_version(ApiKey.PRODUCE, 3, 13) == 11
    assert t.pick_version(ApiKey.PRODUCE) == 11  # CLIENT_VERSIONS default
    assert t.pick_version(ApiKey.METADATA, 1, 9) == 9
    assert t.pick_version(ApiKey.API_VERSIONS) == 3
    assert t.get(ApiKey.METADATA) == (0, 12)
    assert ApiKey.PRODUCE in t
    assert len(t) == 3


def test_kafka4_produce_range_listing_min_0_still_picks_3_plus() -> None:
    # Kafka 4.x lists Produce 0-13 (a librdkafka workaround) but rejects v0-2; our minimum is 3 anyway
    assert table((0, 0, 13)).pick_version(ApiKey.PRODUCE) == 13


def test_no_overlap_names_both_ranges() -> None:
    t = table((0, 0, 2))
    with pytest.raises(
        UnsupportedVersionError,
        match=r"no common version of Produce \(api key 0\): this client supports 3-13, the broker 0-2",
    ):
        t.pick_version(ApiKey.PRODUCE)


def test_api_missing_from_broker() -> None:
    with pytest.raises(
        UnsupportedVersionError, match=r"does not support InitProducerId \(api key 22\) at all"
    ):
        table((0, 3, 9)).pick_version(ApiKey.INIT_PRODUCER_ID)


def test_api_not_used_by_client() -> None:
    with pytest.raises(UnsupportedVersionError, match=r"^api key 8 is not used by this client"):
        table((8, 0, 9)).pick_version(8)  # OffsetCommit


def test_error_response_raises_broker_error() -> None:
    with pytest.raises(BrokerError, match="UNSUPPORTED_VERSION"):
        ApiVersionsTable.from_response({"error_code": 35, "api_keys": []})


def test_inverted_range_is_a_protocol_error() -> None:
    with pytest.raises(ProtocolError, match="min_version 5 > max_version 2"):
        ApiVersionsTable.from_response(
            {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 5, "max_version": 2}]}
        )
