"""The exactly-once sink's decision log: a compacted Kafka topic, one key per sink id.

How it works: a sink's driver records what it decided about a write before and after acting on it:
``PREPARED`` with the list of the write's transactions (the commit point: from here on the write is
committed, whatever happens to the driver), then ``COMMITTED`` once every transaction was ended, or
``ABORTED``. Each decision is one JSON record keyed by the sink id, sent by an idempotent producer with
``acks=all`` to the partition of the key (murmur2, as the default partitioner) of the log topic
(``sparkafka-sink-decisions`` by default: one partition, ``cleanup.policy=compact``, created on the first
write when missing), and the write waits for its acknowledgement. Compaction keeps the latest decision
per sink, which is all a driver needs: ``last_committed`` carries the highest batch id committed so far.

Reading (``latest``): ListOffsets gives the partition's start and end; Fetch (read_uncommitted: the log is
not transactional) reads a window before the end, and earlier windows (4x larger each time) until a
record of the key is found or the start is reached, so a busy log shared by many sinks is not read whole
on every commit. A Fetch answer may end with a partial batch; only whole batches are decoded.

Why Kafka and not a file under the checkpoint location: batch writes have no checkpoint; Spark checkpoints
usually live on HDFS/S3/ABFS, which the driver's Python process cannot write without extra libraries, and
a cluster-mode driver moves between machines; the decision has to be as durable and reachable as the
transactions it describes, which it is on the same cluster. See docs/DESIGN.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sparkafka import errors
from sparkafka._clock import SYSTEM_CLOCK, Clock
from sparkafka.config import ProducerConfig
from sparkafka.net.admin import AdminClient
from sparkafka.producer.murmur2 import partition_for_key
from sparkafka.producer.txn_commit import TransactionHandle
from sparkafka.protocol.messages import ApiKey
from sparkafka.record.reader import Record, decode_batches, whole_batches

__all__ = ["ABORTED", "COMMITTED", "DEFAULT_LOG_TOPIC", "PREPARED", "Decision", "DecisionLog", "SinkTransaction"]

log = logging.getLogger("sparkafka.spark")

PREPARED = "PREPARED"
COMMITTED = "COMMITTED"
ABORTED = "ABORTED"
DEFAULT_LOG_TOPIC = "sparkafka-sink-decisions"
LOG_TOPIC_CONFIGS = {"cleanup.policy": "compact", "max.message.bytes": str(8 * 1024 * 1024),
                     "segment.ms": str(3_600_000)}
"""A decision lists every task's transaction: room for tens of thousands; hourly segments so compaction
can drop superseded decisions soon."""
_WINDOW = 64
_FETCH_MAX_BYTES = 16 * 1024 * 1024
_OFFSET_OUT_OF_RANGE = 1
_UNKNOWN_TOPIC = 3


@dataclass(frozen=True)
class SinkTransaction:
    """One task's transaction: what the coordinator knows it by, and what it holds."""

    handle: TransactionHandle
    spark_partition: int
    attempt: int
    records: int
    partitions: tuple[tuple[str, int], ...] = ()
    """The Kafka topic-partitions it wrote to."""

    def to_json(self) -> dict[str, Any]:
        h = self.handle
        return {"id": h.transactional_id, "pid": h.producer_id, "epoch": h.producer_epoch,
                "tv": h.transaction_version, "task": self.spark_partition, "attempt": self.attempt,
                "records": self.records, "partitions": [list(p) for p in self.partitions]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SinkTransaction:
        handle = TransactionHandle(str(data["id"]), int(data["pid"]), int(data["epoch"]), int(data["tv"]))
        return cls(handle, int(data["task"]), int(data["attempt"]), int(data["records"]),
                   tuple((str(t), int(p)) for t, p in data.get("partitions") or ()))

    def describe(self) -> str:
        where = ", ".join(f"{t}-{p}" for t, p in self.partitions) or "no partitions"
        return (f"Spark partition {self.spark_partition} attempt {self.attempt} ({self.records} records to "
                f"{where}; transactional id {self.handle.transactional_id!r})")


@dataclass(frozen=True)
class Decision:
    """The latest decision of a sink about one of its writes."""

    sink_id: str
    batch: int
    """The streaming batch id; 0 for a batch write (each batch write is its sink id's only write)."""
    state: str
    last_committed: int | None
    """The highest batch id committed so far (this one included when ``state`` is COMMITTED)."""
    transactions: tuple[SinkTransaction, ...] = ()
    query_id: str | None = None
    """The streaming query that wrote it (None: a batch write, or not known)."""
    lost: tuple[str, ...] = ()
    """Transactional ids the coordinator had aborted before the commit reached them."""
    written_ms: int = field(default=0, compare=False)

    def to_json(self) -> bytes:
        return json.dumps({
            "v": 1, "sink": self.sink_id, "batch": self.batch, "state": self.state,
            "last_committed": self.last_committed, "query": self.query_id,
            "transactions": [t.to_json() for t in self.transactions], "lost": list(self.lost),
            "at": self.written_ms}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Decision:
        d = json.loads(data)
        if d.get("v") != 1:
            raise errors.ProtocolError(f"decision log record of version {d.get('v')!r}; this sparkafka reads 1")
        last = d.get("last_committed")
        return cls(str(d["sink"]), int(d["batch"]), str(d["state"]), None if last is None else int(last),
                   tuple(SinkTransaction.from_json(t) for t in d.get("transactions") or ()),
                   d.get("query"), tuple(d.get("lost") or ()), int(d.get("at") or 0))

    def is_committed(self, batch: int) -> bool:
        return self.last_committed is not None and batch <= self.last_committed


class DecisionLog:
    """Read and append a sink's decisions (one instance per driver call; not thread-safe)."""

    def __init__(self, producer_config: Mapping[str, str], topic: str = DEFAULT_LOG_TOPIC, *,
                 clock: Clock = SYSTEM_CLOCK, timeout_ms: float = 60_000) -> None:
        self.topic = topic
        self._clock = clock
        self._timeout_ms = timeout_ms
        # the user's connection and security settings; the log's own durability settings win
        self._producer_config = {**producer_config, "acks": "all", "enable.idempotence": "true",
                                 "max.request.size": str(8 * 1024 * 1024), "compression.type": "gzip",
                                 "linger.ms": "0"}
        self._producer_config.pop("transactional.id", None)
        cfg = ProducerConfig.from_mapping(dict(self._producer_config))
        self._admin = AdminClient(list(cfg.bootstrap_servers), client_id=f"{cfg.client_id}-decision-log",
                                  request_timeout_ms=cfg.request_timeout_ms, clock=clock, security=cfg)
        self._producer: Any = None
        self._partitions: int | None = None

    # ------------------------------------------------------------------ topic
    def _partition_count(self, create: bool) -> int | None:
        if self._partitions is not None:
            return self._partitions
        cluster = self._admin.metadata([self.topic], self._timeout_ms)
        code = cluster.topic_errors.get(self.topic, 0)
        count = cluster.partition_count(self.topic)
        if code == _UNKNOWN_TOPIC or count is None:
            if not create:
                return None
            log.info("creating the exactly-once decision log topic %r (%s)", self.topic, LOG_TOPIC_CONFIGS)
            self._admin.create_topics([(self.topic, 1, -1)], self._timeout_ms, exist_ok=True,
                                      configs=LOG_TOPIC_CONFIGS)
            cluster = self._admin.metadata([self.topic], self._timeout_ms)
            count = cluster.partition_count(self.topic)
        elif code:
            raise errors.error_for_code(code, f"the decision log topic {self.topic!r}")
        if count is None:
            raise errors.error_for_code(_UNKNOWN_TOPIC, f"the decision log topic {self.topic!r}")
        self._partitions = count
        return count

    # ------------------------------------------------------------------ writing
    def record(self, decision: Decision) -> None:
        """Append ``decision`` and wait until the log acknowledged it (acks=all)."""
        from sparkafka.producer.producer import KafkaProducer

        count = self._partition_count(create=True)
        assert count is not None
        if self._producer is None:
            self._producer = KafkaProducer(dict(self._producer_config))
        key = decision.sink_id.encode()
        stamped = Decision(decision.sink_id, decision.batch, decision.state, decision.last_committed,
                           decision.transactions, decision.query_id, decision.lost, self._clock.wall_ms())
        future = self._producer.send(self.topic, stamped.to_json(), key=key,
                                     partition=partition_for_key(key, count))
        self._producer.flush(self._timeout_ms / 1000.0)
        future.get(self._timeout_ms / 1000.0)
        log.info("decision log %r: sink %r batch %d %s (%d transactions)", self.topic, decision.sink_id,
                 decision.batch, decision.state, len(decision.transactions))

    # ------------------------------------------------------------------ reading
    def latest(self, sink_id: str) -> Decision | None:
        """The sink's latest decision, or None if it never recorded one."""
        count = self._partition_count(create=False)
        if count is None:
            return None
        key = sink_id.encode()
        partition = partition_for_key(key, count)
        start = self._admin.list_offsets(self.topic, earliest=True, timeout_ms=self._timeout_ms)[partition]
        end = self._admin.list_offsets(self.topic, timeout_ms=self._timeout_ms)[partition]
        high, window = end, _WINDOW
        while high > start:
            low = max(start, high - window)
            found: Record | None = None
            for record in self._read(partition, low, high):
                if record.key == key and record.value is not None:
                    found = record
            if found is not None:
                assert found.value is not None
                return Decision.from_json(found.value)
            high, window = low, window * 4
        return None

    def _read(self, partition: int, low: int, high: int) -> Iterator[Record]:
        """The records of ``partition`` with offsets in [low, high)."""
        offset = low
        while offset < high:
            leader = self._admin.metadata([self.topic], self._timeout_ms).leader_for((self.topic, partition))
            if leader is None:
                raise errors.error_for_code(5, f"the decision log {self.topic}-{partition} has no leader")
            body = {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 1, "max_bytes": _FETCH_MAX_BYTES,
                    "isolation_level": 0, "session_id": 0, "session_epoch": -1,
                    "topics": [{"topic": self.topic, "partitions": [{
                        "partition": partition, "fetch_offset": offset, "log_start_offset": -1,
                        "partition_max_bytes": _FETCH_MAX_BYTES}]}],
                    "forgotten_topics_data": [], "rack_id": ""}
            _, answer = self._admin.request(ApiKey.FETCH, body, node_id=leader, timeout_ms=self._timeout_ms)
            top = int(answer.get("error_code", 0) or 0)
            if top:
                raise errors.error_for_code(top, f"Fetch of the decision log {self.topic}-{partition}")
            (data,) = [p for t in answer["responses"] for p in t["partitions"]]
            code = int(data.get("error_code", 0) or 0)
            if code == _OFFSET_OUT_OF_RANGE:  # compaction or retention moved the start: read from there
                offset = max(offset + 1, self._admin.list_offsets(
                    self.topic, earliest=True, timeout_ms=self._timeout_ms)[partition])
                continue
            if code:
                raise errors.error_for_code(code, f"Fetch of the decision log {self.topic}-{partition}")
            batches = decode_batches(whole_batches(bytes(data.get("records") or b"")))
            if not batches:
                return  # nothing at or after ``offset`` (compacted away up to the end)
            for batch in batches:
                if batch.is_control:
                    continue
                for record in batch.records:
                    if low <= record.offset < high:
                        yield record
            offset = batches[-1].base_offset + batches[-1].last_offset_delta + 1

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(10)
        self._admin.close()

    def __enter__(self) -> DecisionLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
