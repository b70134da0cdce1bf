"""The hand-written Produce encoder is byte-identical to the generic codec at every version."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka.errors import ProtocolError, UnsupportedVersionError
from sparkafka.protocol.messages import PRODUCE
from sparkafka.protocol.produce import encode_produce_request

NAMES = st.text(alphabet=st.characters(codec="utf-8"), min_size=1, max_size=12)
PARTITIONS = st.lists(
    st.tuples(st.integers(0, (1 << 31) - 1), st.none() | st.binary(max_size=300)), max_size=4
)


@st.composite
def produce_args(draw: st.DrawFn, version: int) -> tuple[Any, ...]:
    key = st.binary(min_size=16, max_size=16) if version >= 13 else NAMES
    topics = draw(st.lists(st.tuples(key, PARTITIONS), max_size=4))
    tid = draw(st.none() | NAMES)
    acks = draw(st.sampled_from([-1, 0, 1]))
    timeout = draw(st.integers(0, (1 << 31) - 1))
    return tid, acks, timeout, topics


def _generic_body(version: int, tid: Any, acks: int, timeout: int, topics: Any) -> dict[str, Any]:
    key = "topic_id" if version >= 13 else "name"
    return {
        "transactional_id": tid,
        "acks": acks,
        "timeout_ms": timeout,
        "topic_data": [
            {key: t, "partition_data": [{"index": i, "records": r} for i, r in parts]} for t, parts in topics
        ],
    }


@pytest.mark.parametrize("version", range(3, 14))
@settings(max_examples=25, deadline=None, database=None)
@given(data=st.data())
def test_fast_encoder_matches_generic_codec(version: int, data: st.DataObject) -> None:
    tid, acks, timeout, topics = data.draw(produce_args(version))
    fast = encode_produce_request(version, tid, acks, timeout, topics)
    body = _generic_body(version, tid, acks, timeout, topics)
    assert fast == PRODUCE.encode_request(version, body)
    decoded = PRODUCE.decode_request(version, fast)
    assert decoded["transactional_id"] == tid
    assert (decoded["acks"], decoded["timeout_ms"]) == (acks, timeout)
    key = "topic_id" if version >= 13 else "name"
    assert [
        (t[key], [(p["index"], p["records"]) for p in t["partition_data"]]) for t in decoded["topic_data"]
    ] == [(t, list(parts)) for t, parts in topics]


def test_memoryview_batches_are_spliced_without_reencoding() -> None:
    backing = bytearray(b"..BATCHBYTES..")
    view = memoryview(backing)[2:12]
    body = encode_produce_request(9, None, -1, 1000, [("t", [(0, view)])])
    assert body == encode_produce_request(9, None, -1, 1000, [("t", [(0, b"BATCHBYTES")])])
    assert b"\x0bBATCHBYTES" in body  # uvarint(10 + 1) then the bytes


def test_v13_accepts_uuid_objects() -> None:
    u = uuid.uuid4()
    assert encode_produce_request(13, None, 1, 5, [(u, [(0, b"x")])]) == encode_produce_request(
        13, None, 1, 5, [(u.bytes, [(0, b"x")])]
    )


def test_bad_inputs() -> None:
    with pytest.raises(UnsupportedVersionError, match="Produce version 2"):
        encode_produce_request(2, None, 1, 5, [])
    with pytest.raises(ProtocolError, match="v13 names topics by their 16-byte topic id"):
        encode_produce_request(13, None, 1, 5, [("name", [])])
    with pytest.raises(ProtocolError, match="v9 names topics by name"):
        encode_produce_request(9, None, 1, 5, [(bytes(16), [])])
    with pytest.raises(ProtocolError, match="acks 40000 must fit int16"):
        encode_produce_request(9, None, 40000, 5, [])
    with pytest.raises(ProtocolError, match="partition index -3000000000"):
        encode_produce_request(9, None, 1, 5, [("t", [(-3_000_000_000, b"")])])
    with pytest.raises(ProtocolError, match="32767"):
        encode_produce_request(9, None, 1, 5, [("t" * 40000, [])])


def test_request_parts_reference_the_batches_and_join_to_the_request() -> None:
    """The pieces are the request in order, with the caller's batch buffers themselves (not copies)."""
    from sparkafka.protocol.produce import encode_produce_request_parts

    batch = bytearray(b"BATCH-ONE")
    view = memoryview(batch)
    for version in (3, 9):
        parts = encode_produce_request_parts(version, "tx", -1, 30_000, [("t", [(0, view), (1, b"TWO")])])
        assert b"".join(parts) == encode_produce_request(version, "tx", -1, 30_000,
                                                         [("t", [(0, bytes(batch)), (1, b"TWO")])])
        assert any(p is view for p in parts)
