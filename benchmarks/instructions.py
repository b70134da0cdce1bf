"""Machine instructions per record of the producer's send paths, counted by callgrind.

Usage: ``python benchmarks/instructions.py [--paths keyed,keyless,...] [--small 20000] [--large 60000]
[--batch-size 16384] [--compression lz4]``
(needs ``valgrind``; a few minutes). Set ``SPARKAFKA_NO_ACCEL=1`` for the pure-Python paths.

How it works: wall time is useless on a shared machine, instruction counts are not. For each path the
script runs a child process under ``valgrind --tool=callgrind --separate-threads=yes`` twice, sending
``--small`` and then ``--large`` records after a warm-up, and prints the difference of the two counts
divided by the difference of the record counts: the cost of one more record, without start-up,
imports and connections. ``caller`` is the thread that sends (``main``), ``total`` every thread of the
process (the Sender's share depends a little on how its loop and the caller's interleave). The broker
is a librdkafka mock cluster in its own process (``mock_broker.py``, not counted). Every path sends
100-byte values with a callback on every record (as ``worker.py``), acks=all, idempotence, batch.size
16384 (``--batch-size``), no compression (``--compression``: a fresh producer's ratio estimate creeps
down from 1.0 by Java's steps, so the first ~100 batches of a compressed run are smaller) and a linger.ms
so long that only full batches and ``flush()`` send, so the batches are the same in every run. Paths:

* ``keyed``: ``producer.send(topic, value, key, callback=cb)``, 8-byte keys (the C send lane when the
  accelerator is built);
* ``keyless``: the same without keys (sticky partitioning);
* ``keyed-python``: ``keyed`` with the send lane disabled (``KafkaProducer.send`` ->
  ``RecordAccumulator.append_open``);
* ``keyed-headers``, ``keyless-headers``: ``keyed`` and ``keyless`` with a header on every record
  (``KafkaProducer.send`` -> ``RecordAccumulator.append``, the general path);
* ``keyed-txn``, ``keyless-txn``: ``keyed`` and ``keyless`` in a transaction (a transactional id: the
  Python ``send`` -> ``RecordAccumulator.append``);
* ``arrow``: ``producer.send_arrow`` of 10,000-row Arrow batches with keys.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys
import tempfile
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PATHS = ("keyed", "keyless", "keyed-python", "keyed-headers", "keyless-headers", "keyed-txn", "keyless-txn", "arrow")
WARMUP = 5000
_CHILD_ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1"}
"""numpy (imported with pyarrow by the arrow path) starts an OpenBLAS thread per core unless told not to:
each is one more callgrind thread file and, spinning, instructions that vary from run to run."""
ARROW_ROWS = 10_000


def child(path: str, bootstrap: str, topic: str, n: int, batch_size: int = 16384, compression: str = "none") -> None:
    sys.path.insert(0, os.path.join(ROOT, "src"))
    from sparkafka.cli.perf import make_keys, random_payload
    from sparkafka.producer.producer import KafkaProducer

    config = {"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 600_000,
              "batch.size": batch_size, "compression.type": compression}
    if path.endswith("-txn"):
        config["transactional.id"] = f"instr-{path}-{n}"
    producer = KafkaProducer(config)
    value = random_payload(100)
    keys = make_keys(8) if not path.startswith("keyless") else [None]
    headers = [("h", b"1")] if path.endswith("-headers") else None
    mask = len(keys) - 1
    acked = [0]

    def cb(metadata: object, error: object) -> None:
        acked[0] += 1

    try:
        producer.partitions_for(topic)
        if path.endswith("-txn"):
            producer.init_transactions()
            producer.begin_transaction()
        if path == "keyed-python":
            assert producer._send_lane is not None or os.environ.get("SPARKAFKA_NO_ACCEL")
            if producer._send_lane is not None:
                producer._send_lane.disable()
        if path == "arrow":
            import pyarrow as pa

            batch = pa.RecordBatch.from_pydict({
                "value": pa.array([value] * ARROW_ROWS, pa.binary()),
                "key": pa.array([keys[i & mask] for i in range(ARROW_ROWS)], pa.binary())})
            results = [producer.send_arrow(topic, batch.slice(0, WARMUP))]
            producer.flush()
            left = n
            while left > 0:
                part = batch if left >= ARROW_ROWS else batch.slice(0, left)
                results.append(producer.send_arrow(topic, part))
                left -= part.num_rows
            producer.flush()
            acked[0] = sum(r.wait(600).acknowledged for r in results)
            assert acked[0] == WARMUP + n, acked
        else:
            send = producer.send
            for count in (WARMUP, n):
                if headers is None:
                    for i in range(count):
                        send(topic, value, keys[i & mask], callback=cb)
                else:
                    for i in range(count):
                        send(topic, value, keys[i & mask], headers=headers, callback=cb)
                producer.flush()
            if path.endswith("-txn"):
                producer.commit_transaction()
            assert acked[0] == WARMUP + n, acked
    finally:
        producer.close()


def count(path: str, bootstrap: str, topic: str, n: int, workdir: str, batch_size: int,
          compression: str) -> tuple[int, int]:
    """(caller thread's instructions, all threads') of one child run."""
    out = os.path.join(workdir, f"{path}-{n}")
    subprocess.run(["valgrind", "--tool=callgrind", "--separate-threads=yes", f"--callgrind-out-file={out}",
                    sys.executable, os.path.abspath(__file__), "--child", path, bootstrap, topic, str(n),
                    str(batch_size), compression],
                   check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_CHILD_ENV)
    totals: dict[str, int] = {}
    for name in glob.glob(out + "*"):
        with open(name) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    totals[name] = int(line.split()[1])
                    break
    caller = totals[out + "-01"]
    return caller, sum(totals.values())


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]), sys.argv[7])
        return 0
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--paths", default=",".join(PATHS))
    parser.add_argument("--small", type=int, default=20_000)
    parser.add_argument("--large", type=int, default=60_000)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"))
    args = parser.parse_args()
    accel = "pure Python" if os.environ.get("SPARKAFKA_NO_ACCEL") else "C accelerator"
    print(f"instructions per record ({accel}; {args.large} - {args.small} records; batch.size {args.batch_size}; "
          f"compression {args.compression})")
    for path in args.paths.split(","):
        if path not in PATHS:
            parser.error(f"unknown path {path!r}; known: {', '.join(PATHS)}")
        topic = f"instr-{uuid.uuid4().hex[:8]}"
        broker = subprocess.Popen([sys.executable, os.path.join(HERE, "mock_broker.py"), "--topic", topic],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            assert broker.stdout is not None
            bootstrap = broker.stdout.readline().strip()
            with tempfile.TemporaryDirectory() as workdir:
                small = count(path, bootstrap, topic, args.small, workdir, args.batch_size, args.compression)
                large = count(path, bootstrap, topic, args.large, workdir, args.batch_size, args.compression)
        finally:
            assert broker.stdin is not None
            broker.stdin.close()
            broker.wait(30)
        span = args.large - args.small
        print(f"{path:14s} caller {(large[0] - small[0]) / span:8.0f}   total {(large[1] - small[1]) / span:8.0f}",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
