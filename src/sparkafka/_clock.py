"""Time, injected.

How it works: every component that needs the time takes a ``Clock``. Production code uses
``SystemClock``; tests use ``ManualClock`` and advance it by hand, so the Sender and the
accumulator can be stepped deterministically. Internal deadlines use ``monotonic_ms`` (float
milliseconds); record timestamps use ``wall_ms`` (int milliseconds since the epoch).
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def monotonic_ms(self) -> float: ...

    def wall_ms(self) -> int: ...


class SystemClock:
    """The real clock."""

    __slots__ = ()

    def monotonic_ms(self) -> float:
        return time.monotonic() * 1000.0

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that moves only when told to (for tests)."""

    def __init__(self, start_ms: float = 1_000_000.0, wall_start_ms: int = 1_700_000_000_000) -> None:
        self._mono = start_ms
        self._wall_offset = wall_start_ms - int(start_ms)

    def monotonic_ms(self) -> float:
        return self._mono

    def wall_ms(self) -> int:
        return int(self._mono) + self._wall_offset

    def advance(self, ms: float) -> None:
        self._mono += ms


SYSTEM_CLOCK = SystemClock()


def timeout_seconds(value: object, what: str, *, negative_ok: bool = False) -> float | None:
    """A public method's ``timeout`` argument checked before anything starts: None, or a number of seconds
    (a bool, a str or NaN is a TypeError / ValueError naming ``what``; a negative one a ValueError unless
    ``negative_ok``: a future's ``result(-1)`` gives up at once, as ``concurrent.futures``)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{what} timeout must be a number of seconds or None, got {type(value).__name__} "
                        f"{value!r:.60}")
    if value != value or (value < 0 and not negative_ok):
        raise ValueError(f"{what} timeout must be >= 0 seconds or None, got {value!r}")
    return float(value)


def wait_seconds(seconds: float | None) -> float | None:
    """A timeout for ``threading``'s waits and joins: None stays None (forever); one longer than
    ``threading.TIMEOUT_MAX`` (~292 years on Linux) is cut to it, where Python would raise OverflowError.
    Java takes ``max.block.ms`` = Long.MAX_VALUE, or a huge close/flush timeout, as "wait forever"."""
    if seconds is None:
        return None
    return seconds if seconds < threading.TIMEOUT_MAX else threading.TIMEOUT_MAX
