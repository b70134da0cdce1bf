"""What ``send_offsets_to_transaction`` takes: a consumer group's metadata and the offsets to commit (KIP-447).

How it works: ``ConsumerGroupMetadata`` is Java's (group id, generation id, member id, group instance id):
the broker's group coordinator checks the last three against the group when it writes the offsets, so a
consumer that left the group (a zombie) cannot commit. ``group_metadata_of`` accepts it, the bytes
confluent-kafka's ``Consumer.consumer_group_metadata()`` returns (librdkafka's serialization:
``"CGMDv2:"``, the generation id as a native-order int32, the group id and member id NUL-terminated, a
byte that is 1 when there is no group instance id, else 0 and the NUL-terminated id), any object with a
``group_id`` attribute (kafka-python's ``ConsumerGroupMetadata``) or a group id alone (Java's deprecated
``sendOffsetsToTransaction(offsets, String)``: no fencing by member). ``offsets_of`` accepts
``{(topic, partition): offset}`` whose values may also be ``OffsetAndMetadata``-like objects (``offset``,
optional ``metadata`` and ``leader_epoch``) and whose keys may be objects with ``topic`` and
``partition``; every bad entry is an ``InvalidRecordInputError`` naming it.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

from sparkafka.errors import InvalidRecordInputError

__all__ = ["CommittedOffset", "ConsumerGroupMetadata", "group_metadata_of", "offsets_of"]

_LIBRDKAFKA_MAGIC = b"CGMDv2:"
_NATIVE_INT32 = struct.Struct("=i")
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True)
class ConsumerGroupMetadata:
    """A consumer's group membership (Java's ``ConsumerGroupMetadata``): pass the consumer's own, so the
    broker refuses the offsets if the consumer is no longer the group member it was."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True)
class CommittedOffset:
    """One partition's offset to commit: the next offset to consume, as Java's ``OffsetAndMetadata``."""

    offset: int
    metadata: str = ""
    leader_epoch: int = -1


def group_metadata_of(obj: object) -> ConsumerGroupMetadata:
    """``obj`` as a ``ConsumerGroupMetadata`` (see the module docstring), checked as Java's
    ``throwIfInvalidGroupMetadata``."""
    if isinstance(obj, ConsumerGroupMetadata):
        group = obj
    elif isinstance(obj, (bytes, bytearray, memoryview)):
        group = _from_librdkafka(bytes(obj))
    elif isinstance(obj, str):
        group = ConsumerGroupMetadata(obj)
    elif isinstance(group_id := getattr(obj, "group_id", None), str):
        generation = getattr(obj, "generation_id", -1)
        member = getattr(obj, "member_id", "")
        instance = getattr(obj, "group_instance_id", None)
        group = ConsumerGroupMetadata(group_id, -1 if generation is None else generation, member or "", instance)
    else:
        raise InvalidRecordInputError(
            "group_metadata must be a ConsumerGroupMetadata, the consumer's consumer_group_metadata() "
            f"(confluent-kafka) or group_metadata() (kafka-python), or a group id, got {type(obj).__name__}")
    if not group.group_id:
        raise InvalidRecordInputError("group_metadata.group_id must be a non-empty str")
    if type(group.generation_id) is not int or not -(2**31) <= group.generation_id < 2**31:
        raise InvalidRecordInputError(f"group_metadata.generation_id must be an int32, got {group.generation_id!r}")
    if not isinstance(group.member_id, str) or not (group.group_instance_id is None
                                                    or isinstance(group.group_instance_id, str)):
        raise InvalidRecordInputError("group_metadata.member_id and group_instance_id must be str (the latter or None)")
    if group.generation_id > 0 and group.member_id == "":
        # Java KafkaProducer.throwIfInvalidGroupMetadata
        raise InvalidRecordInputError(
            f"group_metadata {group} has generation_id > 0 but no member_id: pass the consumer's own metadata")
    return group


def _from_librdkafka(data: bytes) -> ConsumerGroupMetadata:
    """librdkafka's ``rd_kafka_consumer_group_metadata_write`` format (confluent-kafka's
    ``consumer_group_metadata()``)."""
    magic = len(_LIBRDKAFKA_MAGIC)
    if not data.startswith(_LIBRDKAFKA_MAGIC) or len(data) < magic + 4 + 3:
        raise InvalidRecordInputError("group_metadata bytes are not confluent-kafka's consumer_group_metadata()")
    (generation,) = _NATIVE_INT32.unpack_from(data, magic)
    rest = data[magic + 4:]
    try:
        group_id, rest = rest.split(b"\0", 1)
        member_id, rest = rest.split(b"\0", 1)
        is_null, rest = rest[0], rest[1:]
        instance: str | None = None
        if not is_null:
            raw, rest = rest.split(b"\0", 1)
            instance = raw.decode()
        if rest:
            raise ValueError("trailing bytes")
        return ConsumerGroupMetadata(group_id.decode(), generation, member_id.decode(), instance)
    except (ValueError, IndexError, UnicodeDecodeError) as exc:
        raise InvalidRecordInputError(f"group_metadata bytes are malformed: {exc}") from None


def offsets_of(offsets: object) -> dict[tuple[str, int], CommittedOffset]:
    """``{(topic, partition): CommittedOffset}`` from the forms the module docstring lists."""
    if not isinstance(offsets, Mapping):
        raise InvalidRecordInputError(
            f"offsets must be a mapping {{(topic, partition): offset}}, got {type(offsets).__name__}")
    out: dict[tuple[str, int], CommittedOffset] = {}
    for key, value in offsets.items():
        if isinstance(key, tuple) and len(key) >= 2:
            topic, partition = key[0], key[1]
        else:
            topic, partition = getattr(key, "topic", None), getattr(key, "partition", None)
        if not isinstance(topic, str) or not topic or type(partition) is not int or partition < 0:
            raise InvalidRecordInputError(f"offsets key {key!r} must be a (topic, partition) pair")
        if type(value) is int:
            entry = CommittedOffset(value)
        elif isinstance(value, CommittedOffset):
            entry = value
        else:
            offset = getattr(value, "offset", None)
            metadata = getattr(value, "metadata", "") or ""
            epoch = getattr(value, "leader_epoch", -1)
            if type(offset) is not int or not isinstance(metadata, str):
                raise InvalidRecordInputError(
                    f"offsets[{key!r}] must be an int offset or have an int .offset, got {value!r}")
            entry = CommittedOffset(offset, metadata, -1 if epoch is None else int(epoch))
        if not 0 <= entry.offset <= _INT64_MAX:
            raise InvalidRecordInputError(f"offsets[{key!r}] = {entry.offset} is not an offset (0 to 2**63-1)")
        out[(topic, partition)] = entry
    return out

