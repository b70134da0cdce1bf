"""A check that no test leaves a producer's threads running.

How it works: ``leaked_threads(before)`` lists the threads alive now that were not in ``before`` and whose
names are the producer's (``kafka-producer-network-thread | ...``) or another sparkafka thread
(``sparkafka-...``: the confluent layer's metadata hold, the Spark producer cache's reaper). The autouse
fixture in ``conftest.py`` takes ``before`` when a test starts (after the module and session fixtures,
whose producers are theirs) and, when it ends (after the test's own fixtures closed theirs), gives the
threads up to ``GRACE_S`` to end (running ``gc.collect()`` so that a dropped confluent or kafka-python
layer producer's finalizer closes it) before it fails the test naming them. A producer left running keeps
reconnecting to brokers later tests stopped and logs into their ``caplog``; a test that must leave one
(it checks that a dropped native producer keeps running, as Java's) is marked ``leaves_threads``.
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Collection

GRACE_S = 5.0
PREFIXES = ("kafka-producer-network-thread", "sparkafka-")


def leaked_threads(before: Collection[threading.Thread]) -> list[threading.Thread]:
    """The producer threads alive now that were not alive in ``before``."""
    return [t for t in threading.enumerate() if t not in before and t.is_alive() and t.name.startswith(PREFIXES)]


def wait_for_leaks(before: Collection[threading.Thread], grace_s: float = GRACE_S) -> list[threading.Thread]:
    """``leaked_threads(before)`` once they are gone or ``grace_s`` passed (collecting garbage meanwhile)."""
    deadline = time.monotonic() + grace_s
    while True:
        leaked = leaked_threads(before)
        if not leaked or time.monotonic() >= deadline:
            return leaked
        gc.collect()
        for thread in leaked:
            thread.join(min(0.05, max(0.0, deadline - time.monotonic())))
