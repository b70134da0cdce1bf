"""What ``KafkaProducer.send()`` assumes on its fast path, pinned.

``send()`` reads the metadata snapshot as ``Metadata._cluster`` and the partition count as
``Cluster._counts.get(topic)`` (two attribute reads instead of two Python calls per record), and
partitions keyed records with ``partition_for_key_fast``. If ``net/`` changes what those attributes
hold, these tests fail before send() silently misbehaves.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sparkafka import errors
from sparkafka._clock import SYSTEM_CLOCK, ManualClock
from sparkafka.net.cluster import Cluster
from sparkafka.net.metadata import Metadata
from sparkafka.producer.future import FutureRecordMetadata
from sparkafka.producer.murmur2 import murmur2, murmur2_py, partition_for_key_fast, partition_for_key_py
from sparkafka.producer.producer import KafkaProducer
from sparkafka.producer.send_lane import _SendLane


def _metadata_body(topics: dict[str, int]) -> dict[str, object]:
    return {
        "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "controller_id": 1,
        "topics": [
            {"name": name, "error_code": 0, "is_internal": False,
             "partitions": [{"partition_index": p, "leader_id": 1, "leader_epoch": 0, "replica_nodes": [1],
                             "isr_nodes": [1], "offline_replicas": [], "error_code": 0} for p in range(count)]}
            for name, count in topics.items()
        ],
    }


def test_the_snapshot_attribute_is_what_fetch_returns_before_and_after_updates() -> None:
    clock = ManualClock()
    metadata = Metadata(bootstrap_servers="127.0.0.1:9092", clock=clock)
    assert metadata._cluster is metadata.fetch()
    metadata.add_topic("orders", clock.monotonic_ms())
    metadata.update(_metadata_body({"orders": 6, "audit": 1}), clock.monotonic_ms())
    snapshot = metadata._cluster
    assert snapshot is metadata.fetch()
    for topic in ("orders", "audit", "missing"):
        assert snapshot._counts.get(topic) == snapshot.partition_count(topic)
    assert snapshot._counts.get("orders") == 6


def test_partition_counts_attribute_matches_the_accessor() -> None:
    empty = Cluster.empty()
    assert empty._counts.get("t") is None and empty.partition_count("t") is None


@settings(max_examples=300, deadline=None)
@given(key=st.binary(max_size=40), n=st.integers(1, 5000))
def test_fast_key_partitioning_is_javas_formula(key: bytes, n: int) -> None:
    expected = (murmur2_py(key) & 0x7FFFFFFF) % n
    assert partition_for_key_fast(key, n) == expected == (murmur2(key) & 0x7FFFFFFF) % n
    assert partition_for_key_py(key, n) == expected


@pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")
def test_the_send_lane_partitions_a_hash_with_the_high_bit_set_as_java() -> None:
    """The C send lane takes keyed records itself: for a key whose murmur2 is negative as a Java int (the
    high bit set) the partition is still ``(murmur2(key) & 0x7fffffff) % n``, as in Java and send()."""
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 600_000,
                              "metadata.max.age.ms": 600_000, "metadata.recovery.strategy": "none"})
    try:
        lane: Any = producer._send_lane
        assert lane is not None and producer.__dict__["send"] is lane  # the lane is producer.send
        body = _metadata_body({"t": 7})
        body["brokers"] = [{"node_id": 1, "host": "127.0.0.1", "port": 1, "rack": None}]
        producer._metadata.add_topic("t", SYSTEM_CLOCK.monotonic_ms())
        producer._metadata.update(body, SYSTEM_CLOCK.monotonic_ms())
        keys = [k for k in (b"key-%d" % i for i in range(400)) if murmur2_py(k) < 0][:60]
        assert len(keys) == 60
        futures = [producer.send("t", b"v", k) for k in keys]
        assert all(isinstance(f, FutureRecordMetadata) for f in futures)
        assert lane.fast_count >= 40  # all but the records that open a partition's batch
        partitions = [cast(FutureRecordMetadata, f)._produce_result.partition for f in futures]
        assert partitions == [(murmur2_py(k) & 0x7FFFFFFF) % 7 for k in keys]
    finally:
        producer.close(0)


@pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")
def test_the_send_lane_follows_the_topic_and_a_new_partition_count() -> None:
    """The lane keeps the last topic's partition count and queues, found again by the topic object's
    identity: records alternating between topics of 3 and 5 partitions (one of them a str equal to, not
    the same object as, the other's name), then a snapshot with 11 partitions, all go where Java's murmur2
    formula puts them for the count of their own topic in the snapshot current at send()."""
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 600_000,
                              "metadata.max.age.ms": 600_000, "metadata.recovery.strategy": "none"})
    try:
        lane: Any = producer._send_lane
        now = SYSTEM_CLOCK.monotonic_ms()

        def snapshot(counts: dict[str, int]) -> None:
            body = _metadata_body(counts)
            body["brokers"] = [{"node_id": 1, "host": "127.0.0.1", "port": 1, "rack": None}]
            producer._metadata.update(body, now)

        for topic in ("a", "b"):
            producer._metadata.add_topic(topic, now)
        snapshot({"a": 3, "b": 5})
        keys = [b"key-%d" % i for i in range(600)]
        sent: list[tuple[str, bytes, Any]] = []
        b_name = "".join(["b", ""])  # a str equal to "b" but not the same object
        assert b_name == "b" and id(b_name) != id("b")
        for i, key in enumerate(keys):
            topic = "a" if (i // 50) % 2 else ("b" if i % 3 else b_name)  # runs of 50 records per topic
            if i == 425:  # in the middle of a run to "a"
                snapshot({"a": 11, "b": 11})
            sent.append((topic, key, producer.send(topic, b"v", key)))
        assert lane.fast_count >= 500
        for i, (topic, key, future) in enumerate(sent):
            count = 11 if i >= 425 else {"a": 3, "b": 5}[topic]
            assert (future._produce_result.topic, future._produce_result.partition) == \
                   (topic, (murmur2_py(key) & 0x7FFFFFFF) % count), i
    finally:
        producer.close(0)


@pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")
def test_the_send_lane_sees_a_producer_error_and_a_closed_accumulator_at_once() -> None:
    """The lane keeps what it last read of ``TransactionManager.last_error`` and ``RecordAccumulator._closed``
    while their instance dicts are unchanged: setting either takes the very next record off the lane (the
    Python send then decides), and clearing the error gives the records back to it."""
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 600_000, "enable.idempotence": True,
                              "metadata.max.age.ms": 600_000, "metadata.recovery.strategy": "none"})
    try:
        lane: Any = producer._send_lane
        tm = producer._tm
        assert lane is not None and tm is not None
        body = _metadata_body({"t": 3})
        body["brokers"] = [{"node_id": 1, "host": "127.0.0.1", "port": 1, "rack": None}]
        producer._metadata.add_topic("t", SYSTEM_CLOCK.monotonic_ms())
        producer._metadata.update(body, SYSTEM_CLOCK.monotonic_ms())

        def lane_takes(n: int) -> int:
            before = lane.fast_count
            for _ in range(n):
                producer.send("t", b"v", b"k")  # one partition: after the first record, all open appends
            return int(lane.fast_count - before)

        lane_takes(10)  # the lane learns the topic and the queue, the first record opens the batch
        assert lane_takes(50) == 50
        tm.last_error = RuntimeError("fatal")
        handed = lane.handed_over
        with contextlib.suppress(Exception):  # what the Python send makes of it is not the point here
            producer.send("t", b"v", b"k")
        assert lane.handed_over == handed + 1
        tm.last_error = None
        assert lane_takes(50) == 50
        producer._accumulator._closed = True
        handed = lane.handed_over
        with contextlib.suppress(Exception):
            producer.send("t", b"v", b"k")
        assert lane.handed_over == handed + 1
        producer._accumulator._closed = False
        assert lane_takes(10) == 10
    finally:
        producer.close(0)


def _unreachable_producer(config: dict[str, Any], topics: dict[str, int]) -> KafkaProducer:
    """A producer whose metadata knows ``topics`` on a broker at port 1 (nothing is ever sent)."""
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "linger.ms": 600_000, "enable.idempotence": True,
                              "metadata.max.age.ms": 600_000, "metadata.recovery.strategy": "none", **config})
    body = _metadata_body(topics)
    body["brokers"] = [{"node_id": 1, "host": "127.0.0.1", "port": 1, "rack": None}]
    for topic in topics:
        producer._metadata.add_topic(topic, SYSTEM_CLOCK.monotonic_ms())
    producer._metadata.update(body, SYSTEM_CLOCK.monotonic_ms())
    return producer


@pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")
def test_records_that_open_batches_skip_the_python_send_and_keep_javas_partition_and_order(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A record the lane checked but that opens (or fills) a batch goes to ``_append_from_lane`` with the
    lane's partition, not through the whole Python ``send``: every record lands where ``send()`` puts it
    (murmur2 as Java for keys, the sticky partitioner without), in order, each batch's records numbered
    from 0."""
    calls = {"send": 0, "append": 0}
    python_send, from_lane = KafkaProducer.send, KafkaProducer._append_from_lane

    def counting_send(self: KafkaProducer, *args: Any, **kwargs: Any) -> Any:
        calls["send"] += 1
        return python_send(self, *args, **kwargs)

    def counting_append(self: KafkaProducer, *args: Any) -> Any:
        calls["append"] += 1
        return from_lane(self, *args)

    monkeypatch.setattr(KafkaProducer, "send", counting_send)
    monkeypatch.setattr(KafkaProducer, "_append_from_lane", counting_append)
    producer = _unreachable_producer({"batch.size": 1024}, {"t": 5})
    try:
        lane: Any = producer._send_lane
        assert lane is not None
        keys = [b"key-%d" % (i % 13) for i in range(600)]
        sent: list[tuple[bytes | None, Any]] = [
            (key, producer.send("t", b"v%04d" % i + bytes(90), key)) for i, key in enumerate(keys)]
        sent += [(None, producer.send("t", b"n%04d" % i + bytes(90))) for i in range(300)]
        assert calls["send"] == 0 and calls["append"] == lane.handed_over > 20  # every batch opened off the lane
        batches: dict[tuple[str, int], list[Any]] = {}
        for key, future in sent:
            assert isinstance(future, FutureRecordMetadata)
            tp = (future._produce_result.topic, future._produce_result.partition)
            if key is not None:
                assert tp[1] == (murmur2_py(key) & 0x7FFFFFFF) % 5
            batches.setdefault(tp, []).append(future)
        for tp, futures in batches.items():
            results: list[Any] = []
            for f in futures:  # a partition's records fill its batches one after another, each from index 0
                if not results or f._produce_result is not results[-1][0]:
                    results.append((f._produce_result, []))
                results[-1][1].append(f.relative_offset)
            assert all(indexes == list(range(len(indexes))) for _, indexes in results), tp
            queue = producer._accumulator._queue_of(tp)
            assert queue is not None and [b.result for b in queue.deque] == [r for r, _ in results]
            assert [b.record_count for b in queue.deque] == [len(i) for _, i in results]
        keyless = {(f._produce_result.partition) for key, f in sent if key is None}
        assert len(keyless) > 1  # the sticky partitioner switched partitions as batches filled
    finally:
        producer.close(0)


@pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")
def test_a_batch_the_lane_hands_on_without_memory_fails_its_record_as_send_does() -> None:
    """``buffer.memory`` for two batches, ``max.block.ms`` 0, nothing drained: the record that needs a third
    batch goes from the lane to ``_append_from_lane``, whose ``BufferExhaustedError`` fails that record's
    future and callback (Java's send returns it), and the producer goes on taking records that fit."""
    producer = _unreachable_producer({"batch.size": 1024, "buffer.memory": 2048, "max.block.ms": 0}, {"t": 1})
    try:
        lane: Any = producer._send_lane
        assert lane is not None
        seen: list[Any] = []
        futures = [producer.send("t", bytes(100), b"k", callback=lambda md, exc: seen.append(exc))
                   for _ in range(30)]
        failed = [f for f in futures if not isinstance(f, FutureRecordMetadata)]
        assert failed and lane.handed_over >= 2
        with pytest.raises(errors.BufferExhaustedError):
            failed[0].get(0)
        assert seen and all(isinstance(exc, errors.BufferExhaustedError) for exc in seen)
        assert len(seen) == len(failed)
        assert producer.metrics()["record-error-total"] == len(failed)
    finally:
        producer.close(0)


@pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")
def test_a_record_handed_on_while_the_producer_closes_takes_the_python_send() -> None:
    """Closing disables the lane; a record handed on in between (the flag set, the lane not yet disabled)
    goes through the whole Python send, which refuses it with the closed producer's error."""
    producer = _unreachable_producer({"batch.size": 1024}, {"t": 1})
    try:
        lane: Any = producer._send_lane
        producer.send("t", bytes(100), b"k")
        producer._closing = True
        assert lane.enabled
        with pytest.raises(errors.ProducerClosedError, match="the producer is closed"):
            for _ in range(20):  # the first record that needs a new batch
                producer.send("t", bytes(100), b"k")
    finally:
        producer._closing = False
        producer.close(0)


@pytest.mark.parametrize("key", [b"some-key", None])
def test_a_record_without_memory_reports_the_partition_send_placed_it_in(key: bytes | None) -> None:
    """``BufferExhaustedError`` for a record whose partition was chosen (murmur2 for a key, the sticky
    partitioner without): its callback's metadata names that partition, as Java's (``RecordAccumulator.append``
    calls ``AppendCallbacks.setPartition`` before it waits for memory); it was -1. Through the C lane
    (``_append_from_lane``) and the Python ``send`` alike."""
    producer = _unreachable_producer({"batch.size": 1024, "buffer.memory": 4096, "max.block.ms": 0}, {"t": 4})
    try:
        for partition in range(4):  # one batch per partition uses all the memory; nothing is sent
            producer.send("t", b"x" * 100, partition=partition)
        seen: list[tuple[Any, BaseException | None]] = []
        future = producer.send("t", b"y" * 2000, key, callback=lambda md, exc: seen.append((md, exc)))
        assert isinstance(future.exception(0), errors.BufferExhaustedError)
        [(metadata, exc)] = seen
        assert isinstance(exc, errors.BufferExhaustedError)
        if key is not None:
            assert metadata.partition == (murmur2_py(key) & 0x7FFFFFFF) % 4
        else:
            assert 0 <= metadata.partition < 4
        assert (metadata.topic, metadata.offset) == ("t", -1)
    finally:
        producer.close(0)


def test_a_partition_of_another_integer_type_is_taken_and_anything_else_is_refused_by_type() -> None:
    """An explicit partition or a custom partitioner's answer that is a numpy-style integer (``operator.index``)
    is used as an int; a float, bool or str is an InvalidRecordInputError that says it is not an int. A
    partitioner's 1.0 used to be queued as partition 1.0: the Sender could not encode the request, which held
    every batch drained with it until delivery.timeout.ms; an explicit one was refused as "out of range"."""
    class Index:
        def __index__(self) -> int:
            return 2

    answers: list[object] = []
    producer = _unreachable_producer({"partitioner.class": lambda topic, key, n: answers.pop()}, {"t": 4})
    try:
        future = producer.send("t", b"v", partition=cast(int, Index()))
        assert isinstance(future, FutureRecordMetadata) and type(future._produce_result.partition) is int
        assert future._produce_result.partition == 2
        answers.append(Index())
        future = producer.send("t", b"v", b"k")
        assert isinstance(future, FutureRecordMetadata) and type(future._produce_result.partition) is int
        for bad in (1.0, True, "1"):
            wrong = f"partition must be an int, got {type(bad).__name__}"
            with pytest.raises(errors.InvalidRecordInputError, match=wrong):
                producer.send("t", b"v", partition=cast(int, bad))
            answers.append(bad)
            with pytest.raises(errors.InvalidRecordInputError, match="the partitioner's partition must be an int"):
                producer.send("t", b"v", b"k")
        assert [(pq.tp, type(pq.tp[1])) for pq in producer._accumulator._all_queues()] == [(("t", 2), int)]
    finally:
        producer.close(0)


def test_a_partition_beyond_int32_and_an_unencodable_header_value_are_refused_at_once() -> None:
    """Found by an input review: a partition above 2**31-1 (no topic can have it; Java's is an Integer) waited
    max.block.ms for the topic to grow and failed with a MetadataTimeoutError naming the huge number; a str
    header value with a lone surrogate leaked UnicodeEncodeError (a bad header key was already refused)."""
    producer = _unreachable_producer({"max.block.ms": 60_000}, {"t": 4})
    try:
        for partition in (2**31, 2**64):
            started = time.monotonic()
            with pytest.raises(errors.InvalidRecordInputError, match=f"partition {partition} is above 2147483647"):
                producer.send("t", b"v", partition=partition)
            assert time.monotonic() - started < 5
    finally:
        producer.close(0)
    producer = _unreachable_producer({}, {"t": 4})
    try:
        with pytest.raises(errors.InvalidRecordInputError, match="header 'a' value must be a str encodable as UTF-8"):
            producer.send("t", b"v", headers=[("a", "\ud800")])
    finally:
        producer.close(0)


def test_a_timeout_that_is_not_a_number_of_seconds_is_refused_before_anything_starts() -> None:
    """Found by an input review: flush('x'), result('x'), close('x') leaked TypeErrors from deep inside
    ('<' not supported between str and int), close(-1) a bare ValueError, flush(-1) waited and raised
    KafkaTimeoutError 'timed out after -1s'. Now each names the method and the limit, before anything starts
    (a commit with a bad timeout is not begun)."""
    producer = _unreachable_producer({}, {"t": 4})
    try:
        future = producer.send("t", b"v")
        assert not future.done()
        calls: list[tuple[str, Callable[[Any], object]]] = [
            ("flush()", producer.flush), ("close()", producer.close), ("result()/exception()", future.result),
            ("result()/exception()", future.exception), ("commit_transaction()", producer.commit_transaction),
            ("init_transactions()", producer.init_transactions), ("abort_transaction()", producer.abort_transaction)]
        for what, call in calls:
            for bad in ("1", True, [1]):
                with pytest.raises(TypeError, match=re.escape(f"{what} timeout must be a number of seconds or None")):
                    call(bad)
            with pytest.raises(ValueError, match=re.escape(f"{what} timeout must be >= 0 seconds or None, got nan")):
                call(float("nan"))
        for what, call in calls[:2]:
            with pytest.raises(ValueError, match=re.escape(f"{what} timeout must be >= 0 seconds or None, got -1")):
                call(-1)
        with pytest.raises(errors.KafkaTimeoutError):
            future.result(-1)  # gives up at once, as concurrent.futures
    finally:
        producer.close(0)


def test_a_partitioner_that_cannot_take_the_arguments_is_a_config_error() -> None:
    """Found by an input review: partitioner.class=lambda a, b: 0 was accepted and the first keyed send()
    raised TypeError from inside the producer (serializers were already checked this way)."""
    class TwoArguments:
        def partition(self, topic: str, key: object) -> int:
            return 0

    for bad, shape in ((lambda a, b: 0, "a function"), (TwoArguments(), "its partition")):
        with pytest.raises(errors.ConfigError, match=f"does not fit {shape}") as info:
            KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "partitioner.class": bad})
        assert info.value.key == "partitioner.class"
    KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "partitioner.class": lambda *args: 0}).close(0)
