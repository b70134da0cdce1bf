"""Per-record sends in a transaction, one source tree against another, on one Apache Kafka node.

Usage: ``python benchmarks/txn_send.py --tree before=/path/to/old/src --tree after=src [--records 300000]
[--rounds 4]`` (each ``src`` folder with its accelerator built; about a minute).

How it works: the script starts one KRaft node (``tests/support/kafka_cluster.py``) and, for each round,
runs one child process per tree (the order alternates from round to round: ABBA), each with that tree
first on ``PYTHONPATH``. A child makes a transactional producer (acks=all, linger.ms 5, the default
batch.size), writes 50,000 records in a first transaction (warm-up) and then times ``--records`` keyed
records (8-byte keys from 1,024, 100-byte values, a callback on every record) from ``begin_transaction``
through ``commit_transaction``, each run on a new 6-partition topic; it prints records/s, its CPU
microseconds per record and what ``producer.send`` is (the C send lane or the Python method). Every
record must be acknowledged. The table gives each round and the median per tree. Compare trees on
the same machine in the same run only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

_CHILD = r"""
import sys, time
from sparkafka.producer.producer import KafkaProducer
bootstrap, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
producer = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": "txn-" + topic, "linger.ms": 5,
                          "acks": "all"})
producer.init_transactions()
keys = [b"key-%04d" % i for i in range(1024)]
value = b"x" * 100
acked = [0]
def cb(metadata, error):
    if error is None:
        acked[0] += 1
for count in (50_000, n):
    producer.begin_transaction()
    cpu, started = time.process_time(), time.perf_counter()
    send = producer.send
    for i in range(count):
        send(topic, value, keys[i & 1023], callback=cb)
    producer.commit_transaction()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
producer.close()
assert acked[0] == 50_000 + n, acked[0]
print(n / elapsed, cpu / n * 1e6, type(producer.send).__name__)
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=SRC",
                        help="a name and a src folder (twice or more)")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    trees = dict(item.split("=", 1) for item in args.tree)
    sys.path.insert(0, os.path.join(ROOT, "tests"))
    from support.consume import create_topic
    from support.kafka_cluster import KafkaCluster

    names = list(trees)
    results: dict[str, list[tuple[float, float, str]]] = {name: [] for name in names}
    with KafkaCluster(nodes=1, name="bench-txn", heap="1g") as cluster:
        for round_number in range(args.rounds):
            for name in names if round_number % 2 == 0 else names[::-1]:
                topic = f"txn-send-{name}-{round_number}-{os.getpid()}"
                create_topic(cluster.bootstrap, topic, 6)
                env = {**os.environ, "PYTHONPATH": os.path.abspath(trees[name])}
                done = subprocess.run([sys.executable, "-c", _CHILD, cluster.bootstrap, topic, str(args.records)],
                                      env=env, capture_output=True, text=True, timeout=900, check=True)
                rate, cpu, send = done.stdout.split()
                results[name].append((float(rate), float(cpu), send))
                print(f"round {round_number + 1} {name}: {float(rate):,.0f} records/s, {float(cpu):.2f} CPU us per "
                      f"record, send is {send}", flush=True)
    summary = {name: {"records_per_s": statistics.median(r for r, _, _ in rows),
                      "cpu_us_per_record": statistics.median(c for _, c, _ in rows), "send": rows[0][2]}
               for name, rows in results.items()}
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
