"""Producer metrics with the Java client's names.

How it works: the Sender thread updates plain counters (no locks: a metric may lag by one update); the
errors ``send()`` raises or returns are counted by the sending threads under a lock (a rare path);
``snapshot()`` turns them into Java-named values, counted as Java's Sender counts them: records sent are
the records put into Produce requests (a retry counts again, a record that then fails counts too),
request latency is sampled from answered requests only (not a timeout, a disconnect or acks=0), the
compression rate is the average of the batches' ratios (records' bytes, compressed over uncompressed, 1.0
without compression). Unlike Java's (two 30 s samples), rates are per second over the producer's lifetime,
averages over all batches/requests seen.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from .._clock import Clock

if TYPE_CHECKING:
    from .producer_batch import ProducerBatch


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
        self.splits = 0
        self.send_errors = 0
        """Records whose ``send()`` raised or returned an error (Java counts them in the "errors" sensor)."""
        self._send_errors_lock = threading.Lock()
        self.gauges: dict[str, Callable[[], float]] = {}
        self.buffer_exhausted: Callable[[], int] = lambda: 0
        """How many record sends failed because ``buffer.memory`` stayed exhausted for ``max.block.ms``
        (the BufferPool's count; Java's "buffer-exhausted-records" sensor)."""

    def record_request(self, batches: int, records: int, wire_bytes: int, uncompressed_bytes: int,
                       compression_ratios: float | None = None) -> None:
        """One Produce request: its batch and record counts, the batches' bytes as sent and before
        compression (61-byte headers included) and the sum of their compression ratios (None: 1.0 each)."""
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

    def record_success(self, batch: ProducerBatch) -> None:
        self.records_sent += batch.record_count

    def record_errors(self, n: int) -> None:
        self.records_failed += n

    def record_send_errors(self, n: int) -> None:
        """``n`` records failed in ``send()`` itself (any thread)."""
        with self._send_errors_lock:
            self.send_errors += n

    def record_retry(self, n: int) -> None:
        self.records_retried += n

    def record_split(self) -> None:
        self.splits += 1

    def snapshot(self) -> dict[str, float]:
        elapsed_s = max((self.clock.monotonic_ms() - self.window_start_ms) / 1000.0, 1e-9)
        out: dict[str, float] = {
            "record-send-total": float(self.records_in_requests),
            "record-send-rate": self.records_in_requests / elapsed_s,
            "record-error-total": float(self.records_failed + self.send_errors),
            "record-error-rate": (self.records_failed + self.send_errors) / elapsed_s,
            "record-retry-total": float(self.records_retried),
            "record-retry-rate": self.records_retried / elapsed_s,
            "batch-size-avg": self.batch_bytes / self.batches_sent if self.batches_sent else 0.0,
            "records-per-request-avg": (self.records_in_requests / self.requests) if self.requests else 0.0,
            "compression-rate-avg": (self.compression_ratio_sum / self.batches_sent) if self.batches_sent else 1.0,
            "request-total": float(self.requests),
            "request-latency-avg": (self.latency_total_ms / self.latency_count) if self.latency_count else 0.0,
            "request-latency-max": self.latency_max_ms,
            "batch-split-total": float(self.splits),
        }
        exhausted = self.buffer_exhausted()
        out["buffer-exhausted-total"] = float(exhausted)
        out["buffer-exhausted-rate"] = exhausted / elapsed_s
        for name, fn in self.gauges.items():
            out[name] = float(fn())
        return out
