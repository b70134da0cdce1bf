"""The hand-written Produce response decoders, Python and C, give exactly what the generic codec gives, at
every version.

Each either returns the generic codec's dict or None (then ``decode_response_body`` falls back to the
generic codec, so results and error messages are unchanged); each must take the usual responses itself.
Every test runs on the Python decoder and, when the accelerator is built, on its C twin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka.accel import ACCEL
from sparkafka.errors import ProtocolError
from sparkafka.protocol import framing
from sparkafka.protocol.framing import decode_response_body
from sparkafka.protocol.messages import PRODUCE, ApiKey
from sparkafka.protocol.produce import decode_produce_response, decode_produce_response_py

from .strategies import body_strategy

VERSIONS = range(3, 14)
Decoder = Callable[[int, Any], "dict[str, Any] | None"]
DECODERS = [pytest.param(decode_produce_response_py, id="python")] + (
    [] if ACCEL is None else [pytest.param(ACCEL.decode_produce_response, id="c")])


def test_the_producer_uses_the_c_decoder_when_it_is_built() -> None:
    """What the response framing calls per Produce response (``framing.decode_response_body``)."""
    expected = decode_produce_response_py if ACCEL is None else ACCEL.decode_produce_response
    assert vars(framing)["decode_produce_response"] is expected  # the name framing.py imported
    assert decode_produce_response is expected


_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=10)
_INT64 = st.integers(-(1 << 63), (1 << 63) - 1)
_INT32 = st.integers(-(1 << 31), (1 << 31) - 1)


def _generic(version: int, data: bytes) -> dict[str, Any] | ProtocolError:
    try:
        return PRODUCE.decode_response(version, data)
    except ProtocolError as e:
        return e


@st.composite
def usual_body(draw: st.DrawFn, version: int) -> dict[str, Any]:
    """Responses as brokers send them: no tagged fields (those are left to the generic codec)."""
    def partition() -> st.SearchStrategy[dict[str, Any]]:
        return st.fixed_dictionaries({
            "index": _INT32, "error_code": st.integers(-1, 120), "base_offset": _INT64,
            "log_append_time_ms": _INT64, "log_start_offset": _INT64,
            "record_errors": st.lists(st.fixed_dictionaries(
                {"batch_index": _INT32, "batch_index_error_message": st.none() | _TEXT}), max_size=3),
            "error_message": st.none() | _TEXT,
        })

    key = ("topic_id", st.binary(min_size=16, max_size=16)) if version >= 13 else ("name", _TEXT)
    topics = draw(st.lists(st.fixed_dictionaries(
        {key[0]: key[1], "partition_responses": st.lists(partition(), max_size=6)}), max_size=3))
    return {"responses": topics, "throttle_time_ms": draw(_INT32)}


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None, database=None)
@given(data=st.data())
def test_usual_responses_decode_like_the_generic_codec(decoder: Decoder, version: int, data: st.DataObject) -> None:
    encoded = PRODUCE.encode_response(version, data.draw(usual_body(version)))
    fast = decoder(version, encoded)
    assert fast is not None  # the hand-written path takes it
    assert fast == PRODUCE.decode_response(version, encoded)
    assert list(fast) == ["responses", "throttle_time_ms", "node_endpoints"]
    assert decode_response_body(ApiKey.PRODUCE, version, memoryview(encoded)) == (version, fast)
    # trailing bytes are ignored by both
    assert decoder(version, encoded + b"\x07\x00") == fast


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None, database=None)
@given(data=st.data())
def test_any_schema_body_decodes_like_the_generic_codec(decoder: Decoder, version: int, data: st.DataObject) -> None:
    """Bodies drawn from the schema itself, tagged fields (current_leader, node_endpoints) included."""
    encoded = PRODUCE.encode_response(version, data.draw(body_strategy(PRODUCE.response, version)))
    generic = PRODUCE.decode_response(version, encoded)
    fast = decoder(version, encoded)
    assert fast is None or fast == generic
    assert decode_response_body(ApiKey.PRODUCE, version, encoded) == (version, generic)


@pytest.mark.parametrize("decoder", DECODERS)
@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=15, deadline=None, database=None)
@given(data=st.data())
def test_truncated_and_corrupted_input_is_left_to_the_generic_codec(decoder: Decoder, version: int,
                                                                    data: st.DataObject) -> None:
    encoded = PRODUCE.encode_response(version, data.draw(usual_body(version)))
    variants = [encoded[:cut] for cut in range(len(encoded))]
    position = data.draw(st.integers(0, max(0, len(encoded) - 1)))
    byte = data.draw(st.integers(0, 255))
    variants.append(encoded[:position] + bytes([byte]) + encoded[position + 1:])
    for variant in variants:
        generic = _generic(version, variant)
        fast = decoder(version, variant)
        if isinstance(generic, ProtocolError):
            assert fast is None
            with pytest.raises(ProtocolError) as raised:
                decode_response_body(ApiKey.PRODUCE, version, variant)
            assert str(raised.value) == f"cannot decode Produce v{version} response: {generic}"
        else:
            assert fast is None or fast == generic


@pytest.mark.parametrize("decoder", DECODERS)
@settings(max_examples=200, deadline=None, database=None)
@given(version=st.sampled_from(list(VERSIONS)), junk=st.binary(max_size=64))
def test_random_bytes(decoder: Decoder, version: int, junk: bytes) -> None:
    generic = _generic(version, junk)
    fast = decoder(version, junk)
    assert fast is None if isinstance(generic, ProtocolError) else fast in (None, generic)


@pytest.mark.parametrize("decoder", DECODERS)
def test_tagged_fields_and_unknown_versions_go_to_the_generic_codec(decoder: Decoder) -> None:
    body = {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 6, "base_offset": -1, "current_leader": {"leader_id": 2, "leader_epoch": 7}}]}],
        "node_endpoints": [{"node_id": 2, "host": "h", "port": 9092, "rack": None}]}
    encoded = PRODUCE.encode_response(12, body)
    assert decoder(12, encoded) is None
    assert decode_response_body(ApiKey.PRODUCE, 12, encoded)[0] == 12
    decoded = decode_response_body(ApiKey.PRODUCE, 12, encoded)[1]
    assert decoded["responses"][0]["partition_responses"][0]["current_leader"] == {"leader_id": 2, "leader_epoch": 7}
    assert decoded["node_endpoints"][0]["host"] == "h"
    assert decoder(2, PRODUCE.encode_response(3, {})) is None
    assert decoder(14, b"") is None


@pytest.mark.parametrize("decoder", DECODERS)
def test_a_typical_response(decoder: Decoder) -> None:
    body = {"responses": [{"name": "orders", "partition_responses": [
        {"index": p, "error_code": 0, "base_offset": 1000 * p, "log_start_offset": 0} for p in range(6)]}]}
    for version in VERSIONS:
        encoded = PRODUCE.encode_response(version, body)
        fast = decoder(version, memoryview(b"xx" + encoded)[2:])  # the framing hands over a memoryview
        generic = PRODUCE.decode_response(version, encoded)
        assert fast is not None and fast == generic
        assert list(fast["responses"][0]) == list(generic["responses"][0])  # same keys in the same order
        assert list(fast["responses"][0]["partition_responses"][0]) \
            == list(generic["responses"][0]["partition_responses"][0])
        parts = fast["responses"][0]["partition_responses"]
        assert [(p["index"], p["base_offset"], p["log_append_time_ms"]) for p in parts] \
            == [(p, 1000 * p, -1) for p in range(6)]
        assert [p["log_start_offset"] for p in parts] == [0 if version >= 5 else -1] * 6
