"""Memory and error safety of the C accelerator (``_accel.c``, ``_send_lane.c``) on inputs the
producer never builds itself but the functions accept: partition counts beyond 32 bits, writable
buffers another thread changes while the GIL is released, bad arguments whose neighbours run Python
code, and a ``SendLane`` future class of another layout than ``FutureState``.

How it works: each test calls ``sparkafka._accel`` directly and checks the pure-Python result or a
clean exception. The concurrency test runs in a subprocess, so heap corruption shows as a failure
instead of killing pytest. Skipped when the accelerator is not built (or SPARKAFKA_NO_ACCEL=1).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from types import SimpleNamespace
from typing import Any

import pytest

from sparkafka import accel
from sparkafka.producer import murmur2 as m

pytestmark = pytest.mark.skipif(accel.ACCEL is None, reason="the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")

A: Any = accel.ACCEL


def _offsets(lengths: list[int]) -> bytes:
    out = [0]
    for n in lengths:
        out.append(out[-1] + n)
    return struct.pack(f"<{len(out)}q", *out)


@pytest.mark.parametrize("n", [2**31 - 1, 2**31 + 7, 2**32, 2**32 + 3, 2**40 + 5, 2**62])
def test_partition_counts_past_32_bits_match_python(n: int) -> None:
    """``% (uint32_t)n`` truncated the count: 2**32 divided by zero (SIGFPE), 2**32 + 3 gave key % 3."""
    keys = [b"", b"a", b"key-1", b"\xff" * 13]
    assert [A.partition_for_key(k, n) for k in keys] == [m.partition_for_key_py(k, n) for k in keys]
    raw = A.partitions_for_offsets(_offsets([len(k) for k in keys]), b"".join(keys), 0, len(keys), n)
    assert list(struct.unpack(f"<{len(keys)}i", raw)) == [m.partition_for_key_py(k, n) for k in keys]


class _Index:
    """An int argument whose conversion runs Python code."""

    def __index__(self) -> int:
        return 1

    def __bool__(self) -> bool:
        return True


def test_a_bad_argument_raises_its_own_error_not_a_system_error() -> None:
    """Later arguments were converted with the first error still set: Python code then ran with an
    exception pending (SystemError, or the TypeError lost and a misleading ValueError raised)."""
    idx = _Index()
    with pytest.raises(TypeError):
        A.partitions_for_offsets(b"", b"", "x", idx, 3)
    with pytest.raises(TypeError):
        A.partitions_for_offsets(b"\0" * 8, b"", 0, 0, "x", idx)
    with pytest.raises(TypeError):
        A.append_tails(bytearray(64), False, "x", idx, 0, b"\0" * 16, b"", 0, 1, 0, 61, 0.0, 1000)
    with pytest.raises(TypeError):
        A.encode_tails_kv(None, None, None, 0, True, b"\0" * 8, b"", None, "x", idx, 0)


_RACE = """
import struct, sys, threading
from sparkafka import _accel as A
n, extra = 100_000, 4000
# the values' offsets are a writable bytearray; another thread flips the last row between 1 and 4001 bytes
voff = bytearray(struct.pack(f"<{n + 1}q", *range(n + 1)))
vdata = bytes(n + extra)
mv = memoryview(voff).cast("q")
stop = False
def flip():
    while not stop:
        mv[n] = n + extra
        mv[n] = n
t = threading.Thread(target=flip)
t.start()
bad = 0
try:
    for _ in range(60):
        offs, data = A.encode_tails_kv(None, None, None, 0, True, voff, vdata, None, 0, True, n)
        last = memoryview(offs).cast("q")[n]
        if last != len(data):
            bad += 1
        raw = A.partitions_for_offsets(voff, vdata, 0, n, 7)
        if len(raw) != 4 * n:
            bad += 1
finally:
    stop = True
    t.join()
print("inconsistent", bad)
"""


def test_encoding_writable_buffers_another_thread_changes_stays_in_bounds() -> None:
    """encode_tails_kv sized its output in a first pass and wrote it in a second, both without the
    GIL: a Python thread changing a writable offsets buffer in between made the second pass write
    past the output bytearray (glibc aborted with a corrupted heap). Writable inputs now keep the GIL."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(_RACE)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "inconsistent 0"


def test_read_only_inputs_still_encode_alike() -> None:
    """The GIL is still released for read-only buffers (Arrow IPC data): same bytes as writable ones."""
    lengths = [0, 3, 70, 1, 100]
    data = bytes(range(256))[: sum(lengths)]
    ro = A.encode_tails_kv(None, None, None, 0, True, _offsets(lengths), data, None, 0, True, len(lengths))
    rw = A.encode_tails_kv(None, None, None, 0, True, bytearray(_offsets(lengths)), bytearray(data), None, 0, True,
                           len(lengths))
    assert [bytes(x) for x in ro] == [bytes(x) for x in rw]


def test_send_lane_fills_only_futures_that_are_future_state() -> None:
    """The lane writes a future's fields as the struct of ``FutureState`` (``_c/_append.h``) into an object
    of the class it is given: that class must be FutureState or a subclass of it without fields of its own
    (another class would be written past its end, or keep its own fields unset)."""
    if getattr(A, "SendLane", None) is None:
        pytest.skip("no send lane in this build")
    from sparkafka.producer.future import FutureRecordMetadata

    class Small:
        __slots__ = ("x",)

    class More(FutureRecordMetadata):
        __slots__ = ("extra",)

    for bad in (Small, More, type("WithDict", (FutureRecordMetadata,), {})):
        with pytest.raises(TypeError, match="future_type must be a subclass of FutureState"):
            A.SendLane(print, SimpleNamespace(), SimpleNamespace(), None, 1000, False, bad)
    sub = type("Sub", (FutureRecordMetadata,), {"__slots__": ()})
    lane = A.SendLane(print, SimpleNamespace(), SimpleNamespace(), None, 1000, False, sub)
    assert lane.enabled
    with pytest.raises(AttributeError, match="no __dict__"):  # the lane reads these objects' attributes there
        A.SendLane(print, None, SimpleNamespace(), None, 1000, False, sub)


def test_append_tails_rejects_bad_offsets_before_writing_anything() -> None:
    """append_tails checks each row's offsets as it reaches it (increasing, inside the data) and the
    range against the offsets buffer, and raises before it writes a byte."""
    data = b"abcdefgh"
    good = [0, 2, 4, 6, 8]

    def call(offs: list[int], start: int = 0, stop: int = 4, data: bytes = data) -> tuple[int, int]:
        buf = bytearray(256)
        try:
            return tuple(A.append_tails(buf, True, 0, 0, 0, struct.pack(f"<{len(offs)}q", *offs), data,
                                        start, stop, 0, 61, 0.0, 1000))
        finally:
            assert buf == bytearray(256) or offs == good  # nothing written unless the call succeeded

    assert call(good)[0] == 4
    with pytest.raises(ValueError, match="not increasing"):
        call([0, 2, 1, 6, 8])  # row 1 ends before it starts
    with pytest.raises(ValueError, match="point past the data"):
        call([0, 2, 4, 6, 9])  # the last row runs past the data
    with pytest.raises(ValueError, match="not increasing"):
        call([-1, 2, 4, 6, 8])
    with pytest.raises(ValueError, match="outside the offsets"):
        call(good, stop=5)
    with pytest.raises(ValueError, match="outside the offsets"):
        call(good, start=3, stop=2)
