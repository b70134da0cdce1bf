"""One benchmark run of one Kafka client, in its own process: ``python benchmarks/worker.py --client NAME ...``.

How it works: the parent (``run.py``) starts this script once per (client, workload) so that each
client's CPU time and peak RSS are its own (``resource.getrusage`` of this process, taken around the
send loop and the final flush only; peak RSS is the process maximum). Every client runs the same
loop: one fixed payload, keys from a pool of 65,536 distinct keys of ``--key-size`` bytes (or none),
and a completion callback on every record (a shared counting function; every ``--sample-every``-th
record gets a sampling callback bound to a slot of a preallocated array holding its send time, so
the latency is send to acknowledgement). The client-specific parts are small:

* ``sparkafka``: ``producer.send(topic, value, key, callback=cb)``, then ``flush()`` (this is
  ``sparkafka.cli.perf.run_perf``, the code behind ``sparkafka perf``); ``--arrow`` uses
  ``producer.send_arrow(topic, record_batch)`` on 10,000-row Arrow batches instead.
* ``confluent``: ``produce(topic, value, key, on_delivery=cb)`` with ``poll(0)`` every 64 records
  (``BufferError`` -> ``poll(0.005)`` and retry); with several threads one extra thread polls and
  the sending threads only produce. ``--arrow`` converts the same Arrow batches with
  ``to_pylist()`` and produces row by row (what a user of that client would write).
* ``kafka-python``: ``send(topic, value=v, key=k).add_both(cb)``, then ``flush()``.
* ``aiokafka``: in an asyncio loop, ``fut = await producer.send(...)``;
  ``fut.add_done_callback(cb)``, then ``await producer.flush()``.
* ``ceiling``: not a client but the broker's limit: ``broker_ceiling.py`` sends pre-built Produce
  requests of full batches (its docstring).
* ``java``, ``java-perf``: the Java producer in a JVM of its own (``java_peer.py``): the same loop
  through ``KafkaProducer.send`` with a callback per record, and Kafka's own ``ProducerPerformance`` for
  keyless records; both get this run's payload bytes and report CPU and peak RSS of the JVM.

Settings are the same for all: acks=all, idempotence on, linger 5 ms, batch size 16384 bytes,
compression none or lz4. Prints one JSON object (records/s, MB/s, send-loop rate, CPU seconds,
peak RSS, latency percentiles) on stdout.

``--client sparkafka-py`` is sparkafka's run without the C accelerator: the parent sets
``SPARKAFKA_NO_ACCEL=1`` in this process's environment (``run.py`` does), and the run refuses to start
if the accelerator was loaded anyway. ``--batch-stats`` (``scale.py``) adds what the producer batched:
``records_per_batch`` and ``batch_size_avg`` (bytes), the producer's memory bound ``buffer_memory`` and
the resident set right before the send loop ``rss_before_mb``. sparkafka counts batches and records of
its Produce requests exactly (``ProducerMetrics``) and also reports ``batches_per_request`` (the broker's
cost is partly per request: the ceiling sends one batch per partition in each); confluent-kafka gets
``statistics.interval.ms`` 1000 and sums its topic's ``batchcnt``/``batchsize`` windows (their cost is in
its CPU time; the last window is collected after the clock stops), its bound is ``queue.buffering.max.kbytes``; the Java
producer reports Kafka's windowed ``batch-size-avg``, turned into records per batch with the size of
one record in a batch (``record_wire_size``).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import re
import resource
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from sparkafka.cli.perf import (
    LatencyStats,
    PerfOptions,
    choose_sample_every,
    make_keys,
    random_payload,
    run_perf,
)

CLIENTS = ("sparkafka", "sparkafka-py", "confluent", "kafka-python", "aiokafka", "ceiling", "java", "java-perf")
ARROW_ROWS = 10_000
BATCH_SIZE = 16384
LINGER_MS = 5
CONFLUENT_POLL_EVERY = 64
CONFLUENT_STATS_MS = 1000
"""confluent-kafka's ``statistics.interval.ms`` with ``--batch-stats``."""
CONFLUENT_QUEUE_KBYTES = 1048576
"""librdkafka's default ``queue.buffering.max.kbytes`` (1 GiB): its bound on buffered record bytes."""
_HISTOGRAM = {name: re.compile(rf'"{name}":\s*\{{[^}}]*?"sum":\s*(\d+)[^}}]*?"cnt":\s*(\d+)')
              for name in ("batchcnt", "batchsize")}
"""``sum`` and ``cnt`` of a librdkafka statistics histogram (window of one interval)."""


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _rss_mb() -> float:
    """The resident set now (``/proc/self/statm``), in MB as ``_peak_rss_mb``."""
    with open("/proc/self/statm", encoding="ascii") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / (1024.0 * 1024.0)


def _varint_size(value: int) -> int:
    zigzag = (value << 1) ^ (value >> 63)
    size = 1
    while zigzag >= 0x80:
        zigzag >>= 7
        size += 1
    return size


def record_wire_size(key_size: int, value_size: int, batch_bytes: float) -> float:
    """Bytes of one record with these sizes inside an uncompressed v2 batch of about ``batch_bytes``
    (Java ``DefaultRecord``: length, attributes, timestamp delta, offset delta, key and value each with
    its length, header count), its offset delta taken as the batch's middle record's."""
    key_length = key_size if key_size else -1
    rough = 2 + 1 + 2 + _varint_size(key_length) + max(key_size, 0) + _varint_size(value_size) + value_size + 1
    middle = max(0, int((batch_bytes - 61) / rough) // 2)
    body = (1 + 1 + _varint_size(middle) + _varint_size(key_length) + max(key_size, 0)
            + _varint_size(value_size) + value_size + 1)
    return float(_varint_size(body) + body)


class _ConfluentBatches:
    """confluent-kafka's batch sizes from its statistics: the topic's ``batchcnt`` and ``batchsize``
    histograms cover one statistics interval each, so their sums and counts add up over the run."""

    def __init__(self, topic: str) -> None:
        self.marker = '"topic":' + json.dumps(topic)
        self.records = self.bytes = self.batches = self.calls = 0

    def on_stats(self, text: str) -> None:
        self.calls += 1
        topics = text.find('"topics":')
        found = text.find(self.marker, topics) if topics >= 0 else -1
        if found < 0:
            return
        count = _HISTOGRAM["batchcnt"].search(text, found)
        size = _HISTOGRAM["batchsize"].search(text, found)
        if count is None or size is None:
            return
        self.records += int(count.group(1))
        self.batches += int(count.group(2))
        self.bytes += int(size.group(1))

    def last_window(self, producer: Any) -> None:
        """After the flush, untimed: wait for one more statistics callback (the run's last window)."""
        calls = self.calls
        deadline = time.monotonic() + 3 * CONFLUENT_STATS_MS / 1000
        while self.calls == calls and time.monotonic() < deadline:
            producer.poll(0.05)

    def result(self) -> dict[str, Any]:
        return {"records_per_batch": self.records / self.batches if self.batches else None,
                "batch_size_avg": self.bytes / self.batches if self.batches else None,
                "buffer_memory": CONFLUENT_QUEUE_KBYTES * 1024}


class Run:
    """Shared state of one run: payload, keys, latency stats and the timing result."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.topic: str = args.topic
        self.n: int = args.records
        self.payload = random_payload(args.value_size)
        self.keys = make_keys(args.key_size)
        self.key_mask = len(self.keys) - 1
        self.stats = LatencyStats(self.n, choose_sample_every(self.n, args.sample_every))
        self.every = self.stats.sample_every
        self.started = self.send_done = self.finished = 0.0
        self.cpu0 = 0.0
        self.cpu = 0.0
        self.rss_before = 0.0
        self.extra: Callable[[], dict[str, Any]] | None = None
        """More fields for the result (``--batch-stats``), read after ``after``."""
        self.after: Callable[[], None] | None = None
        """Runs after the clock stops (``--batch-stats``: confluent-kafka's last statistics)."""

    def begin(self) -> None:
        self.rss_before = _rss_mb()
        self.cpu0 = _cpu()
        self.started = time.perf_counter()

    def end(self) -> None:
        self.finished = time.perf_counter()
        self.cpu = _cpu() - self.cpu0
        if self.after is not None:
            self.after()

    def shares(self, threads: int) -> list[tuple[int, int]]:
        """``threads`` contiguous ranges of record numbers, each starting at a multiple of ``every``."""
        per = -(-self.n // threads)
        per += -per % self.every
        return [(min(i * per, self.n), min((i + 1) * per, self.n)) for i in range(threads)]

    def result(self, client: str) -> dict[str, Any]:
        st = self.stats
        seconds = self.finished - self.started
        send_seconds = (self.send_done or self.finished) - self.started
        samples = st.samples
        extra = {} if self.extra is None else self.extra()
        return extra | {
            "rss_before_mb": self.rss_before,
            "client": client, "records": self.n, "acked": st.acked, "errors": st.errors,
            "first_error": None if st.first_error is None else repr(st.first_error),
            "seconds": seconds, "send_seconds": send_seconds,
            "records_per_second": st.acked / seconds if seconds > 0 else 0.0,
            "send_records_per_second": self.n / send_seconds if send_seconds > 0 else 0.0,
            "mb_per_second": st.acked * len(self.payload) / seconds / 1e6 if seconds > 0 else 0.0,
            "cpu_seconds": self.cpu, "cpu_seconds_per_million": self.cpu / self.n * 1e6,
            "peak_rss_mb": _peak_rss_mb(),
            "latency_avg_ms": st.total_sum / samples if samples else None,
            "latency_max_ms": st.total_max if samples else None,
            "percentiles_ms": st.percentiles() if samples else None,
        }


# ------------------------------------------------------------------------------------------- sparkafka
def run_sparkafka(run: Run) -> dict[str, Any]:
    from sparkafka.producer.producer import KafkaProducer

    a = run.args
    producer = KafkaProducer({"bootstrap.servers": a.bootstrap_servers, "acks": "all",
                              "enable.idempotence": True, "linger.ms": LINGER_MS,
                              "batch.size": a.batch_size, "compression.type": a.compression})
    try:
        producer.partitions_for(run.topic)
        if a.arrow:
            return _sparkafka_arrow(run, producer) | _sparkafka_batches(producer)
        options = PerfOptions(topic=run.topic, num_records=run.n, payloads=[run.payload],
                              key_size=a.key_size, threads=a.threads, reporting_interval=0,
                              sample_every=a.sample_every)
        rss_before = _rss_mb()
        res = run_perf(producer, options)
        batches = _sparkafka_batches(producer) | {"rss_before_mb": rss_before}
    finally:
        producer.close()
    return batches | {
        "client": "sparkafka", "records": res.records, "acked": res.acked, "errors": res.errors,
        "first_error": res.first_error, "seconds": res.seconds, "send_seconds": res.send_seconds,
        "records_per_second": res.records_per_second, "send_records_per_second": res.send_records_per_second,
        "mb_per_second": res.acked * len(run.payload) / res.seconds / 1e6,
        "cpu_seconds": res.cpu_seconds, "cpu_seconds_per_million": res.cpu_seconds_per_million,
        "peak_rss_mb": res.peak_rss_mb, "latency_avg_ms": res.latency_avg_ms,
        "latency_max_ms": res.latency_max_ms, "percentiles_ms": res.percentiles_ms,
    }


def _sparkafka_batches(producer: Any) -> dict[str, Any]:
    """Records per batch and bytes per batch of every Produce request the producer sent, exactly."""
    m = producer.metrics_registry
    return {"records_per_batch": m.records_in_requests / m.batches_sent if m.batches_sent else None,
            "batch_size_avg": m.batch_bytes / m.batches_sent if m.batches_sent else None,
            "batches_per_request": m.batches_sent / m.requests if m.requests else None,
            "buffer_memory": int(producer.metrics()["buffer-total-bytes"])}


def arrow_batch(run: Run, rows: int) -> Any:
    import pyarrow as pa

    keys = [run.keys[i & run.key_mask] for i in range(rows)]
    columns = {"value": pa.array([run.payload] * rows, pa.binary())}
    if run.args.key_size:
        columns["key"] = pa.array(keys, pa.binary())
    return pa.RecordBatch.from_pydict(columns)


def _sparkafka_arrow(run: Run, producer: Any) -> dict[str, Any]:
    batch = arrow_batch(run, min(ARROW_ROWS, run.n))
    results = []
    unfolded = 0
    run.begin()
    left = run.n
    while left > 0:
        part = batch if left >= batch.num_rows else batch.slice(0, left)
        results.append(producer.send_arrow(run.topic, part))
        left -= part.num_rows
        while unfolded < len(results) and results[unfolded].poll():  # fold finished ones, in order,
            unfolded += 1  # so their segments are released (results before `unfolded` are all done)
    run.send_done = time.perf_counter()
    producer.flush()
    for r in results:
        report = r.wait(60)
        run.stats.acked += report.acknowledged
        run.stats.errors += report.failed
        if report.first_error is not None and run.stats.first_error is None:
            run.stats.first_error = report.first_error
    run.end()
    return run.result("sparkafka")


# ------------------------------------------------------------------------------------------- confluent
def run_confluent(run: Run) -> dict[str, Any]:
    from confluent_kafka import Producer

    a = run.args
    config: dict[str, Any] = {"bootstrap.servers": a.bootstrap_servers, "acks": "all",
                              "enable.idempotence": True, "linger.ms": LINGER_MS, "batch.size": a.batch_size,
                              "compression.type": a.compression}
    batches = _ConfluentBatches(run.topic)
    if a.batch_stats:
        config.update({"statistics.interval.ms": CONFLUENT_STATS_MS, "stats_cb": batches.on_stats})
    producer = Producer(config)
    producer.list_topics(run.topic, timeout=30)
    if a.batch_stats:
        run.extra = batches.result
        run.after = functools.partial(batches.last_window, producer)
    stats = run.stats
    topic, payload, keys, mask, every = run.topic, run.payload, run.keys, run.key_mask, run.every

    def on_ack(err: Any, msg: Any) -> None:
        if err is None:
            stats.acked += 1
        else:
            stats._failed(RuntimeError(str(err)))

    def on_sampled(slot: int, err: Any, msg: Any) -> None:
        stats.on_sampled_ack(slot, msg, None if err is None else RuntimeError(str(err)))

    def sampled(slot: int) -> Callable[[Any, Any], None]:
        stats.send_times[slot] = time.perf_counter()
        return functools.partial(on_sampled, slot)

    def produce(value: bytes, key: bytes | None, cb: Any, poll: bool) -> None:
        while True:
            try:
                producer.produce(topic, value, key, on_delivery=cb)
                return
            except BufferError:
                if poll:
                    producer.poll(0.005)
                else:
                    time.sleep(0.001)

    def share(start: int, end: int, poll: bool) -> None:
        prod = producer.produce
        n = 0
        for base in range(start, end, every):
            produce(payload, keys[base & mask], sampled(base // every), poll)
            for i in range(base + 1, min(base + every, end)):
                try:
                    prod(topic, payload, keys[i & mask], on_delivery=on_ack)
                except BufferError:
                    produce(payload, keys[i & mask], on_ack, poll)
            n += every
            if poll and n >= CONFLUENT_POLL_EVERY:
                producer.poll(0)
                n = 0

    if a.arrow:
        return _confluent_arrow(run, producer, on_ack)
    run.begin()
    if a.threads == 1:
        share(0, run.n, True)
    else:
        stop = threading.Event()

        def poller() -> None:
            while not stop.is_set():
                producer.poll(0.01)

        pt = threading.Thread(target=poller)
        pt.start()
        workers = [threading.Thread(target=share, args=(s, e, False)) for s, e in run.shares(a.threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        stop.set()
        pt.join()
    run.send_done = time.perf_counter()
    producer.flush(120)
    run.end()
    return run.result("confluent")


def _confluent_arrow(run: Run, producer: Any, on_ack: Any) -> dict[str, Any]:
    batch = arrow_batch(run, min(ARROW_ROWS, run.n))
    topic = run.topic
    run.begin()
    left = run.n
    while left > 0:
        part = batch if left >= batch.num_rows else batch.slice(0, left)
        values = part.column("value").to_pylist()
        keys = part.column("key").to_pylist() if "key" in part.schema.names else [None] * part.num_rows
        for v, k in zip(values, keys):
            while True:
                try:
                    producer.produce(topic, v, k, on_delivery=on_ack)
                    break
                except BufferError:
                    producer.poll(0.005)
        producer.poll(0)
        left -= part.num_rows
    run.send_done = time.perf_counter()
    producer.flush(120)
    run.end()
    return run.result("confluent")


# ------------------------------------------------------------------------------------------- kafka-python
def run_kafka_python(run: Run) -> dict[str, Any]:
    from kafka import KafkaProducer

    a = run.args
    producer = KafkaProducer(bootstrap_servers=a.bootstrap_servers, acks="all", enable_idempotence=True,
                             linger_ms=LINGER_MS, batch_size=a.batch_size,
                             compression_type=None if a.compression == "none" else a.compression)
    producer.partitions_for(run.topic)
    stats = run.stats
    topic, payload, keys, mask, every = run.topic, run.payload, run.keys, run.key_mask, run.every

    def on_ack(result: Any) -> None:
        if isinstance(result, BaseException):
            stats._failed(result)
        else:
            stats.acked += 1

    def on_sampled(slot: int, result: Any) -> None:
        err = result if isinstance(result, BaseException) else None
        stats.on_sampled_ack(slot, result, err)

    def share(start: int, end: int) -> None:
        send = producer.send
        for base in range(start, end, every):
            stats.send_times[base // every] = time.perf_counter()
            send(topic, value=payload, key=keys[base & mask]).add_both(on_sampled, base // every)
            for i in range(base + 1, min(base + every, end)):
                send(topic, value=payload, key=keys[i & mask]).add_both(on_ack)

    run.begin()
    _threaded(share, run, a.threads)
    run.send_done = time.perf_counter()
    producer.flush()
    run.end()
    producer.close()
    return run.result("kafka-python")


def _threaded(share: Callable[[int, int], None], run: Run, threads: int) -> None:
    if threads == 1:
        share(0, run.n)
        return
    workers = [threading.Thread(target=share, args=se) for se in run.shares(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()


# ------------------------------------------------------------------------------------------- ceiling
def run_ceiling(run: Run) -> dict[str, Any]:
    """Not a client: the broker's own limit, pre-built requests sent as fast as it answers them."""
    from broker_ceiling import run_ceiling as ceiling

    a = run.args
    return ceiling(a.bootstrap_servers, run.topic, run.n, a.batch_size, a.key_size, a.value_size)


# ------------------------------------------------------------------------------------------- aiokafka
def run_aiokafka(run: Run) -> dict[str, Any]:
    from aiokafka import AIOKafkaProducer

    a = run.args
    stats = run.stats
    topic, payload, keys, mask, every = run.topic, run.payload, run.keys, run.key_mask, run.every

    def on_ack(fut: Any) -> None:
        err = fut.exception()
        if err is None:
            stats.acked += 1
        else:
            stats._failed(err)

    def on_sampled(slot: int, fut: Any) -> None:
        stats.on_sampled_ack(slot, None, fut.exception())

    async def main() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=a.bootstrap_servers, acks="all",
                                    enable_idempotence=a.aiokafka_idempotence, linger_ms=LINGER_MS,
                                    max_batch_size=a.batch_size,
                                    compression_type=None if a.compression == "none" else a.compression)
        await producer.start()
        try:
            await producer.partitions_for(topic)
            send = producer.send
            run.begin()
            for base in range(0, run.n, every):
                stats.send_times[base // every] = time.perf_counter()
                fut = await send(topic, payload, keys[base & mask])
                fut.add_done_callback(functools.partial(on_sampled, base // every))
                for i in range(base + 1, min(base + every, run.n)):
                    fut = await send(topic, payload, keys[i & mask])
                    fut.add_done_callback(on_ack)
            run.send_done = time.perf_counter()
            await producer.flush()
            await asyncio.sleep(0)  # let the done-callbacks of the last batch run
            run.end()
        finally:
            await producer.stop()

    asyncio.run(main())
    return run.result("aiokafka")


# ------------------------------------------------------------------------------------------- Java
def run_java(run: Run) -> dict[str, Any]:
    """The Java producer (``java_peer.py``): a JVM of its own, so its CPU and RSS are its own."""
    import java_peer

    a = run.args
    result = java_peer.run(a.client, bootstrap=a.bootstrap_servers, topic=run.topic, records=run.n,
                           payload=run.payload, key_size=a.key_size, compression=a.compression,
                           batch_size=a.batch_size, sample_every=a.sample_every)
    batch = result.get("batch_size_avg")
    if batch and a.compression == "none":  # Kafka counts no batches: bytes per batch / bytes per record
        result["records_per_batch"] = (batch - 61) / record_wire_size(a.key_size, a.value_size, batch)
        result["records_per_batch_estimated"] = True
    return result


def run_sparkafka_py(run: Run) -> dict[str, Any]:
    """sparkafka without the C accelerator (``SPARKAFKA_NO_ACCEL=1`` in this process's environment)."""
    from sparkafka.accel import ACCEL

    if ACCEL is not None:
        raise SystemExit("sparkafka-py needs SPARKAFKA_NO_ACCEL=1 in the environment (the accelerator is loaded)")
    return run_sparkafka(run) | {"client": "sparkafka-py"}


RUNNERS: dict[str, Callable[[Run], dict[str, Any]]] = {
    "sparkafka": run_sparkafka, "sparkafka-py": run_sparkafka_py, "confluent": run_confluent,
    "kafka-python": run_kafka_python, "aiokafka": run_aiokafka, "ceiling": run_ceiling,
    "java": run_java, "java-perf": run_java,
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one benchmark run (see the module docstring)")
    parser.add_argument("--client", choices=CLIENTS, required=True)
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--key-size", type=int, default=8)
    parser.add_argument("--compression", choices=("none", "lz4"), default="none")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arrow", action="store_true")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE, help="batch.size for every client")
    parser.add_argument("--sample-every", type=int, default=None)
    parser.add_argument("--batch-stats", action="store_true",
                        help="also report records per batch, bytes per batch, buffer.memory and the RSS "
                             "before sending (confluent-kafka: turns its statistics on)")
    parser.add_argument("--aiokafka-idempotence", action="store_true",
                        help="enable idempotence in aiokafka (off by default: Tansu answers aiokafka's "
                             "InitProducerId with UNKNOWN_SERVER_ERROR)")
    args = parser.parse_args(argv)
    if args.client == "aiokafka" and args.threads != 1:
        parser.error("aiokafka runs in one event loop: --threads must be 1")
    if args.arrow and args.client not in ("sparkafka", "sparkafka-py", "confluent", "ceiling"):
        parser.error("--arrow is for sparkafka and confluent (and the ceiling run, which ignores it)")
    if args.client in ("java", "java-perf") and (args.threads != 1 or args.arrow):
        parser.error("the Java peers run one sending thread and no Arrow batches")
    if args.client == "java-perf" and args.key_size:
        parser.error("java-perf (ProducerPerformance) runs keyless workloads: --key-size 0")
    if args.client == "ceiling" and (args.threads != 1 or args.compression != "none"):
        parser.error("the ceiling run (benchmarks/broker_ceiling.py) has one thread and no compression")
    result = RUNNERS[args.client](Run(args))
    result.update(threads=args.threads, compression=args.compression, value_size=args.value_size,
                  key_size=args.key_size, arrow=args.arrow)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
