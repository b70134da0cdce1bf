"""A hand-written encoder for the Produce request body (v3-v13) that splices record batches in as-is.

How it works: the Produce body is ``transactional_id, acks, timeout_ms, [topic [partition index, records]]``.
Each record batch is already encoded (and possibly large), so instead of going through the generic schema
codec this builds a list of small header pieces interleaved with the caller's batch buffers (``bytes`` or
``memoryview``) and joins them once: the batch bytes are copied exactly once, into the result (or, with
``encode_produce_request_parts``, at most once on their way to the socket). v9+ is flexible (compact
lengths and an empty tagged-field section closing every struct); v13 names each topic by its 16-byte topic
id instead of its name. Topic-name prefixes are cached. The output is byte-identical to
``PRODUCE.encode_request`` (the tests check it).

``decode_produce_response`` is the matching hand-written decoder for the response (one per request,
on the Sender thread): one ``unpack_from`` per partition instead of the generic codec's nested
decoder calls. It handles the shapes brokers send (no tagged fields; any number of topics,
partitions and record errors) and returns the same dict the generic ``PRODUCE.decode_response``
builds, absent fields with their defaults; for anything else (tagged fields, a null where none is
allowed, bad or truncated input, a version outside 3-13) it returns None and the caller uses the
generic codec, so results and error messages stay exactly the generic ones. With the C accelerator
``decode_produce_response`` is its C twin (``_accel.decode_produce_response``), which takes the same inputs.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

from sparkafka.accel import ACCEL
from sparkafka.errors import ProtocolError, UnsupportedVersionError
from sparkafka.protocol.primitives import INT16, INT32, MAX_STRING_BYTES, Buffer, read_uvarint, uvarint_bytes

PRODUCE_MIN_VERSION = 3
PRODUCE_MAX_VERSION = 13
PRODUCE_FIRST_FLEXIBLE = 9
PRODUCE_FIRST_TOPIC_ID = 13

_ACKS_TIMEOUT = struct.Struct(">hi")

TopicKey = str | bytes | uuid.UUID
PartitionData = tuple[int, "Buffer | None"]
TopicData = tuple[TopicKey, Sequence[PartitionData]]


@lru_cache(maxsize=4096)
def _name_prefix(name: str, flexible: bool) -> bytes:
    data = name.encode()
    if len(data) > MAX_STRING_BYTES:
        raise ProtocolError(
            f"Produce topic name: {len(data)} UTF-8 bytes exceed the limit {MAX_STRING_BYTES}"
        )
    return (uvarint_bytes(len(data) + 1) if flexible else INT16.pack(len(data))) + data


def _topic_prefix(topic: TopicKey, version: int, flexible: bool) -> bytes:
    if version >= PRODUCE_FIRST_TOPIC_ID:
        if isinstance(topic, uuid.UUID):
            return topic.bytes
        if isinstance(topic, bytes) and len(topic) == 16:
            return topic
        raise ProtocolError(f"Produce v{version} names topics by their 16-byte topic id; got {topic!r:.60}")
    if not isinstance(topic, str):
        raise ProtocolError(
            f"Produce v{version} names topics by name (str); got {type(topic).__name__} {topic!r:.60}"
        )
    return _name_prefix(topic, flexible)


def _count(n: int, flexible: bool) -> bytes:
    return uvarint_bytes(n + 1) if flexible else INT32.pack(n)


def encode_produce_request(
    version: int,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topics: Sequence[TopicData],
) -> bytes:
    """Encode a Produce request body.

    ``topics`` is a sequence of ``(topic, [(partition_index, batch_bytes), ...])`` where ``topic`` is
    the name (v3-v12) or the 16-byte topic id (v13, ``bytes`` or ``uuid.UUID``).
    """
    return b"".join(encode_produce_request_parts(version, transactional_id, acks, timeout_ms, topics))


def encode_produce_request_parts(
    version: int,
    transactional_id: str | None,
    acks: int,
    timeout_ms: int,
    topics: Sequence[TopicData],
) -> tuple[Buffer, ...]:
    """``encode_produce_request`` as its pieces, in order: the callers' batch buffers themselves (not
    copied), with the small header bytes between two batches joined into one piece. ``KafkaProtocol.
    send_request_parts`` puts the frame header in front and the connection writes them with one
    ``sendmsg`` (or joins them once), so the batch bytes are copied at most once on their way to the
    socket."""
    if not PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        raise UnsupportedVersionError(
            f"Produce version {version} is not supported "
            f"(this encoder writes {PRODUCE_MIN_VERSION}-{PRODUCE_MAX_VERSION})"
        )
    flexible = version >= PRODUCE_FIRST_FLEXIBLE
    parts: list[Buffer] = []
    add = parts.append
    # ``head``: the header bytes since the last batch buffer, joined into one piece in front of the next
    if transactional_id is None:
        head = b"\x00" if flexible else b"\xff\xff"
    else:
        tid = transactional_id.encode()
        if len(tid) > MAX_STRING_BYTES:
            raise ProtocolError(
                f"Produce transactional_id: {len(tid)} UTF-8 bytes exceed the limit {MAX_STRING_BYTES}"
            )
        head = (uvarint_bytes(len(tid) + 1) if flexible else INT16.pack(len(tid))) + tid
    try:
        head += _ACKS_TIMEOUT.pack(acks, timeout_ms)
    except struct.error:
        raise ProtocolError(
            f"Produce acks {acks!r} must fit int16 and timeout_ms {timeout_ms!r} int32"
        ) from None
    head += _count(len(topics), flexible)

    pack32 = INT32.pack
    pack_index_size = _INDEX_SIZE.pack
    # after each partition (flexible: its empty tagged-field section) and after each topic
    partition_end = b"\x00" if flexible else b""
    for topic, partitions in topics:
        head += _topic_prefix(topic, version, flexible) + _count(len(partitions), flexible)
        for index, records in partitions:
            if records is None:
                try:
                    head += pack32(index) + (b"\x00" if flexible else b"\xff\xff\xff\xff") + partition_end
                except struct.error:
                    raise _bad_index(index, topic) from None
                continue
            size = records.nbytes if isinstance(records, memoryview) else len(records)
            try:
                if flexible:
                    add(head + pack32(index) + uvarint_bytes(size + 1))
                else:
                    add(head + pack_index_size(index, size))
            except struct.error:
                raise _bad_index(index, topic) from None
            add(records)
            head = partition_end
        head += partition_end  # the topic's tagged fields
    add(head + partition_end)  # the top-level tagged fields
    return tuple(parts)


_INDEX_SIZE = struct.Struct(">ii")  # partition index, records size (v3-v8)


def _bad_index(index: object, topic: TopicKey) -> ProtocolError:
    return ProtocolError(f"Produce partition index {index!r} of topic {topic!r:.60} must fit int32")


# ------------------------------------------------------------------------------------------ response
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error_code, base_offset, log_append_time_ms (v2+)
_PARTITION_V5 = struct.Struct(">ihqqq")  # ... and log_start_offset (v5+)
_UNPACK_I16 = INT16.unpack_from
_UNPACK_I32 = INT32.unpack_from
_NO_TOPIC_ID = bytes(16)
_FIRST_RECORD_ERRORS = 8


class _Unusual(Exception):
    """Input left to the generic codec."""


_LEAVE = (_Unusual, ProtocolError, struct.error, IndexError, ValueError, OverflowError, MemoryError)


def decode_produce_response_py(version: int, data: Buffer) -> dict[str, Any] | None:
    """The Produce response body as ``PRODUCE.decode_response(version, data)`` decodes it, or None
    when this decoder leaves it to that generic codec (see the module docstring)."""
    if not PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        return None
    try:
        return _decode_response(version, data)
    except _LEAVE:
        return None


decode_produce_response: Callable[[int, Buffer], dict[str, Any] | None] = (
    decode_produce_response_py if ACCEL is None else ACCEL.decode_produce_response)
"""``decode_produce_response_py``, or its C twin when the accelerator is built (``_c/_produce_response.c``)."""


def _compact_length(buf: Buffer, pos: int) -> tuple[int, int]:
    """A compact (flexible-version) length: unsigned varint minus one (-1 = null)."""
    n = buf[pos]
    if n & 0x80:
        n, pos = read_uvarint(buf, pos)
        return n - 1, pos
    return n - 1, pos + 1


def _length(buf: Buffer, pos: int, flexible: bool, width: int) -> tuple[int, int]:
    """A string (``width`` 2) or array (4) length; null and invalid lengths are unusual here."""
    if flexible:
        n, pos = _compact_length(buf, pos)
    elif width == 4:
        (n,) = _UNPACK_I32(buf, pos)
        pos += 4
    else:
        (n,) = _UNPACK_I16(buf, pos)
        pos += 2
    if n < 0:
        raise _Unusual
    return n, pos


def _nullable_string(buf: Buffer, pos: int, flexible: bool) -> tuple[str | None, int]:
    if flexible:
        n, pos = _compact_length(buf, pos)
    else:
        (n,) = _UNPACK_I16(buf, pos)
        pos += 2
        if n < -1:
            raise _Unusual
    if n < 0:
        return None, pos
    end = pos + n
    if end > len(buf):
        raise _Unusual
    return str(buf[pos:end], "utf-8"), end


def _decode_response(version: int, buf: Buffer) -> dict[str, Any]:
    flexible = version >= PRODUCE_FIRST_FLEXIBLE
    by_id = version >= PRODUCE_FIRST_TOPIC_ID
    record_errors_field = version >= _FIRST_RECORD_ERRORS
    with_start_offset = version >= 5
    fixed = _PARTITION_V5 if with_start_offset else _PARTITION_V3
    unpack = fixed.unpack_from
    step = fixed.size
    size = len(buf)
    topics, pos = _length(buf, 0, flexible, 4)
    responses: list[dict[str, Any]] = []
    for _ in range(topics):
        if by_id:
            end = pos + 16
            if end > size:
                raise _Unusual
            name = ""
            topic_id = bytes(buf[pos:end])
        else:
            n, pos = _length(buf, pos, flexible, 2)
            end = pos + n
            if end > size:
                raise _Unusual
            name = str(buf[pos:end], "utf-8")
            topic_id = _NO_TOPIC_ID
        count, pos = _length(buf, end, flexible, 4)
        partitions: list[dict[str, Any]] = []
        for _ in range(count):
            if with_start_offset:
                index, code, base_offset, append_time, start_offset = unpack(buf, pos)
            else:
                index, code, base_offset, append_time = unpack(buf, pos)
                start_offset = -1
            pos += step
            record_errors: list[dict[str, Any]] = []
            message = None
            if flexible and buf[pos] == 1 and not buf[pos + 1] and not buf[pos + 2]:
                # the usual partition: no record errors, no error message, no tagged fields
                pos += 3
                partitions.append({
                    "index": index, "error_code": code, "base_offset": base_offset,
                    "log_append_time_ms": append_time, "log_start_offset": start_offset,
                    "record_errors": record_errors, "error_message": None,
                    "current_leader": {"leader_id": -1, "leader_epoch": -1},
                })
                continue
            if record_errors_field:
                listed, pos = _length(buf, pos, flexible, 4)
                for _ in range(listed):
                    (batch_index,) = _UNPACK_I32(buf, pos)
                    text, pos = _nullable_string(buf, pos + 4, flexible)
                    if flexible:
                        if buf[pos]:
                            raise _Unusual  # tagged fields
                        pos += 1
                    record_errors.append({"batch_index": batch_index, "batch_index_error_message": text})
                message, pos = _nullable_string(buf, pos, flexible)
            if flexible:
                if buf[pos]:
                    raise _Unusual  # tagged fields (current_leader)
                pos += 1
            partitions.append({
                "index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": append_time,
                "log_start_offset": start_offset, "record_errors": record_errors, "error_message": message,
                "current_leader": {"leader_id": -1, "leader_epoch": -1},
            })
        if flexible:
            if buf[pos]:
                raise _Unusual
            pos += 1
        responses.append({"name": name, "topic_id": topic_id, "partition_responses": partitions})
    (throttle_time_ms,) = _UNPACK_I32(buf, pos)
    if flexible and buf[pos + 4]:
        raise _Unusual  # tagged fields (node_endpoints)
    return {"responses": responses, "throttle_time_ms": throttle_time_ms, "node_endpoints": []}
