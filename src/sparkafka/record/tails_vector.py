"""``RecordBatchBuilder.append_tails`` for many rows at once with numpy (the pure-Python path, large batches).

How it works: the bulk path hands the builder record *tails* (``producer/arrow/tails.py``: everything of a v2
record after its offset delta), and the builder puts ``length, attributes, timestampDelta, offsetDelta`` in
front of each. Without the C accelerator ``RecordBatchBuilder._append_tails_py`` does that one row at a time
(~270 ns a row). When a batch has room for hundreds of rows and nothing is compressed, ``encode_tails``
does it with a fixed number of numpy operations instead: the rows' sizes and their running total give how
many fit (the same rule: the first record of an empty batch always fits, every later one must keep the
batch's size within its limit), then the header bytes of all of them are laid out as a padded table,
scattered to their places, and the tails fill the gaps in order. A call costs ~45 us plus a few ns a row,
so the builder uses it only when a call brings at least ``MIN_ROWS`` rows and the batch has room for as
many; with fewer the per-row loop is faster.
The result is byte-identical to the loop and to the C accelerator (``tests/record/test_tails_vector.py``).
numpy is optional: ``numpy_module()`` is None without it, and the loop does everything. Pure functions of
their inputs: no sockets, threads or clocks.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from sparkafka.record.layout import RECORD_BATCH_OVERHEAD

__all__ = ["MIN_ROWS", "encode_tails", "numpy_module"]

MIN_ROWS = 384
"""Use ``encode_tails`` for calls of at least this many rows into a batch with room for as many like the
first (measured:
118-byte records, the loop is faster up to ~300 rows (a 32 KB batch), numpy 1.4x faster at ~550 (64 KB) and
2.8x at ~2,200 (256 KB))."""

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


def encode_tails(np: Any, offsets: memoryview, data: memoryview, start: int, stop: int, n: int, tsb: bytes,
                 estimate: int, uncompressed: int, limit: int) -> tuple[int, Any]:
    """The records of tail rows ``[start, stop)`` (``offsets``: int64 view; row ``i`` is
    ``data[offsets[i]:offsets[i + 1]]``) that fit a batch without compression holding ``n`` records,
    ``uncompressed`` bytes of them and estimated at ``estimate`` bytes, with write limit ``limit``; each
    record gets offset delta ``n, n + 1, ...`` and the timestamp delta encoded as ``tsb``. Returns
    ``(count, records)``: how many fit and their encoded bytes (a numpy uint8 array)."""
    off = np.frombuffer(offsets, np.int64)
    fixed = 1 + len(tsb)  # attributes + timestampDelta
    room_after = limit - RECORD_BATCH_OVERHEAD - uncompressed  # the rows after the first one keep within this
    # rows to look at: twice what the first row's size suggests, more while every one of them fits
    first = int(off[start + 1] - off[start]) + fixed + 3
    want = max(16, 2 * max(0, limit - estimate) // first + 16)
    while True:
        rows = min(stop - start, want)
        lens = off[start + 1:start + rows + 1] - off[start:start + rows]
        deltas = np.arange(n, n + rows, dtype=np.int64)
        delta_sizes = _sizes(np, deltas)
        body = lens + fixed + delta_sizes
        body_sizes = _sizes(np, body)
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
    # every record's header as one row of a padded table: length varint, attributes, timestampDelta,
    # offsetDelta; ``valid`` marks the cells that are bytes of the record
    length, length_valid = _varint_bytes(np, body, body_sizes[:count])
    delta, delta_valid = _varint_bytes(np, deltas, delta_sizes[:count])
    middle = np.frombuffer(b"\x00" + tsb, np.uint8)
    table = np.concatenate([length, np.broadcast_to(middle, (count, len(middle))), delta], axis=1)
    valid = np.concatenate([length_valid, np.ones((count, len(middle)), np.bool_), delta_valid], axis=1)
    places = starts[:, None] + (np.cumsum(valid, axis=1) - 1)
    out = np.empty(written, np.uint8)
    header = np.zeros(written, np.bool_)
    at = places[valid]
    out[at] = table[valid]
    header[at] = True
    out[~header] = np.frombuffer(data, np.uint8)[int(off[start]):int(off[start + count])]
    return count, out
