"""Regression: NetworkClient.wakeup() must never get lost, however it races with poll().

The Sender sleeps in ``poll()`` for up to the metadata max age when nothing is queued; user threads
call ``wakeup()`` after appending a record or asking for metadata. A wake-up flag that ends up set
while the socketpair is empty turns every later ``wakeup()`` into a no-op, and send()/partitions_for()
then wait out max.block.ms. Hammer ``wakeup()`` from two threads while polling, then check that one
more ``wakeup()`` still interrupts a long ``poll()``.
"""

from __future__ import annotations

import sys
import threading
import time

from sparkafka.net.client import NetworkClient


def test_wakeup_survives_racing_with_poll() -> None:
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible to hit the race window
    try:
        for _ in range(3):
            client = NetworkClient(None)
            stop = threading.Event()

            def hammer(c: NetworkClient = client, stop: threading.Event = stop) -> None:
                while not stop.is_set():
                    c.wakeup()

            threads = [threading.Thread(target=hammer) for _ in range(2)]
            for t in threads:
                t.start()
            end = time.monotonic() + 0.2
            while time.monotonic() < end:
                client.poll(50, 0)
            stop.set()
            for t in threads:
                t.join()
            client.poll(0, 0)  # consume whatever is pending
            client.wakeup()
            started = time.monotonic()
            client.poll(3000, 0)
            elapsed = time.monotonic() - started
            client.close()
            assert elapsed < 1.0, f"wakeup() was lost: poll() slept {elapsed:.2f}s"
    finally:
        sys.setswitchinterval(old_interval)
