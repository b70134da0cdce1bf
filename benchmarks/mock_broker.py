"""A librdkafka mock cluster in its own process, for ``run.py --broker mock``.

How it works: ``python benchmarks/mock_broker.py --topic T [--partitions 6] [--brokers 3]`` creates a
mock cluster of ``--brokers`` nodes inside the ``confluent-kafka`` wheel's librdkafka (through
``tests/support/mock_cluster.py``, ctypes), creates the topic (the mock has no CreateTopics API),
prints the bootstrap servers on one line and serves until its stdin closes (so it never outlives
``run.py``). The cluster is C code in its own process: unlike the embedded Tansu it needs little CPU
per batch, so the producers, not the broker, set the pace; run.py starts a fresh one per run (the mock
keeps every record in memory).
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--topic", required=True)
    parser.add_argument("--partitions", type=int, default=6)
    parser.add_argument("--brokers", type=int, default=3)
    args = parser.parse_args()
    from support.mock_cluster import MockCluster

    cluster = MockCluster(args.brokers)
    cluster.create_topic(args.topic, args.partitions, 1)
    print(cluster.bootstrap_servers, flush=True)
    sys.stdin.read()  # until the parent closes the pipe (or exits)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
