"""The Sender stepped by hand: a ManualClock, a fake network client and fake metadata, no sockets.

How it works: ``Rig`` builds a real RecordAccumulator and Sender around ``FakeClient`` (records every
request; responses given with ``respond`` are delivered on the next ``poll``, as the real client does)
and ``FakeMetadata`` (a fixed cluster; counts update requests). Each test appends records, calls
``run_once()`` and advances the clock, then decodes the Produce requests on the "wire" (the real codec
and record reader) to check what was sent, when, and with which producer id and sequences.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest

from producer.fakes import FakeCluster
from sparkafka import errors
from sparkafka._clock import ManualClock
from sparkafka._types import TopicPartition
from sparkafka.net.connection import ConnectionState
from sparkafka.net.response import ClientResponse
from sparkafka.producer.accumulator import RecordAccumulator
from sparkafka.producer.future import FutureRecordMetadata
from sparkafka.producer.metrics import ProducerMetrics
from sparkafka.producer.sender import Sender
from sparkafka.producer.transactions import TransactionManager
from sparkafka.protocol.messages import PRODUCE, ApiKey
from sparkafka.record.compression import CompressionType
from sparkafka.record.reader import DecodedBatch, decode_batches
from support.txn import answer_add_partitions, answer_find_coordinator, ready

T = "t"
TS = 1_700_000_000_000
PRODUCE_VERSION = 9


# ----------------------------------------------------------------------------------------- fakes


class FakeRequest:
    def __init__(self, node: int, api_key: int, version: int | None, body: Any, expect_response: bool,
                 callback: Callable[[ClientResponse], None], sent_at: float) -> None:
        self.node = node
        self.api_key = api_key
        self.version = version
        self.body = body
        self.expect_response = expect_response
        self.callback = callback
        self.sent_at = sent_at
        self.answered = False
        self.topic_names: dict[bytes, str] = {}
        """For Produce v13 (topics named by id): the names of the ids (set by the rig)."""

    def produce(self) -> dict[str, Any]:
        assert self.api_key == ApiKey.PRODUCE and self.version is not None
        return PRODUCE.decode_request(self.version, self.body)

    def batches(self) -> dict[TopicPartition, DecodedBatch]:
        """The record batch of every partition in this Produce request (one per partition)."""
        out: dict[TopicPartition, DecodedBatch] = {}
        for topic in self.produce()["topic_data"]:
            for part in topic["partition_data"]:
                decoded = decode_batches(part["records"])
                assert len(decoded) == 1
                name = topic.get("name") or self.topic_names[bytes(topic["topic_id"])]
                out[(name, part["index"])] = decoded[0]
        return out

    def values(self, tp: TopicPartition) -> list[bytes | None]:
        return [r.value for r in self.batches()[tp].records]

    def size(self) -> int:
        return sum(b.size_in_bytes for b in self.batches().values())


class FakeClient:
    """The subset of NetworkClient the Sender uses."""

    request_timeout_ms = 30_000.0
    reconnect_backoff_ms = 50.0

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.produce_version = PRODUCE_VERSION  # the broker's highest Produce version
        self.produce_min_version = 3  # and its lowest
        self.sent: list[FakeRequest] = []
        self.not_ready: set[int] = set()
        self.failed: set[int] = set()  # not ready because the last connection attempt failed
        self.polls: list[float] = []
        self.hand_overs: list[bool] = []  # NetworkClient.poll's hand_over of each poll
        self._completions: list[tuple[Callable[[ClientResponse], None], ClientResponse]] = []

    # NetworkClient API
    def ready(self, node: int, now: float) -> bool:
        return node not in self.not_ready

    def authentication_error(self, node: int | None = None) -> errors.AuthenticationError | None:
        return None

    def connection_state(self, node: int) -> ConnectionState:
        if node in self.failed:
            return ConnectionState.DISCONNECTED
        return ConnectionState.CONNECTING if node in self.not_ready else ConnectionState.READY

    def connection_delay(self, node: int, now: float) -> float:
        return 50.0

    def api_version(self, node: int, api_key: int, max_version: int | None = None) -> int:
        assert api_key == ApiKey.PRODUCE
        hi = self.produce_version if max_version is None else min(max_version, self.produce_version)
        if hi < self.produce_min_version:
            raise errors.UnsupportedVersionError(f"no common version of Produce: this client supports "
                                                 f"3-{max_version}, the broker {self.produce_min_version}-"
                                                 f"{self.produce_version}")
        return hi

    def least_loaded_node(self, now: float) -> int | None:
        return 1

    def send(self, node: int, api_key: int, body: Any, *, version: int | None = None, expect_response: bool = True,
             callback: Callable[[ClientResponse], None], timeout_ms: float | None = None) -> None:
        if isinstance(body, tuple):  # encoded pieces: joined now, as the real client frames them in send()
            body = b"".join(body)
        req = FakeRequest(node, api_key, version, body, expect_response, callback, self.clock.monotonic_ms())
        self.sent.append(req)
        if not expect_response:
            req.answered = True
            self._completions.append((callback, ClientResponse(node, api_key, version or -1, -1, None, None, 0.0)))

    def poll(self, timeout_ms: float, now: float, hand_over: bool = True) -> None:
        self.polls.append(timeout_ms)
        self.hand_overs.append(hand_over)
        completions, self._completions = self._completions, []
        for callback, response in completions:
            callback(response)

    def wakeup(self) -> None:
        pass

    def in_flight_count(self, node: int | None = None) -> int:
        return sum(1 for r in self.sent if not r.answered and r.expect_response)

    def close(self) -> None:
        pass

    # test helpers
    def produce_requests(self) -> list[FakeRequest]:
        return [r for r in self.sent if r.api_key == ApiKey.PRODUCE]

    def respond(self, req: FakeRequest, body: dict[str, Any] | None = None, error: Exception | None = None,
                latency_ms: float = 2.0) -> None:
        """Deliver ``body`` (or ``error``) for ``req`` on the next poll."""
        assert not req.answered, "answered twice"
        req.answered = True
        response = ClientResponse(req.node, req.api_key, req.version or -1, 0, body, error, latency_ms)
        self._completions.append((req.callback, response))

    def respond_produce(self, req: FakeRequest, codes: dict[TopicPartition, int] | None = None,
                        offsets: dict[TopicPartition, int] | None = None) -> None:
        """Answer every partition of a Produce request: error code (default 0) and base offset."""
        codes = codes or {}
        offsets = offsets or {}
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp in req.batches():
            code = codes.get(tp, 0)
            topics.setdefault(tp[0], []).append({
                "index": tp[1], "error_code": code, "base_offset": -1 if code else offsets.get(tp, 0),
                "log_append_time_ms": -1, "log_start_offset": 0, "record_errors": [], "error_message": None,
            })
        ids = {name: topic_id for topic_id, name in req.topic_names.items()}
        body = {"responses": [{"name": name, "topic_id": ids.get(name, bytes(16)), "partition_responses": parts}
                              for name, parts in topics.items()],
                "throttle_time_ms": 0}
        self.respond(req, body)


class FakeMetadata:
    def __init__(self, cluster: FakeCluster) -> None:
        self.cluster = cluster
        self.update_requests = 0
        self.added: list[str] = []
        self.touched: set[str] = set()

    def fetch(self) -> FakeCluster:
        return self.cluster

    def add_topic(self, topic: str, now: float) -> None:
        self.added.append(topic)

    def touch(self, topic: str) -> None:
        self.touched.add(topic)

    def request_update(self) -> int:
        self.update_requests += 1
        return 0

    def update_requested(self) -> bool:
        return self.update_requests > 0


class FakeUpdater:
    def maybe_update(self, now: float) -> float:
        return math.inf


class Rig:
    """A Sender with fakes around a real accumulator (and optionally a real TransactionManager)."""

    def __init__(self, *, partitions: int = 3, leaders: dict[TopicPartition, int | None] | None = None,
                 linger_ms: float = 0, batch_size: int = 16384, retry_backoff_ms: int = 100,
                 delivery_timeout_ms: int = 120_000, retries: int = 10, max_request_size: int = 1_048_576,
                 in_order: bool = False, idempotent: bool = False, compression: CompressionType = CompressionType.NONE,
                 acks: int = -1, transactional_id: str | None = None) -> None:
        self.clock = ManualClock()
        self.cluster = FakeCluster(leaders if leaders is not None else {(T, p): 1 for p in range(partitions)})
        self.tm = TransactionManager(None, 60_000, retry_backoff_ms) if idempotent else None
        self.accumulator = RecordAccumulator(
            batch_size=batch_size, buffer_memory=1 << 22, compression=compression, linger_ms=linger_ms,
            retry_backoff_ms=retry_backoff_ms, retry_backoff_max_ms=retry_backoff_ms,  # no jitter
            delivery_timeout_ms=delivery_timeout_ms, clock=self.clock, transaction_manager=self.tm,
        )
        self.client = FakeClient(self.clock)
        self.metadata = FakeMetadata(self.cluster)
        self.metrics = ProducerMetrics(self.clock)
        self.sender = Sender(
            client=self.client,  # type: ignore[arg-type]
            metadata=self.metadata,  # type: ignore[arg-type]
            metadata_updater=FakeUpdater(),  # type: ignore[arg-type]
            accumulator=self.accumulator, transaction_manager=self.tm, clock=self.clock, metrics=self.metrics,
            acks=acks, retries=retries, max_request_size=max_request_size, request_timeout_ms=30_000,
            delivery_timeout_ms=delivery_timeout_ms, retry_backoff_ms=retry_backoff_ms,
            guarantee_message_order=in_order, transactional_id=transactional_id,
        )

    def send(self, value: bytes, partition: int = 0, callback: Any = None, topic: str = T) -> FutureRecordMetadata:
        result = self.accumulator.append(topic, partition, TS, None, value, None, callback, 1000,
                                         self.clock.monotonic_ms(), self.cluster)
        assert result.future is not None
        return result.future

    def step(self, advance_ms: float = 0) -> list[FakeRequest]:
        """Advance the clock, run one Sender iteration; returns the Produce requests it sent."""
        self.clock.advance(advance_ms)
        before = len(self.client.sent)
        self.sender.run_once()
        return [r for r in self.client.sent[before:] if r.api_key == ApiKey.PRODUCE]

    def step_one(self, advance_ms: float = 0) -> FakeRequest:
        sent = self.step(advance_ms)
        assert len(sent) == 1, f"expected one Produce request, got {len(sent)}"
        return sent[0]


# ----------------------------------------------------------------------------------------- batching


def test_batch_size_max_queue_time_and_throttle_time_metrics() -> None:
    """Java's batch-size-max, record-queue-time-avg/max (a batch's creation to its drain) and
    produce-throttle-time-avg/max (the throttle_time_ms of the Produce answers)."""
    rig = Rig(linger_ms=100)
    rig.send(b"a" * 10)  # partition 0, drained at +100 ms
    rig.step(40)
    rig.send(b"b" * 500, partition=1)  # created at +40, drained with the first: 60 ms
    req = rig.step_one(60)
    sizes = [b.size_in_bytes for b in req.batches().values()]

    def answer(partitions: tuple[int, ...], throttle_ms: int) -> dict[str, Any]:
        return {"responses": [{"name": T, "partition_responses": [
            {"index": p, "error_code": 0, "base_offset": 0, "log_append_time_ms": -1, "log_start_offset": 0,
             "record_errors": [], "error_message": None} for p in partitions]}], "throttle_time_ms": throttle_ms}

    rig.client.respond(req, answer((0, 1), 30))
    rig.step()
    rig.send(b"c")
    second = rig.step_one(100)
    rig.client.respond(second, answer((0,), 0))
    rig.step()
    m = rig.metrics.snapshot()
    assert m["batch-size-max"] == max(sizes) > min(sizes)
    assert m["record-queue-time-max"] == pytest.approx(100)
    assert m["record-queue-time-avg"] == pytest.approx((100 + 60 + 100) / 3)
    assert (m["produce-throttle-time-avg"], m["produce-throttle-time-max"]) == (15.0, 30.0)


def test_linger_is_respected() -> None:
    rig = Rig(linger_ms=100)
    future = rig.send(b"a")
    assert rig.step() == []
    assert rig.client.polls[-1] == pytest.approx(100)  # sleeps exactly until the linger expires
    assert rig.step(60) == []
    assert rig.client.polls[-1] == pytest.approx(40)
    assert rig.step(39.5) == []
    req = rig.step_one(0.5)
    assert req.values((T, 0)) == [b"a"]
    assert not future.done()
    rig.client.respond_produce(req, offsets={(T, 0): 7})
    rig.step()
    assert future.result(0).offset == 7


def test_a_full_batch_is_sent_at_once() -> None:
    rig = Rig(linger_ms=10_000, batch_size=1000)
    futures = [rig.send(b"x" * 100) for _ in range(12)]  # more than one batch's worth
    req = rig.step_one()  # no clock movement: the first (full) batch goes now
    first = req.values((T, 0))
    assert 1 < len(first) < 12
    assert rig.step() == []  # the second batch is not full: it lingers
    rig.client.respond_produce(req, offsets={(T, 0): 0})
    rig.step()
    assert all(f.done() for f in futures[: len(first)])
    assert not any(f.done() for f in futures[len(first):])


def test_the_sender_asks_for_the_gil_only_while_full_batches_wait_for_it() -> None:
    """``poll(hand_over=...)`` (``_c/_sender_io.c``) follows ``RecordAccumulator.has_full_backlog``: a Sender
    that is not what the sending threads wait for takes the GIL back as CPython gives it."""
    rig = Rig(linger_ms=10_000, batch_size=1000)
    rig.client.not_ready.add(1)  # nothing can be sent: the full batches stay queued
    for _ in range(30):
        rig.send(b"x" * 100)
    rig.step()
    assert rig.client.hand_overs[-1] is rig.accumulator.has_full_backlog() is False  # never drained yet
    rig.client.not_ready.clear()
    rig.step()  # one request per loop and node while full batches remain: the drain leaves a backlog
    assert rig.accumulator.may_have_full_batches(1) == rig.accumulator.has_full_backlog()
    assert rig.client.hand_overs[-1] is rig.accumulator.has_full_backlog()
    rig.accumulator.has_full_backlog = lambda: True  # type: ignore[method-assign]
    rig.step()
    assert rig.client.hand_overs[-1] is True


def test_flush_makes_batches_sendable() -> None:
    rig = Rig(linger_ms=10_000)
    rig.send(b"a", partition=0)
    rig.send(b"b", partition=2)
    assert rig.step() == []
    rig.accumulator.begin_flush()
    req = rig.step_one()
    assert set(req.batches()) == {(T, 0), (T, 2)}


# ----------------------------------------------------------------------------------------- retries


def test_retry_waits_for_the_backoff() -> None:
    rig = Rig(retry_backoff_ms=100)
    future = rig.send(b"a")
    req = rig.step_one()
    rig.client.respond_produce(req, codes={(T, 0): 19})  # NOT_ENOUGH_REPLICAS: retriable
    assert rig.step(5) == []  # the response is handled in this step's poll
    assert not future.done()
    assert rig.step() == []
    assert rig.client.polls[-1] == pytest.approx(100)  # sleeps until the backoff ends
    assert rig.step(99) == []  # 99 ms after the re-enqueue: still backing off
    assert rig.client.polls[-1] == pytest.approx(1)
    retry = rig.step_one(1)
    assert retry.values((T, 0)) == [b"a"]
    rig.client.respond_produce(retry, offsets={(T, 0): 3})
    rig.step()
    assert future.result(0).offset == 3
    assert rig.metrics.records_retried == 1
    assert rig.metadata.update_requests == 0  # NOT_ENOUGH_REPLICAS is not a metadata problem


def test_retries_exhausted_fail_with_the_broker_error() -> None:
    rig = Rig(retries=1, retry_backoff_ms=10)
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={(T, 0): 19})
    rig.step()
    rig.client.respond_produce(rig.step_one(10), codes={(T, 0): 19})
    rig.step()
    exc = future.exception(0)
    assert isinstance(exc, errors.BrokerError) and exc.code == 19


def test_invalid_metadata_error_requests_an_update_and_retries() -> None:
    rig = Rig(retry_backoff_ms=50)
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={(T, 0): errors.NOT_LEADER_OR_FOLLOWER})
    rig.step()
    assert rig.metadata.update_requests >= 1
    retry = rig.step_one(50)
    rig.client.respond_produce(retry, offsets={(T, 0): 11})
    rig.step()
    assert future.result(0).offset == 11


def test_network_error_retries_the_whole_request() -> None:
    rig = Rig(retry_backoff_ms=20)
    f0, f1 = rig.send(b"a", partition=0), rig.send(b"b", partition=1)
    req = rig.step_one()
    rig.client.respond(req, error=errors.KafkaConnectionError("connection lost"))
    rig.step()
    assert not f0.done() and not f1.done()
    assert rig.metadata.update_requests >= 1  # NETWORK_EXCEPTION is an invalid-metadata error
    retry = rig.step_one(20)
    assert set(retry.batches()) == {(T, 0), (T, 1)}


def test_unknown_leader_requests_metadata_and_waits() -> None:
    rig = Rig(leaders={(T, 0): None, (T, 1): 1})
    rig.send(b"a", partition=0)
    assert rig.step() == []
    assert rig.metadata.update_requests >= 1 and T in rig.metadata.added
    # the new metadata snapshot names a leader (snapshots are immutable: Metadata publishes a new one)
    rig.cluster = rig.metadata.cluster = FakeCluster({(T, 0): 1, (T, 1): 1})
    assert set(rig.step_one().batches()) == {(T, 0)}


# ----------------------------------------------------------------------------------------- expiry


def test_delivery_timeout_expires_queued_batches() -> None:
    rig = Rig(delivery_timeout_ms=1000)
    rig.client.not_ready.add(1)  # the leader cannot be reached
    futures = [rig.send(b"%d" % i) for i in range(3)]
    assert rig.step() == []
    assert rig.step(999) == []
    assert not any(f.done() for f in futures)
    rig.step(1)
    for f in futures:
        exc = f.exception(0)
        assert isinstance(exc, errors.DeliveryTimeoutError)
        assert "delivery.timeout.ms=1000" in str(exc)
    assert rig.accumulator.pool.available_memory() == 1 << 22


def test_a_batch_expiring_after_retries_names_the_error_it_was_retried_after() -> None:
    """Records refused with NOT_ENOUGH_REPLICAS until delivery.timeout.ms (a follower down on Apache Kafka,
    tests/kafka_faults) fail with a DeliveryTimeoutError that says why they were never written."""
    rig = Rig(delivery_timeout_ms=1000, retry_backoff_ms=100)
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={(T, 0): 19})  # NOT_ENOUGH_REPLICAS: retriable
    rig.step()  # the answer is handled: the batch waits for its backoff
    rig.step(1000)
    exc = future.exception(0)
    assert isinstance(exc, errors.DeliveryTimeoutError)
    assert "delivery.timeout.ms=1000" in str(exc) and "last attempt failed with NOT_ENOUGH_REPLICAS" in str(exc)


def test_delivery_timeout_of_batches_created_between_expiry_scans() -> None:
    # The Sender scans for expired batches only when something can be due; a batch created after a
    # scan, and a retried batch that was in flight at the scan, still expire exactly on time.
    rig = Rig(delivery_timeout_ms=1000)
    rig.client.not_ready.add(1)
    assert rig.step() == []  # t=0: a scan with nothing queued
    rig.clock.advance(600)
    late = rig.send(b"late", partition=0)  # t=600, due at 1600
    rig.step()
    rig.step(600)  # t=1200: a scan finds it due at 1600
    assert rig.client.polls[-1] <= 400
    rig.step(399)
    assert not late.done()
    rig.step(1)  # t=1600
    assert isinstance(late.exception(0), errors.DeliveryTimeoutError)

    rig.client.not_ready.clear()
    retried = rig.send(b"retried", partition=1)  # t=1600, due at 2600
    first = rig.step_one()
    rig.step(300)  # t=1900: a scan while it is in flight
    rig.client.respond_produce(first, codes={(T, 1): 6})  # NOT_LEADER_OR_FOLLOWER: retried
    rig.client.not_ready.add(1)
    rig.step(100)
    assert not retried.done()
    rig.step(599)  # t=2599
    assert not retried.done()
    rig.step(1)  # t=2600
    assert isinstance(retried.exception(0), errors.DeliveryTimeoutError)


def test_delivery_timeout_expires_in_flight_batches_and_ignores_the_late_answer() -> None:
    rig = Rig(delivery_timeout_ms=1000)
    future = rig.send(b"a")
    req = rig.step_one()
    rig.step(1000)
    assert isinstance(future.exception(0), errors.DeliveryTimeoutError)
    rig.client.respond_produce(req, offsets={(T, 0): 5})  # too late
    rig.step()
    assert isinstance(future.exception(0), errors.DeliveryTimeoutError)


def test_a_late_not_leader_answer_for_an_expired_batch_still_refreshes_metadata() -> None:
    """Java's completeBatch fails an already-expired batch (a no-op) and then, for an invalid-metadata
    error, still requests a metadata update: the next batch to that partition should not pay for it."""
    rig = Rig(delivery_timeout_ms=1000)
    future = rig.send(b"a")
    req = rig.step_one()
    rig.step(1000)
    assert isinstance(future.exception(0), errors.DeliveryTimeoutError)
    before = rig.metadata.update_requests
    rig.client.respond_produce(req, codes={(T, 0): errors.NOT_LEADER_OR_FOLLOWER})
    rig.step()
    assert rig.metadata.update_requests == before + 1
    assert isinstance(future.exception(0), errors.DeliveryTimeoutError)


# ----------------------------------------------------------------------------------------- ordering


def test_max_in_flight_one_mutes_the_partition_until_the_response() -> None:
    rig = Rig(in_order=True)
    rig.send(b"a", partition=0)
    first = rig.step_one()
    rig.send(b"b", partition=0)
    rig.send(b"c", partition=1)
    second = rig.step_one()
    assert set(second.batches()) == {(T, 1)}  # partition 0 is muted while "a" is in flight
    assert rig.step() == []
    assert rig.accumulator.is_muted((T, 0))
    rig.client.respond_produce(first)
    assert rig.step() == []  # the response arrives in this step's poll, after the drain
    assert not rig.accumulator.is_muted((T, 0))
    assert rig.step_one().values((T, 0)) == [b"b"]


@pytest.mark.parametrize("error", [errors.AuthenticationError("SASL re-authentication failed"),
                                   errors.UnsupportedVersionError("the broker dropped Produce v3")])
def test_max_in_flight_one_unmutes_a_partition_whose_request_failed_for_good(error: Exception) -> None:
    """A request answered with an error that fails its batches at once (no retry) unmutes their partitions
    (Java's completeBatch unmutes on every outcome): the partition's next batch is sent, not held until it
    expires."""
    rig = Rig(in_order=True)
    f_a = rig.send(b"a", partition=0)
    first = rig.step_one()
    rig.send(b"b", partition=0)
    assert rig.step() == []
    rig.client.respond(first, error=error)
    rig.step()
    assert f_a.exception(0) is error
    assert not rig.accumulator.is_muted((T, 0))
    assert rig.step_one().values((T, 0)) == [b"b"]


def test_max_in_flight_one_unmutes_when_no_produce_version_is_usable() -> None:
    """The batches of a request that cannot be sent (no Produce version both sides support) fail and their
    partitions are unmuted, as after an answer."""
    rig = Rig(in_order=True)
    rig.client.produce_version = 13
    rig.client.produce_min_version = 13  # above our cap without topic ids (12)
    f_a = rig.send(b"a", partition=0)
    assert rig.step() == []
    assert isinstance(f_a.exception(0), errors.UnsupportedVersionError)
    assert not rig.accumulator.is_muted((T, 0))


def test_max_in_flight_one_stays_muted_while_an_expired_batch_is_on_the_wire() -> None:
    """Java unmutes a partition only when its request is answered (completeBatch). Expiring a queued batch of
    it while an expired batch's request is still on the wire must not let a new batch out beside that one:
    the two could be reordered by a retriable error."""
    rig = Rig(in_order=True, delivery_timeout_ms=1000, retries=10, retry_backoff_ms=10)
    rig.send(b"r0")
    on_wire = rig.step_one()
    rig.send(b"r1")  # queued behind it
    assert rig.step() == []
    assert rig.step(1000) == []  # both expire; r0's request is still unanswered
    assert rig.accumulator.is_muted((T, 0))
    rig.send(b"r2")
    assert rig.step() == []  # not while r0's request is on the wire
    rig.client.respond_produce(on_wire, offsets={(T, 0): 0})
    assert rig.step() == []  # the late answer arrives in this loop's poll and unmutes
    assert rig.step_one().values((T, 0)) == [b"r2"]


class _OwnBaseException(BaseException):
    """What pytest's ``Failed`` or gevent's ``Timeout`` are: a BaseException of a library's own."""


@pytest.mark.parametrize("raised", [SystemExit(1), GeneratorExit(), ValueError("bad"), _OwnBaseException()])
def test_a_callback_raising_anything_but_keyboard_interrupt_is_logged_and_the_rest_complete(
        raised: BaseException) -> None:
    """``sys.exit()`` in a callback on the I/O thread: logged like any callback error; the batch's other
    records and their callbacks complete (before, SystemExit left the run and, on the real thread, ended it
    silently with the batch and every later record pending). A BaseException of its own did so without the
    accelerator (the Python loops caught a tuple of three classes; the C loop everything but
    KeyboardInterrupt)."""
    rig = Rig()
    calls: list[int] = []

    def bad(metadata: object, error: object) -> None:
        raise raised

    futures = [rig.send(b"a", callback=bad), rig.send(b"b", callback=lambda m, e: calls.append(1)),
               rig.send(b"c", callback=lambda m, e: calls.append(2))]
    req = rig.step_one()
    rig.client.respond_produce(req, offsets={(T, 0): 5})
    rig.step()
    assert [f.result(0).offset for f in futures] == [5, 6, 7] and calls == [1, 2]


def test_a_request_that_cannot_be_encoded_fails_its_batches_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Produce request whose fields the protocol cannot carry: its batches fail with that error in the
    same loop and nothing is left marked as on the wire. The error left run_once after the batches were
    drained and marked in a request, where they waited until delivery.timeout.ms (a partitioner's 1.0 was
    one way there before send() refused non-int partitions)."""
    import sparkafka.producer.sender as sender_module

    def cannot(*args: object) -> None:
        raise errors.ProtocolError("Produce partition index 1.0 of topic 't' must fit int32")

    monkeypatch.setattr(sender_module, "encode_produce_request_parts", cannot)
    rig = Rig()
    futures = [rig.send(b"a", partition=0), rig.send(b"b", partition=1)]
    assert rig.step() == []
    for future in futures:
        assert isinstance(future.exception(0), errors.ProtocolError)
    assert not rig.sender.in_flight_batches and rig.accumulator.has_undrained() is False


def test_a_callback_raising_keyboard_interrupt_propagates() -> None:
    rig = Rig()

    def interrupted(metadata: object, error: object) -> None:
        raise KeyboardInterrupt

    rig.send(b"a", callback=interrupted)
    req = rig.step_one()
    rig.client.respond_produce(req)
    with pytest.raises(KeyboardInterrupt):
        rig.step()


def test_muted_partition_stays_muted_during_retry() -> None:
    rig = Rig(in_order=True, retry_backoff_ms=10)
    f_a = rig.send(b"a", partition=0)
    first = rig.step_one()
    rig.send(b"b", partition=0)
    rig.client.respond_produce(first, codes={(T, 0): 19})
    rig.step()
    retry = rig.step_one(10)
    assert retry.values((T, 0)) == [b"a"]  # the retry goes before "b", alone
    rig.client.respond_produce(retry, offsets={(T, 0): 0})
    rig.step()
    assert f_a.result(0).offset == 0
    assert rig.step_one().values((T, 0)) == [b"b"]


def test_drain_rotates_over_the_partitions_of_a_node() -> None:
    value = b"v" * 400
    rig = Rig(partitions=3, batch_size=600, max_request_size=700)  # one batch per request
    for _ in range(2):
        for p in range(3):
            rig.send(value, partition=p)
    order = []
    for _ in range(6):
        for req in rig.step():  # full batches queued: one loop may send several requests
            (tp,) = req.batches()
            order.append(tp[1])
            rig.client.respond_produce(req)
        if len(order) == 6:
            break
    assert order == [0, 1, 2, 0, 1, 2]


def test_a_backlog_of_full_batches_goes_in_several_requests_per_loop() -> None:
    """While full batches are queued and the node can take more, one loop sends up to five requests;
    the open batch at the tail is not sent before its linger."""
    rig = Rig(partitions=1, batch_size=600, max_request_size=700, linger_ms=1000)
    values = [bytes([65 + i]) * 400 for i in range(7)]  # one record per batch: 7 batches, the last open
    for value in values:
        rig.send(value, partition=0)
    first = rig.step()
    assert [req.values((T, 0)) for req in first] == [[v] for v in values[:5]]
    for req in first:
        rig.client.respond_produce(req)
    second = rig.step()
    assert [req.values((T, 0)) for req in second] == [[values[5]]]  # the 7th is alone and lingers
    rig.client.respond_produce(second[0])
    assert rig.step() == []
    assert rig.step_one(1000).values((T, 0)) == [values[6]]


def test_no_extra_request_to_a_node_that_cannot_take_one() -> None:
    rig = Rig(partitions=1, batch_size=600, max_request_size=700)
    for i in range(4):
        rig.send(bytes([65 + i]) * 400, partition=0)
    original = rig.client.ready
    calls: list[int] = []

    def ready(node: int, now: float) -> bool:  # the in-flight limit is reached after one request
        calls.append(node)
        return len(calls) == 1 and original(node, now)

    rig.client.ready = ready  # type: ignore[method-assign]
    assert len(rig.step()) == 1


def test_max_request_size_splits_batches_across_requests() -> None:
    value = b"v" * 900
    rig = Rig(partitions=4, batch_size=1000, max_request_size=2500)
    for p in range(4):
        rig.send(value, partition=p)
    first = rig.step_one()
    second = rig.step_one()
    assert len(first.batches()) == 2 and len(second.batches()) == 2
    assert first.size() <= 2500 and second.size() <= 2500
    assert set(first.batches()) | set(second.batches()) == {(T, p) for p in range(4)}


def test_a_single_batch_larger_than_max_request_size_still_goes() -> None:
    rig = Rig(batch_size=100, max_request_size=500)
    rig.send(b"x" * 1000)
    assert rig.step_one().values((T, 0)) == [b"x" * 1000]


# ----------------------------------------------------------------------------------------- errors


def test_message_too_large_splits_the_batch() -> None:
    rig = Rig(batch_size=16384)
    calls: list[int] = []
    values = [b"%04d" % i + b"0" * 96 for i in range(100)]
    futures = [rig.send(v, callback=lambda m, e, i=i: calls.append(i)) for i, v in enumerate(values)]
    big = rig.step_one()
    assert rig.step() == []
    assert big.values((T, 0)) == values  # one batch of ~11 KB
    # The split targets batch.size; make it smaller than this batch, as when a compressed batch came out
    # bigger than its estimate (the usual way a batch exceeds the broker's limit).
    rig.accumulator._batch_size = 2000
    rig.client.respond_produce(big, codes={(T, 0): errors.MESSAGE_TOO_LARGE})
    rig.step()
    assert rig.metrics.splits == 1
    assert not any(f.done() for f in futures)
    sent: list[bytes | None] = []
    offset = 0
    for _ in range(50):
        reqs = rig.step()
        for req in reqs:
            part = req.values((T, 0))
            assert 1 <= len(part) <= 20  # ~2000-byte batches now
            sent += part
            rig.client.respond_produce(req, offsets={(T, 0): offset})
            offset += len(part)
        if len(sent) == len(values):
            break
    rig.step()
    assert sent == values  # the same records, in the same order
    assert [f.result(0).offset for f in futures] == list(range(100))
    assert calls == list(range(100))  # callbacks once each, in order
    assert rig.metrics.records_retried == 0  # a split is not a retry


def test_a_batch_within_batch_size_rejected_as_too_large_is_split_in_halves_until_single_records() -> None:
    """batch.size at or above the topic's max.message.bytes: splitting into batch.size gave the same batch
    back, rejected and split again until delivery.timeout.ms. A rejected batch no longer than batch.size is
    split into halves of its size instead, and halves of those, until the parts are accepted: every record
    is written, in order, after a few splits. (max.in.flight 1 keeps the parts in order, as with any retry.)"""
    rig = Rig(batch_size=16384, in_order=True)
    values = [b"%04d" % i + b"0" * 96 for i in range(100)]
    futures = [rig.send(v) for v in values]
    rejected = rig.step_one()
    assert len(rejected.values((T, 0))) == 100
    limit = 2500  # the broker's max.message.bytes
    rig.client.respond_produce(rejected, codes={(T, 0): errors.MESSAGE_TOO_LARGE})
    offset, written, sizes = 0, [], []
    for _ in range(200):
        for req in rig.step():
            batch = req.batches()[(T, 0)]
            size = len(req.produce()["topic_data"][0]["partition_data"][0]["records"])
            sizes.append(size)
            if size > limit:
                rig.client.respond_produce(req, codes={(T, 0): errors.MESSAGE_TOO_LARGE})
            else:
                rig.client.respond_produce(req, offsets={(T, 0): offset})
                written += [r.value for r in batch.records]
                offset += len(batch.records)
        if all(f.done() for f in futures):
            break
    assert written == values
    assert rig.metrics.splits <= 7 and max(sizes[1:]) < 16384 // 2 + 200  # halves, not 16 KB again
    assert [f.result(0).offset for f in futures] == list(range(100))


def test_waiting_on_a_batch_split_many_times_is_bounded_by_its_timeout() -> None:
    """``ProduceRequestResult.wait`` follows split batches with a list (no recursion) and under one
    deadline for the whole chain: a wait on a batch split 5,000 deep neither overflows the stack nor
    waits a timeout per level."""
    from sparkafka.producer.future import ProduceRequestResult

    first = ProduceRequestResult(T, 0)
    current = first
    for _ in range(5000):
        nxt = ProduceRequestResult(T, 0)
        current.set_redirect([0], [nxt])
        current.done(-1, -1)
        current = nxt
    assert first.wait(0) is False  # the last one is pending: a timeout, not a RecursionError
    current.done(7, -1)
    assert first.wait(0) is True


def test_an_internal_error_while_completing_fails_the_batch_instead_of_hanging(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rig = Rig()
    futures = [rig.send(b"%d" % i) for i in range(3)]
    req = rig.step_one()

    def broken_split(batch: object) -> int:
        raise RuntimeError("split bug")

    monkeypatch.setattr(rig.accumulator, "split_and_reenqueue", broken_split)
    rig.client.respond_produce(req, codes={(T, 0): errors.MESSAGE_TOO_LARGE})
    rig.step()
    for future in futures:
        exc = future.exception(0)
        assert isinstance(exc, errors.KafkaError) and "split bug" in str(exc)
    assert not rig.accumulator.has_incomplete()  # flush() has nothing left to wait for
    assert rig.accumulator.buffer_pool_available_memory() == 1 << 22


def test_an_internal_error_while_completing_a_success_fails_the_batch_instead_of_hanging(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The same guard on the path of a batch answered without error (``Sender._succeed``)."""
    rig = Rig()
    futures = [rig.send(b"%d" % i) for i in range(3)]
    other = rig.send(b"x", partition=1)
    req = rig.step_one()

    def broken_complete_ok(batch: Any, base_offset: int, log_append_time: int) -> None:
        if batch.tp == (T, 0):
            raise RuntimeError("completion bug")
        real(batch, base_offset, log_append_time)

    real = rig.sender._complete_ok
    monkeypatch.setattr(rig.sender, "_complete_ok", broken_complete_ok)
    rig.client.respond_produce(req, offsets={(T, 0): 10, (T, 1): 20})
    rig.step()
    for future in futures:
        exc = future.exception(0)
        assert isinstance(exc, errors.KafkaError) and "completion bug" in str(exc)
    assert other.result(0).offset == 20  # the other batch of the answer completes as usual
    assert not rig.accumulator.has_incomplete()  # flush() has nothing left to wait for
    assert rig.accumulator.buffer_pool_available_memory() == 1 << 22


def test_non_retriable_error_fails_only_that_batch() -> None:
    rig = Rig()
    f0, f1 = rig.send(b"a", partition=0), rig.send(b"b", partition=1)
    req = rig.step_one()
    rig.client.respond_produce(req, codes={(T, 0): errors.TOPIC_AUTHORIZATION_FAILED}, offsets={(T, 1): 4})
    rig.step()
    exc = f0.exception(0)
    assert isinstance(exc, errors.BrokerError) and exc.code == errors.TOPIC_AUTHORIZATION_FAILED
    assert f1.result(0).offset == 4
    assert rig.metrics.records_failed == 1 and rig.metrics.records_sent == 1


def test_duplicate_sequence_number_counts_as_success() -> None:
    rig = Rig()
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={(T, 0): errors.DUPLICATE_SEQUENCE_NUMBER})
    rig.step()
    assert future.exception(0) is None
    assert future.result(0).offset == -1


def test_acks_zero_completes_without_a_response() -> None:
    rig = Rig(acks=0)
    future = rig.send(b"a")
    req = rig.step_one()
    assert not req.expect_response and req.produce()["acks"] == 0
    rig.step()
    assert future.result(0).offset == -1


# ----------------------------------------------------------------------------------------- idempotence
def _in_transaction(rig: Rig) -> tuple[TransactionManager, RecordAccumulator, Sender]:
    """A transactional manager, initialized and in a transaction with partition t-0 added (answers given by
    hand), and an accumulator and Sender around it and the rig's fakes."""
    tm = ready()
    tm.begin_transaction()
    tm.maybe_add_partition((T, 0))
    add = tm.next_request(False)
    assert add is not None
    answer_add_partitions(add, (T, 0))
    accumulator = RecordAccumulator(
        batch_size=16384, buffer_memory=1 << 22, compression=CompressionType.NONE, linger_ms=0,
        retry_backoff_ms=100, retry_backoff_max_ms=100, delivery_timeout_ms=120_000, clock=rig.clock,
        transaction_manager=tm)
    sender = Sender(
        client=rig.client, metadata=rig.metadata, metadata_updater=FakeUpdater(),  # type: ignore[arg-type]
        accumulator=accumulator, transaction_manager=tm, clock=rig.clock, metrics=rig.metrics, acks=-1,
        retries=10, max_request_size=1 << 20, request_timeout_ms=30_000, delivery_timeout_ms=120_000,
        retry_backoff_ms=100, guarantee_message_order=False, transactional_id="tx")
    return tm, accumulator, sender


def test_records_failed_because_every_broker_refused_the_login_make_the_transaction_abortable() -> None:
    """Java's handleFailedBatch: a transaction that lost records must not commit. The Sender fails the
    records it never sent when every broker rejects the login; the transaction becomes abortable, so
    ``commit_transaction()`` refuses instead of committing the records that did get in."""
    rig = Rig()
    tm, accumulator, sender = _in_transaction(rig)
    sent = accumulator.append(T, 0, TS, None, b"one", None, None, 1000, rig.clock.monotonic_ms(), rig.cluster).future
    assert sent is not None
    sender.run_once()
    rig.client.respond_produce(rig.client.produce_requests()[-1])
    sender.run_once()
    assert sent.result(0).offset == 0
    refused = errors.AuthenticationError("SASL authentication failed")
    rig.client.authentication_error = lambda node=None: refused if node is None else None  # type: ignore[method-assign]
    rig.client.not_ready.add(1)
    lost = accumulator.append(T, 0, TS, None, b"two", None, None, 1000, rig.clock.monotonic_ms(), rig.cluster).future
    assert lost is not None
    sender.run_once()
    assert lost.exception(0) is refused
    assert tm.has_abortable_error() and tm.last_error is refused
    with pytest.raises(errors.TransactionError, match="must be aborted"):
        tm.begin_commit()


@pytest.mark.parametrize("override", [None, 20.0])
def test_a_transactional_request_is_retried_after_its_own_backoff(override: float | None) -> None:
    """The Sender stamps a re-queued transactional request's deadline with the request's backoff when it has
    one (``ADD_PARTITIONS_RETRY_BACKOFF_MS``), else ``retry.backoff.ms``, and sleeps until then."""
    rig = Rig(retry_backoff_ms=100)
    tm = TransactionManager("tx", 60_000, 100)
    tm.initialize_transactions()
    answer_find_coordinator(tm)
    init = tm.next_request(False)
    assert init is not None
    init.retry_at_ms = -1.0  # as TransactionManager._retry leaves it
    init.retry_backoff_ms = override
    tm.requeue(init)
    rig.sender.tm = tm
    now = rig.clock.monotonic_ms()
    assert rig.sender._maybe_send_and_poll_txn_request(now)
    expected = 100.0 if override is None else override
    assert init.retry_at_ms == now + expected and rig.client.polls[-1] == pytest.approx(expected)
    assert not [r for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID]  # not before its time




def test_a_refused_login_fails_init_transactions_and_close_does_not_wait_for_it() -> None:
    """Java's Sender.runOnce: an AuthenticationException while awaiting the transactional request's node fails
    every pending request and the producer, fatally (TransactionManager.authenticationFailed). Found by a
    review with a wrong SASL password, TLS to a plaintext listener and mTLS without a certificate:
    init_transactions() timed out again and again, and close() without a timeout never returned (its loop
    waited for the pending FindCoordinator; Java's counts pending requests only inside a transaction)."""
    rig = Rig()
    tm = TransactionManager("tx", 60_000, 100)
    rig.sender.tm = tm
    result = tm.initialize_transactions()
    rig.client.not_ready.add(1)
    assert rig.sender._work_left() is False  # a FindCoordinator, no transaction yet: close() need not wait
    rig.sender.run_once()
    assert not result.is_done()  # not ready, no login refused: it waits, as before
    refused = errors.AuthenticationError("SASL authentication failed: invalid credentials")
    rig.client.authentication_error = lambda node=None: refused  # type: ignore[method-assign]
    rig.sender.run_once()
    assert result.is_done() and result.error is refused
    assert tm.has_fatal_error() and rig.sender._work_left() is False
    with pytest.raises(errors.AuthenticationError, match="invalid credentials"):
        result.wait(0)


def _init_pid(rig: Rig, pid: int = 4242, epoch: int = 3) -> None:
    rig.step()
    init = [r for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID]
    assert len(init) == 1
    assert init[0].body["transactional_id"] is None
    rig.client.respond(init[0], {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid,
                                 "producer_epoch": epoch})
    rig.step()
    assert rig.tm is not None and rig.tm.has_producer_id()


@pytest.mark.parametrize("backoff_ms", [100, 2000])
def test_init_producer_id_is_retried_every_retry_backoff_ms(backoff_ms: int) -> None:
    """Java retries an idempotent producer's InitProducerId after retry.backoff.ms each time (its
    TxnRequestHandler's constant retryBackoffMs): it doubled here and stopped at a hard-coded 1000 ms, so
    retry.backoff.ms 2000 retried after 1000 and the third attempt of 100 came 200 ms after the second."""
    rig = Rig(idempotent=True, retry_backoff_ms=backoff_ms)
    rig.send(b"x")

    def init_requests() -> list[FakeRequest]:
        return [r for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID]

    rig.step()
    for attempt in range(1, 5):
        assert len(init_requests()) == attempt
        rig.client.respond(init_requests()[-1], {"throttle_time_ms": 0, "producer_id": -1, "producer_epoch": -1,
                                                 "error_code": errors.COORDINATOR_NOT_AVAILABLE})
        rig.step()  # the answer: a retriable error
        rig.step(backoff_ms - 1)
        assert len(init_requests()) == attempt, f"retry {attempt} came before retry.backoff.ms"
        rig.step(1)
    assert len(init_requests()) == 5
    rig.client.respond(init_requests()[-1], {"throttle_time_ms": 0, "error_code": 0, "producer_id": 7,
                                             "producer_epoch": 0})
    rig.step()
    assert rig.tm is not None and rig.tm.has_producer_id()


@pytest.mark.parametrize(("transactional_id", "version"), [(None, 12), ("tx", 11)])
def test_produce_version_against_a_broker_that_offers_13(transactional_id: str | None, version: int) -> None:
    # v13 names topics by id (none known here: v12); Produce 12 is transactions v2 (KIP-890), so a
    # transaction under protocol v1 stops at 11, as Java without transaction.version 2.
    rig = Rig(transactional_id=transactional_id)
    rig.client.produce_version = 13
    rig.send(b"a")
    req = rig.step_one()
    assert req.version == version
    assert req.produce()["transactional_id"] == transactional_id


def test_produce_13_names_topics_by_the_ids_metadata_gave() -> None:
    """KIP-516: with a topic id for every topic of the request, v13; the answer (by id) completes the batch."""
    topic_id = bytes(range(1, 17))
    rig = Rig()
    rig.cluster.topic_ids[T] = topic_id
    rig.client.produce_version = 13
    future = rig.send(b"a")
    req = rig.step_one()
    assert req.version == 13
    assert [t["topic_id"] for t in req.produce()["topic_data"]] == [topic_id]
    req.topic_names = {topic_id: T}
    rig.client.respond_produce(req, offsets={(T, 0): 41})
    rig.step()
    assert future.result(0).offset == 41


def test_produce_13_takes_the_ids_of_each_new_metadata_snapshot() -> None:
    """The Sender keeps the ids of one metadata snapshot: a topic re-created under a new id (a new snapshot)
    is named by the new id, while the answer to a request sent before still finds its topic by the old one."""
    old_id, new_id = bytes(range(1, 17)), bytes(range(2, 18))
    rig = Rig()
    rig.cluster.topic_ids[T] = old_id
    rig.client.produce_version = 13
    first = rig.send(b"a")
    req1 = rig.step_one()
    assert [t["topic_id"] for t in req1.produce()["topic_data"]] == [old_id]
    renewed = FakeCluster(dict(rig.cluster.leaders), topic_ids={T: new_id})
    rig.cluster = rig.metadata.cluster = renewed
    second = rig.send(b"b", partition=1)
    req2 = rig.step_one()
    assert [t["topic_id"] for t in req2.produce()["topic_data"]] == [new_id]
    req1.topic_names = {old_id: T}
    req2.topic_names = {new_id: T}
    rig.client.respond_produce(req1, offsets={(T, 0): 7})
    rig.client.respond_produce(req2, offsets={(T, 1): 9})
    rig.step()
    assert (first.result(0).offset, second.result(0).offset) == (7, 9)
    # a snapshot without an id for the topic: v12, by name
    rig.cluster = rig.metadata.cluster = FakeCluster(dict(rig.cluster.leaders))
    rig.send(b"c", partition=2)
    assert rig.step_one().version == 12


def test_a_broker_whose_produce_versions_are_all_above_our_cap_fails_the_batch_typed() -> None:
    # Java's latestUsableVersion(PRODUCE, 3, cap): no overlap is an UnsupportedVersionException. The Sender
    # took min(negotiated, cap) and sent a version the broker had said it does not support.
    rig = Rig()
    rig.client.produce_version = 13
    rig.client.produce_min_version = 13  # names topics by id only; our cap without topic ids is 12
    future = rig.send(b"a")
    assert rig.step() == []
    error = future.exception(0)
    assert isinstance(error, errors.UnsupportedVersionError) and "the broker 13-13" in str(error)


def test_idempotent_batches_carry_producer_id_and_sequences() -> None:
    rig = Rig(idempotent=True)
    rig.send(b"x")
    assert rig.step() == []  # no producer id yet: nothing is drained
    _init_pid(rig)
    req1 = rig.step_one()
    b1 = req1.batches()[(T, 0)]
    assert (b1.producer_id, b1.producer_epoch, b1.base_sequence) == (4242, 3, 0)
    rig.client.respond_produce(req1)
    rig.step()
    for v in (b"a", b"b", b"c"):
        rig.send(v)
    rig.send(b"p1", partition=1)
    req2 = rig.step_one()
    b2 = req2.batches()
    assert (b2[(T, 0)].producer_id, b2[(T, 0)].base_sequence, len(b2[(T, 0)].records)) == (4242, 1, 3)
    assert b2[(T, 1)].base_sequence == 0
    assert req2.produce()["acks"] == -1


def test_idempotent_retry_keeps_its_sequence() -> None:
    rig = Rig(idempotent=True, retry_backoff_ms=10)
    _init_pid(rig)
    rig.send(b"first")  # the partition's first batch goes alone until acknowledged
    rig.client.respond_produce(rig.step_one(), offsets={(T, 0): 0})
    rig.step()
    f_a = rig.send(b"a")
    req = rig.step_one()
    rig.client.respond_produce(req, codes={(T, 0): 19})
    rig.step()
    f_b = rig.send(b"b")
    retry = rig.step_one(10)
    assert retry.batches()[(T, 0)].base_sequence == 1 and retry.values((T, 0)) == [b"a"]
    nxt = rig.step_one()  # "b" may follow while the retry is in flight (max.in.flight 5)
    assert nxt.batches()[(T, 0)].base_sequence == 2 and nxt.values((T, 0)) == [b"b"]
    rig.client.respond_produce(retry, offsets={(T, 0): 1})
    rig.client.respond_produce(nxt, offsets={(T, 0): 2})
    rig.step()
    assert (f_a.result(0).offset, f_b.result(0).offset) == (1, 2)


def test_idempotent_duplicate_sequence_counts_as_success() -> None:
    rig = Rig(idempotent=True)
    _init_pid(rig)
    future = rig.send(b"a")
    rig.client.respond_produce(rig.step_one(), codes={(T, 0): errors.DUPLICATE_SEQUENCE_NUMBER})
    rig.step()
    assert future.exception(0) is None
    nxt = rig.send(b"b")
    req = rig.step_one()
    assert req.batches()[(T, 0)].base_sequence == 1
    rig.client.respond_produce(req, offsets={(T, 0): 1})
    rig.step()
    assert nxt.result(0).offset == 1


def test_a_batch_that_expires_as_it_is_drained_is_not_sent() -> None:
    # The leader becomes reachable just as the batch's delivery.timeout.ms runs out: the loop drains it,
    # the expiry scan fails it and gives its buffer back to the pool, and the request must not then carry
    # it (its bytes may already belong to a new batch; the caller was told it failed).
    rig = Rig(delivery_timeout_ms=1000)
    rig.client.not_ready.add(1)
    expired = rig.send(b"old", partition=0)
    assert rig.step() == []
    rig.clock.advance(500)
    live = rig.send(b"new", partition=1)
    rig.step(499)  # t=999
    assert not expired.done()
    rig.client.not_ready.clear()
    req = rig.step_one(1)  # t=1000: both drained, the first one expired
    assert isinstance(expired.exception(0), errors.DeliveryTimeoutError)
    assert set(req.batches()) == {(T, 1)}
    rig.client.respond_produce(req, offsets={(T, 1): 3})
    rig.step()
    assert live.result(0).offset == 3
    assert rig.accumulator.pool.available_memory() == 1 << 22


def test_idempotent_a_batch_expired_before_it_went_out_leaves_no_sequence_gap() -> None:
    rig = Rig(idempotent=True, delivery_timeout_ms=1000)
    _init_pid(rig)
    rig.client.not_ready.add(1)
    expired = rig.send(b"old")
    rig.step(999)
    rig.client.not_ready.clear()
    assert rig.step(1) == []  # t=1000: drained with sequence 0, expired, not sent
    assert isinstance(expired.exception(0), errors.DeliveryTimeoutError)
    nxt = rig.send(b"next")
    sent: list[FakeRequest] = []
    for _ in range(5):  # an epoch bump (InitProducerId) may come first
        for init in [r for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID and not r.answered]:
            rig.client.respond(init, {"throttle_time_ms": 0, "error_code": 0, "producer_id": 4242,
                                      "producer_epoch": 4})
        sent += rig.step(100)
    assert len(sent) == 1
    batch = sent[0].batches()[(T, 0)]
    assert batch.base_sequence == 0  # the broker never saw sequence 0
    rig.client.respond_produce(sent[0], offsets={(T, 0): 0})
    rig.step()
    assert nxt.result(0).offset == 0


# ----------------------------------------------------------------------------------------- transactions


def _transactional(rig: Rig, coordinator: int) -> TransactionManager:
    """A real transactional TransactionManager behind ``rig``'s Sender, initialized with ``coordinator``."""
    tm = TransactionManager("tx", 60_000, 100)
    rig.sender.tm = tm
    result = tm.initialize_transactions()
    for api_key, answer in ((ApiKey.FIND_COORDINATOR, {"error_code": 0, "node_id": coordinator, "host": "h",
                                                        "port": 1}),
                            (ApiKey.INIT_PRODUCER_ID, {"throttle_time_ms": 0, "error_code": 0, "producer_id": 7,
                                                        "producer_epoch": 0})):
        rig.step()
        rig.client.respond(next(r for r in rig.client.sent if r.api_key == api_key and not r.answered), answer)
        rig.step()
    assert result.is_done() and result.error is None
    return tm


def _find_coordinator_requests(rig: Rig) -> int:
    return sum(1 for r in rig.client.sent if r.api_key == ApiKey.FIND_COORDINATOR)


def test_a_coordinator_that_refuses_the_connection_is_looked_up_again_at_once() -> None:
    """Java's ``awaitNodeReady`` gives up on the coordinator as soon as the connection to it failed
    (``NetworkClientUtils.awaitReady``: ``connectionFailed``) and finds the coordinator again. Waiting
    request.timeout.ms instead held a commit for 30 s after the coordinator was killed on a 3-node
    Apache Kafka cluster (tests/kafka_faults), while another broker was the coordinator after 3 s."""
    rig = Rig(transactional_id="tx")
    tm = _transactional(rig, coordinator=2)
    finds = _find_coordinator_requests(rig)
    rig.client.not_ready.add(2)
    rig.client.failed.add(2)  # killed: the connection is refused
    tm.begin_transaction()
    tm.maybe_add_partition((T, 0))
    rig.step()
    rig.step()
    assert _find_coordinator_requests(rig) == finds + 1
    assert not any(r.api_key == ApiKey.ADD_PARTITIONS_TO_TXN for r in rig.client.sent)


def test_a_coordinator_still_connecting_is_waited_for() -> None:
    rig = Rig(transactional_id="tx")
    tm = _transactional(rig, coordinator=2)
    finds = _find_coordinator_requests(rig)
    rig.client.not_ready.add(2)  # connecting
    tm.begin_transaction()
    tm.maybe_add_partition((T, 0))
    for _ in range(5):
        rig.step(100)
    assert _find_coordinator_requests(rig) == finds
    rig.client.not_ready.clear()
    rig.step()
    assert [r.node for r in rig.client.sent if r.api_key == ApiKey.ADD_PARTITIONS_TO_TXN] == [2]
