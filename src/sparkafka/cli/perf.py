"""``sparkafka perf``: a producer load test, like Kafka's ``kafka-producer-perf-test``.

How it works: ``--threads`` threads share one ``KafkaProducer`` and each sends its share of
``--num-records`` records (``--record-size`` random upper-case letters, different from record to
record as in Kafka's tool: a pool of up to 4,096 random payloads, at most 16 MiB, is cycled through;
or payloads from ``--payload-file``; keys of ``--key-size`` bytes from a pool of up to 65,536
distinct keys, at most 64 MiB, or none).
``--throughput`` caps the rate (records/s over all threads, -1 = no cap). Without
``--bootstrap-servers`` (or ``bootstrap.servers`` in the producer settings) an embedded Tansu broker
runs for the test and the topic is created. The producer settings are checked before anything
starts, and a record (payload plus key) larger than the producer accepts is an option error.

Errors: a record that fails in the producer is counted (``errors``; the first one is shown); a
``send()`` that fails at once (metadata or memory not available within ``max.block.ms``: returned in
a failed future, as Java's ``send()`` does, or raised by another producer) stops every sending thread,
the records already sent are flushed (bounded by ``delivery.timeout.ms``), and the final line says how
many records were not sent and why; the exit code is then 1. Ctrl-C closes the producer at once
(pending records fail) instead of waiting for them.

Measuring stays cheap: every record gets the same counting callback (no allocation per record);
every ``--latency-sample-every``-th record instead gets a sampling callback (one small slotted
object) bound to a slot in a preallocated ``array('d')`` where its send time (``perf_counter``) was
stored; the callback turns
the slot into the latency (send to acknowledgement) in ms. A reporter thread prints one progress
line per ``--reporting-interval`` (acknowledged records/s, MB/s, average and maximum latency of the
interval) and the run ends with totals: records/s, MB/s (payload bytes, as Kafka's tool counts),
latency average, maximum and p50/p95/p99/p99.9, the rate of the send() loop alone, the CPU time of
the process (``getrusage``) per million records and its peak RSS. ``--json`` prints every line as
a JSON object instead (``"type": "progress"`` / ``"final"``). ``run_perf`` does the same for
programs (the benchmarks use it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import random
import resource
import sys
import threading
import time
from array import array
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from sparkafka._topic import validate_topic_name
from sparkafka.errors import ConfigError, InvalidTopicNameError, KafkaError

if TYPE_CHECKING:
    from sparkafka.config import ProducerConfig

DEFAULT_PARTITIONS = 6
KEY_POOL = 1 << 16
"""Distinct keys cycled through (a power of two: the key of record i is ``keys[i & (KEY_POOL - 1)]``)."""
PAYLOAD_POOL = 1 << 12
"""Payload choices cycled through (random payloads of --record-size, or draws from a payload file)."""
PAYLOAD_POOL_BYTES = 16 << 20
"""Memory cap of the --record-size payload pool (fewer payloads when they are large)."""
KEY_POOL_BYTES = 64 << 20
"""Memory cap of the key pool (fewer distinct keys when they are large)."""
REPORTER_JOIN_S = 5.0
"""How long the end of a run waits for a progress line being printed (a blocked terminal stops waiting)."""
MAX_SAMPLES = 1_000_000
"""Latency samples kept at most (the sampling interval grows with --num-records to stay under it)."""
DEFAULT_SAMPLE_EVERY = 8
PERCENTILES = (50.0, 95.0, 99.0, 99.9)


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "perf",
        help="producer load test (like kafka-producer-perf-test)",
        description="Send --num-records records as fast as allowed and report throughput and "
                    "send-to-acknowledgement latency. Without --bootstrap-servers an embedded Tansu "
                    "broker runs for the test.",
    )
    parser.add_argument("--topic", default="perf-test", help="topic (default 'perf-test')")
    parser.add_argument("--num-records", type=int, required=True, metavar="N", help="records to send")
    size = parser.add_mutually_exclusive_group(required=True)
    size.add_argument("--record-size", type=int, metavar="BYTES", help="value size in bytes")
    size.add_argument("--payload-file", metavar="PATH",
                      help="file of payloads separated by --payload-delimiter, chosen at random")
    parser.add_argument("--payload-delimiter", default="\\n",
                        help="separator of payloads in --payload-file (default: newline)")
    parser.add_argument("--key-size", type=int, default=0, metavar="BYTES",
                        help="key size in bytes (default 0: no key, sticky partitioning)")
    parser.add_argument("--throughput", type=float, required=True, metavar="RECORDS_PER_S",
                        help="maximum records/s over all threads (-1: no limit)")
    parser.add_argument("--producer-props", nargs="+", default=[], metavar="KEY=VALUE",
                        help="producer settings, Java names (e.g. acks=all linger.ms=5)")
    parser.add_argument("--producer-config", metavar="PATH", help="a .properties file of producer settings")
    parser.add_argument("--threads", type=int, default=1, help="sending threads sharing the producer")
    parser.add_argument("--bootstrap-servers", metavar="HOST:PORT[,...]",
                        help="Kafka brokers; default: bootstrap.servers from the producer settings, else "
                             "start an embedded Tansu broker for the test")
    parser.add_argument("--partitions", type=int, default=None,
                        help="create the topic with this many partitions if missing (default: "
                             f"{DEFAULT_PARTITIONS} with the embedded broker, no creation otherwise)")
    parser.add_argument("--reporting-interval", type=float, default=5.0, metavar="SECONDS",
                        help="seconds between progress lines (default 5; 0: none)")
    parser.add_argument("--latency-sample-every", type=int, default=None, metavar="K",
                        help=f"measure the latency of every K-th record (default {DEFAULT_SAMPLE_EVERY}, "
                             f"more when needed to keep at most {MAX_SAMPLES:,} samples)")
    parser.add_argument("--json", action="store_true", help="print progress and result as JSON lines")


# ------------------------------------------------------------------------------------------- options
@dataclass
class PerfOptions:
    """What ``run_perf`` sends."""

    topic: str
    num_records: int
    payloads: list[bytes]
    key_size: int = 0
    throughput: float = -1.0
    threads: int = 1
    reporting_interval: float = 5.0
    sample_every: int | None = None
    producer_config: dict[str, str] = field(default_factory=dict)

    def validate(self) -> None:
        try:
            validate_topic_name(self.topic, "--topic")
        except InvalidTopicNameError as exc:
            raise ConfigError(str(exc), "topic") from None
        if self.num_records < 1:
            raise ConfigError(f"--num-records must be >= 1, got {self.num_records}", "num-records")
        if not self.payloads:
            raise ConfigError("no payload: give --record-size or a non-empty --payload-file", "payload-file")
        if self.key_size < 0:
            raise ConfigError(f"--key-size must be >= 0, got {self.key_size}", "key-size")
        if self.threads < 1 or self.threads > 256:
            raise ConfigError(f"--threads must be in 1..256, got {self.threads}", "threads")
        if not (self.throughput > 0 or self.throughput == -1) or math.isinf(self.throughput):
            raise ConfigError(f"--throughput must be > 0 or -1 (no limit), got {self.throughput}", "throughput")
        if self.sample_every is not None and self.sample_every < 1:
            raise ConfigError(f"--latency-sample-every must be >= 1, got {self.sample_every}",
                              "latency-sample-every")
        if not 0 <= self.reporting_interval < math.inf:  # nan and inf too (inf crashed the progress thread)
            raise ConfigError(f"--reporting-interval must be a number of seconds >= 0, got {self.reporting_interval}",
                              "reporting-interval")


_LETTERS = bytes(65 + b % 26 for b in range(256))
"""Maps a random byte to an upper-case letter (A..V a little likelier than W..Z: 10/256 against 9/256)."""


def random_payload(size: int, seed: int = 0) -> bytes:
    """``size`` random upper-case letters (what Kafka's perf tool sends: compressible like text)."""
    return random_payloads(size, 1, seed)[0]


def random_payloads(size: int, count: int = PAYLOAD_POOL, seed: int = 0) -> list[bytes]:
    """Up to ``count`` different payloads of ``size`` random upper-case letters, together at most
    ``PAYLOAD_POOL_BYTES`` (at least one). Kafka's tool draws new letters for every record; cycling
    through a pool costs nothing per record and keeps batches from compressing like identical records."""
    if size < 1:
        raise ConfigError(f"--record-size must be >= 1, got {size}", "record-size")
    count = max(1, min(count, PAYLOAD_POOL_BYTES // size))
    rng = random.Random(seed)
    total = size * count  # more than PAYLOAD_POOL_BYTES only for one payload larger than that
    data = b"".join(rng.randbytes(min(PAYLOAD_POOL_BYTES, total - i))  # randbytes(n) fails from n = 256 MiB
                    for i in range(0, total, PAYLOAD_POOL_BYTES)).translate(_LETTERS)
    return [data[i:i + size] for i in range(0, total, size)]


def read_payloads(path: str, delimiter: str) -> list[bytes]:
    """The non-empty payloads of a file split on ``delimiter`` (``\\n`` escapes are understood)."""
    try:  # backslash escapes only: other characters (non-ASCII ones too) stand for themselves
        sep = delimiter.encode("latin-1", "backslashreplace").decode("unicode_escape").encode()
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--payload-delimiter {delimiter!r}: {exc}", "payload-delimiter") from exc
    if not sep:
        raise ConfigError("--payload-delimiter must not be empty", "payload-delimiter")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read --payload-file {path!r}: {exc}", "payload-file") from exc
    payloads = [p for p in data.split(sep) if p]
    if not payloads:
        raise ConfigError(f"--payload-file {path!r} has no payloads", "payload-file")
    return payloads


def make_keys(key_size: int, count: int = KEY_POOL) -> list[bytes | None]:
    """``count`` keys of ``key_size`` bytes (decimal, zero-padded; distinct when ``key_size`` allows),
    fewer (a power of two) when they would take more than ``KEY_POOL_BYTES``; or ``[None]``."""
    if key_size <= 0:
        return [None]
    while count > 1 and count * key_size > KEY_POOL_BYTES:
        count >>= 1
    keys: list[bytes | None] = []
    for i in range(count):
        digits = b"%d" % i
        keys.append(digits.rjust(key_size, b"0")[-key_size:])
    return keys


def read_properties(path: str) -> dict[str, str]:
    """A Java ``.properties`` file (``key=value`` lines, ``#`` comments)."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read --producer-config {path!r}: {exc}", "producer-config") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"--producer-config {path!r} must be UTF-8 text: byte 0x{exc.object[exc.start]:02x} at "
                          f"offset {exc.start} is not", "producer-config") from exc
    for line in lines:
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        name, sep, value = line.partition("=")
        if not sep:
            name, sep, value = line.partition(":")
        out[name.strip()] = value.strip()
    return out


def parse_props(pairs: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ConfigError(f"--producer-props expects KEY=VALUE, got {pair!r}", "producer-props")
        out[name.strip()] = value
    return out


# ------------------------------------------------------------------------------------------- stats
class LatencyStats:
    """Acknowledgement counts and sampled latencies, written by the producer's callbacks.

    Callbacks run on the producer's I/O thread only, so the counters need no lock; the reporter
    thread only reads them (a torn read shows up as one slightly-off progress line at worst)."""

    def __init__(self, num_records: int, sample_every: int) -> None:
        self.sample_every = sample_every
        slots = -(-num_records // sample_every)
        self.send_times = array("d", bytes(8 * slots))
        self.latencies = array("d", bytes(8 * slots))
        self.samples = 0
        self.acked = 0
        self.errors = 0
        self.first_error: BaseException | None = None
        self.window_sum = 0.0
        self.window_count = 0
        self.window_max = 0.0
        self.total_sum = 0.0
        self.total_max = 0.0
        self.last_ack = 0.0

    def on_ack(self, metadata: object, error: BaseException | None) -> None:
        """The callback of records whose latency is not sampled: counts only."""
        if error is None:
            self.acked += 1
        else:
            self._failed(error)

    def on_sampled_ack(self, slot: int, metadata: object, error: BaseException | None) -> None:
        now = time.perf_counter()
        self.last_ack = now
        if error is not None:
            self._failed(error)
            return
        self.acked += 1
        latency = (now - self.send_times[slot]) * 1000.0
        self.latencies[slot] = latency
        self.samples += 1
        self.window_sum += latency
        self.window_count += 1
        if latency > self.window_max:
            self.window_max = latency
        self.total_sum += latency
        if latency > self.total_max:
            self.total_max = latency

    def sampled_callback(self, slot: int) -> Callable[[object, BaseException | None], None]:
        """Stamp the send time of ``slot`` now and return its callback (one small object)."""
        self.send_times[slot] = time.perf_counter()
        return _SampledAck(self, slot)

    def _failed(self, error: BaseException) -> None:
        self.errors += 1
        if self.first_error is None:
            self.first_error = error

    def take_window(self) -> tuple[float, float]:
        """(average, maximum) latency of the samples since the last call."""
        count, total, peak = self.window_count, self.window_sum, self.window_max
        self.window_count, self.window_sum, self.window_max = 0, 0.0, 0.0
        return (total / count if count else 0.0), peak

    def percentiles(self, points: Sequence[float] = PERCENTILES) -> dict[str, float]:
        """Latency percentiles (ms, nearest rank) over the measured samples."""
        values = sorted(x for x in self.latencies if x > 0.0)
        out: dict[str, float] = {}
        for p in points:
            name = f"p{p:g}".replace(".", "_")
            if not values:
                out[name] = 0.0
                continue
            rank = max(1, math.ceil(round(p * len(values) / 100.0, 6)))  # round: 99.9% of 1000 is 999
            out[name] = values[min(rank, len(values)) - 1]
        return out


class _SampledAck:
    """The callback of a sampled record: one slotted object (a ``functools.partial`` of a bound method
    would be three objects for the garbage collector to track while the record is in flight)."""

    __slots__ = ("slot", "stats")

    def __init__(self, stats: LatencyStats, slot: int) -> None:
        self.stats = stats
        self.slot = slot

    def __call__(self, metadata: object, error: BaseException | None) -> None:
        self.stats.on_sampled_ack(self.slot, metadata, error)


def choose_sample_every(num_records: int, requested: int | None) -> int:
    every = requested if requested is not None else DEFAULT_SAMPLE_EVERY
    return max(every, -(-num_records // MAX_SAMPLES))


# ------------------------------------------------------------------------------------------- result
@dataclass
class PerfResult:
    records: int
    acked: int
    errors: int
    seconds: float
    send_seconds: float
    payload_bytes: int
    cpu_seconds: float
    peak_rss_mb: float
    latency_avg_ms: float
    latency_max_ms: float
    percentiles_ms: dict[str, float]
    latency_samples: int
    threads: int
    first_error: str | None = None
    sent: int = -1
    """Records handed to ``send()`` (``records`` unless a ``send()`` failed at once; -1 is taken as
    ``records``)."""
    send_error: str | None = None
    """The error of the ``send()`` that stopped the run."""

    def __post_init__(self) -> None:
        if self.sent < 0:
            self.sent = self.records

    @property
    def records_per_second(self) -> float:
        return self.acked / self.seconds if self.seconds > 0 else 0.0

    @property
    def mb_per_second(self) -> float:
        return self.payload_bytes * (self.acked / max(1, self.records)) / self.seconds / 1e6 if self.seconds else 0.0

    @property
    def send_records_per_second(self) -> float:
        return self.sent / self.send_seconds if self.send_seconds > 0 else 0.0

    @property
    def cpu_seconds_per_million(self) -> float:
        return self.cpu_seconds / self.sent * 1e6 if self.sent else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.update(type="final", records_per_second=round(self.records_per_second, 1),
                    mb_per_second=round(self.mb_per_second, 3),
                    send_records_per_second=round(self.send_records_per_second, 1),
                    cpu_seconds_per_million=round(self.cpu_seconds_per_million, 3))
        return data

    def line(self) -> str:
        p = self.percentiles_ms
        text = (f"{self.acked} records sent, {self.records_per_second:.1f} records/sec "
                f"({self.mb_per_second:.2f} MB/sec), {self.latency_avg_ms:.2f} ms avg latency, "
                f"{self.latency_max_ms:.2f} ms max latency, {p['p50']:.2f} ms 50th, {p['p95']:.2f} ms 95th, "
                f"{p['p99']:.2f} ms 99th, {p['p99_9']:.2f} ms 99.9th. send() loop {self.send_records_per_second:.0f} "
                f"records/sec; CPU {self.cpu_seconds:.2f} s ({self.cpu_seconds_per_million:.2f} s per million "
                f"records); peak RSS {self.peak_rss_mb:.0f} MB.")
        if self.errors:
            text += f" {self.errors} records FAILED, first error: {self.first_error}"
        if self.sent < self.records:
            text += (f" {self.records - self.sent} records NOT SENT: send() failed with {self.send_error} "
                     "(the run stopped there)")
        return text


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_mb() -> float:
    """Peak resident set size of this process in MB (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


# ------------------------------------------------------------------------------------------- the run
class _Reporter(threading.Thread):
    def __init__(self, stats: LatencyStats, interval: float, payload_size: float,
                 emit: Callable[[dict[str, Any], str], None]) -> None:
        super().__init__(name="sparkafka-perf-reporter", daemon=True)
        self.stats = stats
        self.interval = interval
        self.payload_size = payload_size
        self.emit = emit
        self.stop_event = threading.Event()

    def run(self) -> None:
        last_acked, last_t = self.stats.acked, time.perf_counter()
        while not self.stop_event.wait(self.interval):
            now = time.perf_counter()
            acked = self.stats.acked
            elapsed = now - last_t
            rate = (acked - last_acked) / elapsed if elapsed > 0 else 0.0
            avg, peak = self.stats.take_window()
            mb = rate * self.payload_size / 1e6
            self.emit(
                {"type": "progress", "records": acked - last_acked, "records_per_second": round(rate, 1),
                 "mb_per_second": round(mb, 3), "latency_avg_ms": round(avg, 3), "latency_max_ms": round(peak, 3)},
                f"{acked - last_acked} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
                f"{avg:.1f} ms avg latency, {peak:.1f} ms max latency.",
            )
            last_acked, last_t = acked, now


class _SendStopped(Exception):
    """A ``send()`` raised or failed with ``__cause__`` after ``sent`` records of the share were sent."""

    def __init__(self, sent: int) -> None:
        super().__init__(sent)
        self.sent = sent


class _FailedInSend(Exception):
    """A ``send()`` returned a future that had already failed (sparkafka's, as Java's, returns what
    Java's ``send()`` returns as a failed future: no metadata or memory within ``max.block.ms``, ...)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


def _send_share(producer: Any, options: PerfOptions, stats: LatencyStats, keys: Sequence[bytes | None],
                payloads: Sequence[bytes], start: int, end: int, started: float, stop: threading.Event) -> int:
    """Send records ``start..end-1`` (global numbering, so sample slots never collide); return how many
    were sent: all, unless ``stop`` is set (checked every ``sample_every`` records and while throttled).
    A ``send()`` that raises becomes ``_SendStopped`` (the count so far, the error as ``__cause__``); so
    does one that returns a ``FailedFuture`` (that record counts as sent: its callback got the error)."""
    from sparkafka.producer.future import FailedFuture

    failed = FailedFuture
    send = producer.send
    topic = options.topic
    on_ack = stats.on_ack
    sampled = stats.sampled_callback
    every = stats.sample_every
    key_mask = len(keys) - 1
    payload_mask = len(payloads) - 1
    rate = options.throughput / options.threads if options.throughput > 0 else 0.0
    first = start + (-start % every)  # the first sampled record of this share
    i = start  # the record being sent, for the count when send() raises
    try:
        # unsampled records before it
        for i in range(start, min(first, end)):
            f = send(topic, payloads[i & payload_mask], keys[i & key_mask], callback=on_ack)
            if f.__class__ is failed:
                raise _FailedInSend(f.error)
        sent = first - start
        for base in range(first, end, every):
            if stop.is_set():
                return base - start
            i = base
            f = send(topic, payloads[base & payload_mask], keys[base & key_mask], callback=sampled(base // every))
            if f.__class__ is failed:
                raise _FailedInSend(f.error)
            for i in range(base + 1, min(base + every, end)):
                f = send(topic, payloads[i & payload_mask], keys[i & key_mask], callback=on_ack)
                if f.__class__ is failed:
                    raise _FailedInSend(f.error)
            if rate:
                sent += min(every, end - base)
                ahead = sent / rate - (time.perf_counter() - started)
                if ahead > 0.001 and stop.wait(ahead):
                    return min(base + every, end) - start
    except _FailedInSend as exc:
        raise _SendStopped(i + 1 - start) from exc.error
    except Exception as exc:
        raise _SendStopped(i - start) from exc
    return end - start


def run_perf(producer: Any, options: PerfOptions,
             emit: Callable[[dict[str, Any], str], None] | None = None, *,
             report_send_errors: bool = False) -> PerfResult:
    """Run the load test on ``producer`` (anything with sparkafka's ``send(topic, value, key,
    callback=)`` and ``flush()``) and return the totals. ``emit(json_dict, text)`` gets progress.

    A ``send()`` that raises or fails at once stops every sending thread. By default its error is raised
    (nothing is flushed); with ``report_send_errors`` a ``KafkaError`` is reported instead: the records
    sent so far are flushed and the result says how many were sent (``sent``) and why the run stopped
    (``send_error``)."""
    options.validate()
    every = choose_sample_every(options.num_records, options.sample_every)
    stats = LatencyStats(options.num_records, every)
    keys = make_keys(options.key_size)
    payloads = options.payloads
    if len(payloads) > 1:  # a random choice per record, drawn up front
        rng = random.Random(1)
        payloads = [rng.choice(options.payloads) for _ in range(PAYLOAD_POOL)]
    payload_total = _payload_total(options.num_records, payloads)
    reporter = None
    if emit is not None and options.reporting_interval > 0:
        reporter = _Reporter(stats, options.reporting_interval, payload_total / options.num_records, emit)
    n, t = options.num_records, options.threads
    bounds = [n * i // t for i in range(t + 1)]
    stop = threading.Event()
    counts = [0] * t
    failures: list[BaseException] = []  # in the order they happened

    def share(index: int) -> None:
        try:
            counts[index] = _send_share(producer, options, stats, keys, payloads, bounds[index],
                                        bounds[index + 1], started, stop)
        except _SendStopped as exc:
            counts[index] = exc.sent
            failures.append(exc.__cause__ or exc)
            stop.set()
        except BaseException as exc:  # re-raised in the calling thread below
            failures.append(exc)
            stop.set()

    cpu0 = _cpu_seconds()
    started = time.perf_counter()
    if reporter is not None:
        reporter.start()
    send_error: BaseException | None = None
    try:
        if t == 1:
            try:
                counts[0] = _send_share(producer, options, stats, keys, payloads, 0, n, started, stop)
            except _SendStopped as exc:
                counts[0] = exc.sent
                failures.append(exc.__cause__ or exc)
        else:
            workers = [threading.Thread(target=share, name=f"sparkafka-perf-{i}", args=(i,), daemon=True)
                       for i in range(t)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
        if failures:
            if not report_send_errors or not isinstance(failures[0], KafkaError):
                raise failures[0]
            send_error = failures[0]
        send_done = time.perf_counter()
        producer.flush()
        finished = time.perf_counter()
    finally:
        stop.set()  # worker threads still sending (Ctrl-C in the calling thread) stop
        if reporter is not None:
            reporter.stop_event.set()
            reporter.join(REPORTER_JOIN_S)  # a progress line being printed comes before the final one
    cpu = _cpu_seconds() - cpu0
    end = max(finished, stats.last_ack) if stats.last_ack else finished
    samples = stats.samples
    return PerfResult(
        records=n, acked=stats.acked, errors=stats.errors, seconds=end - started,
        send_seconds=send_done - started, payload_bytes=payload_total, cpu_seconds=cpu,
        peak_rss_mb=peak_rss_mb(), latency_avg_ms=stats.total_sum / samples if samples else 0.0,
        latency_max_ms=stats.total_max, percentiles_ms=stats.percentiles(), latency_samples=samples,
        threads=t, first_error=None if stats.first_error is None else repr(stats.first_error),
        sent=sum(counts), send_error=None if send_error is None else repr(send_error),
    )


def _payload_total(num_records: int, payloads: Sequence[bytes]) -> int:
    mask = len(payloads) - 1
    if mask == 0:
        return num_records * len(payloads[0])
    full, rest = divmod(num_records, len(payloads))
    per_cycle = sum(map(len, payloads))
    return full * per_cycle + sum(len(payloads[i & mask]) for i in range(rest))


# ------------------------------------------------------------------------------------------- CLI
@contextlib.contextmanager
def _bootstrap(servers: str | None) -> Iterator[tuple[str, bool]]:
    if servers:
        yield servers, False
        return
    from sparkafka.broker import EmbeddedBroker

    with EmbeddedBroker() as broker:
        yield broker.bootstrap_servers, True


def _printer(as_json: bool, out: TextIO) -> Callable[[dict[str, Any], str], None]:
    def emit(data: dict[str, Any], text: str) -> None:
        print(json.dumps(data) if as_json else text, file=out, flush=True)

    return emit


def options_from_args(args: argparse.Namespace) -> PerfOptions:
    config: dict[str, str] = {}
    if args.producer_config:
        config.update(read_properties(args.producer_config))
    config.update(parse_props(args.producer_props))
    if args.partitions is not None and args.partitions < 1:  # before a broker starts (_create_topic again)
        raise ConfigError(f"--partitions must be >= 1, got {args.partitions}", "partitions")
    # before the payloads and keys are made: a size no record may have would only fill memory
    _check_sizes(args.record_size, args.key_size, _settings(config)[0])
    if args.record_size is not None:
        payloads = random_payloads(args.record_size)
    else:
        payloads = read_payloads(args.payload_file, args.payload_delimiter)
    options = PerfOptions(
        topic=args.topic, num_records=args.num_records, payloads=payloads, key_size=args.key_size,
        throughput=args.throughput, threads=args.threads, reporting_interval=args.reporting_interval,
        sample_every=args.latency_sample_every, producer_config=config,
    )
    options.validate()
    return options


def run(args: argparse.Namespace) -> int:
    from sparkafka.producer.producer import KafkaProducer

    emit = _printer(args.json, sys.stdout)
    try:
        options = options_from_args(args)
        settings, config, from_props = _settings(options.producer_config)  # before any broker starts
        _check_record_size(options, settings, f"--record-size {args.record_size}" if args.record_size is not None
                           else "the largest payload of --payload-file")
        with _bootstrap(args.bootstrap_servers or from_props) as (servers, embedded):
            partitions = args.partitions if args.partitions is not None else (
                DEFAULT_PARTITIONS if embedded else None)
            if partitions is not None:
                _create_topic(servers, options.topic, partitions, settings)
            config["bootstrap.servers"] = servers
            producer = KafkaProducer(config)
            done = False
            try:
                producer.partitions_for(options.topic)  # metadata before the clock starts
                result = run_perf(producer, options, emit, report_send_errors=True)
                done = True
            finally:
                # after an error or Ctrl-C, fail what is pending at once instead of waiting for it
                # (up to delivery.timeout.ms when the broker is gone)
                producer.close(None if done else 0)
    except (ConfigError, KafkaError, OSError) as exc:
        print(f"sparkafka perf: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, ConfigError) else 1
    emit(result.to_dict(), result.line())
    return 1 if result.errors or result.sent < result.records else 0


def _settings(producer_config: Mapping[str, str]) -> tuple[ProducerConfig, dict[str, Any], str | None]:
    """The producer settings of --producer-props / --producer-config (checked), the settings without
    ``bootstrap.servers``, and that address if they had one."""
    from sparkafka.config import ProducerConfig

    config: dict[str, Any] = dict(producer_config)
    from_props = _pop_bootstrap_servers(config)
    return ProducerConfig.from_mapping(config, allow_empty_bootstrap=True), config, from_props


def _record_limit(settings: ProducerConfig) -> int:
    """The largest record (as a one-record batch) the producer accepts."""
    return min(settings.max_request_size, settings.buffer_memory)


def _check_sizes(record_size: int | None, key_size: int, settings: ProducerConfig) -> None:
    """An option error if --record-size plus --key-size alone is more than the producer accepts (a record is
    larger still); ``_check_record_size`` checks the exact size of the largest record once it is made. Sizes
    below their minimum are left to their own checks."""
    limit = _record_limit(settings)
    value, key = max(record_size or 0, 0), max(key_size, 0)
    if value + key > limit:
        sizes = f"--key-size {key_size}" if record_size is None else (
            f"--record-size {record_size} with --key-size {key_size}")
        raise ConfigError(f"{sizes} makes records of more than {value + key} bytes, more than the producer accepts: "
                          f"min(max.request.size, buffer.memory) = {limit}",
                          "key-size" if key > limit else "record-size")


def _check_record_size(options: PerfOptions, settings: ProducerConfig, what: str) -> None:
    """An option error if the largest record is more than the producer accepts (it would fail every send)."""
    from sparkafka.record.builder import estimate_batch_size_upper_bound

    limit = _record_limit(settings)
    value = max(options.payloads, key=len)
    key = b"0" * options.key_size if options.key_size > 0 else None
    size = estimate_batch_size_upper_bound(key, value, None)
    if size > limit:
        raise ConfigError(
            f"{what} with --key-size {options.key_size} makes records of {size} bytes (as a one-record "
            f"batch), more than the producer accepts: min(max.request.size, buffer.memory) = {limit}",
            "record-size")


def _pop_bootstrap_servers(config: dict[str, Any]) -> str | None:
    """Remove ``bootstrap.servers`` (any spelling) from --producer-props / --producer-config and return it:
    it names the brokers to test when --bootstrap-servers is not given (--bootstrap-servers wins)."""
    found: str | None = None
    for name in list(config):
        if name.strip().replace("_", ".") == "bootstrap.servers":
            value = str(config.pop(name)).strip()
            found = value or found
    return found


def _create_topic(servers: str, topic: str, partitions: int, settings: ProducerConfig) -> None:
    """Create the topic if missing, with the producer's security settings, within ``max.block.ms``."""
    from sparkafka.net.admin import AdminClient

    if partitions < 1:
        raise ConfigError(f"--partitions must be >= 1, got {partitions}", "partitions")
    with AdminClient(servers, security=settings,
                     request_timeout_ms=min(settings.request_timeout_ms, settings.max_block_ms)) as admin:
        admin.create_topics([(topic, partitions, 1)], timeout_ms=settings.max_block_ms, exist_ok=True)
