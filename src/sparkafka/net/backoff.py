"""Exponential backoff with jitter, as Kafka's ``ExponentialBackoff``.

How it works: ``backoff(attempts)`` is ``initial * base**min(attempts, exp_max)`` scaled by a random factor
drawn uniformly from ``[1 - jitter, 1 + jitter]`` and capped at ``max_ms``; ``exp_max`` is the exponent at
which the cap is reached. As in Java, the first interval is ``min(initial_ms, max_ms)``, so when
``max_ms <= initial_ms`` the value is always ``max_ms`` (no growth, no jitter): e.g. retry.backoff.ms=2000
with the default retry.backoff.max.ms=1000 waits 1000 ms. Used for reconnects (reconnect.backoff.ms/.max.ms),
connection setup timeouts, metadata refresh retries and produce retries. The random source is injectable
so tests are deterministic.
"""

from __future__ import annotations

import math
import random


class ExponentialBackoff:
    """``backoff(n)`` for the n-th consecutive failure (n = 0 for the first)."""

    __slots__ = ("_exp_max", "_initial", "_jitter", "_max", "_multiplier", "_random")

    def __init__(
        self,
        initial_ms: float,
        max_ms: float,
        *,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if initial_ms < 0:
            raise ValueError(f"initial_ms must be >= 0, got {initial_ms}")
        if multiplier <= 1.0:
            raise ValueError(f"multiplier must be > 1, got {multiplier}")
        if not 0.0 <= jitter < 1.0:
            raise ValueError(f"jitter must be in [0, 1), got {jitter}")
        self._max = float(max_ms)
        self._initial = min(float(initial_ms), self._max)  # Java: min(max, initial)
        self._multiplier = multiplier
        self._jitter = jitter
        self._random = rng if rng is not None else random.Random()
        if self._max > self._initial:
            self._exp_max = math.log(self._max / max(self._initial, 1.0)) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    @property
    def initial_ms(self) -> float:
        return self._initial

    @property
    def max_ms(self) -> float:
        return self._max

    def backoff(self, attempts: int) -> float:
        """Milliseconds to wait after ``attempts`` earlier consecutive failures (whole ms, like Java)."""
        if self._exp_max == 0.0:
            return self._initial
        term = self._initial * self._multiplier ** min(float(max(attempts, 0)), self._exp_max)
        if self._jitter > 0.0:
            term *= self._random.uniform(1.0 - self._jitter, 1.0 + self._jitter)
        return min(float(math.floor(term)), self._max)
