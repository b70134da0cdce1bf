"""A drained batch's header and CRC-32C: the Python references (``_finish_batch_py``,
``_set_producer_state_py`` in record/builder.py) and their C twins (``finish_batch``,
``patch_producer_state`` of ``_c/_batch.c``) write the same bytes and refuse the same inputs."""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka import accel
from sparkafka.errors import CorruptRecordBatchError, InvalidRecordInputError
from sparkafka.record import RecordBatchBuilder, decode_batch
from sparkafka.record.builder import _finish_batch_py, _set_producer_state_py, set_producer_state
from sparkafka.record.crc import crc32c, crc32c_python
from sparkafka.record.layout import HEADER, RECORD_BATCH_OVERHEAD, TRANSACTIONAL_FLAG

needs_c = pytest.mark.skipif(accel.ACCEL is None, reason="the C accelerator is not built")
TS = 1700000000000


def _finishers() -> list[Callable[..., memoryview]]:
    return [_finish_batch_py] + ([accel.ACCEL.finish_batch] if accel.ACCEL is not None else [])


def _records(n: int, size: int) -> bytearray:
    """A buffer with ``n`` records (a real builder's bytes) and room to spare."""
    builder = RecordBatchBuilder(None, 1 << 20)
    for i in range(n):
        builder.try_append(TS + i, b"k%d" % i, b"v" * size, None)
    records = bytes(memoryview(builder._buf)[RECORD_BATCH_OVERHEAD:builder._pos])
    return bytearray(RECORD_BATCH_OVERHEAD) + records + bytearray(b"\xee" * 100)


int16 = st.integers(-(1 << 15), (1 << 15) - 1)
int32 = st.integers(-(1 << 31), (1 << 31) - 1)
int64 = st.integers(-(1 << 63), (1 << 63) - 1)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 20), size=st.integers(0, 300), attributes=int16, pid=int64, epoch=int16, seq=int32,
       ts=int64, max_ts=int64)
def test_c_and_python_write_the_same_header_and_crc(n: int, size: int, attributes: int, pid: int, epoch: int,
                                                    seq: int, ts: int, max_ts: int) -> None:
    results = []
    for finish in _finishers():
        out = _records(n, size)
        end = len(out) - 100
        view = finish(out, end, attributes, n - 1, ts, max_ts, pid, epoch, seq, n, crc32c)
        assert len(view) == end and view.obj is out  # a view of the buffer itself, not a copy
        results.append(bytes(out))
        fields = HEADER.unpack_from(out)
        assert fields == (0, end - 12, -1, 2, crc32c(out[21:end]), attributes, n - 1, ts, max_ts, pid, epoch, seq, n)
        assert out[end:] == b"\xee" * 100  # nothing written past the batch
    assert len(set(results)) == 1


def test_the_finished_batch_decodes_and_the_crc_function_is_the_one_given() -> None:
    for finish in _finishers():
        out = _records(5, 40)
        end = len(out) - 100
        view = finish(out, end, 0, 4, TS, TS + 4, 7, 1, 3, 5, crc32c_python)
        batch = decode_batch(bytes(view))
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (7, 1, 3)
        assert [r.key for r in batch.records] == [b"k%d" % i for i in range(5)]
        seen: list[bytes] = []

        def fixed_crc(data: memoryview, seen: list[bytes] = seen) -> int:
            seen.append(bytes(data))
            return 0x12345678

        finish(out, end, 0, 4, TS, TS + 4, 7, 1, 3, 5, fixed_crc)
        assert seen == [bytes(out[21:end])]
        assert out[17:21] == b"\x12\x34\x56\x78"


@needs_c
@pytest.mark.parametrize(("index", "value", "field"), [
    (2, 1 << 15, "attributes"), (3, 1 << 31, "last_offset_delta"), (4, 1 << 63, "base_timestamp"),
    (5, -(1 << 63) - 1, "max_timestamp"), (6, 1 << 64, "producer_id"), (7, -(1 << 15) - 1, "producer_epoch"),
    (8, 1 << 31, "base_sequence"), (9, 1 << 31, "record_count"),
])
def test_c_refuses_a_field_out_of_range_naming_it_and_writes_nothing(index: int, value: int, field: str) -> None:
    out = _records(3, 10)
    before = bytes(out)
    args: list[Any] = [out, len(out) - 100, 0, 2, TS, TS, 1, 0, 0, 3, crc32c]
    args[index] = value
    assert accel.ACCEL is not None
    with pytest.raises(OverflowError, match=field):
        accel.ACCEL.finish_batch(*args)
    assert bytes(out) == before
    with pytest.raises(struct.error):
        _finish_batch_py(*args)


@pytest.mark.parametrize("producer_epoch", [1 << 15, -(1 << 15) - 1])
def test_close_turns_a_header_field_out_of_range_into_invalid_record_input(producer_epoch: int) -> None:
    builder = RecordBatchBuilder(bytearray(1024), 1024)
    builder.try_append(TS, b"k", b"v", None)
    with pytest.raises(InvalidRecordInputError, match="batch header field out of range"):
        builder.close(1, producer_epoch, 0, False)


def _patchers() -> list[Callable[..., str | None]]:
    def ref(batch: bytearray | memoryview, pid: int, epoch: int, seq: int, txn: bool, crc: object) -> str | None:
        return _set_producer_state_py(batch, pid, epoch, seq, txn)

    return [ref] + ([accel.ACCEL.patch_producer_state] if accel.ACCEL is not None else [])


@settings(max_examples=40, deadline=None)
@given(pid=int64, epoch=int16, seq=int32, txn=st.booleans(), was_txn=st.booleans())
def test_c_and_python_patch_the_same_producer_state(pid: int, epoch: int, seq: int, txn: bool, was_txn: bool) -> None:
    results = []
    for patch in _patchers():
        out = _records(4, 30)
        end = len(out) - 100
        _finish_batch_py(out, end, 3 | (TRANSACTIONAL_FLAG if was_txn else 0), 3, TS, TS + 3, 1, 0, 0, 4, crc32c)
        assert patch(memoryview(out)[:end], pid, epoch, seq, txn, crc32c) is None
        results.append(bytes(out))
        fields = HEADER.unpack_from(out)
        assert fields[5] == 3 | (TRANSACTIONAL_FLAG if txn else 0)
        assert fields[9:12] == (pid, epoch, seq)
        assert fields[4] == crc32c(out[21:end])
    assert len(set(results)) == 1


@pytest.mark.parametrize("damage", ["short", "magic", "length-short", "length-long"])
def test_patch_refuses_bytes_that_are_not_a_v2_batch_and_changes_nothing(damage: str) -> None:
    reasons = []
    for patch in _patchers():
        out = _records(2, 10)
        end = len(out) - 100
        _finish_batch_py(out, end, 0, 1, TS, TS, 1, 0, 0, 2, crc32c)
        batch = bytearray(out[:end])
        if damage == "short":
            batch = batch[:RECORD_BATCH_OVERHEAD - 1]
        elif damage == "magic":
            batch[16] = 1
        elif damage == "length-short":
            batch[8:12] = (RECORD_BATCH_OVERHEAD - 13).to_bytes(4, "big")
        else:
            batch[8:12] = (len(batch) - 11).to_bytes(4, "big")
        before = bytes(batch)
        reason = patch(batch, 9, 9, 9, True, crc32c)
        assert isinstance(reason, str)
        assert bytes(batch) == before
        reasons.append(reason)
        with pytest.raises(CorruptRecordBatchError, match=reason.split(" (")[0]):
            set_producer_state(batch, 9, 9, 9, True)
    assert len(set(reasons)) == 1
