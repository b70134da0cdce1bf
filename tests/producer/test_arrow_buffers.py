"""The buffer-built Arrow arrays and scalars (``producer/arrow/buffers.py``) equal what ``pa.array`` and
``pa.scalar`` make from the same Python values, and bad input is refused as those refuse it."""

from __future__ import annotations

import pyarrow as pa
import pytest

from sparkafka.producer.arrow.buffers import binary_array, binary_scalar, bool_scalar, full, int32_array, int_scalar

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


@pytest.mark.parametrize("type_", INT_TYPES, ids=str)
def test_int_scalar_equals_pa_scalar_at_both_ends_of_the_type(type_: pa.DataType) -> None:
    width = type_.bit_width
    if pa.types.is_signed_integer(type_):
        low, high = -(1 << (width - 1)), (1 << (width - 1)) - 1
    else:
        low, high = 0, (1 << width) - 1
    for value in (low, low + 1, 0, 1, high - 1, high):
        made = int_scalar(value, type_)
        assert made.type == type_ and made.as_py() == value
        assert made.equals(pa.scalar(value, type_))
    with pytest.raises(OverflowError):
        int_scalar(high + 1, type_)
    with pytest.raises(OverflowError):
        int_scalar(low - 1, type_)


def test_int_scalar_needs_an_integer_type() -> None:
    with pytest.raises(TypeError, match="integer type, got double"):
        int_scalar(1, pa.float64())


def test_full_and_int32_array_equal_pa_array() -> None:
    assert full(5, -1, pa.int32()).equals(pa.array([-1] * 5, pa.int32()))
    assert full(0, 7, pa.int64()).equals(pa.array([], pa.int64()))
    assert full(3, 2**32 - 1, pa.uint32()).equals(pa.array([2**32 - 1] * 3, pa.uint32()))
    values = [0, 1, -1, 2**31 - 1, -(2**31), 12345]
    made = int32_array(values)
    assert made.equals(pa.array(values, pa.int32())) and made.null_count == 0
    assert int32_array([]).equals(pa.array([], pa.int32()))
    with pytest.raises(OverflowError):
        int32_array([2**31])


@pytest.mark.parametrize("type_", [pa.binary(), pa.large_binary()], ids=str)
def test_binary_array_and_scalar_equal_pa_array(type_: pa.DataType) -> None:
    values = [b"", b"\x00", b"abc", bytes(range(256)), b"", b"z" * 70000]
    made = binary_array(values, type_)
    assert made.type == type_ and made.equals(pa.array(values, type_)) and made.to_pylist() == values
    assert binary_array([], type_).equals(pa.array([], type_))
    for value in values:
        assert binary_scalar(value, type_).equals(pa.scalar(value, type_))


def test_binary_defaults_to_large_binary_and_refuses_other_types() -> None:
    assert binary_array([b"a"]).type == pa.large_binary()
    assert binary_scalar(b"a").type == pa.large_binary()
    with pytest.raises(TypeError, match="binary or large_binary, got string"):
        binary_array([b"a"], pa.string())


def test_bool_scalar() -> None:
    assert bool_scalar(True).equals(pa.scalar(True)) and bool_scalar(False).equals(pa.scalar(False))
