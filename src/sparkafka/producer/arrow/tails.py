"""Record bodies for whole Arrow columns at once (the bulk path's encoder; needs ``pyarrow``).

How it works: a v2 record is ``length, attributes, timestampDelta, offsetDelta`` followed by what this module
calls its *tail*: ``keyLength, key, valueLength, value, headerCount, headers`` (Java ``DefaultRecord``). Only the first
four fields depend on where the record lands in its batch; the tail depends on the row alone. ``encode_tails``
builds the tails of every row of an Arrow batch with Arrow compute kernels (no Python object per row): lengths
become zigzag varints by ``take`` from a table of ready-made encodings (index ``length + 1``, so a null's -1
is index 0), and the pieces are concatenated per row by ``binary_join_element_wise``. When the C accelerator
is built, rows without headers (the common case) are encoded instead by one C call over the columns' own
buffers (``_accel.encode_tails_kv``: two passes, without the GIL, no intermediate arrays), and rows with
headers likewise by ``_accel.encode_tails_kvh`` over the list offsets and the header items' key and value
columns (the kernels cost ~7x as much per row); the tests check both give the same bytes. Without the
accelerator, headers (``list<struct<key, value>>``) are encoded per header the same way as keys and values,
then joined per row with ``binary_join`` over a list array built on the column's own offsets. The result is one
``large_binary`` array: its offsets and data buffers are what the batch builder
(``RecordBatchBuilder.append_tails``) copies into batches, so a row's bytes are written once. Pure functions
of their inputs: no sockets, threads or clocks.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc

from sparkafka.accel import ACCEL
from sparkafka.errors import InvalidRecordInputError
from sparkafka.producer.arrow.buffers import binary_array, binary_scalar, int_scalar
from sparkafka.record._varint import zigzag_varint

__all__ = ["as_large_binary", "column_buffers", "encode_tails", "tail_buffers"]

_EMPTY = binary_scalar(b"")
_NO_HEADERS = binary_scalar(b"\x00")
_NULL_LENGTH = binary_scalar(b"\x01")
"""The varint of -1: a null key."""
_INT64 = pa.int64()
_ZERO = int_scalar(0, _INT64)
_ONE = int_scalar(1, _INT64)
_MAX_TABLE = 1 << 31
"""Lengths are int32 in the record format."""
_TABLE_SIZE = 1 << 14


class _VarintTable:
    """``table[i]`` is the zigzag varint of ``i - 1`` for ``i < 2**14`` (lengths up to 16 KB - 2). Longer
    lengths (each such row holds >= 16 KB, so there are few) are encoded one by one in Python: a table
    grown to the longest value would cost seconds and hundreds of MB for a value of a few MB."""

    def __init__(self) -> None:
        self._table = binary_array([zigzag_varint(i - 1) for i in range(_TABLE_SIZE)])
        self._size = int_scalar(_TABLE_SIZE, _INT64)

    def encode(self, lengths: pa.Array) -> pa.Array:
        """The varint of each length, with null lengths encoded as -1 (``b"\\x01"``)."""
        index = pc.fill_null(pc.add(pc.cast(lengths, _INT64), _ONE), _ZERO)
        table = self._table
        top = pc.max(index).as_py() if len(index) else 0
        if top < _TABLE_SIZE:
            return pc.take(table, index)
        if top >= _MAX_TABLE:
            raise InvalidRecordInputError(f"a key, value or header is {top - 1} bytes; the limit is 2^31-1")
        big = pc.greater_equal(index, self._size)
        out = pc.take(table, pc.if_else(big, _ZERO, index))
        long_lengths = pc.filter(index, big).to_pylist()
        return pc.replace_with_mask(out, big, binary_array([zigzag_varint(i - 1) for i in long_lengths]))


_VARINTS = _VarintTable()

_c_tails: Callable[..., tuple[bytearray, bytearray]] | None = getattr(ACCEL, "encode_tails_kv", None)
"""``sparkafka._accel.encode_tails_kv`` when the accelerator is built."""
_c_tails_headers: Callable[..., tuple[bytearray, bytearray]] | None = getattr(ACCEL, "encode_tails_kvh", None)
"""``sparkafka._accel.encode_tails_kvh`` (the same with a headers column) when the accelerator is built."""


def column_buffers(arr: pa.Array) -> tuple[pa.Buffer, pa.Buffer | bytes, pa.Buffer | None, int, bool] | None:
    """``(offsets, data, validity or None, first row, wide)`` of a plain binary or string array (64-bit
    offsets when ``wide``), or None for other layouts (dictionary, view)."""
    t = arr.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        wide = True
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        wide = False
    else:
        return None
    validity, offsets, data = arr.buffers()
    return offsets, (b"" if data is None else data), (validity if arr.null_count else None), arr.offset, wide


def _key_value_buffers(keys: pa.Array | None, values: pa.Array) -> tuple[tuple[object, ...], tuple[object, ...]] | None:
    """The C calls' arguments for the key column (a null key column for ``keys=None``) and the value
    column, or None if either has a layout the C code does not read."""
    vcol = column_buffers(values)
    if vcol is None:
        return None
    if keys is None:
        return (None, None, None, 0, True), vcol
    kcol = column_buffers(keys)
    return None if kcol is None else (kcol, vcol)


def _encode_tails_c(keys: pa.Array | None, values: pa.Array) -> pa.Array | None:
    """``encode_tails`` without headers by the accelerator, or None if it is missing or a column has
    another layout."""
    if _c_tails is None:
        return None
    columns = _key_value_buffers(keys, values)
    if columns is None:
        return None
    kcol, vcol = columns
    n = len(values)
    try:
        offsets, data = _c_tails(*kcol, *vcol, n)
    except ValueError as exc:  # a length over 2**31 - 1 (the buffers come from Arrow, so nothing else)
        raise InvalidRecordInputError(f"cannot encode the records: {exc}") from None
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _encode_tails_c_headers(keys: pa.Array | None, values: pa.Array, headers: pa.Array) -> pa.Array | None:
    """``encode_tails`` with headers by the accelerator, or None if it is missing or a column has another
    layout (dictionary or view children, null header structs: the Arrow kernels handle those)."""
    if _c_tails_headers is None or _c_tails is None:
        return None
    t = headers.type
    if pa.types.is_list(t):
        wide_list = False
    elif pa.types.is_large_list(t):
        wide_list = True
    else:
        return None
    items = headers.values  # every header of the unsliced column: the list offsets point into it
    if items.null_count:
        return None
    kind = items.type
    hk = column_buffers(items.field(kind.get_field_index("key")))
    hv = column_buffers(items.field(kind.get_field_index("value")))
    columns = _key_value_buffers(keys, values)
    if hk is None or hv is None or columns is None:
        return None
    kcol, vcol = columns
    validity, list_offsets = headers.buffers()[:2]
    n = len(values)
    try:
        offsets, data = _c_tails_headers(*kcol, *vcol, list_offsets, validity if headers.null_count else None,
                                         headers.offset, wide_list, *hk, *hv, len(items), n)
    except ValueError as exc:  # a length over 2**31 - 1 (the buffers come from Arrow, so nothing else)
        raise InvalidRecordInputError(f"cannot encode the records: {exc}") from None
    return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def decode_dictionary(arr: pa.Array) -> pa.Array:
    """A dictionary-encoded array as a plain one (others as they are). Arrow has no ``take`` kernel for
    string/binary views, so a dictionary of views is decoded with its values cast to large types."""
    if not pa.types.is_dictionary(arr.type):
        return arr
    values = arr.dictionary
    if pa.types.is_string_view(values.type) or pa.types.is_binary_view(values.type):
        large = pa.large_string() if pa.types.is_string_view(values.type) else pa.large_binary()
        arr = pa.DictionaryArray.from_arrays(arr.indices, values.cast(large))
    return arr.dictionary_decode()


def as_large_binary(arr: pa.Array) -> pa.Array:
    """The same bytes as a ``large_binary`` array (dictionary-decoded; strings are UTF-8 already)."""
    arr = decode_dictionary(arr)
    if not pa.types.is_large_binary(arr.type):
        arr = arr.cast(pa.large_binary())
    return arr


def _length_and_bytes(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(varint of each length or -1, the bytes with nulls as empty)."""
    data = as_large_binary(arr)
    return _VARINTS.encode(pc.binary_length(data)), pc.fill_null(data, _EMPTY)


def _encode_headers(col: pa.Array) -> pa.Array:
    """Per row: header count varint + every header (``keyLength key valueLength value``)."""
    if pa.types.is_large_list(col.type):
        list_type = pa.LargeListArray
    else:
        list_type = pa.ListArray
    # ``values`` holds every header of the unsliced column: take only this slice's (its offsets are
    # positions in the unsliced one), so slicing a big column into many parts stays linear
    offsets = col.offsets
    first = offsets[0].as_py()
    items = col.values.slice(first, offsets[-1].as_py() - first)
    if first:
        offsets = pc.subtract(offsets, int_scalar(first, offsets.type))
    kind = items.type
    children = items.flatten()
    keys = children[kind.get_field_index("key")]
    values = children[kind.get_field_index("value")]
    key_len, key_bytes = _length_and_bytes(keys)
    value_len, value_bytes = _length_and_bytes(values)
    pieces = pc.binary_join_element_wise(key_len, key_bytes, value_len, value_bytes, _EMPTY)
    # No null mask here: ``from_arrays`` refuses one with the offsets of a sliced column. A null row may
    # still span headers (Arrow allows it), so its joined bytes are blanked afterwards.
    joined = pc.binary_join(list_type.from_arrays(offsets, pieces), _EMPTY)
    if col.null_count:
        joined = pc.if_else(col.is_valid(), joined, _EMPTY)
    counts = _VARINTS.encode(pc.fill_null(pc.cast(pc.list_value_length(col), _INT64), _ZERO))
    return pc.binary_join_element_wise(counts, joined, _EMPTY)


def encode_tails(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None = None) -> pa.Array:
    """The tail of each row's record (see the module docstring) as a ``large_binary`` array.

    ``keys`` and ``values`` are string or binary arrays (any width, dictionary-encoded or not; nulls
    are null keys/values), ``headers`` a ``list<struct<key: string, value: binary>>`` array whose
    header keys are not null (checked by the caller). All arrays have the same length.
    """
    fast = _encode_tails_c(keys, values) if headers is None else _encode_tails_c_headers(keys, values, headers)
    if fast is not None:
        return fast
    parts: list[pa.Array | pa.Scalar] = []
    if keys is None:
        parts.append(_NULL_LENGTH)
    else:
        parts += _length_and_bytes(keys)
    parts += _length_and_bytes(values)
    parts.append(_NO_HEADERS if headers is None else _encode_headers(headers))
    tails = pc.binary_join_element_wise(*parts, _EMPTY)
    if not isinstance(tails, pa.Array):  # every part a scalar cannot happen (values is an array)
        raise TypeError("encode_tails needs array inputs")
    return tails


def tail_buffers(tails: pa.Array) -> tuple[memoryview, memoryview, int]:
    """``(offsets, data, first)`` of a ``large_binary`` array: row ``i``'s bytes are
    ``data[offsets[first + i]:offsets[first + i + 1]]`` (``offsets`` is an int64 view, Arrow's
    little-endian layout read in native order: the supported platforms are little-endian)."""
    _, offsets, data = tails.buffers()
    return (memoryview(offsets).cast("B").cast("q"),
            memoryview(data).cast("B") if data is not None else memoryview(b""), tails.offset)
