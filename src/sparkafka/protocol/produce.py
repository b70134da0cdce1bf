"""A hand-written encoder for the Produce request body (v3-v13) that splices record batches in as-is.

How it works: the Produce body is ``transactional_id, acks, timeout_ms, [topic [partition index,
records]]``. Each record batch is already encoded (and possibly large), so instead of going through
the generic schema codec this builds a list of small header pieces interleaved with the caller's
batch buffers (``bytes`` or ``memoryview``) and joins them once: the batch bytes are copied exactly
once, into the result. v9+ is flexible (compact lengths and an empty tagged-field section closing
every struct); v13 names each topic by its 16-byte topic id instead of its name. Topic-name prefixes
are cached. The output is byte-identical to ``PRODUCE.encode_request`` (the tests check it).
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Sequence
from functools import lru_cache

from sparkafka.errors import ProtocolError, UnsupportedVersionError
from sparkafka.protocol.primitives import INT16, INT32, MAX_STRING_BYTES, Buffer, uvarint_bytes

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
    if not PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        raise UnsupportedVersionError(
            f"Produce version {version} is not supported "
            f"(this encoder writes {PRODUCE_MIN_VERSION}-{PRODUCE_MAX_VERSION})"
        )
    flexible = version >= PRODUCE_FIRST_FLEXIBLE
    parts: list[Buffer] = []
    append = parts.append

    if transactional_id is None:
        append(b"\x00" if flexible else b"\xff\xff")
    else:
        tid = transactional_id.encode()
        if len(tid) > MAX_STRING_BYTES:
            raise ProtocolError(
                f"Produce transactional_id: {len(tid)} UTF-8 bytes exceed the limit {MAX_STRING_BYTES}"
            )
        append(uvarint_bytes(len(tid) + 1) if flexible else INT16.pack(len(tid)))
        append(tid)
    try:
        append(_ACKS_TIMEOUT.pack(acks, timeout_ms))
    except struct.error:
        raise ProtocolError(
            f"Produce acks {acks!r} must fit int16 and timeout_ms {timeout_ms!r} int32"
        ) from None
    append(_count(len(topics), flexible))

    pack32 = INT32.pack
    for topic, partitions in topics:
        append(_topic_prefix(topic, version, flexible))
        append(_count(len(partitions), flexible))
        for index, records in partitions:
            try:
                head = pack32(index)
            except struct.error:
                raise ProtocolError(
                    f"Produce partition index {index!r} of topic {topic!r:.60} must fit int32"
                ) from None
            if records is None:
                append(head + (b"\x00" if flexible else b"\xff\xff\xff\xff"))
            else:
                size = records.nbytes if isinstance(records, memoryview) else len(records)
                append(head + (uvarint_bytes(size + 1) if flexible else pack32(size)))
                append(records)
            if flexible:
                append(b"\x00")  # partition tagged fields
        if flexible:
            append(b"\x00")  # topic tagged fields
    if flexible:
        append(b"\x00")  # top-level tagged fields
    return b"".join(parts)
