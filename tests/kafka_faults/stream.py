"""A steady stream of ledger records through one producer while a test breaks the cluster under it.

How it works: ``Stream`` wraps a ``faults.scenario.Scenario`` (one producer, one topic, one ``Ledger``) and
sends in chunks of ``CHUNK`` records. After each chunk it waits until every record but the last ``window``
is complete, so at most ``window`` records are unacknowledged: a fault always finds a full pipeline
(batches on the wire and queued), and while one partition refuses writes the stream stops at the window
instead of piling every remaining record into the accumulator. A transactional stream commits every ``txn_size``
records (the last transaction in ``end``) and remembers which records were committed. ``send_until``
keeps sending, at most ``per_second`` records a second (a load shape: the fault decides how long it
lasts), until a background action (``Background``) is over. ``finish`` reads the topic back with
confluent-kafka (``read_committed`` for a transactional stream) and checks the ledger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from faults.ledger import Report, verify_records
from faults.scenario import Scenario
from support.consume import consume_all

__all__ = ["Background", "ErrorLog", "Stream"]

CHUNK = 500
WAIT_S = 150.0
"""The longest a chunk waits for one record to complete (a hang fails the test, not the run)."""


class Stream:
    """Throttled (optionally transactional) sending through ``run.producer`` (see the module docstring)."""

    def __init__(self, run: Scenario, window: int = 5_000, txn_size: int = 5_000) -> None:
        self.run = run
        self.window = window
        self.txn_size = txn_size
        self.committed: set[int] = set()
        self.commit_errors: list[BaseException] = []
        self._txn_start: int | None = None
        self._triggers: list[tuple[int, str, Callable[[], Any], Background | None]] = []
        self._started = time.monotonic()
        self._complete_upto = 0  # every record before this index is done

    def phase(self, label: str) -> None:
        """Print where the stream is (pytest shows it when the test fails)."""
        done = sum(1 for f in self.run.ledger.futures if f.done())
        print(f"{time.monotonic() - self._started:7.2f}s  sent {self.sent:>7}  done {done:>7}  {label}", flush=True)

    @property
    def sent(self) -> int:
        return len(self.run.ledger)

    def send(self, count: int) -> None:
        target = self.sent + count
        while self.sent < target:
            self._chunk(min(CHUNK, target - self.sent))

    def settle(self) -> None:
        """Wait until every record sent so far is complete (acknowledged or failed)."""
        futures = self.run.ledger.futures
        while self._complete_upto < self.sent:
            futures[self._complete_upto].exception(WAIT_S)
            self._complete_upto += 1

    def at(self, index: int, name: str, action: Callable[[], Any]) -> Callable[[], None]:
        """Run ``action`` on a thread of its own once ``index`` records are sent, while the stream goes on
        (a fault that meets requests on the wire); returns a function that waits for it to be over."""
        slot = len(self._triggers)
        self._triggers.append((index, name, action, None))

        def join() -> None:
            started = self._triggers[slot][3]
            assert started is not None, f"{name} never started: the stream stopped before record {index}"
            started.join()

        return join

    def send_until(self, action: Background, per_second: int) -> int:
        """Send while ``action`` runs (at most ``per_second`` records a second); returns how many."""
        first, started = self.sent, time.monotonic()
        while action.running():
            self._chunk(CHUNK)
            ahead = (self.sent - first) / per_second - (time.monotonic() - started)
            if ahead > 0:
                action.wait(ahead)
        action.join()
        return self.sent - first

    def _chunk(self, count: int) -> None:
        run, ledger = self.run, self.run.ledger
        if run.transactional and self._txn_start is None:
            run.producer.begin_transaction()
            self._txn_start = self.sent
        ledger.send(run.producer, run.topic, count)
        for i, (index, name, action, started) in enumerate(self._triggers):
            if started is None and self.sent >= index:
                self._triggers[i] = (index, name, action, Background(name, action))
        futures = ledger.futures
        while self._complete_upto < self.sent - self.window:  # every record but the last `window` is done
            futures[self._complete_upto].exception(WAIT_S)
            self._complete_upto += 1
        if self._txn_start is not None and self.sent - self._txn_start >= self.txn_size:
            self._commit()

    def _commit(self) -> None:
        assert self._txn_start is not None
        start, self._txn_start = self._txn_start, None
        try:
            self.run.producer.commit_transaction(timeout=WAIT_S)
        except Exception as exc:  # the test asserts there were none; the records then must be invisible
            self.commit_errors.append(exc)
            self.run.producer.abort_transaction(timeout=WAIT_S)
            return
        self.committed.update(range(start, self.sent))

    def end(self) -> None:
        if self._txn_start is not None:
            self._commit()

    def finish(self, flush_timeout: float = WAIT_S) -> Report:
        """Commit what is open, flush, close, read back (read_committed if transactional) and verify."""
        self.end()
        run = self.run
        run.producer.flush(timeout=flush_timeout)
        pending = run.ledger.wait_all(timeout=5.0)
        assert pending == 0, f"{pending} futures still pending after flush()"
        run.producer.close(timeout=10)
        isolation = "read_committed" if run.transactional else "read_uncommitted"
        if run.transactional:
            # commit_transaction() returns once the coordinator has logged the commit; it writes the markers
            # to the partitions after that (Kafka's TransactionMarkerChannelManager), so right after a rolling
            # restart a partition's last stable offset can still stand before the last transaction: wait for
            # every committed record (a record that never shows up still fails, after the timeout)
            expected = len(self.committed)
        else:
            # wait for every acknowledged record, not only for each partition's end: right after leaderships
            # move (a node back, the preferred leader elected again) a new leader can answer a fetch below the
            # high watermark the old one had acknowledged up to, until its followers report their offsets, and
            # the consumer then saw a partition's "end" before its last records (seen once in a full run: 171
            # of 60,000 acknowledged records missing, all at the stream's end)
            expected = sum(1 for index, future in enumerate(run.ledger.futures)
                           if future.done() and run.ledger.outcome(index) is None)
        records = consume_all(run.bootstrap, run.topic, timeout=90, isolation_level=isolation,
                              expected_count=expected)
        only = self.committed.__contains__ if run.transactional else None
        report = verify_records(run.ledger, records, only=only)
        if run.transactional:
            # exactly the committed records are visible: none of an aborted transaction
            assert report.in_log == len(self.committed), report.summary()
        return report


class Background:
    """``action()`` on a thread of its own; ``join`` re-raises what it raised."""

    def __init__(self, name: str, action: Callable[[], Any]) -> None:
        self._done = threading.Event()
        self._error: BaseException | None = None
        self._action = action
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._action()
        except BaseException as exc:  # re-raised by join()
            self._error = exc
        finally:
            self._done.set()

    def running(self) -> bool:
        return not self._done.is_set()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    def join(self, timeout: float = WAIT_S) -> None:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"{self._thread.name} did not finish within {timeout}s"
        if self._error is not None:
            raise self._error


class ErrorLog(logging.Handler):
    """Collects the broker errors the producer retried (the Sender's debug line "retrying batch ... after
    <ERROR>"); ``seen(name)`` is set the first time ``name`` is retried."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.retried: dict[str, int] = {}
        self._events: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._logger = logging.getLogger("sparkafka.producer")
        self._level = self._logger.level

    def seen(self, name: str) -> threading.Event:
        with self._lock:
            return self._events.setdefault(name, threading.Event())

    def emit(self, record: logging.LogRecord) -> None:
        if not record.msg.startswith("retrying batch"):
            return
        name = str(record.args[-1]) if isinstance(record.args, tuple) and record.args else "?"
        with self._lock:
            self.retried[name] = self.retried.get(name, 0) + 1
            self._events.setdefault(name, threading.Event()).set()

    def __enter__(self) -> ErrorLog:
        self._logger.addHandler(self)
        self._logger.setLevel(logging.DEBUG)
        return self

    def __exit__(self, *exc: object) -> None:
        self._logger.removeHandler(self)
        self._logger.setLevel(self._level)
