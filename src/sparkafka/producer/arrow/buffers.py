"""Arrow arrays and scalars built from buffers, so the bulk path never makes pyarrow import pandas.

How it works: pyarrow imports pandas, when it is installed, the first time it converts Python objects to
Arrow: ``pa.array`` (even of an empty list or a numpy array), ``pa.scalar``, and a Python number given to a
compute function (``pc.equal(a, -1)``, ``a.fill_null(0)``), all of which go through its pandas check. That
import costs ~120 ms of CPU in every fresh process that sends Arrow batches. (A Spark Python worker of
pyspark 4.3 imports pandas anyway, but only after the sink's ``write`` returned: its
``write_into_data_source`` builds the commit message with ``pa.array``. So there a fresh worker's first
task sends its rows before that import instead of after it.)

Arrays made with ``pa.Array.from_buffers`` over bytes packed here, and scalars taken from such arrays
(``array[0]``), are the same values without that check: ``int_scalar``, ``binary_scalar`` and
``bool_scalar`` are what ``pa.scalar`` would give, ``int32_array`` and ``binary_array`` what ``pa.array``
would, ``full`` what ``pa.nulls(n, type).fill_null(value)`` would.
``tests/integration/test_arrow_no_pandas.py`` runs the bulk path in a fresh process and fails if pandas
got imported. Pure functions: no sockets, threads or clocks.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from itertools import accumulate

import pyarrow as pa

__all__ = ["binary_array", "binary_scalar", "bool_scalar", "full", "int32_array", "int_scalar"]

_LITTLE = sys.byteorder == "little"


def _int_bytes(value: int, type_: pa.DataType) -> bytes:
    if not pa.types.is_integer(type_):
        raise TypeError(f"int_scalar needs an integer type, got {type_}")
    return value.to_bytes(type_.bit_width // 8, "little", signed=pa.types.is_signed_integer(type_))


def int_scalar(value: int, type_: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, type_)`` for an integer type (``OverflowError`` if it does not fit)."""
    return pa.Array.from_buffers(type_, 1, [None, pa.py_buffer(_int_bytes(value, type_))])[0]


def bool_scalar(value: bool) -> pa.Scalar:
    """``pa.scalar(value)`` for a bool."""
    return pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(b"\x01" if value else b"\x00")])[0]


def full(count: int, value: int, type_: pa.DataType) -> pa.Array:
    """``count`` copies of ``value`` (``pa.nulls(count, type_).fill_null(value)``) for an integer type."""
    return pa.Array.from_buffers(type_, count, [None, pa.py_buffer(_int_bytes(value, type_) * count)])


def int32_array(values: Sequence[int]) -> pa.Array:
    """``pa.array(values, pa.int32())`` for ints that fit (``OverflowError`` otherwise)."""
    packed = array("i", values)
    if not _LITTLE:
        packed.byteswap()
    return pa.Array.from_buffers(pa.int32(), len(packed), [None, pa.py_buffer(packed)])


def binary_array(values: Sequence[bytes], type_: pa.DataType | None = None) -> pa.Array:
    """``pa.array(values, type_)`` for ``binary`` or ``large_binary`` (the default) without nulls."""
    type_ = pa.large_binary() if type_ is None else type_
    if pa.types.is_large_binary(type_):
        code = "q"
    elif pa.types.is_binary(type_):
        code = "i"
    else:
        raise TypeError(f"binary_array needs binary or large_binary, got {type_}")
    offsets = array(code, accumulate(map(len, values), initial=0))
    if not _LITTLE:
        offsets.byteswap()
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(offsets), pa.py_buffer(b"".join(values))])


def binary_scalar(value: bytes, type_: pa.DataType | None = None) -> pa.Scalar:
    """``pa.scalar(value, type_)`` for ``binary`` or ``large_binary`` (the default)."""
    return binary_array([value], type_)[0]
