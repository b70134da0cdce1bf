"""Producer metrics' rates against Java's ``Rate`` over two 30 s samples (``SampledStat``).

How it works: a ``ProducerMetrics`` on a ``ManualClock`` is fed requests, errors and retries as the Sender
feeds it, and its snapshot's rates are compared with what Java's ``Rate.measure`` gives for the same events
at the same times (worked out by hand below each step).
"""

from __future__ import annotations

import pytest

from sparkafka._clock import ManualClock
from sparkafka.producer.metrics import ProducerMetrics


def test_rates_are_javas_two_sample_windows_and_fall_to_zero_when_idle() -> None:
    """The rates were totals over the producer's lifetime: 1,000 records in the first second read 1,000/s
    (Java: 1000 / (1 + 30) s ~ 32/s) and ten idle minutes later still 1.66/s (Java: 0)."""
    clock = ManualClock()
    metrics = ProducerMetrics(clock)
    clock.advance(1000)
    metrics.record_request(1, 1000, 16_000, 16_000)
    m = metrics.snapshot()
    assert m["record-send-total"] == 1000
    assert m["record-send-rate"] == pytest.approx(1000 / 31)  # Rate.windowSize: 1 s elapsed + one 30 s window
    clock.advance(34_000)  # t = 35 s: the first sample (from t = 0) is complete; this request starts the next
    metrics.record_request(1, 500, 8_000, 8_000)
    metrics.record_errors(5)
    metrics.record_retry(7)
    m = metrics.snapshot()
    assert m["record-send-rate"] == pytest.approx(1500 / 35)  # both samples, 35 s since the oldest began
    assert m["record-error-rate"] == pytest.approx(5 / 35) and m["record-retry-rate"] == pytest.approx(7 / 35)
    clock.advance(30_000)  # t = 65 s: the first sample is 65 s old, dropped; the second (from 35 s) is kept
    m = metrics.snapshot()
    assert m["record-send-rate"] == pytest.approx(500 / 30)  # 30 s since it began: a full window, none added
    clock.advance(600_000)  # ten idle minutes: every sample is obsolete
    m = metrics.snapshot()
    assert m["record-send-rate"] == 0 and m["record-error-rate"] == 0 and m["record-retry-rate"] == 0
    assert m["record-send-total"] == 1500 and m["record-error-total"] == 5 and m["record-retry-total"] == 7


def test_buffer_exhausted_and_send_errors_have_windowed_rates_too() -> None:
    clock = ManualClock()
    metrics = ProducerMetrics(clock)
    exhausted = [0]
    metrics.buffer_exhausted = lambda: exhausted[0]
    clock.advance(2000)
    exhausted[0] += 1
    metrics.record_send_errors(1)  # the exhausted record fails in send()
    m = metrics.snapshot()
    assert m["buffer-exhausted-total"] == 1 and m["buffer-exhausted-rate"] == pytest.approx(1 / 32)
    assert m["record-error-total"] == 1 and m["record-error-rate"] == pytest.approx(1 / 32)
    clock.advance(120_000)
    assert metrics.snapshot()["buffer-exhausted-rate"] == 0


def test_request_and_byte_rates_count_every_request_over_javas_windows() -> None:
    """request-total/-rate, request-size-avg/-max and outgoing/incoming-byte-total/-rate come from the network
    client's counts of every API (Java's Selector sensors), at the same two 30 s samples as the record
    rates."""
    clock = ManualClock()
    metrics = ProducerMetrics(clock)
    clock.advance(2000)
    network = metrics.network
    network.requests, network.request_bytes, network.request_bytes_max = 6, 1_800, 1_100  # Metadata, ..., Produce
    network.bytes_sent, network.bytes_received = 1_800, 640
    metrics.record_request(1, 10, 1_000, 1_000)
    m = metrics.snapshot()
    assert m["request-total"] == 6 and m["request-rate"] == pytest.approx(6 / 32)
    assert m["request-size-avg"] == 300 and m["request-size-max"] == 1_100
    assert m["outgoing-byte-total"] == 1_800 and m["outgoing-byte-rate"] == pytest.approx(1_800 / 32)
    assert m["incoming-byte-total"] == 640 and m["incoming-byte-rate"] == pytest.approx(640 / 32)
    clock.advance(600_000)
    m = metrics.snapshot()
    assert m["request-rate"] == m["outgoing-byte-rate"] == m["incoming-byte-rate"] == 0
    assert m["outgoing-byte-total"] == 1_800
