"""murmur2 partitions of a whole Arrow key column with Arrow kernels (the bulk path without the C accelerator).

How it works: a keyed record's default partition is ``(murmur2(key) & 0x7fffffff) % num_partitions`` (Java
``BuiltInPartitioner.partitionForKey`` over ``Utils.murmur2``). murmur2 is 32-bit arithmetic that wraps
around, which is what Arrow's unchecked ``multiply`` does on ``uint32`` arrays, so every step of the hash
runs once per column, in C, instead of once per key in Python. The seed and the number of words depend on
the key's length, so keys are grouped by length (``binary_length``, then ``filter``; one group and no
``filter`` when every key has the same length, the usual case). A group of N keys of length L is N*L
contiguous bytes in its data buffer; word j of every key is gathered into one uint32 column by strided
copies in C (a ``memoryview`` cast to 32-bit words when L is a multiple of 4 on a little-endian machine,
else four byte-wise slice copies, little-endian as Java reads them), the tail bytes likewise. The modulo
is ``p - (p / n) * n`` (integer ``divide``). Each group's partitions go back to their rows with
``replace_with_mask``; a group of fewer than ``_SMALL_GROUP`` keys (where the fixed cost of some 30
kernel calls is more than hashing a few keys) is hashed one key at a time by the scalar murmur2. Null
keys get -1. A pure function of its input: no sockets, threads or clocks.
"""

from __future__ import annotations

import sys

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka.producer.arrow.buffers import bool_scalar, full, int32_array, int_scalar
from sparkafka.producer.murmur2 import partition_for_key_py

__all__ = ["arrow_key_partitions"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_U32 = pa.uint32()
_MUL = int_scalar(_M, _U32)
_SHIFTS = {bits: int_scalar(bits, _U32) for bits in (8, 13, 15, 16, 24)}
_POSITIVE = int_scalar(0x7FFFFFFF, _U32)
_FALSE = bool_scalar(False)
_SMALL_GROUP = 16
"""Groups with fewer keys are hashed one key at a time (the kernels' fixed cost is higher)."""
_LITTLE = sys.byteorder == "little"


def _mix_word(h: pa.Array | None, seed: int, k: pa.Array) -> pa.Array:
    """One word step of murmur2: ``k *= m; k ^= k >> 24; k *= m; h *= m; h ^= k`` (``h`` None: the seed)."""
    k = pc.multiply(k, _MUL)
    k = pc.multiply(pc.bit_wise_xor(k, pc.shift_right(k, _SHIFTS[24])), _MUL)
    if h is None:
        return pc.bit_wise_xor(k, int_scalar((seed * _M) & 0xFFFFFFFF, _U32))
    return pc.bit_wise_xor(pc.multiply(h, _MUL), k)


class _Bytes:
    """The N*L bytes of a group of N keys of length L, read column-wise (strided copies in C)."""

    def __init__(self, data: pa.Buffer, start: int, count: int, length: int) -> None:
        self.cat = data.slice(start, count * length).to_pybytes()
        self.count = count
        self.length = length
        self.native = memoryview(self.cat).cast("I") if _LITTLE and length % 4 == 0 else None

    def byte(self, index: int) -> pa.Array:
        """Byte ``index`` of every key, as uint32."""
        column = pa.py_buffer(self.cat[index :: self.length])
        return pc.cast(pa.Array.from_buffers(pa.uint8(), self.count, [None, column]), _U32)

    def word(self, index: int) -> pa.Array:
        """Little-endian word ``index`` (bytes 4*index..4*index+3) of every key."""
        if self.native is not None:
            column = self.native[index :: self.length // 4].tobytes()
        else:
            i, step = 4 * index, self.length
            out = bytearray(4 * self.count)
            for b in range(4):  # byte b of the word is its b-th least significant byte
                out[(b if _LITTLE else 3 - b) :: 4] = self.cat[i + b :: step]
            column = bytes(out)
        return pa.Array.from_buffers(_U32, self.count, [None, pa.py_buffer(column)])


def _group_partitions(group: pa.Array, length: int, num_partitions: int) -> pa.Array:
    """Partitions (int32) of the keys of ``group``: large_binary, no nulls, every key ``length`` bytes."""
    count = len(group)
    if length == 0:  # murmur2 of the empty key is one number
        return full(count, partition_for_key_py(b"", num_partitions), pa.int32())
    _, offsets, data = group.buffers()
    start = int(pa.Array.from_buffers(pa.int64(), 1, [None, offsets], offset=group.offset)[0].as_py())
    source = _Bytes(data, start, count, length)
    seed = _SEED ^ length
    h: pa.Array | None = None
    for j in range(length // 4):
        h = _mix_word(h, seed, source.word(j))
    tail = length & 3
    if tail:
        i = length - tail
        t = source.byte(i)
        if tail >= 2:
            t = pc.bit_wise_xor(t, pc.shift_left(source.byte(i + 1), _SHIFTS[8]))
        if tail == 3:
            t = pc.bit_wise_xor(t, pc.shift_left(source.byte(i + 2), _SHIFTS[16]))
        t = pc.bit_wise_xor(t, int_scalar(seed, _U32)) if h is None else pc.bit_wise_xor(h, t)
        h = pc.multiply(t, _MUL)
    assert h is not None
    h = pc.bit_wise_xor(h, pc.shift_right(h, _SHIFTS[13]))
    h = pc.multiply(h, _MUL)
    h = pc.bit_wise_xor(h, pc.shift_right(h, _SHIFTS[15]))
    positive = pc.bit_wise_and(h, _POSITIVE)
    n = int_scalar(num_partitions, _U32)
    return pc.cast(pc.subtract(positive, pc.multiply(pc.divide(positive, n), n)), pa.int32())


def arrow_key_partitions(keys: pa.Array, num_partitions: int) -> pa.Array:
    """``partition_for_key`` of every key of a large_binary array (int32), -1 where the key is null.
    ``num_partitions`` must be in 1..2**31-1 (the caller checks)."""
    count = len(keys)
    valid = count - keys.null_count
    if not valid:
        return full(count, -1, pa.int32())
    lengths = pc.binary_length(keys)
    low, high = pc.min_max(lengths).values()
    if not keys.null_count and low.as_py() == high.as_py():
        return _group_partitions(keys, int(low.as_py()), num_partitions)
    out = full(count, -1, pa.int32())
    counts = pc.value_counts(pc.drop_null(lengths))
    for length, size in zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()):
        mask = pc.fill_null(pc.equal(lengths, int_scalar(length, lengths.type)), _FALSE)
        group = pc.filter(keys, mask)
        if size < _SMALL_GROUP:
            parts = int32_array([partition_for_key_py(k, num_partitions) for k in group.to_pylist()])
        else:
            parts = _group_partitions(group, int(length), num_partitions)
        out = pc.replace_with_mask(out, mask, parts)
    return out
