"""Peak RSS of a sparkafka producer over a long run: ``python benchmarks/rss_flat.py [--records 10000000]``.

How it works: one producer (acks=all, idempotence, linger 5 ms, default batch.size) sends
``--records`` keyed records (8-byte keys from a pool of 65,536, 100-byte values) as fast as it can
to the embedded Tansu broker (or ``--bootstrap-servers``), with a counting callback on every record,
once per ``--buffer-memory`` value given, each in a fresh process (memory a run freed is not given
back to the OS, so runs must not share one). A thread samples the process RSS (``/proc/self/statm``)
every 0.25 s. The producer runs saturated, so its buffer is full most of the time: the bound to check
is RSS <= (RSS before the first send) + buffer.memory + a constant, and no growth over the run.
Prints, per run, the RSS before sending, after each tenth of the records, the peak, and the peak
minus the starting RSS compared with buffer.memory; ``--json`` for one JSON line per run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * PAGE / 1e6


class Sampler(threading.Thread):
    def __init__(self, interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.peak = 0.0
        self.samples: list[tuple[float, float]] = []
        self.stop_event = threading.Event()

    def run(self) -> None:
        start = time.perf_counter()
        while not self.stop_event.wait(self.interval):
            value = rss_mb()
            self.samples.append((time.perf_counter() - start, value))
            self.peak = max(self.peak, value)


@contextlib.contextmanager
def broker(servers: str | None) -> Iterator[str]:
    if servers:
        yield servers
        return
    from sparkafka.broker import EmbeddedBroker

    with EmbeddedBroker() as b:
        yield b.bootstrap_servers


def one_run(servers: str, records: int, buffer_memory: int) -> dict[str, Any]:
    from sparkafka.cli.perf import make_keys, random_payload
    from sparkafka.net.admin import AdminClient
    from sparkafka.producer.producer import KafkaProducer

    topic = f"rss-{buffer_memory}-{os.getpid()}"
    with AdminClient(servers) as admin:
        admin.create_topics([(topic, 6, 1)], exist_ok=True)
    producer = KafkaProducer({"bootstrap.servers": servers, "acks": "all", "enable.idempotence": True,
                              "linger.ms": 5, "buffer.memory": buffer_memory})
    producer.partitions_for(topic)
    keys = make_keys(8)
    payload = random_payload(100)
    acked = [0]

    def on_ack(metadata: object, error: BaseException | None) -> None:
        if error is None:
            acked[0] += 1

    start_rss = rss_mb()
    sampler = Sampler()
    sampler.start()
    checkpoints: list[float] = []
    tenth = max(1, records // 10)
    send = producer.send
    started = time.perf_counter()
    for base in range(0, records, tenth):
        for i in range(base, min(base + tenth, records)):
            send(topic, payload, keys[i & 0xFFFF], callback=on_ack)
        checkpoints.append(round(rss_mb(), 1))
    producer.flush()
    seconds = time.perf_counter() - started
    sampler.stop_event.set()
    sampler.join()
    producer.close()
    peak = max(sampler.peak, max(checkpoints))
    return {
        "records": records, "acked": acked[0], "seconds": round(seconds, 1),
        "records_per_second": round(records / seconds), "buffer_memory_mb": buffer_memory / 1e6,
        "rss_before_mb": round(start_rss, 1), "rss_after_each_tenth_mb": checkpoints,
        "rss_peak_mb": round(peak, 1), "peak_minus_start_mb": round(peak - start_rss, 1),
        "growth_second_half_mb": _second_half_growth(checkpoints),
    }


def _second_half_growth(checkpoints: list[float]) -> float:
    """How much the RSS rose during the second half of the run (0 when flat)."""
    half = len(checkpoints) // 2
    if half < 1:
        return 0.0
    return round(max(checkpoints[half:]) - checkpoints[half - 1], 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--buffer-memory", type=int, nargs="+", default=[33554432],
                        help="buffer.memory values to run with (bytes; default 33554432)")
    parser.add_argument("--bootstrap-servers", default=None)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: one run, JSON out
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one_run(args.bootstrap_servers, args.records, args.buffer_memory[0])), flush=True)
        return 0
    with broker(args.bootstrap_servers) as servers:
        for memory in args.buffer_memory:
            cmd = [sys.executable, os.path.abspath(__file__), "--one", "--records", str(args.records),
                   "--buffer-memory", str(memory), "--bootstrap-servers", servers]
            out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
            result = json.loads(out.strip().splitlines()[-1])
            if args.json:
                print(json.dumps(result), flush=True)
                continue
            print(f"{result['records']:,} records in {result['seconds']} s ({result['records_per_second']:,}/s), "
                  f"buffer.memory {result['buffer_memory_mb']:.1f} MB: RSS {result['rss_before_mb']} MB before, "
                  f"after each tenth {result['rss_after_each_tenth_mb']}, peak {result['rss_peak_mb']} MB "
                  f"(+{result['peak_minus_start_mb']} MB over the start; second-half growth "
                  f"{result['growth_second_half_mb']} MB); {result['acked']:,} acknowledged", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
