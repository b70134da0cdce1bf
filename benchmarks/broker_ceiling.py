"""The broker's ceiling: how many records/s a broker accepts when the client does (almost) nothing.

Usage: ``python benchmarks/broker_ceiling.py --bootstrap-servers HOST:PORT --topic T --records N``
(or ``worker.py --client ceiling``, which ``run.py`` runs next to the bulk Arrow workloads).

How it works: the record batches are built once, before the clock starts: for each partition of the
topic one v2 batch of ``--batch-size`` bytes holding as many records as the producer would put in it
(``--key-size``-byte random keys, one ``--value-size``-byte value, the same ``RecordBatchBuilder``).
Each Produce request carries one batch per partition led by that broker (Kafka takes at most one
batch per partition per request), up to ``max.request.size`` (1 MB), as the producer's Sender drains
them. The producer is idempotent like the benchmarked clients (a producer id from InitProducerId;
each resend of a partition's batch gets the next sequence, which rewrites 13 header bytes and the CRC
in place). One connection per broker, as every Kafka client has, with up to
``max.in.flight.requests.per.connection`` (5) requests in flight; the loop only writes the prepared
bytes, reads the answers and checks their error codes.

The result (same JSON as ``worker.py``) is what a producer with no per-record cost could reach
against that broker on this machine: the bulk path's rate divided by it says how much of the
broker's capacity the client leaves unused.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

from sparkafka.errors import error_class_for_code, error_name
from sparkafka.net.admin import AdminClient
from sparkafka.protocol.framing import KafkaProtocol
from sparkafka.protocol.messages import PRODUCE_MAX_VERSION_WITH_NAMES, ApiKey
from sparkafka.protocol.produce import encode_produce_request_parts
from sparkafka.record.builder import RecordBatchBuilder, set_producer_state
from sparkafka.record.layout import increment_sequence

MAX_IN_FLIGHT = 5
MAX_REQUEST_SIZE = 1048576
"""The producer's default ``max.request.size``."""
REQUEST_TIMEOUT_MS = 30_000


def build_batch(batch_size: int, key_size: int, value_size: int) -> RecordBatchBuilder:
    """One full batch of the benchmark's records: random keys, one random value (as ``worker.py``)."""
    builder = RecordBatchBuilder(bytearray(batch_size), batch_size)
    value = os.urandom(value_size)
    now = int(time.time() * 1000)
    while builder.try_append(now, os.urandom(key_size) if key_size else None, value, None) >= 0:
        pass
    return builder


class _Leader:
    """One broker's connection: its partitions' batches, grouped into requests of at most
    ``max_request_size`` bytes (one batch per partition each), and the protocol state."""

    def __init__(self, address: tuple[str, int], partitions: list[int], batch: RecordBatchBuilder,
                 version: int, max_request_size: int) -> None:
        self.sock = socket.create_connection(address, timeout=REQUEST_TIMEOUT_MS / 1000)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.proto = KafkaProtocol(client_id="sparkafka-ceiling")
        size = len(batch.close())
        per_request = max(1, max_request_size // size)  # the Sender's drain: the first batch always goes
        self.requests = [partitions[i:i + per_request] for i in range(0, len(partitions), per_request)]
        """The partitions of each request of a round (every partition once per round)."""
        self.wire = {p: bytearray(batch.close()) for p in partitions}
        """Each partition's batch, rewritten in place for each request (the frame is a copy)."""
        self.version = version
        self.sent = 0
        self.in_flight = 0

    def close(self) -> None:
        self.sock.close()


def _frame(leader: _Leader, topic: str, producer_id: int, epoch: int, sequences: list[int],
           per_batch: int) -> bytes:
    """The next Produce request to this broker: its partitions' batches with their next sequences."""
    entries = []
    for p in leader.requests[leader.sent % len(leader.requests)]:
        wire = leader.wire[p]
        set_producer_state(wire, producer_id, epoch, sequences[p], False)
        sequences[p] = increment_sequence(sequences[p], per_batch)
        entries.append((p, wire))
    body = encode_produce_request_parts(leader.version, None, -1, REQUEST_TIMEOUT_MS, [(topic, entries)])
    _, pieces, _ = leader.proto.send_request_parts(ApiKey.PRODUCE, leader.version, body)
    leader.sent += 1
    return b"".join(pieces)


def _init_producer_id(admin: AdminClient, timeout_s: float = 60.0) -> dict[str, Any]:
    """InitProducerId, retried while the broker answers with a retriable error (a node that has just
    started answers COORDINATOR_LOAD_IN_PROGRESS until its producer-id manager is ready), as Java's
    TransactionManager retries it."""
    deadline = time.monotonic() + timeout_s
    while True:
        _, answer = admin._call(ApiKey.INIT_PRODUCER_ID, {
            "transactional_id": None, "transaction_timeout_ms": 2147483647,
            "producer_id": -1, "producer_epoch": -1})
        code = int(answer.get("error_code") or 0)
        if code == 0:
            return answer
        if not error_class_for_code(code).retriable or time.monotonic() > deadline:
            raise SystemExit(f"InitProducerId failed with {error_name(code)} ({code})")
        time.sleep(0.1)


def run_ceiling(bootstrap_servers: str, topic: str, records: int, batch_size: int, key_size: int,
                value_size: int, max_request_size: int = MAX_REQUEST_SIZE) -> dict[str, Any]:
    with AdminClient(bootstrap_servers) as admin:
        cluster = admin.metadata([topic])
        count = cluster.partition_count(topic)
        if not count:
            raise SystemExit(f"topic {topic!r} does not exist")
        by_leader: dict[int, list[int]] = {}
        for p in range(count):
            node = cluster.leader_for((topic, p))
            if node is None:
                raise SystemExit(f"{topic}-{p} has no leader")
            by_leader.setdefault(node, []).append(p)
        answer = _init_producer_id(admin)
        producer_id, epoch = int(answer["producer_id"]), int(answer["producer_epoch"])
        versions = {}
        for node in by_leader:
            admin.negotiated_version(ApiKey.PRODUCE, node)  # connects to the node
            versions[node] = admin.client.api_version(node, ApiKey.PRODUCE, PRODUCE_MAX_VERSION_WITH_NAMES)
        addresses = cluster.node_addresses()

    batch = build_batch(batch_size, key_size, value_size)
    per_batch = batch.record_count
    leaders = [_Leader(addresses[node], parts, batch, versions[node], max_request_size)
               for node, parts in by_leader.items()]
    sequences = [0] * count
    sel = selectors.DefaultSelector()
    for leader in leaders:
        sel.register(leader.sock, selectors.EVENT_READ, leader)
    rounds = -(-records // (per_batch * count))  # a round: one batch to every partition
    acked = errors = 0
    first_error: str | None = None
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    try:
        while True:
            for leader in leaders:
                while leader.in_flight < MAX_IN_FLIGHT and leader.sent < rounds * len(leader.requests):
                    leader.sock.sendall(_frame(leader, topic, producer_id, epoch, sequences, per_batch))
                    leader.in_flight += 1
            if not any(leader.in_flight for leader in leaders):
                break
            events = sel.select(REQUEST_TIMEOUT_MS / 1000)
            if not events:
                raise SystemExit(f"no answer from the broker within {REQUEST_TIMEOUT_MS} ms (request.timeout.ms)")
            for key, _ in events:
                leader = key.data
                data = leader.sock.recv(1 << 20)
                if not data:
                    raise SystemExit("the broker closed the connection")
                for response in leader.proto.receive_data(data):
                    leader.in_flight -= 1
                    for topic_resp in response.body.get("responses", ()):
                        for part in topic_resp.get("partition_responses", ()):
                            code = int(part.get("error_code", 0))
                            if code:
                                errors += per_batch
                                first_error = first_error or f"error code {code} for partition {part['index']}"
                            else:
                                acked += per_batch
        finished = time.perf_counter()
    finally:
        for leader in leaders:
            leader.close()
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime - usage0.ru_utime) + (usage1.ru_stime - usage0.ru_stime)
    seconds = finished - started
    total = acked + errors
    return {
        "client": "ceiling", "records": total, "acked": acked, "errors": errors, "first_error": first_error,
        "seconds": seconds, "send_seconds": seconds,
        "records_per_second": acked / seconds if seconds > 0 else 0.0,
        "send_records_per_second": total / seconds if seconds > 0 else 0.0,
        "mb_per_second": acked * value_size / seconds / 1e6 if seconds > 0 else 0.0,
        "cpu_seconds": cpu, "cpu_seconds_per_million": cpu / max(total, 1) * 1e6,
        "peak_rss_mb": usage1.ru_maxrss / 1024.0, "latency_avg_ms": None, "latency_max_ms": None,
        "percentiles_ms": None, "records_per_batch": per_batch,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--records", type=int, default=3_000_000)
    parser.add_argument("--batch-size", type=int, default=16384)
    parser.add_argument("--key-size", type=int, default=8)
    parser.add_argument("--value-size", type=int, default=100)
    parser.add_argument("--max-request-size", type=int, default=MAX_REQUEST_SIZE)
    args = parser.parse_args(argv)
    print(json.dumps(run_ceiling(args.bootstrap_servers, args.topic, args.records, args.batch_size,
                                 args.key_size, args.value_size, args.max_request_size)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
