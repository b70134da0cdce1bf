"""The interface between the producer and the C code (``_c/_append.h``): the state classes the open-batch
append reads and changes have the same attributes in C and in their pure-Python twins, the Python
classes built on them add none of those again, and the C rule names the attribute it cannot use."""

from __future__ import annotations

import pytest

from sparkafka import accel
from sparkafka.producer import future, partitioner, producer_batch
from sparkafka.record import builder as builder_module
from sparkafka.record.builder import RecordBatchBuilder

TS = 1_700_000_000_000

# (the C type's name in sparkafka._accel, its pure-Python twin, the Python class built on it)
PAIRS = [
    ("BuilderState", builder_module._BuilderStatePy, RecordBatchBuilder),
    ("BatchState", producer_batch._BatchStatePy, producer_batch.ProducerBatch),
    ("FutureState", future._FutureStatePy, future.FutureRecordMetadata),
    ("StickyState", partitioner._StickyStatePy, partitioner.StickyPartitionInfo),
    ("PartitionerState", partitioner._PartitionerStatePy, partitioner.BuiltInPartitioner),
]


def _members(cls: type) -> set[str]:
    return {name for name, value in vars(cls).items() if type(value).__name__ == "member_descriptor"}


@pytest.mark.parametrize("name,twin,user", PAIRS, ids=[p[0] for p in PAIRS])
def test_c_types_and_python_twins_have_the_same_attributes(name: str, twin: type, user: type) -> None:
    fields = set(vars(twin)["__slots__"])
    assert fields == _members(twin)
    assert not set(vars(user).get("__slots__", ())) & fields  # nothing shadowed
    if accel.ACCEL is None:
        assert twin in user.__mro__
        pytest.skip("the C accelerator is not built")
    c_type = getattr(accel.ACCEL, name)
    assert _members(c_type) == fields
    assert c_type in user.__mro__ and twin not in user.__mro__


def test_the_c_rule_names_an_attribute_it_cannot_use() -> None:
    if accel.ACCEL is None:
        pytest.skip("the C accelerator is not built")
    builder = RecordBatchBuilder(None, 1000)
    assert builder.try_append(TS, None, b"v", None) > 0
    with pytest.raises(TypeError):  # the sizes are C numbers: only an int that fits goes in
        builder._pos = "61"  # type: ignore[assignment]
    with pytest.raises(OverflowError):
        builder._pos = 1 << 70
    # CPython's member setter leaves -1 behind a refused write, which the rule refuses in turn
    with pytest.raises(TypeError, match=r"RecordBatchBuilder\._pos holds -1"):
        builder.try_append_open(TS, None, b"v")
    builder._pos = 69
    builder._ratio_factor = "0"  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"RecordBatchBuilder\._ratio_factor holds '0'"):
        builder.try_append_open(TS, None, b"v")
    builder._ratio_factor = 0.0
    builder._pos = 10_000  # past the end of the buffer
    with pytest.raises(TypeError, match=r"\._pos holds 10000"):
        builder.try_append_open(TS, None, b"v")
    batch = producer_batch.ProducerBatch(("t", 0), RecordBatchBuilder(None, 1000), 0.0)
    batch.try_append(TS, None, b"v", None, None, 0.0)
    batch._callbacks = ()  # type: ignore[assignment]
    with pytest.raises(TypeError, match=r"ProducerBatch\._callbacks holds \(\)"):
        batch.try_append_open(TS, None, b"v", None, -1, 1)
    assert batch.record_count == 1 and batch.builder.record_count == 1  # nothing appended


def test_future_subclasses_free_their_fields_and_type_references() -> None:
    """FutureState gives a subclass without a __dict__, weak references or __del__ of its own a lean
    deallocation (``_c/_append.c``); every kind of subclass must still free what its futures hold,
    its own type reference included, and one with weak references must clear them."""
    import gc
    import sys
    import weakref

    class Slotted(future.FutureRecordMetadata):
        __slots__ = ()

    class WithDict(future.FutureRecordMetadata):
        pass

    class Weak(future.FutureRecordMetadata):
        __slots__ = ("__weakref__",)

    result = object()
    # FutureRecordMetadata's own count also falls when futures of earlier tests are collected: it may end
    # lower, never higher; the classes made here (Slotted takes the lean path from its base) end equal
    kinds: list[type] = [future.FutureRecordMetadata, Slotted, WithDict, Weak]
    gc.collect()
    before = [sys.getrefcount(k) for k in kinds] + [sys.getrefcount(result)]
    futures = [k(result, 3, TS, 1, 2) for k in kinds for _ in range(50)]
    assert all(f.create_timestamp == TS and f.relative_offset == 3 for f in futures)
    assert sys.getrefcount(result) == before[-1] + len(futures)
    ref = weakref.ref(futures[-1])
    del futures
    gc.collect()
    assert ref() is None
    after = [sys.getrefcount(k) for k in kinds] + [sys.getrefcount(result)]
    assert after[0] <= before[0] and after[1:] == before[1:]
