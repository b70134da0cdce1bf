"""Sending turns (``_c/_send_turns.c``): busy sending threads take turns without the GIL; a thread that
sends now and then, an I/O thread and a forked child never wait for one.

How it works: ``hand_over_gil()`` is what the start of every send calls; the tests call it from their
own threads and read the counts of ``send_turn_stats()`` (turns given by an owner whose slice was over,
turns taken by a thread that found nobody sending, waits). Counts, not timings, are asserted. Skipped
when the accelerator is not built (or SPARKAFKA_NO_ACCEL=1).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import pytest

from sparkafka import accel

pytestmark = pytest.mark.skipif(accel.ACCEL is None, reason="the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")

A: Any = accel.ACCEL


def _stats() -> dict[str, int]:
    stats: dict[str, int] = A.send_turn_stats()
    return stats


def _send_in_a_thread(sends: int = 1, marked_io: bool = False) -> None:
    def run() -> None:
        if marked_io:
            A.io_thread()
        for _ in range(sends):
            A.hand_over_gil()

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    assert not thread.is_alive()


def test_busy_threads_take_turns_and_every_one_gets_its_share() -> None:
    """Three threads sending in a loop for 0.6 s: the turn goes from one to the next (given after a slice
    of about a millisecond; taken by the head of the queue when the owner stood still, which a loaded
    machine's scheduler makes common), and none starves."""
    before = _stats()
    stop = threading.Event()
    counts = [0, 0, 0]

    def busy(i: int) -> None:
        while not stop.is_set():
            A.hand_over_gil()
            counts[i] += 1

    threads = [threading.Thread(target=busy, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    time.sleep(0.6)
    stop.set()
    for t in threads:
        t.join(30)
    after = _stats()
    assert after["given"] + after["taken"] - before["given"] - before["taken"] > 20, (before, after)
    assert after["queued"] == 0
    assert min(counts) > max(counts) / 20, counts  # turns go round: nobody is left out


def test_a_thread_that_sends_now_and_then_takes_the_turn_without_waiting() -> None:
    """A thread that has the turn and stopped sending does not hold up another one: each of six live
    threads, sending one after the other, takes the turn at once (taken, never waits)."""
    go = [threading.Event() for _ in range(6)]
    done = [threading.Event() for _ in range(6)]
    leave = threading.Event()

    def run(i: int) -> None:
        go[i].wait(30)
        for _ in range(100):
            A.hand_over_gil()
        done[i].set()
        leave.wait(30)  # alive until the end, so that no thread reuses another's identity

    threads = [threading.Thread(target=run, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    try:
        go[0].set()
        assert done[0].wait(30)
        before = _stats()
        for i in range(1, 6):
            go[i].set()
            assert done[i].wait(30)
        after = _stats()
        assert after["taken"] - before["taken"] == 5, (before, after)
        assert after["waits"] == before["waits"], (before, after)
    finally:
        leave.set()
        for t in threads:
            t.join(30)


def test_a_busy_thread_gets_the_turn_back_from_one_that_stopped_sending() -> None:
    """The owner stops sending (sleeps) while a busy thread waits for its turn: the waiting thread takes
    it once the owner's count of sends stands still, and keeps sending while the owner sleeps."""
    owner_has_it = threading.Event()
    release = threading.Event()
    progress = [0]

    def owner() -> None:
        for _ in range(1000):
            A.hand_over_gil()
        owner_has_it.set()
        release.wait(30)  # the owner now does something else with the turn

    def busy() -> None:
        deadline = time.monotonic() + 30
        while progress[0] < 20_000 and time.monotonic() < deadline:
            A.hand_over_gil()
            progress[0] += 1

    first = threading.Thread(target=owner)
    first.start()
    assert owner_has_it.wait(30)
    before = _stats()
    second = threading.Thread(target=busy)
    second.start()
    second.join(30)
    release.set()
    first.join(30)
    assert progress[0] == 20_000
    after = _stats()
    assert after["taken"] - before["taken"] >= 1


def test_an_io_thread_never_waits_for_a_turn() -> None:
    """The Sender marks itself with ``io_thread()``: its sends (a callback's) neither wait nor take the
    turn from the busy thread that has it."""
    stop = threading.Event()
    started = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            A.hand_over_gil()
            started.set()

    thread = threading.Thread(target=busy)
    thread.start()
    try:
        assert started.wait(30)
        before = _stats()
        _send_in_a_thread(10_000, marked_io=True)
        after = _stats()
        assert after["waits"] == before["waits"], (before, after)
        assert after["taken"] == before["taken"], (before, after)
    finally:
        stop.set()
        thread.join(30)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_with_no_turn_owner_and_no_queue() -> None:
    """A child forked while another thread has the turn and one waits for it sends at once."""
    stop = threading.Event()

    def busy() -> None:
        while not stop.is_set():
            A.hand_over_gil()

    threads = [threading.Thread(target=busy) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.05)
        pid = os.fork()
        if pid == 0:  # the child: one thread, nobody owns the turn, nobody waits
            code = 1
            try:
                stats = A.send_turn_stats()
                for _ in range(1000):
                    A.hand_over_gil()
                after = A.send_turn_stats()
                code = 0 if stats["queued"] == 0 and after["waits"] == stats["waits"] else 3
            finally:
                os._exit(code)
        deadline = time.monotonic() + 30  # a child left waiting for a parent's thread would never end
        waited, status = os.waitpid(pid, os.WNOHANG)
        while waited == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
            waited, status = os.waitpid(pid, os.WNOHANG)
        if waited == 0:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child waited for a sending turn held by a thread of its parent")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(30)
