"""The C send lane (``producer/send_lane.py``, ``_send_lane.c``) against real brokers.

The lane is ``producer.send`` when the accelerator is built: these tests check that it really takes
the common record (its ``fast_count``), that what it appends is what the Python ``send`` appends
(both read back by confluent-kafka: partitions, order, keys, values, metadata), and that every call
it must not take reaches the Python path (``handed_over``) with the Python behaviour: headers,
timestamps, explicit partitions, other key types, a held partition lock, sticky switches, close.
Skipped without the accelerator (the pure-Python CI pass), where ``send`` is the Python method.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import threading
from typing import Any

import pytest

from sparkafka import errors
from sparkafka.producer.future import FutureRecordMetadata, RecordFuture
from sparkafka.producer.murmur2 import murmur2_py
from sparkafka.producer.producer import KafkaProducer
from sparkafka.producer.send_lane import _SendLane
from support.consume import consume_all

from .conftest import Target

pytestmark = [pytest.mark.broker,
              pytest.mark.skipif(_SendLane is None, reason="the C accelerator is not in use")]


def _lane(producer: KafkaProducer) -> Any:
    lane = producer._send_lane
    assert lane is not None and producer.send is lane
    return lane


def _collect(bucket: list[Any], metadata: Any, error: Any) -> None:
    bucket.append((metadata, error))


def test_lane_appends_what_the_python_send_appends(target: Target) -> None:
    rng = random.Random(7)
    records = [(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 12))) if i % 5 else None,
                bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))) if i % 7 else None)
               for i in range(3000)]
    topics = [target.topic(partitions=6), target.topic(partitions=6)]
    results = []
    for use_lane, topic in zip((True, False), topics):
        producer = target.producer({"linger.ms": 20, "batch.size": 4096})
        lane = _lane(producer)
        acked: list[Any] = []
        on_ack = functools.partial(_collect, acked)
        send = lane if use_lane else functools.partial(KafkaProducer.send, producer)
        futures = [send(topic, value, key, callback=on_ack) for key, value in records if key is not None]
        producer.flush(30)
        assert all(err is None for _, err in acked) and len(acked) == len(futures)
        metadata = [f.get(0) for f in futures]
        if use_lane:
            assert lane.fast_count > len(futures) * 0.75  # all but the records that open or fill a batch
        else:
            assert lane.fast_count == 0
        read = consume_all(target.bootstrap, topic, expected_count=len(futures))
        results.append((metadata, read))
    (lane_md, lane_read), (py_md, py_read) = results
    assert [(r.partition, r.offset, r.key, r.value) for r in lane_read] == \
           [(r.partition, r.offset, r.key, r.value) for r in py_read]
    assert [(m.partition, m.offset, m.serialized_key_size, m.serialized_value_size) for m in lane_md] == \
           [(m.partition, m.offset, m.serialized_key_size, m.serialized_value_size) for m in py_md]
    # keyed records: Java's murmur2 partitions, in send order within each partition
    keyed = [(k, v) for k, v in records if k is not None]
    assert [m.partition for m in lane_md] == [(murmur2_py(k) & 0x7FFFFFFF) % 6 for k, _ in keyed]
    by_partition: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
    for (k, v), m in zip(keyed, lane_md):
        by_partition.setdefault(m.partition, []).append((k, v))
    assert {p: [(r.key, r.value) for r in lane_read if r.partition == p] for p in by_partition} == by_partition


def test_compressed_batches_take_the_records_java_has_room_for_on_both_paths(target: Target) -> None:
    """Java's hasRoomFor counts the next record uncompressed (estimate so far + record <= batch.size):
    at a 0.5 ratio estimate 6,000-byte values make 16 KB batches of 4 records. The lane (and the Python
    fast path) checked the estimate after the record and made batches of 5."""
    per_batch = []
    for use_lane in (True, False):
        topic = target.topic(partitions=1)
        producer = target.producer({"linger.ms": 50, "batch.size": 16384, "compression.type": "lz4"})
        lane = _lane(producer)
        producer.send(topic, b"first", b"k").get(20)  # the topic's accumulator state exists
        info = producer._accumulator._topics.get(topic)
        assert info is not None
        info.compression_ratio = 0.5  # as if earlier batches compressed to half
        send = lane if use_lane else functools.partial(KafkaProducer.send, producer)
        before = producer.metrics_registry.batches_sent
        futures = [send(topic, b"v" * 6000, b"k") for _ in range(20)]
        producer.flush(30)
        assert [f.get(0).offset for f in futures] == list(range(1, 21))
        assert (lane.fast_count > 0) == use_lane
        per_batch.append(producer.metrics_registry.batches_sent - before)
    assert per_batch == [5, 5]  # 20 records, 4 per batch


def test_lane_future_and_callback_carry_the_record_metadata(target: Target) -> None:
    topic = target.topic(partitions=1)
    producer = target.producer({"linger.ms": 50})
    lane = _lane(producer)
    seen: list[Any] = []
    first = producer.send(topic, b"v0", b"k0")  # opens the batch (Python path)
    futures = [producer.send(topic, b"v%d" % i, None if i % 2 else b"key", callback=lambda md, e: seen.append(md))
               for i in range(1, 50)]
    assert lane.fast_count >= 40 and isinstance(futures[0], FutureRecordMetadata)  # a few meet a held lock
    producer.flush(30)
    assert first.get(0).offset == 0
    assert [f.get(0).offset for f in futures] == list(range(1, 50)) == [md.offset for md in seen]
    assert [md.serialized_key_size for md in seen] == [-1 if i % 2 else 3 for i in range(1, 50)]
    assert all(md.serialized_value_size == len(b"v%d" % i) for i, md in zip(range(1, 50), seen))
    read = consume_all(target.bootstrap, topic, expected_count=50)
    assert [(r.key, r.value) for r in read[1:]] == [(None if i % 2 else b"key", b"v%d" % i) for i in range(1, 50)]
    assert all(r.timestamp_type != 0 for r in read)


def test_calls_the_lane_cannot_take_reach_the_python_send(target: Target) -> None:
    topic = target.topic(partitions=3)
    producer = target.producer({"linger.ms": 50})
    lane = _lane(producer)
    producer.send(topic, b"open", b"k").get(30)
    producer.send(topic, b"open", b"k")
    fast, over = lane.fast_count, lane.handed_over
    calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        ((topic, b"h", b"k"), {"headers": [("a", b"1")]}),
        ((topic, b"ts", b"k"), {"timestamp": 1_600_000_000_000}),
        ((topic, b"p"), {"partition": 2}),
        ((topic, bytearray(b"ba"), b"k"), {}),
        ((topic, b"mv", memoryview(b"k")), {}),
        ((topic,), {"value": b"kw", "key": b"k", "headers": None, "partition": None}),
    ]
    futures = [producer.send(*args, **kwargs) for args, kwargs in calls]
    # the first five must go to Python; the keyword form is the lane's unless the Sender held the lock
    assert lane.handed_over - over >= len(calls) - 1 and lane.handed_over - over + lane.fast_count - fast == len(calls)
    fast = lane.fast_count
    for _ in range(20):
        producer.send(topic=topic, value=b"kw", key=b"k", headers=None, partition=None, callback=None)
    assert lane.fast_count - fast >= 15
    with pytest.raises(TypeError):
        producer.send(topic, b"v", b"k", b"extra", None, None, None, "too many")  # type: ignore[call-arg, arg-type]
    with pytest.raises(TypeError):
        producer.send(topic, b"v", bogus=1)  # type: ignore[call-arg]
    with pytest.raises(errors.InvalidRecordInputError, match="out of range"):
        producer.send(topic, b"v", partition=-1)
    producer.flush(30)
    assert [f.get(0).partition for f in futures][2] == 2
    read = {r.value: r for r in consume_all(target.bootstrap, topic, expected_count=28)}
    assert read[b"h"].headers == [("a", b"1")] and read[b"ts"].timestamp == 1_600_000_000_000
    assert read[b"ba"].key == b"k" and read[b"mv"].key == b"k" and read[b"kw"].key == b"k"


def test_a_held_partition_lock_sends_the_record_down_the_python_path(target: Target) -> None:
    topic = target.topic(partitions=1)
    producer = target.producer({"linger.ms": 50})
    lane = _lane(producer)
    producer.send(topic, b"first", b"k")
    info = producer._accumulator._topics.get(topic)
    assert info is not None
    queue = info.queues.get(0)
    assert queue is not None
    done: list[RecordFuture] = []
    with queue.lock:
        over = lane.handed_over
        sender = threading.Thread(target=lambda: done.append(producer.send(topic, b"second", b"k")))
        sender.start()
        sender.join(0.5)
        assert sender.is_alive() and not done  # waiting for the lock on the Python path
        assert lane.handed_over == over + 1
    sender.join(10)
    assert done and done[0].get(30).offset == 1
    assert [r.value for r in consume_all(target.bootstrap, topic, expected_count=2)] == [b"first", b"second"]


def test_keyless_records_switch_sticky_partitions_with_the_lane(target: Target) -> None:
    # how many records each sticky partition gets also depends on when the Sender drains (on both
    # paths), so this checks that the lane leaves the switches to the Python path and still switches
    topic = target.topic(partitions=4)
    producer = target.producer({"linger.ms": 1000, "batch.size": 1024})
    lane = _lane(producer)
    values = [os.urandom(100) for _ in range(400)]
    futures = [producer.send(topic, v) for v in values]
    producer.flush(30)
    partitions = [f.get(0).partition for f in futures]
    runs = [len(list(group)) for _, group in itertools.groupby(partitions)]
    assert lane.fast_count > 200 and lane.handed_over >= len(runs) - 1  # ~9 records a batch, 2 handed over
    assert len(runs) > 10 and len(set(partitions)) > 1, runs
    read = consume_all(target.bootstrap, topic, expected_count=400)
    assert {(r.partition, r.offset): r.value for r in read} == {
        (f.get(0).partition, f.get(0).offset): v for f, v in zip(futures, values)}


def test_a_captured_lane_refuses_records_after_close(target: Target) -> None:
    topic = target.topic(partitions=1)
    producer = target.producer({"linger.ms": 5})
    send = producer.send
    send(topic, b"a").get(30)
    producer.close(10)
    assert not producer._send_lane.enabled
    with pytest.raises(errors.ProducerClosedError):
        send(topic, b"b", b"k")


def test_a_transactions_records_take_the_lane_once_their_partition_is_in_it(target: Target) -> None:
    """With a transactional id the lane takes a record only in a transaction and once its partition was
    added to it (the Python send adds it); outside a transaction the Python send refuses the record. The
    committed records are read back by a read_committed consumer, each once, at Java's partitions; on
    Apache Kafka an aborted transaction's lane records stay invisible (Tansu's and the mock's Fetch do
    not filter aborted records)."""
    topic = target.topic(partitions=3)
    producer = target.producer({"transactional.id": f"lane-{topic}", "linger.ms": 5})
    lane = _lane(producer)
    producer.init_transactions()
    with pytest.raises(errors.IllegalStateError, match="outside a transaction"):
        producer.send(topic, b"outside", b"k")
    keys = [b"key-%d" % i for i in range(9)]
    for aborted in (False, True):
        producer.begin_transaction()
        prefix = b"a" if aborted else b"c"
        first = [producer.send(topic, prefix + b"-first-%d" % i, key) for i, key in enumerate(keys)]
        producer.flush(30)  # every partition is in the transaction now
        fast = lane.fast_count
        futures = first + [producer.send(topic, prefix + b"-%d" % i, keys[i % 9]) for i in range(600)]
        assert lane.fast_count - fast > 400  # all but the records that open or fill a batch
        if aborted:
            producer.abort_transaction()
        else:
            producer.commit_transaction()
            for f, key in zip(futures, keys + [keys[i % 9] for i in range(600)]):
                assert f.get(0).partition == (murmur2_py(key) & 0x7FFFFFFF) % 3
    committed = consume_all(target.bootstrap, topic, expected_count=609, isolation_level="read_committed")
    values = sorted(r.value for r in committed if r.value is not None and r.value.startswith(b"c-"))
    assert values == sorted([b"c-first-%d" % i for i in range(9)] + [b"c-%d" % i for i in range(600)])
    if target.name == "kafka":
        assert len(committed) == 609


def test_producers_the_lane_cannot_serve_use_the_python_send(target: Target) -> None:
    for config in ({"key.serializer": "str"}, {"partitioner.class": "round_robin"}):
        producer = target.producer(config)
        assert producer._send_lane is None and producer.send.__func__ is KafkaProducer.send  # type: ignore[attr-defined]
