"""Producer metadata: the current ``Cluster`` snapshot and when to refresh it.

How it works: ``Metadata`` holds the latest immutable ``Cluster`` in one attribute, so ``fetch()`` is a
lock-free read from any thread. Producer threads name the topics they use (``add_topic`` / the fast path
of ``wait_for_topic``, which only adds the topic to a "used" set); the Sender thread's
``MetadataUpdater.maybe_update(now)`` sends a Metadata request for those topics to the least-loaded
broker whenever ``time_to_next_update(now)`` is 0 (an update was requested, or ``metadata.max.age.ms``
passed; never sooner than the retry backoff after the previous attempt) and applies the answer with
``update()``, which builds a new snapshot, drops topics unused for ``metadata.max.idle.ms``, remembers
fatal per-topic errors (invalid name, not authorised) and wakes threads blocked in ``await_update`` /
``wait_for_topic`` (a ``threading.Condition``: this state is shared between the Sender and callers).
When every known broker is unreachable (or the refresh that is due has kept failing for
``metadata.recovery.rebootstrap.trigger.ms``) and ``metadata.recovery.strategy=rebootstrap``, the snapshot
falls back to the bootstrap addresses.
When every known broker rejected the client's credentials (the network client reports an
``AuthenticationError`` for all of them), waiting threads get that error at once instead of waiting for
``max.block.ms``; it stays until a metadata update succeeds.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .. import errors
from .._clock import SYSTEM_CLOCK, Clock, wait_seconds
from .._topic import validate_topic_name
from .._types import TopicPartition
from ..protocol.messages import ApiKey
from .addresses import parse_bootstrap_servers
from .backoff import ExponentialBackoff
from .cluster import Cluster, Node, PartitionInfo

if TYPE_CHECKING:
    from .client import ClientResponse, NetworkClient

__all__ = ["Cluster", "Metadata", "MetadataUpdater", "Node", "PartitionInfo"]

log = logging.getLogger("sparkafka.net.metadata")

# Topic error codes that mean "not there yet": keep waiting instead of failing the caller.
_WAITABLE_TOPIC_CODES = frozenset({errors.UNKNOWN_TOPIC_OR_PARTITION, errors.LEADER_NOT_AVAILABLE})
_ZERO_UUID = bytes(16)


def _topic_error(topic: str, code: int) -> errors.KafkaError:
    if code == errors.INVALID_TOPIC_EXCEPTION:
        return errors.InvalidTopicNameError(
            f"the broker rejected topic {topic!r} as invalid (INVALID_TOPIC_EXCEPTION)"
        )
    if code == errors.TOPIC_AUTHORIZATION_FAILED:
        return errors.error_for_code(code, f"not authorized to access topic {topic!r}")
    return errors.error_for_code(code, f"metadata for topic {topic!r}")


def _topic_id_changed(old_id: Any, new_id: Any) -> bool:
    """True when the broker names a known topic id other than the cached one: the topic was deleted and
    re-created, so its leader epochs started again and an older epoch is no reason to keep the cached
    partition (Java ``Metadata.updateLatestMetadata``). A zero id means the broker did not say."""
    return new_id is not None and new_id != _ZERO_UUID and new_id != old_id


def _is_fatal(error: Exception) -> bool:
    """Errors that a metadata retry cannot fix: raised to the threads waiting for metadata."""
    if isinstance(error, (errors.UnsupportedVersionError, errors.AuthenticationError)):
        return True
    return isinstance(error, errors.BrokerError) and not error.retriable


class Metadata:
    """The producer's metadata manager (Java's ``ProducerMetadata``)."""

    def __init__(
        self,
        bootstrap_servers: str | Sequence[str],
        *,
        clock: Clock = SYSTEM_CLOCK,
        metadata_max_age_ms: float = 300_000,
        metadata_max_idle_ms: float = 300_000,
        retry_backoff_ms: float = 100,
        retry_backoff_max_ms: float = 1000,
        recovery_strategy: str = "rebootstrap",
        rebootstrap_trigger_ms: float = 300_000,
        wakeup: Callable[[], None] | None = None,
    ) -> None:
        if metadata_max_age_ms < 0:
            raise errors.ConfigError(
                f"metadata.max.age.ms must be >= 0, got {metadata_max_age_ms}", "metadata.max.age.ms"
            )
        if metadata_max_idle_ms < 5000:
            raise errors.ConfigError(
                f"metadata.max.idle.ms must be >= 5000, got {metadata_max_idle_ms}", "metadata.max.idle.ms"
            )
        if recovery_strategy not in ("none", "rebootstrap"):
            raise errors.ConfigError(
                f"metadata.recovery.strategy must be 'none' or 'rebootstrap', got {recovery_strategy!r}",
                "metadata.recovery.strategy",
            )
        self._bootstrap = parse_bootstrap_servers(bootstrap_servers)
        self._clock = clock
        self.max_age_ms = float(metadata_max_age_ms)
        self.max_idle_ms = float(metadata_max_idle_ms)
        self.recovery_strategy = recovery_strategy
        self.rebootstrap_trigger_ms = float(rebootstrap_trigger_ms)
        self._backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms)
        self._refresh_backoff_ms = self._backoff.backoff(0)
        self._cond = threading.Condition()
        self._cluster = Cluster.bootstrap(self._bootstrap)
        self._topics: dict[str, float] = {}  # topic -> expiry (monotonic ms)
        self._new_topics: set[str] = set()
        self._used: set[str] = set()
        self._last_seen_epoch: dict[TopicPartition, tuple[int, Any]] = {}
        """Per partition, the newest leader epoch any answer gave and its topic's id then (Java's
        ``lastSeenLeaderEpochs``): kept while the topic is, so an older epoch is refused also after an
        answer that left the partition out (a topic error from a broker whose cache lagged)."""
        self._need_update = True
        self._version = 1
        self._last_refresh_ms = -math.inf
        self._last_success_ms = -math.inf
        self._created_ms = clock.monotonic_ms()
        self._attempt_start_ms: float | None = None  # when the refresh now due was first attempted
        self._failed_attempts = 0
        self._topic_failures: dict[str, errors.KafkaError] = {}
        self._fatal: Exception | None = None
        self._closed = False
        self._wakeup = wakeup

    # ------------------------------------------------------------------ reads (any thread)
    def fetch(self) -> Cluster:
        """The current snapshot (no lock)."""
        return self._cluster

    @property
    def version(self) -> int:
        return self._version

    @property
    def bootstrap_addresses(self) -> list[tuple[str, int]]:
        return list(self._bootstrap)

    def set_wakeup(self, wakeup: Callable[[], None] | None) -> None:
        """Called when a thread starts waiting for an update (the Sender's ``client.wakeup``)."""
        self._wakeup = wakeup

    # ------------------------------------------------------------------ topics
    def add_topic(self, topic: str, now: float) -> None:
        """Keep ``topic`` in the refresh set until it is idle for metadata.max.idle.ms. A topic not in the
        set yet is fetched at once (``_request_update_for_new_topics``)."""
        with self._cond:
            if topic not in self._topics:
                self._new_topics.add(topic)
                self._request_update_for_new_topics()
            self._topics[topic] = now + self.max_idle_ms

    def touch(self, topic: str) -> None:
        """Cheap "topic used" mark for the send path: no clock read, no lock."""
        self._used.add(topic)

    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._topics)

    def build_request_topics(self) -> list[str]:
        """Topic names for the next Metadata request (an empty list means brokers only)."""
        with self._cond:
            # A copy: callers add to _used without the lock (one C call each), and iterating the live set
            # while one of them adds a new topic would raise "Set changed size during iteration".
            for topic in tuple(self._used):
                if topic not in self._topics:
                    self._new_topics.add(topic)
                    self._topics[topic] = -math.inf  # refreshed to now + idle on the next update
            return sorted(self._topics)

    # ------------------------------------------------------------------ scheduling
    def request_update(self) -> int:
        """Ask for a refresh as soon as the backoff allows; returns the version to wait past."""
        self._need_update = True
        return self._version

    def _request_update_for_new_topics(self) -> int:
        """Java ``Metadata.requestUpdateForNewTopics``: a refresh now, without waiting out the retry backoff
        since the last one (a caller is blocked on a topic no answer has named yet). Without it, a producer
        whose first send to a topic came within ``retry.backoff.ms`` of any other refresh (the one
        ``init_transactions`` makes, say) waited the rest of that backoff, ~100 ms, for the topic."""
        self._last_refresh_ms = -math.inf
        self._need_update = True
        return self._version

    def _request_update_for_topic(self, topic: str) -> int:
        """Java ``ProducerMetadata.requestUpdateForTopic``: at once while no answer has named ``topic`` yet,
        else after the backoff (a topic the broker does not know yet is asked for again at that pace). The
        caller holds the lock."""
        if topic in self._new_topics:
            return self._request_update_for_new_topics()
        return self.request_update()

    def age_ms(self, now: float) -> float:
        """How old the metadata in use is: since the last successful update, or since this object was made
        before the first (the producer's ``metadata-age``, in seconds there)."""
        last = self._last_success_ms
        return now - (last if last != -math.inf else self._created_ms)

    def update_requested(self) -> bool:
        return self._need_update

    def time_to_next_update(self, now: float) -> float:
        """Milliseconds until the next refresh is due (0 = now)."""
        expire = 0.0 if self._need_update else max(self._last_success_ms + self.max_age_ms - now, 0.0)
        allow = max(self._last_refresh_ms + self._refresh_backoff_ms - now, 0.0)
        return max(expire, allow)

    def should_rebootstrap(self, now: float) -> bool:
        """True when rebootstrap is on and the refresh that is due has been attempted without success for
        rebootstrap_trigger_ms (Java ``needsRebootstrap``). Asked when a refresh is due: the first call after
        a successful update starts the attempt window, so a routine refresh never counts the time since the
        previous one."""
        start = self._attempt_start_ms
        if start is None:
            start = self._attempt_start_ms = now
        if self.recovery_strategy != "rebootstrap" or self._cluster.is_bootstrap:
            return False
        return now - start >= self.rebootstrap_trigger_ms

    def rebootstrap(self) -> None:
        """Forget the brokers and go back to the bootstrap addresses."""
        with self._cond:
            log.info("rebootstrapping metadata from %s", self._bootstrap)
            self._cluster = Cluster.bootstrap(self._bootstrap)
            self._need_update = True
            self._version += 1
            self._cond.notify_all()

    # ------------------------------------------------------------------ results (Sender thread)
    def update(self, response_body: Mapping[str, Any], now: float) -> Cluster:
        """Apply a Metadata response; returns the new snapshot."""
        fresh = Cluster.from_metadata_response(response_body)
        with self._cond:
            used, self._used = self._used, set()
            for topic in used:
                self._topics[topic] = now + self.max_idle_ms
            for topic in [t for t, exp in self._topics.items() if t not in self._new_topics and exp <= now]:
                log.debug("dropping topic %r from metadata: unused for %s ms", topic, self.max_idle_ms)
                del self._topics[topic]
            for topic in [t for t, exp in self._topics.items() if exp == -math.inf]:
                self._topics[topic] = now + self.max_idle_ms
            returned = {t["name"] for t in response_body.get("topics") or () if t.get("name") is not None}
            self._new_topics -= returned
            old = self._cluster
            seen = self._last_seen_epoch
            for tp in [tp for tp in seen if tp[0] not in self._topics]:
                del seen[tp]
            partitions: list[PartitionInfo] = []
            for p in fresh.all_partitions():
                if p.topic not in self._topics:
                    continue
                tp = (p.topic, p.partition)
                topic_id = fresh.topic_id(p.topic)
                last = seen.get(tp)
                if (last is not None and p.leader_epoch >= 0 and last[0] > p.leader_epoch
                        and not _topic_id_changed(last[1], topic_id)):
                    # Java's Metadata.updateLatestMetadata: the cached partition stays (none if an answer
                    # since left it out: then no leader until an answer at least as new)
                    log.debug("keeping %s-%s: response epoch %s is older than %s", p.topic, p.partition,
                              p.leader_epoch, last[0])
                    previous = old.partition(tp)
                    if previous is not None:
                        partitions.append(previous)
                    continue
                if p.leader_epoch >= 0:
                    seen[tp] = (p.leader_epoch, topic_id)
                partitions.append(p)
            topic_errors = {t: c for t, c in fresh.topic_errors.items() if t in self._topics}
            self._topic_failures = {
                t: _topic_error(t, c)
                for t, c in topic_errors.items()
                if c not in _WAITABLE_TOPIC_CODES
                and (c == errors.INVALID_TOPIC_EXCEPTION or not errors.error_class_for_code(c).retriable)
            }
            self._cluster = fresh.with_partitions(partitions, topic_errors)
            self._need_update = False
            self._last_refresh_ms = now
            self._last_success_ms = now
            self._attempt_start_ms = None
            self._failed_attempts = 0
            self._refresh_backoff_ms = self._backoff.backoff(0)
            self._fatal = None
            self._version += 1
            self._cond.notify_all()
            return self._cluster

    def handle_failed_update(self, error: Exception, now: float) -> None:
        """A refresh failed: back off; a non-retriable error is raised to waiting threads."""
        with self._cond:
            self._last_refresh_ms = now
            self._refresh_backoff_ms = self._backoff.backoff(self._failed_attempts)
            self._failed_attempts += 1
            if _is_fatal(error):
                self._fatal = error
                self._cond.notify_all()

    def fail_waiters(self, error: Exception) -> None:
        """Raise ``error`` to every thread waiting for metadata (now and until the next successful update)."""
        with self._cond:
            self._fatal = error
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ------------------------------------------------------------------ waiting (caller threads)
    def await_update(self, version: int, timeout_ms: float) -> None:
        """Block until the metadata version is past ``version``; raises on timeout or fatal error."""
        deadline = self._clock.monotonic_ms() + timeout_ms
        with self._cond:
            while self._version <= version:
                self._raise_if_failed(None)
                remaining = deadline - self._clock.monotonic_ms()
                if remaining <= 0:
                    raise errors.MetadataTimeoutError(f"metadata was not updated within {timeout_ms:.0f} ms")
                self._cond.wait(wait_seconds(remaining / 1000.0))

    def wait_for_topic(
        self,
        topic: str,
        partition: int | None,
        max_block_ms: float,
        *,
        wakeup: Callable[[], None] | None = None,
    ) -> Cluster:
        """The snapshot once ``topic`` (and ``partition``) is known; blocks at most ``max_block_ms``.

        ``wakeup`` (default: the one given to ``set_wakeup``) is called whenever an update is requested.
        Raises ``MetadataTimeoutError`` naming the topic on timeout, ``InvalidTopicNameError`` or the
        broker's error (e.g. TOPIC_AUTHORIZATION_FAILED) as soon as the broker reports it.
        """
        cluster = self._cluster
        count = cluster._counts.get(topic)
        if count is not None and (partition is None or 0 <= partition < count):
            self._used.add(topic)
            return cluster
        return self._wait_for_topic_slow(topic, partition, max_block_ms, wakeup)

    def _wait_for_topic_slow(
        self, topic: str, partition: int | None, max_block_ms: float, wakeup: Callable[[], None] | None
    ) -> Cluster:
        validate_topic_name(topic)
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise errors.InvalidRecordInputError(f"partition must be an int >= 0, got {partition!r}")
        start = self._clock.monotonic_ms()
        deadline = start + max_block_ms
        self.add_topic(topic, start)
        while True:
            cluster = self._cluster
            count = cluster.partition_count(topic)
            if count is not None and (partition is None or partition < count):
                return cluster
            with self._cond:
                self._raise_if_failed(topic)
                version = self._request_update_for_topic(topic)
            wake = wakeup if wakeup is not None else self._wakeup
            if wake is not None:
                wake()
            now = self._clock.monotonic_ms()
            if now >= deadline:  # the messages name the limit, as Java's (the time waited can be a bit more)
                if count is None:
                    raise errors.MetadataTimeoutError(
                        f"topic {topic!r} not present in metadata after {max_block_ms:.0f} ms (max.block.ms)"
                    )
                raise errors.MetadataTimeoutError(
                    f"partition {partition} of topic {topic!r} with partition count {count} is not present "
                    f"in metadata after {max_block_ms:.0f} ms (max.block.ms)"
                )
            try:
                self.await_update(version, deadline - now)
            except errors.MetadataTimeoutError:
                continue  # the loop re-checks the snapshot and raises with the topic's name

    def _raise_if_failed(self, topic: str | None) -> None:
        if self._closed:
            raise errors.ProducerClosedError("metadata is closed")
        if topic is not None:
            failure = self._topic_failures.get(topic)
            if failure is not None:
                raise failure
        if self._fatal is not None:
            raise self._fatal


class MetadataUpdater:
    """Sends Metadata requests through a ``NetworkClient`` when ``Metadata`` says one is due."""

    def __init__(self, metadata: Metadata, client: NetworkClient, *, clock: Clock | None = None) -> None:
        self._client = client
        self._metadata = metadata
        self._clock = clock if clock is not None else client.clock
        self._in_flight = False
        self._rebootstrap_requested = False  # a broker answered ApiVersions with REBOOTSTRAP_REQUIRED
        metadata.set_wakeup(client.wakeup)
        client.add_disconnect_listener(self._on_disconnect)
        client.update_nodes(metadata.fetch().node_addresses())

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def maybe_update(self, now: float) -> float:
        """Send a Metadata request if one is due; returns ms until this needs to be called again."""
        metadata = self._metadata
        client = self._client
        if self._rebootstrap_requested:
            self._rebootstrap_requested = False
            self._rebootstrap()
        if self._in_flight:
            return float(client.request_timeout_ms)
        wait = metadata.time_to_next_update(now)
        if wait > 0:
            return wait
        if metadata.should_rebootstrap(now):
            self._rebootstrap()
        node = client.least_loaded_node(now)
        if node is None and metadata.recovery_strategy == "rebootstrap" and not metadata.fetch().is_bootstrap \
                and not any(client.is_connected(n) for n in client.nodes()):
            # no node to ask and none connected (a connected one at max.in.flight answers later): Java's
            # LeastLoadedNode.hasNodeAvailableOrConnectionReady
            self._rebootstrap()
            node = client.least_loaded_node(now)
        if node is None:
            return float(client.reconnect_backoff_ms)
        if not client.ready(node, now):
            return min(float(client.reconnect_backoff_ms), client.connection_delay(node, now))
        topics = metadata.build_request_topics()
        body = {
            "topics": [{"name": t} for t in topics],
            "allow_auto_topic_creation": True,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        }
        self._in_flight = True
        client.send(node, ApiKey.METADATA, body, callback=self._on_response)
        return float(client.request_timeout_ms)

    def _rebootstrap(self) -> None:
        self._metadata.rebootstrap()
        self._client.update_nodes(self._metadata.fetch().node_addresses())

    def _on_response(self, resp: ClientResponse) -> None:
        self._in_flight = False
        now = self._clock.monotonic_ms()
        if resp.error is not None:
            log.debug("metadata request to node %s failed: %r", resp.node_id, resp.error)
            self._metadata.handle_failed_update(resp.error, now)
            return
        body = resp.body
        assert isinstance(body, dict)
        code = int(body.get("error_code", 0) or 0)
        if code == errors.REBOOTSTRAP_REQUIRED:
            # KIP-1102 (Metadata v13): the broker says our view is stale. As Java, with
            # metadata.recovery.strategy=rebootstrap start again from the bootstrap servers; either way
            # this answer updates nothing and the next refresh comes after the retry backoff.
            log.info("node %s asked for a rebootstrap (REBOOTSTRAP_REQUIRED)", resp.node_id)
            if self._metadata.recovery_strategy == "rebootstrap":
                self._rebootstrap()
            self._metadata.handle_failed_update(errors.KafkaConnectionError(
                f"node {resp.node_id} answered metadata with REBOOTSTRAP_REQUIRED"), now)
            return
        if code:
            self._metadata.handle_failed_update(errors.error_for_code(code, "metadata request failed"), now)
            return
        if not body.get("brokers"):
            log.debug("ignoring a metadata response with no brokers from node %s", resp.node_id)
            self._metadata.handle_failed_update(
                errors.KafkaConnectionError(f"node {resp.node_id} returned metadata with no brokers"), now
            )
            return
        # nodes first, so a thread woken by the new snapshot finds the client able to dial its leaders
        brokers = body["brokers"]
        self._client.update_nodes({int(b["node_id"]): (str(b["host"]), int(b["port"])) for b in brokers})
        self._metadata.update(body, now)

    def _on_disconnect(self, node_id: int, error: Exception | None) -> None:
        self._metadata.request_update()
        asked = getattr(error, "code", None) == errors.REBOOTSTRAP_REQUIRED
        if asked and self._metadata.recovery_strategy == "rebootstrap":
            # KIP-1102, as Java's handleApiVersionsResponse: at the next update (not inside the client's
            # disconnect handling) start again from bootstrap.servers
            log.info("node %s asked for a rebootstrap in its ApiVersions answer", node_id)
            self._rebootstrap_requested = True
        if isinstance(error, errors.AuthenticationError):
            failure = self._client.authentication_error()  # set only when every known node rejected us
            if failure is not None:
                self._metadata.fail_waiters(failure)
