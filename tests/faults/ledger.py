"""A ledger of keyed sends and the checks that prove "nothing lost, nothing duplicated, nothing reordered".

How it works: ``Ledger.send`` sends record ``i`` with key ``key-<i % keys>`` and value
``"<key index>:<per-key sequence>:<i>"`` (independent of the partition it lands on), keeps its future, and
counts what its callback reported. ``verify_records`` takes the topic as read back by an independent
client (confluent-kafka, ``support.consume``) and checks:

* every acknowledged record is in the log exactly once (and at the offset its metadata named);
* no record appears twice, acknowledged or not;
* inside each partition, records appear in send order (``i`` strictly increasing), so per-key order holds;
* every record missing from the log failed: its future raised a ``sparkafka.errors.KafkaError`` and its
  callback ran once with the same error;
* every future is done and every callback ran exactly once.

``Report`` carries the counts; ``Report.problems()`` lists what broke (empty = clean).
(``benchmarks/soak.py`` keeps a lighter one-byte-per-record ledger for runs of millions of records.)
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sparkafka.errors import KafkaError
from sparkafka.producer.future import FailedFuture

__all__ = ["Ledger", "Raised", "Report", "decode_value", "failed_indexes", "verify_records"]


def decode_value(value: bytes | None) -> tuple[int, int, int]:
    """(key index, per-key sequence, global send index) from a ledger value."""
    assert value is not None
    key_index, key_seq, index = value.split(b":")
    return int(key_index), int(key_seq), int(index)


class Raised:
    """Stands in for the future of a record whose ``send()`` raised."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def done(self) -> bool:
        return True

    def exception(self, timeout: float | None = None) -> BaseException:
        return self.error

    def result(self, timeout: float | None = None) -> Any:
        raise self.error


class Ledger:
    """Sends keyed records and remembers every future and callback outcome (callbacks run on the
    producer's I/O thread and each writes only its own record's slots)."""

    def __init__(self, keys: int = 500, value_padding: int = 0) -> None:
        self.keys = keys
        self.padding = b"" if value_padding <= 0 else b":" + b"x" * value_padding
        self.futures: list[Any] = []
        self.topics: list[str] = []
        self.callback_errors: list[BaseException | None] = []
        self.callback_calls: list[int] = []
        self.callback_time: list[float] = []
        self._key_seq = [0] * keys

    def __len__(self) -> int:
        return len(self.futures)

    def _callback(self, index: int) -> Callable[[Any, BaseException | None], None]:
        def on_done(metadata: Any, error: BaseException | None) -> None:
            self.callback_errors[index] = error
            self.callback_calls[index] += 1
            self.callback_time[index] = time.monotonic()

        return on_done

    def send(self, producer: Any, topic: str, count: int, every: int = 0,
             hook: Callable[[int], None] | None = None, stop_on_error: bool = False) -> int:
        """Send ``count`` more records to ``topic``; ``hook(i)`` runs before record ``i`` when
        ``i % every == 0`` (fault injection mid-stream). A ``KafkaError`` raised by ``send()`` itself
        is recorded as that record's outcome; with ``stop_on_error`` sending stops there, and at a record
        that failed in ``send()`` (e.g. no metadata within max.block.ms: a ``FailedFuture``). Returns how
        many records were attempted."""
        futures, key_seq, keys = self.futures, self._key_seq, self.keys
        for attempt in range(count):
            index = len(futures)
            if hook is not None and every and index % every == 0:
                hook(index)
            k = index % keys
            seq = key_seq[k]
            key_seq[k] = seq + 1
            self.callback_errors.append(None)
            self.callback_calls.append(0)
            self.callback_time.append(0.0)
            self.topics.append(topic)
            try:
                future = producer.send(topic, value=b"%d:%d:%d%s" % (k, seq, index, self.padding),
                                       key=b"key-%d" % k, callback=self._callback(index))
            except KafkaError as exc:
                futures.append(Raised(exc))
                self.callback_calls[index] = 1  # no callback runs when send() raises: nothing to compare
                self.callback_errors[index] = exc
                if stop_on_error:
                    return attempt + 1
                continue
            futures.append(future)
            if stop_on_error and isinstance(future, FailedFuture):  # failed in send() (Java's contract)
                return attempt + 1
        return count

    def wait_all(self, timeout: float) -> int:
        """Wait until every future is done (at most ``timeout`` s); returns how many are still pending."""
        deadline = time.monotonic() + timeout
        pending = 0
        for future in self.futures:
            remaining = deadline - time.monotonic()
            try:
                future.exception(max(0.0, remaining))
            except KafkaError:
                pending += 1
        return pending

    def outcome(self, index: int) -> BaseException | None:
        """The error of record ``index`` (None = acknowledged); raises if it is not done."""
        return self.futures[index].exception(0)  # type: ignore[no-any-return]


@dataclass
class Report:
    """What ``verify_records`` found. ``problems()`` is empty when every guarantee held."""

    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    pending: int = 0
    in_log: int = 0
    duplicated: int = 0
    reordered: int = 0
    lost: int = 0
    """Acknowledged but not in the log."""
    untyped_failures: int = 0
    callback_mismatches: int = 0
    offset_mismatches: int = 0
    failures_by_type: Counter[str] = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def problems(self) -> list[str]:
        out = [f"{name}={getattr(self, name)}" for name in (
            "pending", "duplicated", "reordered", "lost", "untyped_failures", "callback_mismatches",
            "offset_mismatches") if getattr(self, name)]
        return out + self.examples[:10]

    def summary(self) -> str:
        failures = ", ".join(f"{k}={v}" for k, v in sorted(self.failures_by_type.items())) or "none"
        return (f"sent={self.sent} acknowledged={self.acknowledged} failed={self.failed} "
                f"pending={self.pending} in_log={self.in_log} duplicated={self.duplicated} "
                f"reordered={self.reordered} lost={self.lost} failures: {failures}")


def verify_records(ledger: Ledger, records: Iterable[Any], topic: str | None = None,
                   only: Callable[[int], bool] | None = None,
                   offset_aliases: Mapping[tuple[int, int], tuple[int, int]] | None = None) -> Report:
    """Compare the ledger with the records read back (objects with ``partition``, ``offset``, ``value``;
    in (partition, offset) order). ``only(i)`` restricts the "acknowledged must be present" check to
    some records (e.g. those acknowledged after a broker restart). ``offset_aliases`` maps a (partition,
    offset) a future may report to the one where the record is expected instead (a copy the mock appended
    and ``records`` leaves out: ``transactions.raw_log.mock_reappends``)."""
    report = Report(sent=len(ledger))
    seen: Counter[int] = Counter()
    where: dict[int, tuple[int, int]] = {}
    last_in_partition: dict[int, int] = {}
    for record in records:
        _, _, index = decode_value(record.value)
        seen[index] += 1
        where[index] = (record.partition, record.offset)
        previous = last_in_partition.get(record.partition)
        if previous is not None and index <= previous:
            report.reordered += 1
            if len(report.examples) < 10:
                report.examples.append(
                    f"partition {record.partition} offset {record.offset}: record {index} after {previous}")
        last_in_partition[record.partition] = index
    report.in_log = sum(seen.values())
    report.duplicated = sum(n - 1 for n in seen.values() if n > 1)
    for index, future in enumerate(ledger.futures):
        if topic is not None and ledger.topics[index] != topic:
            continue
        if not future.done():
            report.pending += 1
            continue
        error = future.exception(0)
        calls = ledger.callback_calls[index]
        if calls != 1 or type(ledger.callback_errors[index]) is not type(error):
            report.callback_mismatches += 1
            if len(report.examples) < 10:
                report.examples.append(f"record {index}: {calls} callback(s), callback error "
                                       f"{ledger.callback_errors[index]!r} vs future {error!r}")
        if error is None:
            report.acknowledged += 1
            if only is not None and not only(index):
                continue
            if index not in seen:
                report.lost += 1
                if len(report.examples) < 10:
                    report.examples.append(f"record {index} was acknowledged but is not in the log")
                continue
            metadata = future.result(0)
            reported = (metadata.partition, metadata.offset)
            if offset_aliases:
                reported = offset_aliases.get(reported, reported)
            if metadata.offset >= 0 and reported != where[index]:
                report.offset_mismatches += 1
        else:
            report.failed += 1
            report.failures_by_type[type(error).__name__] += 1
            if not isinstance(error, KafkaError):
                report.untyped_failures += 1
    return report


def failed_indexes(ledger: Ledger, kinds: Sequence[type[BaseException]] = (BaseException,)) -> list[int]:
    """Indexes of records whose futures failed with one of ``kinds``."""
    out = []
    for index, future in enumerate(ledger.futures):
        if future.done():
            error = future.exception(0)
            if error is not None and isinstance(error, tuple(kinds)):
                out.append(index)
    return out
