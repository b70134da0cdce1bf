"""``AdminClient``: a small synchronous helper for tools, the CLI and tests.

How it works: it owns a ``NetworkClient`` and drives its poll loop in the calling thread. Every call has
a deadline: ``_ready_node`` connects (to a given node, or the least-loaded one) while polling, and raises
``KafkaConnectionError`` with the last connection error if nothing became ready in time; ``_call`` sends
one request with the remaining time as its request timeout and polls until its callback fires, so a call
always ends with a body or a typed error. Broker error codes in the answers become ``BrokerError``
subclasses naming the topic. ``end_offsets`` is ``list_offsets`` made exact on brokers whose ListOffsets
answer lags (Tansu answers with the base offset of a partition's last batch, plus one): a Fetch at each
answer returns the partition's high watermark and the header of the batch holding that offset, and the
largest of the three is the end offset. ``security`` takes the producer's settings (a ProducerConfig, a
mapping of Java keys such as ``{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
...}``, or ``SecuritySettings``); a node that rejects them raises its ``AuthenticationError`` at once
instead of waiting for the deadline. Not thread-safe; not for the producer's hot path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .. import errors
from .._clock import SYSTEM_CLOCK, Clock
from ..protocol.messages import ApiKey
from ..record.reader import next_offset_after
from .client import ClientResponse, NetworkClient
from .cluster import Cluster

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1
_WAITABLE_CODES = frozenset({  # creation settling
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.LEADER_NOT_AVAILABLE, errors.NOT_LEADER_OR_FOLLOWER})
_POLL_SLICE_MS = 100.0
_FETCH_PARTITION_MAX_BYTES = 64 * 1024
"""Enough for the header of the batch at the fetch offset; the broker may cut the batch short."""


class AdminClient:
    """Blocking admin calls over a private ``NetworkClient``; use as a context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        client_id: str = "sparkafka-admin",
        request_timeout_ms: float = 30_000,
        clock: Clock = SYSTEM_CLOCK,
        security: object | None = None,
        **client_options: Any,
    ) -> None:
        self._clock = clock
        self._default_timeout_ms = float(request_timeout_ms)
        self._bootstrap = bootstrap_servers
        self.client = NetworkClient(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            clock=clock,
            security=security,
            **client_options,
        )
        self._cluster: Cluster | None = None

    # ------------------------------------------------------------------ plumbing
    def _deadline(self, timeout_ms: float | None) -> float:
        return self._clock.monotonic_ms() + (self._default_timeout_ms if timeout_ms is None else timeout_ms)

    def _ready_node(self, node_id: int | None, deadline: float) -> int:
        client = self.client
        while True:
            now = self._clock.monotonic_ms()
            node = node_id if node_id is not None else client.least_loaded_node(now)
            if node is not None and client.ready(node, now):
                return node
            rejected = client.authentication_error(node_id)  # None unless every candidate rejected us
            if rejected is not None:
                raise rejected
            if now >= deadline:
                raise self._unreachable(node_id)
            wait = client.connection_delay(node, now) if node is not None else client.reconnect_backoff_ms
            client.poll(min(wait, deadline - now, _POLL_SLICE_MS), now)

    def _unreachable(self, node_id: int | None) -> errors.KafkaError:
        nodes = [node_id] if node_id is not None else sorted(self.client.nodes())
        failures = [(n, self.client.connection_failure(n)) for n in nodes]
        last = next((err for _, err in reversed(failures) if err is not None), None)
        if isinstance(last, errors.AuthenticationError):
            return last
        where = f"node {node_id}" if node_id is not None else f"any broker of {self._bootstrap!r}"
        detail = f": {last}" if last is not None else ""
        exc = errors.KafkaConnectionError(f"could not get a ready connection to {where} in time{detail}")
        exc.__cause__ = last
        return exc

    def _call(
        self,
        api_key: int,
        body: Mapping[str, Any],
        *,
        node_id: int | None = None,
        timeout_ms: float | None = None,
        version: int | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Send one request and wait for its answer; returns ``(node_id, body)`` or raises the error."""
        deadline = self._deadline(timeout_ms)
        node = self._ready_node(node_id, deadline)
        box: list[ClientResponse] = []
        remaining = max(deadline - self._clock.monotonic_ms(), 1.0)
        self.client.send(
            node, api_key, dict(body), version=version, callback=box.append, timeout_ms=remaining
        )
        while not box:
            now = self._clock.monotonic_ms()
            self.client.poll(max(min(deadline - now, _POLL_SLICE_MS), 0.0), now)
        resp = box[0]
        if resp.error is not None:
            raise resp.error
        assert resp.body is not None
        return node, resp.body

    # ------------------------------------------------------------------ API
    def request(
        self,
        api_key: int,
        body: Mapping[str, Any],
        *,
        node_id: int | None = None,
        timeout_ms: float | None = None,
        version: int | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Send one request (to ``node_id``, else the least-loaded node) and wait for its answer: returns
        ``(node_id, body)``; error codes in the body are the caller's to read. ``version=None``: the
        highest both sides speak."""
        return self._call(api_key, body, node_id=node_id, timeout_ms=timeout_ms, version=version)

    def add_node(self, node_id: int, host: str, port: int) -> None:
        """Make ``node_id`` reachable (a coordinator named by FindCoordinator) without a Metadata round trip."""
        nodes = self.client.nodes()
        if nodes.get(node_id) != (host, port):
            self.client.update_nodes({**nodes, node_id: (host, port)})

    def api_versions(
        self, node_id: int | None = None, timeout_ms: float | None = None
    ) -> dict[int, tuple[int, int]]:
        """The broker's ``{api_key: (min, max)}`` from the connection handshake."""
        node = self._ready_node(node_id, self._deadline(timeout_ms))
        table = self.client.api_versions_table(node)
        assert table is not None
        return {key: rng for key in table if (rng := table.get(key)) is not None}

    def negotiated_version(
        self, api_key: int, node_id: int | None = None, timeout_ms: float | None = None
    ) -> int:
        node = self._ready_node(node_id, self._deadline(timeout_ms))
        return self.client.api_version(node, api_key)

    def metadata(
        self,
        topics: Iterable[str] | None = None,
        timeout_ms: float | None = None,
        *,
        allow_auto_topic_creation: bool = False,
    ) -> Cluster:
        """A Metadata request (``topics=None``: all topics); also refreshes the client's node table."""
        body: dict[str, Any] = {
            "topics": None if topics is None else [{"name": t} for t in topics],
            "allow_auto_topic_creation": allow_auto_topic_creation,
        }
        _, answer = self._call(ApiKey.METADATA, body, timeout_ms=timeout_ms)
        code = int(answer.get("error_code", 0) or 0)
        if code:
            raise errors.error_for_code(code, "metadata request failed")
        cluster = Cluster.from_metadata_response(answer)
        if cluster.nodes:
            self.client.update_nodes(cluster.node_addresses())
        self._cluster = cluster
        return cluster

    def describe_cluster(self, timeout_ms: float | None = None) -> Cluster:
        """Brokers, controller, cluster id and every topic."""
        return self.metadata(None, timeout_ms)

    def create_topics(
        self,
        topics: Sequence[tuple[str, int, int]],
        timeout_ms: float | None = None,
        *,
        exist_ok: bool = False,
        wait_for_leaders: bool = True,
        configs: Mapping[str, str] | None = None,
    ) -> None:
        """Create ``[(name, partitions, replication_factor)]``; raises the first topic's error (naming it).

        With ``wait_for_leaders`` it returns once metadata shows a leader for every new partition.
        """
        for entry in topics:
            name, partitions, replication = entry
            if not isinstance(name, str) or not name:
                raise errors.InvalidTopicNameError(f"topic name must be a non-empty str, got {name!r}")
            if not isinstance(partitions, int) or (partitions < 1 and partitions != -1):
                raise errors.ConfigError(
                    f"partitions for {name!r} must be >= 1 (or -1), got {partitions!r}", "num_partitions"
                )
            if not isinstance(replication, int) or (replication < 1 and replication != -1):
                raise errors.ConfigError(
                    f"replication factor for {name!r} must be >= 1 (or -1), got {replication!r}",
                    "replication_factor",
                )
        deadline = self._deadline(timeout_ms)
        remaining = max(deadline - self._clock.monotonic_ms(), 1.0)
        config_list = [{"name": k, "value": v} for k, v in (configs or {}).items()]
        body = {
            "topics": [
                {
                    "name": n,
                    "num_partitions": p,
                    "replication_factor": r,
                    "assignments": [],
                    "configs": config_list,
                }
                for n, p, r in topics
            ],
            "timeout_ms": int(min(remaining, 2**31 - 1)),
            "validate_only": False,
        }
        cluster = self._cluster if self._cluster is not None else self.metadata([], remaining)
        controller = cluster.controller_id if cluster.controller_id in cluster.nodes else None
        _, answer = self._call(
            ApiKey.CREATE_TOPICS,
            body,
            node_id=controller,
            timeout_ms=max(deadline - self._clock.monotonic_ms(), 1.0),
        )
        for result in answer.get("topics") or ():
            code = int(result.get("error_code", 0))
            if code == 0 or (exist_ok and code == errors.TOPIC_ALREADY_EXISTS):
                continue
            message = result.get("error_message")
            raise errors.error_for_code(
                code, f"cannot create topic {result.get('name')!r}" + (f": {message}" if message else "")
            )
        if wait_for_leaders:
            self.wait_for_topics([n for n, _, _ in topics], deadline)

    def wait_for_topics(self, names: Sequence[str], deadline: float) -> Cluster:
        """Poll metadata until every partition of every topic has a leader (or raise at ``deadline``)."""
        while True:
            now = self._clock.monotonic_ms()
            cluster = self.metadata(names, max(deadline - now, 1.0))
            pending = [n for n in names if not _all_led(cluster, n)]
            if not pending:
                return cluster
            for n in pending:
                code = cluster.topic_errors.get(n, 0)
                if code and code not in _WAITABLE_CODES:
                    raise errors.error_for_code(code, f"metadata for topic {n!r}")
            now = self._clock.monotonic_ms()
            if now >= deadline:
                raise errors.KafkaTimeoutError(f"topics {pending} have no leader for every partition yet")
            self.client.poll(min(_POLL_SLICE_MS, deadline - now), now)

    def list_offsets(
        self, topic: str, *, earliest: bool = False, timeout_ms: float | None = None
    ) -> dict[int, int]:
        """``{partition: offset}``: the end offsets (next offset to be written) or, with ``earliest``, the
        log start offsets.

        A retriable error (a partition without a leader yet, NOT_LEADER_OR_FOLLOWER right after the topic
        was created, a leader that moved) is retried with fresh metadata every 100 ms until the deadline,
        as Java's ``Admin.listOffsets``; the last error is raised then."""
        deadline = self._deadline(timeout_ms)
        while True:
            try:
                return self._list_offsets_once(topic, earliest, deadline)
            except errors.KafkaError as exc:
                if not exc.retriable or self._clock.monotonic_ms() + _RETRY_BACKOFF_MS >= deadline:
                    raise
            self.client.poll(_RETRY_BACKOFF_MS, self._clock.monotonic_ms())

    def _list_offsets_once(self, topic: str, earliest: bool, deadline: float) -> dict[int, int]:
        cluster = self.metadata([topic], max(deadline - self._clock.monotonic_ms(), 1.0))
        code = cluster.topic_errors.get(topic, 0)
        if code:
            raise errors.error_for_code(code, f"topic {topic!r}")
        count = cluster.partition_count(topic)
        if count is None:
            raise errors.error_for_code(3, f"topic {topic!r} is unknown")
        by_leader: dict[int, list[int]] = {}
        for p in range(count):
            leader = cluster.leader_for((topic, p))
            if leader is None:
                raise errors.error_for_code(5, f"partition {topic}-{p} has no leader")
            by_leader.setdefault(leader, []).append(p)
        timestamp = EARLIEST_TIMESTAMP if earliest else LATEST_TIMESTAMP
        result: dict[int, int] = {}
        for leader, partitions in sorted(by_leader.items()):
            remaining = max(deadline - self._clock.monotonic_ms(), 1.0)
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": topic,
                        "partitions": [
                            {
                                "partition_index": p,
                                "current_leader_epoch": -1,
                                "timestamp": timestamp,
                                "max_num_offsets": 1,
                            }
                            for p in partitions
                        ],
                    }
                ],
                "timeout_ms": int(min(remaining, 2**31 - 1)),
            }
            _, answer = self._call(ApiKey.LIST_OFFSETS, body, node_id=leader, timeout_ms=remaining)
            for t in answer.get("topics") or ():
                for part in t.get("partitions") or ():
                    err = int(part.get("error_code", 0))
                    index = int(part["partition_index"])
                    if err:
                        raise errors.error_for_code(err, f"ListOffsets for {topic}-{index}")
                    offset = int(part.get("offset", -1))
                    if offset < 0 and part.get("old_style_offsets"):
                        offset = int(part["old_style_offsets"][0])
                    result[index] = offset
        missing = [p for p in range(count) if p not in result]
        if missing:
            raise errors.ProtocolError(f"ListOffsets answer for {topic!r} lacks partitions {missing}")
        return result

    def end_offsets(self, topic: str, *, timeout_ms: float | None = None) -> dict[int, int]:
        """``{partition: end offset}`` (the next offset to be written), exact even where ListOffsets lags.

        ``list_offsets``, then one Fetch (read_uncommitted, min_bytes 0) per leader at the offsets it
        answered: a partition's end offset is the largest of the ListOffsets answer, the Fetch's high
        watermark and the offset after the last batch the Fetch returned. On Apache Kafka the Fetch at the
        end offset returns no records and the same high watermark. A partition the Fetch answer leaves out
        keeps its ListOffsets answer (Tansu leaves out partitions that hold no records, where that answer
        is right). Retriable errors are retried as ``list_offsets`` does."""
        deadline = self._deadline(timeout_ms)
        while True:
            try:
                listed = self.list_offsets(topic, timeout_ms=max(deadline - self._clock.monotonic_ms(), 1.0))
                return self._fetch_end_offsets(topic, listed, deadline)
            except errors.KafkaError as exc:
                if not exc.retriable or self._clock.monotonic_ms() + _RETRY_BACKOFF_MS >= deadline:
                    raise
            self.client.poll(_RETRY_BACKOFF_MS, self._clock.monotonic_ms())

    def _fetch_end_offsets(self, topic: str, listed: Mapping[int, int], deadline: float) -> dict[int, int]:
        cluster = self._cluster
        assert cluster is not None  # list_offsets refreshed it
        by_leader: dict[int, list[int]] = {}
        for p in listed:
            leader = cluster.leader_for((topic, p))
            if leader is None:
                raise errors.error_for_code(5, f"partition {topic}-{p} has no leader")
            by_leader.setdefault(leader, []).append(p)
        result = dict(listed)
        for leader, partitions in sorted(by_leader.items()):
            body = {
                "replica_id": -1,
                "max_wait_ms": 1,  # Tansu answers max_wait_ms 0 with no partitions at all
                "min_bytes": 0,
                "max_bytes": _FETCH_PARTITION_MAX_BYTES * len(partitions),
                "isolation_level": 0,
                "session_id": 0,
                "session_epoch": -1,
                "topics": [
                    {
                        "topic": topic,
                        "partitions": [
                            {
                                "partition": p,
                                "fetch_offset": listed[p],
                                "partition_max_bytes": _FETCH_PARTITION_MAX_BYTES,
                            }
                            for p in partitions
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            }
            remaining = max(deadline - self._clock.monotonic_ms(), 1.0)
            _, answer = self._call(ApiKey.FETCH, body, node_id=leader, timeout_ms=remaining)
            code = int(answer.get("error_code", 0) or 0)
            if code:
                raise errors.error_for_code(code, f"Fetch for {topic!r}")
            for t in answer.get("responses") or ():
                for part in t.get("partitions") or ():
                    index = int(part["partition_index"])
                    err = int(part.get("error_code", 0))
                    if err:
                        raise errors.error_for_code(err, f"Fetch for {topic}-{index}")
                    records = part.get("records")
                    after = next_offset_after(records) if records else None
                    result[index] = max(result.get(index, 0), int(part.get("high_watermark", -1)),
                                        after if after is not None else -1)
        return result

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_RETRY_BACKOFF_MS = 100.0


def _all_led(cluster: Cluster, topic: str) -> bool:
    count = cluster.partition_count(topic)
    return count is not None and count > 0 and len(cluster.available_partitions(topic)) == count
