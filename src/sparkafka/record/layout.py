"""The v2 record batch layout (magic 2), shared by the builder and the reader.

How it works: constants only, as Java's ``DefaultRecordBatch`` declares them. A batch is a 61-byte
header followed by its records (compressed as one block when the attributes name a codec):

    offset  size  field
         0     8  baseOffset
         8     4  batchLength            bytes after this field (LOG_OVERHEAD = 12 are not counted)
        12     4  partitionLeaderEpoch
        16     1  magic                  2
        17     4  crc                    CRC-32C of bytes [21, end)
        21     2  attributes             bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control
        23     4  lastOffsetDelta
        27     8  baseTimestamp
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount

Each record is ``length, attributes, timestampDelta, offsetDelta, keyLength, key, valueLength,
value, headerCount, headers`` with zigzag varints for the lengths and deltas (Java
``DefaultRecord``). ``increment_sequence`` is the sequence arithmetic of the producer id's sequence
space (``DefaultRecordBatch.incrementSequence``).
"""

from __future__ import annotations

import struct

RECORD_BATCH_OVERHEAD = 61
"""Size of the v2 batch header."""
LOG_OVERHEAD = 12
"""baseOffset + batchLength: bytes not counted by batchLength."""
MAX_RECORD_OVERHEAD = 21
"""Upper bound of a record's bytes besides key, value and headers (Java ``DefaultRecord``)."""
MAGIC = 2
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
PRODUCER_ID_OFFSET = 43
COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
INT32_MAX = 2**31 - 1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")


def sequence_after(a: int, b: int) -> bool:
    """Sequence ``a`` comes after ``b`` in the wrapping int32 sequence space (``increment_sequence``), for
    sequences less than 2**30 apart: 0 comes after 2**31-1."""
    return 0 < (a - b) % (INT32_MAX + 1) < (INT32_MAX + 1) // 2


def increment_sequence(seq: int, n: int) -> int:
    """``seq + n`` wrapping past Int32.MAX to 0, as Java's ``DefaultRecordBatch.incrementSequence``."""
    if seq > INT32_MAX - n:
        return n - (INT32_MAX - seq) - 1
    return seq + n
