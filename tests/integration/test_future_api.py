"""The future send() returns: result/exception/done/add_done_callback, timeouts, and ``await`` in asyncio."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from sparkafka import errors
from sparkafka.producer.future import FutureRecordMetadata, RecordMetadata
from support.mock_cluster import ApiKey

from .conftest import Target

pytestmark = pytest.mark.broker


def test_future_success_api(target: Target) -> None:
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    future = producer.send(topic, value=b"v", key=b"k")
    seen: list[FutureRecordMetadata] = []
    future.add_done_callback(seen.append)
    metadata = future.result(10)
    assert isinstance(metadata, RecordMetadata)
    assert (metadata.topic, metadata.partition, metadata.offset) == (topic, 0, 0)
    assert future.done()
    assert future.exception(0) is None
    assert future.get(0) == metadata  # Java-style alias
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [future]
    late: list[FutureRecordMetadata] = []
    future.add_done_callback(late.append)  # already done: runs at once, in this thread
    assert late == [future]
    assert not future.cancel() and not future.cancelled()


def test_future_failure_api(mock_target: Target) -> None:
    assert mock_target.mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 0, "retries": 0, "enable.idempotence": False})
    producer.partitions_for(topic)
    mock_target.mock.push_request_errors(ApiKey.PRODUCE, [errors.TOPIC_AUTHORIZATION_FAILED])
    future = producer.send(topic, value=b"v")
    exc = future.exception(10)
    assert isinstance(exc, errors.BrokerError) and exc.code == errors.TOPIC_AUTHORIZATION_FAILED
    assert future.done()
    with pytest.raises(errors.BrokerError) as info:
        future.result(0)
    assert info.value is exc


def test_result_timeout_on_slow_broker(mock_target: Target) -> None:
    assert mock_target.mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 0})
    producer.send(topic, value=b"warm-up").result(10)  # connections and versions first
    mock_target.mock.broker_set_rtt(-1, 1000)
    future = producer.send(topic, value=b"slow")
    with pytest.raises(errors.KafkaTimeoutError):
        future.result(0.05)
    with pytest.raises(errors.KafkaTimeoutError):
        future.exception(0.05)
    assert not future.done()
    assert future.result(15).offset == 1


def test_await_in_asyncio_does_not_block_the_loop(mock_target: Target) -> None:
    assert mock_target.mock is not None
    topic = mock_target.topic(2)
    producer = mock_target.producer({"linger.ms": 0})
    for partition in (0, 1):  # connections and versions first
        producer.send(topic, value=b"warm-up", partition=partition).result(10)
    mock_target.mock.broker_set_rtt(-1, 300)
    loop_thread: list[int] = []

    async def main() -> tuple[list[RecordMetadata], int]:
        loop_thread.append(threading.get_ident())
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        task = asyncio.create_task(ticker())
        single = await producer.send(topic, value=b"one", partition=0)
        many = await asyncio.gather(*(producer.send(topic, value=b"%d" % i, partition=1) for i in range(50)))
        stop.set()
        await task
        return [single, *many], ticks

    results, ticks = asyncio.run(asyncio.wait_for(main(), 20))
    assert results[0].partition == 0 and results[0].offset == 1
    assert [m.offset for m in results[1:]] == list(range(1, 51))
    # ~2 x 300 ms of broker latency: a loop blocked by ``await`` would not have ticked in between
    assert ticks >= 20, ticks


def test_await_failed_future_raises(mock_target: Target) -> None:
    assert mock_target.mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 0, "retries": 0, "enable.idempotence": False})
    producer.partitions_for(topic)
    mock_target.mock.push_request_errors(ApiKey.PRODUCE, [errors.TOPIC_AUTHORIZATION_FAILED])

    async def main() -> None:
        await producer.send(topic, value=b"v")

    with pytest.raises(errors.BrokerError) as info:
        asyncio.run(asyncio.wait_for(main(), 10))
    assert info.value.code == errors.TOPIC_AUTHORIZATION_FAILED
