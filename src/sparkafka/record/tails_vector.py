"""``RecordBatchBuilder.append_tails`` for many rows at once with numpy (the pure-Python path, large batches).

How it works: the bulk path hands the builder record *tails* (``producer/arrow/tails.py``: everything of a v2
record after its offset delta), and the builder puts ``length, attributes, timestampDelta, offsetDelta`` in
front of each. Without the C accelerator ``RecordBatchBuilder._append_tails_py`` does that one row at a time
(~270 ns a row). When a batch has room for a few hundred rows and nothing is compressed, ``encode_tails``
does it with a fixed number of numpy operations instead: the rows' sizes and their running total give how
many fit (the same rule: the first record of an empty batch always fits, every later one must keep the
batch's size within its limit), then the header bytes of all of them are laid out as a padded table,
scattered to their places, and the tails fill the gaps in order. Varints of values below 8,192 (offset
deltas and record lengths of batches up to that many records and records up to 8 KB) come from a lookup
table, and a header of at most 8 bytes is built as one int64 per row; other rows take the general table of
varint bytes. A call costs ~17 us plus ~80 ns a row, so the builder uses it only when a call brings at
least ``MIN_ROWS`` rows and the batch has room for as many; with fewer the per-row loop is faster.
A bulk call that opens new batches (``RecordAccumulator.append_tails``) asks ``encode_run`` for them, up to
about 1 MiB of rows at a time: batch ends from running totals, then every header of the run in one pass, so
16 KB batches (~140 rows, where ``encode_tails`` costs as much as the loop) pay the fixed cost once per
window, not per batch.
The result is byte-identical to the loop and to the C accelerator (``tests/record/test_tails_vector.py``,
``tests/producer/test_bulk_run_plan.py``).
numpy is optional: ``numpy_module()`` is None without it, and the loop does everything. Pure functions of
their inputs: no sockets, threads or clocks.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from sparkafka.record.layout import MAX_RECORD_OVERHEAD, RECORD_BATCH_OVERHEAD

__all__ = ["MIN_ROWS", "RUN_MIN_ROWS", "encode_run", "encode_tails", "numpy_module"]

MIN_ROWS = 256
"""Use ``encode_tails`` for calls of at least this many rows into a batch with room for as many like the
first. Measured per call with 118-byte records (loop / numpy): 34 rows (4 KB) 10.5 / 20.9 us, 104 rows
(12 KB) 27.1 / 26.6, 138 rows (16 KB) 36.7 / 30.4, 277 rows (32 KB) 70.1 / 40.9, 555 rows (64 KB) 143 / 63.
Alone numpy wins from ~104 rows, but with the Sender thread running its margin at 138 rows vanished (34
against 36 us per call), and on Apache Kafka the pure-Python bulk path at 16 KB ran 3-7% slower with it
(three interleaved runs each): so 16 KB batches keep the loop."""


RUN_MIN_ROWS = 256
"""Use ``encode_run`` for the rows of a bulk call that go into new batches when there are at least this many
(about two 16 KB batches of 100-byte rows)."""

_numpy: ModuleType | None = None
_looked = False


def numpy_module() -> ModuleType | None:
    """numpy if it can be imported, else None (looked up once: importing it costs ~0.1 s, so the bulk path
    asks before it takes any lock, ``producer/arrow/bulk.py``). A numpy that fails to import for any reason
    counts as missing: the loop does the work."""
    global _numpy, _looked
    if not _looked:
        _looked = True
        try:
            import numpy
        except Exception:
            return None
        _numpy = numpy
    return _numpy


_SMALL = 8192
"""Non-negative values below this have zigzag varints of at most two bytes (``_small_varints``)."""

_small: tuple[Any, Any] | None = None


def _small_varints(np: Any) -> tuple[Any, Any]:
    """``(words, sizes)`` for the values ``0 .. _SMALL - 1``: each one's zigzag varint as the low bytes of a
    little-endian int64, and its length in bytes. Built once; a lookup replaces a dozen array operations."""
    global _small
    if _small is None:
        u = np.arange(_SMALL, dtype=np.int64) * 2
        two = u >= 0x80
        words = np.where(two, (u & 0x7F) | 0x80 | ((u >> 7) << 8), u)
        _small = words, (1 + two).astype(np.int64)
    return _small


def _varint_bytes(np: Any, values: Any, sizes: Any) -> tuple[Any, Any]:
    """``(bytes, valid)``: the zigzag varints of the non-negative ``values`` (whose varint ``sizes`` are
    given) as a ``(rows, longest)`` table, and which of its cells belong to each varint (the first ``size``
    of its row)."""
    u = values * 2
    width = int(sizes.max())
    table = np.empty((len(values), width), np.uint8)
    valid = np.empty((len(values), width), np.bool_)
    for k in range(width):
        rest = u >> (7 * k)  # the bits from this byte on
        table[:, k] = (rest & 0x7F) | ((rest >= 0x80) << 7)
        valid[:, k] = rest > 0 if k else True
    return table, valid


def _sizes(np: Any, values: Any) -> Any:
    """Bytes of the zigzag varint of each non-negative value (values below 2**31)."""
    return 1 + (values >= 64) + (values >= 8192) + (values >= 1 << 20) + (values >= 1 << 27)


def _word_table(np: Any, header: Any, widths: Any, starts: Any) -> tuple[Any, Any, Any]:
    """``(table, valid, places)`` of headers held as one little-endian int64 each, ``widths`` bytes long,
    for records starting at ``starts``: the bytes, which of them belong to the header, and where they go."""
    table = header.astype("<i8", copy=False).view(np.uint8).reshape(len(header), 8)
    return table, np.arange(8) < widths[:, None], starts[:, None] + np.arange(8)


def _scatter(np: Any, table: Any, valid: Any, places: Any, size: int, tails: Any) -> Any:
    """``size`` bytes of records: the ``valid`` cells of the header ``table`` at their ``places``, and the
    ``tails`` (one after the other) in the cells left between them."""
    out = np.empty(size, np.uint8)
    at = places[valid]
    out[at] = table[valid]
    tail_cells = np.ones(size, np.bool_)
    tail_cells[at] = False
    out[tail_cells] = tails
    return out


def encode_tails(np: Any, offsets: memoryview, data: memoryview, start: int, stop: int, n: int, tsb: bytes,
                 estimate: int, uncompressed: int, limit: int) -> tuple[int, Any]:
    """The records of tail rows ``[start, stop)`` (``offsets``: int64 view; row ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``) that fit a batch without compression holding ``n`` records,
    ``uncompressed`` bytes of them and estimated at ``estimate`` bytes, with write limit ``limit``; each
    record gets offset delta ``n, n + 1, ...`` and the timestamp delta encoded as ``tsb``. Returns
    ``(count, records)``: how many fit and their encoded bytes (a numpy uint8 array)."""
    off = np.frombuffer(offsets, np.int64)
    words, small_sizes = _small_varints(np)
    fixed = 1 + len(tsb)  # attributes + timestampDelta
    room_after = limit - RECORD_BATCH_OVERHEAD - uncompressed  # the rows after the first one keep within this
    # rows to look at: twice what the first row's size suggests, more while every one of them fits
    first = int(off[start + 1] - off[start]) + fixed + 3
    want = max(16, 2 * max(0, limit - estimate) // first + 16)
    while True:
        rows = min(stop - start, want)
        lens = off[start + 1:start + rows + 1] - off[start:start + rows]
        deltas = np.arange(n, n + rows, dtype=np.int64)
        small = n + rows <= _SMALL and int(lens.max()) + fixed + 2 < _SMALL  # every varint from the tables
        delta_sizes = small_sizes[deltas] if small else _sizes(np, deltas)
        body = lens + fixed + delta_sizes
        body_sizes = small_sizes[body] if small else _sizes(np, body)
        total = body + body_sizes
        cum = np.cumsum(total)
        if n == 0 or estimate + int(total[0]) <= limit:
            count = max(1, int(np.searchsorted(cum, room_after, side="right")))
        else:
            count = 0
        if count < rows or rows == stop - start:
            break
        want *= 2
    if not count:
        return 0, None
    body, deltas = body[:count], deltas[:count]
    written = int(cum[count - 1])
    starts = np.empty(count, np.int64)
    starts[0] = 0
    starts[1:] = cum[:count - 1]
    # every record's header (length varint, attributes, timestampDelta, offsetDelta) as one row of a padded
    # table; ``valid`` marks the cells that are bytes of the record
    if small and fixed <= 4:  # at most 2 + 4 + 2 bytes: each header is one little-endian int64
        length_sizes = body_sizes[:count]
        header = words[body] | (words[deltas] << ((length_sizes + fixed) << 3))
        middle = int.from_bytes(b"\x00" + tsb, "little")
        if middle:  # attributes and timestampDelta are zero bytes for rows of the batch's first timestamp
            header |= middle << (length_sizes << 3)
        table, valid, places = _word_table(np, header, length_sizes + fixed + delta_sizes[:count], starts)
    else:
        length, length_valid = _varint_bytes(np, body, body_sizes[:count])
        delta, delta_valid = _varint_bytes(np, deltas, delta_sizes[:count])
        middle_bytes = np.frombuffer(b"\x00" + tsb, np.uint8)
        table = np.concatenate([length, np.broadcast_to(middle_bytes, (count, fixed)), delta], axis=1)
        valid = np.concatenate([length_valid, np.ones((count, fixed), np.bool_), delta_valid], axis=1)
        places = starts[:, None] + (np.cumsum(valid, axis=1) - 1)
    return count, _scatter(np, table, valid, places, written,
                           np.frombuffer(data, np.uint8)[int(off[start]):int(off[start + count])])


def encode_run(np: Any, offsets: memoryview, data: memoryview, start: int, stop: int,
               limit: int) -> list[tuple[int, memoryview]] | None:
    """The tail rows ``[start, stop)`` laid out into consecutive new batches without compression, each with
    write limit ``limit`` and every row at the batch's first timestamp: per batch ``(count, records)``, its
    number of rows and the bytes of its records, exactly what ``RecordBatchBuilder.append_tails`` would give
    batch after batch. None when some row needs more than this does (a record length or offset delta past two
    varint bytes, a row whose batch would need a buffer longer than ``limit``: 61 + 21 + its tail): the caller
    then goes batch by batch.

    One pass over the whole run instead of one per batch: with 16 KB batches (~140 rows) ``encode_tails``
    spends most of its time on fixed costs. The batch boundaries come first. Every row's record size is
    known for both offset-delta widths (one byte below 64, two from there), so their running totals give
    each batch's end with one or two binary searches; then all the headers are written at once."""
    off = np.frombuffer(offsets, np.int64)
    words, small_sizes = _small_varints(np)
    rows = stop - start
    lens = off[start + 1:stop + 1] - off[start:stop]
    room = limit - RECORD_BATCH_OVERHEAD  # every record of a batch, the first included, unless it is alone
    longest = int(lens.max())
    # a row that needs a larger buffer than ``limit`` would get one, and a longer write limit (RecordAccumulator)
    if longest + 4 >= _SMALL or RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + longest > limit:
        return None
    if room // (int(lens.min()) + 5) >= _SMALL:  # the smallest records could fill a batch past 8,192 of them
        return None
    # Record sizes with a one-byte offset delta (its first 64 rows) and a two-byte one, and their running totals.
    body1 = lens + 3
    sums1 = np.zeros(rows + 1, np.int64)
    np.cumsum(body1 + small_sizes[body1], out=sums1[1:])
    body2 = lens + 4
    sums2 = np.zeros(rows + 1, np.int64)
    np.cumsum(body2 + small_sizes[body2], out=sums2[1:])
    ends: list[int] = []
    first = 0
    while first < rows:
        mid = min(first + 64, rows)
        head = int(sums1[mid] - sums1[first])
        if head > room:  # the batch ends within its first 64 rows
            end = int(np.searchsorted(sums1, sums1[first] + room, side="right")) - 1
        else:
            end = int(np.searchsorted(sums2, room - head + sums2[mid], side="right")) - 1
        end = max(first + 1, min(end, rows))
        if end - first > _SMALL:
            return None
        ends.append(end)
        first = end
    # every row's offset delta: its index minus its batch's first
    bounds = np.array([0, *ends], np.int64)
    counts = np.diff(bounds)
    deltas = np.arange(rows, dtype=np.int64) - np.repeat(bounds[:-1], counts)
    delta_sizes = small_sizes[deltas]
    body = lens + 2 + delta_sizes
    length_sizes = small_sizes[body]
    positions = np.zeros(rows + 1, np.int64)
    np.cumsum(body + length_sizes, out=positions[1:])
    header = words[body] | (words[deltas] << ((length_sizes + 2) << 3))
    table, valid, places = _word_table(np, header, length_sizes + 2 + delta_sizes, positions[:-1])
    out = _scatter(np, table, valid, places, int(positions[-1]),
                   np.frombuffer(data, np.uint8)[int(off[start]):int(off[stop])])
    cuts = positions[bounds].tolist()
    view = memoryview(out)
    return [(end - begin, view[cuts[k]:cuts[k + 1]])
            for k, (begin, end) in enumerate(zip(bounds[:-1].tolist(), ends))]
