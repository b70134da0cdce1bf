"""murmur2 against Java's test vectors (``UtilsTest.testMurmur2``) and a straight transliteration; bulk == scalar."""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sparkafka.errors import InvalidRecordInputError
from sparkafka.producer.murmur2 import murmur2, murmur2_partitions, partition_for_key, to_positive

JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

# key: (murmur2, toPositive, %3, %6, %10, %12)
EXTRA = {
    b"": (275646681, 275646681, 0, 3, 1, 9),
    b"a": (-1563381124, 584102524, 1, 4, 4, 4),
    b"key1": (28543940, 28543940, 2, 2, 0, 8),
    b"hello": (2132663229, 2132663229, 0, 3, 9, 9),
    b"test": (716234879, 716234879, 2, 5, 9, 11),
    b"21": (-973932308, 1173551340, 0, 0, 0, 0),
    b"foobar": (-790332482, 1357151166, 0, 0, 6, 6),
}


def _int32(x: int) -> int:
    x &= 0xFFFFFFFF
    return x - (1 << 32) if x >= 1 << 31 else x


def reference_murmur2(data: bytes) -> int:
    """Line-by-line Java semantics with explicit int32 wrapping (slow, obviously right)."""
    length = len(data)
    m, r = 0x5BD1E995, 24
    h = _int32(0x9747B28C ^ length)
    for i in range(length // 4):
        i4 = i * 4
        k = (data[i4] & 0xFF) + ((data[i4 + 1] & 0xFF) << 8) + ((data[i4 + 2] & 0xFF) << 16) + \
            ((data[i4 + 3] & 0xFF) << 24)
        k = _int32(k * m)
        k ^= (k & 0xFFFFFFFF) >> r
        k = _int32(k * m)
        h = _int32(h * m)
        h = _int32(h ^ k)
    tail = length % 4
    base = length & ~3
    if tail == 3:
        h = _int32(h ^ ((data[base + 2] & 0xFF) << 16))
    if tail >= 2:
        h = _int32(h ^ ((data[base + 1] & 0xFF) << 8))
    if tail >= 1:
        h = _int32(h ^ (data[base] & 0xFF))
        h = _int32(h * m)
    h = _int32(h ^ ((h & 0xFFFFFFFF) >> 13))
    h = _int32(h * m)
    h = _int32(h ^ ((h & 0xFFFFFFFF) >> 15))
    return h


@pytest.mark.parametrize(("key", "expected"), sorted(JAVA_VECTORS.items()))
def test_java_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert reference_murmur2(key) == expected


@pytest.mark.parametrize(("key", "row"), sorted(EXTRA.items()))
def test_extra_vectors_and_partitions(key: bytes, row: tuple[int, ...]) -> None:
    hashed, positive, p3, p6, p10, p12 = row
    assert murmur2(key) == hashed
    assert to_positive(hashed) == positive
    assert [partition_for_key(key, n) for n in (3, 6, 10, 12)] == [p3, p6, p10, p12]


def test_to_positive_is_a_mask_not_abs() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(1 << 31)) == 0


@given(st.binary(max_size=80))
def test_matches_reference(data: bytes) -> None:
    assert murmur2(data) == reference_murmur2(data)
    assert murmur2(bytearray(data)) == murmur2(memoryview(data)) == murmur2(data)


@given(st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60), st.integers(1, 50))
def test_bulk_matches_scalar(keys: list[bytes | None], n: int) -> None:
    expected = [-1 if k is None else partition_for_key(k, n) for k in keys]
    assert murmur2_partitions(keys, n) == expected


def test_bulk_large_groups_and_chunking() -> None:
    rng = random.Random(7)
    same = [rng.randbytes(8) for _ in range(70000)]  # one length, more than one 65536-key chunk
    assert murmur2_partitions(same, 12) == [partition_for_key(k, 12) for k in same]
    mixed: list[bytes | None] = [os.urandom(rng.randint(0, 41)) for _ in range(3000)] + [None] * 5
    rng.shuffle(mixed)
    assert murmur2_partitions(mixed, 7) == [-1 if k is None else partition_for_key(k, 7) for k in mixed]
    assert murmur2_partitions([], 3) == []


def test_bad_partition_count() -> None:
    with pytest.raises(InvalidRecordInputError, match="num_partitions"):
        partition_for_key(b"k", 0)
    with pytest.raises(InvalidRecordInputError, match="num_partitions"):
        murmur2_partitions([b"k"], -1)
