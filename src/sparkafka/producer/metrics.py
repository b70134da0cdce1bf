"""Producer metrics with the Java client's names.

How it works: the Sender thread updates plain counters (no locks: a metric may lag by one update); the
errors ``send()`` raises or returns are counted by the sending threads under a lock (a rare path);
``snapshot()`` turns them into Java-named values, counted as Java's Sender counts them: records sent are
the records put into Produce requests (a retry counts again, a record that then fails counts too),
request latency is sampled from answered requests only (not a timeout, a disconnect or acks=0), the
compression rate is the average of the batches' ratios (records' bytes, compressed over uncompressed, 1.0
without compression). Averages are over all batches/requests seen. Rates are Java's ``Rate`` over two
samples of 30 s (``SampledStat``, ``metrics.sample.window.ms`` x ``metrics.num.samples``): a sample starts
with the first event after the current one is 30 s old (``_Samples.advance``), a sample 60 s old is dropped
when measured, and the rate divides what the kept samples counted by the time since the oldest began, plus
30 s while that is under 30 s (``Rate.windowSize``): an idle producer's rates fall to 0 within a minute.
The samples keep the counters' values where they began, so the events themselves stay plain increments.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._clock import Clock
from ..net.connection import NetworkStats

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch


SAMPLE_WINDOW_MS = 30_000.0
"""Java's ``metrics.sample.window.ms`` default (with ``metrics.num.samples`` 2)."""

_Counts = tuple[float, float, float, float, float, float, float]
"""The counters the rates are taken of: records sent, records failed, records retried, buffers exhausted,
requests sent, bytes sent, bytes received."""


class _Samples:
    """Java's two-sample ``SampledStat`` of ``Rate`` for the counters of ``_Counts``, kept as the counters'
    values where each sample began (the counters only grow)."""

    __slots__ = ("_lock", "current", "previous")

    def __init__(self, now: float, counts: _Counts) -> None:
        self._lock = threading.Lock()
        self.current: tuple[float, _Counts] = (now, counts)
        self.previous: tuple[float, _Counts] | None = None

    def advance(self, now: float, counts: _Counts) -> None:
        """An event at ``now``: a new sample starts if the current one is a window old."""
        with self._lock:
            if now - self.current[0] >= SAMPLE_WINDOW_MS:
                self.previous, self.current = self.current, (now, counts)

    def rates(self, now: float, counts: _Counts) -> list[float]:
        """Per second, each counter's growth over the kept samples (``Rate.measure``)."""
        with self._lock:
            if self.previous is not None and now - self.previous[0] >= 2 * SAMPLE_WINDOW_MS:
                self.previous = None  # purgeObsoleteSamples: older than samples x window
            if now - self.current[0] >= 2 * SAMPLE_WINDOW_MS:
                self.current = (now, counts)
            start, base = self.previous if self.previous is not None else self.current
        elapsed = now - start
        if elapsed < SAMPLE_WINDOW_MS:
            elapsed += SAMPLE_WINDOW_MS  # Rate.windowSize: at least (samples - 1) full windows
        return [(c - b) * 1000.0 / elapsed for c, b in zip(counts, base, strict=True)]


class ProducerMetrics:
    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.window_start_ms = clock.monotonic_ms()
        self.records_sent = 0
        self.records_failed = 0
        self.records_retried = 0
        self.batches_sent = 0
        self.batch_bytes = 0
        self.requests = 0
        self.records_in_requests = 0
        self.compressed_bytes = 0
        self.uncompressed_bytes = 0
        self.compression_ratio_sum = 0.0
        """The sum of the batches' compression ratios (Java's compression-rate sensor, an average of them)."""
        self.latency_total_ms = 0.0
        self.latency_count = 0
        self.latency_max_ms = 0.0
        self.batch_bytes_max = 0
        self.queue_time_total_ms = 0.0
        """Sum over sent batches of their time from creation to their (last) drain (Java's queueTimeMs)."""
        self.queue_time_max_ms = 0.0
        self.throttle_total_ms = 0.0
        self.throttle_count = 0
        self.throttle_max_ms = 0.0
        self.splits = 0
        self.send_errors = 0
        """Records whose ``send()`` raised or returned an error (Java counts them in the "errors" sensor)."""
        self._send_errors_lock = threading.Lock()
        self.gauges: dict[str, Callable[[], float]] = {}
        self.buffer_exhausted: Callable[[], int] = lambda: 0
        """How many record sends failed because ``buffer.memory`` stayed exhausted for ``max.block.ms``
        (the BufferPool's count; Java's "buffer-exhausted-records" sensor)."""
        self.network = NetworkStats()
        """The network client's counts of requests (every API, as Java's Selector) and bytes (the producer sets
        its client's)."""
        self._samples = _Samples(self.window_start_ms, (0.0,) * 7)

    def _counts(self) -> _Counts:
        network = self.network
        return (float(self.records_in_requests), float(self.records_failed + self.send_errors),
                float(self.records_retried), float(self.buffer_exhausted()), float(network.requests),
                float(network.bytes_sent), float(network.bytes_received))

    def _event(self) -> None:
        """A counter of ``_Counts`` is about to grow: start a new rate sample first if the current one is a
        window old (a clock read per request or failed/retried batch, not per record)."""
        now = self.clock.monotonic_ms()
        if now - self._samples.current[0] >= SAMPLE_WINDOW_MS:
            self._samples.advance(now, self._counts())

    def record_request(self, batches: int, records: int, wire_bytes: int, uncompressed_bytes: int,
                       compression_ratios: float | None = None, largest_batch: int = 0,
                       queue_time_ms: float = 0.0, longest_queue_time_ms: float = 0.0) -> None:
        """One Produce request: its batch and record counts, the batches' bytes as sent and before
        compression (61-byte headers included), the sum of their compression ratios (None: 1.0 each), the
        largest batch's bytes, and the batches' queue times (creation to drain, ms): their sum and the
        longest. Java's Sender records these per batch (updateProduceRequestMetrics); here per request."""
        self._event()
        if largest_batch > self.batch_bytes_max:
            self.batch_bytes_max = largest_batch
        self.queue_time_total_ms += queue_time_ms
        if longest_queue_time_ms > self.queue_time_max_ms:
            self.queue_time_max_ms = longest_queue_time_ms
        self.requests += 1
        self.batches_sent += batches
        self.records_in_requests += records
        self.batch_bytes += wire_bytes
        self.compressed_bytes += wire_bytes
        self.uncompressed_bytes += uncompressed_bytes
        self.compression_ratio_sum += float(batches) if compression_ratios is None else compression_ratios

    def record_latency(self, ms: float) -> None:
        self.latency_total_ms += ms
        self.latency_count += 1
        if ms > self.latency_max_ms:
            self.latency_max_ms = ms

    def record_throttle(self, ms: float) -> None:
        """The throttle time a Produce response asked for (produce-throttle-time-avg/max)."""
        self.throttle_total_ms += ms
        self.throttle_count += 1
        if ms > self.throttle_max_ms:
            self.throttle_max_ms = ms

    def record_success(self, batch: ProducerBatch) -> None:
        self.records_sent += batch.record_count

    def record_errors(self, n: int) -> None:
        self._event()
        self.records_failed += n

    def record_send_errors(self, n: int) -> None:
        """``n`` records failed in ``send()`` itself (any thread; a buffer exhausted is one of them)."""
        self._event()
        with self._send_errors_lock:
            self.send_errors += n

    def record_retry(self, n: int) -> None:
        self._event()
        self.records_retried += n

    def record_split(self) -> None:
        self.splits += 1

    def snapshot(self) -> dict[str, float]:
        counts = self._counts()
        send_rate, error_rate, retry_rate, exhausted_rate, request_rate, out_rate, in_rate = self._samples.rates(
            self.clock.monotonic_ms(), counts)
        out: dict[str, float] = {
            "record-send-total": counts[0],
            "record-send-rate": send_rate,
            "record-error-total": counts[1],
            "record-error-rate": error_rate,
            "record-retry-total": counts[2],
            "record-retry-rate": retry_rate,
            "batch-size-avg": self.batch_bytes / self.batches_sent if self.batches_sent else 0.0,
            "batch-size-max": float(self.batch_bytes_max),
            "record-queue-time-avg": self.queue_time_total_ms / self.batches_sent if self.batches_sent else 0.0,
            "record-queue-time-max": self.queue_time_max_ms,
            "produce-throttle-time-avg": (self.throttle_total_ms / self.throttle_count) if self.throttle_count else 0.0,
            "produce-throttle-time-max": self.throttle_max_ms,
            "records-per-request-avg": (self.records_in_requests / self.requests) if self.requests else 0.0,
            "compression-rate-avg": (self.compression_ratio_sum / self.batches_sent) if self.batches_sent else 1.0,
            "request-latency-avg": (self.latency_total_ms / self.latency_count) if self.latency_count else 0.0,
            "request-latency-max": self.latency_max_ms,
            "batch-split-total": float(self.splits),
        }
        out["buffer-exhausted-total"] = counts[3]
        out["buffer-exhausted-rate"] = exhausted_rate
        out["request-total"] = counts[4]
        out["request-rate"] = request_rate
        network = self.network
        out["request-size-avg"] = network.request_bytes / network.requests if network.requests else 0.0
        out["request-size-max"] = float(network.request_bytes_max)
        out["outgoing-byte-total"] = counts[5]
        out["outgoing-byte-rate"] = out_rate
        out["incoming-byte-total"] = counts[6]
        out["incoming-byte-rate"] = in_rate
        for name, fn in self.gauges.items():
            out[name] = float(fn())
        return out
