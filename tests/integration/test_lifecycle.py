"""flush(), close(), the context manager, closed-producer errors, dead brokers, threads and fork.

Wall-time bounds here are hang checks with generous slack (timeout + 3 s), not timing assertions.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict

import pytest

from sparkafka import errors
from sparkafka.producer.future import RecordMetadata
from sparkafka.producer.producer import KafkaProducer
from support.consume import consume_all

from .conftest import Target

pytestmark = pytest.mark.broker

SLACK_S = 3.0
LONG_LINGER = {"linger.ms": 60_000}


def test_flush_completes_everything_sent_before_it(target: Target) -> None:
    topic = target.topic(3)
    producer = target.producer(LONG_LINGER)
    futures = [producer.send(topic, value=b"%d" % i, key=b"%d" % i) for i in range(500)]
    assert not any(f.done() for f in futures)  # lingering for a minute
    started = time.monotonic()
    producer.flush(10)
    assert time.monotonic() - started < 10
    assert all(f.done() for f in futures)
    assert all(f.exception(0) is None for f in futures)
    # the producer keeps working after a flush, and flush with nothing buffered returns
    later = producer.send(topic, value=b"after")
    producer.flush(10)
    assert later.done() and later.exception(0) is None
    producer.flush(1)


def test_close_sends_what_is_buffered(target: Target) -> None:
    topic = target.topic(2)
    producer = target.producer(LONG_LINGER)
    futures = [producer.send(topic, value=b"%d" % i) for i in range(300)]
    assert not any(f.done() for f in futures)
    producer.close(10)
    assert all(f.exception(0) is None for f in futures)
    assert len(consume_all(target.bootstrap, topic, expected_count=300, timeout=15)) == 300
    producer.close()  # idempotent
    producer.flush()  # a no-op after close


def test_send_after_close_raises(target: Target) -> None:
    topic = target.topic(1)
    producer = target.producer()
    producer.send(topic, value=b"x").result(10)
    producer.close(5)
    with pytest.raises(errors.ProducerClosedError):
        producer.send(topic, value=b"y")
    with pytest.raises(errors.ProducerClosedError):
        producer.partitions_for(topic)


def test_context_manager_closes_and_delivers(target: Target) -> None:
    topic = target.topic(1)
    with KafkaProducer({"bootstrap.servers": target.bootstrap, **LONG_LINGER}) as producer:
        futures = [producer.send(topic, value=b"%d" % i) for i in range(50)]
    assert [f.result(0).offset for f in futures] == list(range(50))
    with pytest.raises(errors.ProducerClosedError):
        producer.send(topic, value=b"late")


def test_close_from_a_callback_returns_at_once(target: Target) -> None:
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    outcome: list[tuple[float, BaseException | None]] = []
    done = threading.Event()

    def cb(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        started = time.monotonic()
        error: BaseException | None = None
        try:
            producer.close()  # no timeout: must not wait for the I/O thread it runs on
        except BaseException as e:
            error = e
        outcome.append((time.monotonic() - started, error))
        done.set()
        time.sleep(0.3)  # the I/O thread is still running when the caller's close() below starts

    producer.send(topic, value=b"x", callback=cb)
    assert done.wait(15)
    (elapsed, error), = outcome
    assert error is None
    assert elapsed < SLACK_S
    with pytest.raises(errors.ProducerClosedError):
        producer.send(topic, value=b"y")
    producer.close(2)  # closing again from the caller's thread waits for the I/O thread to end (as Java's)
    assert not producer._io_thread.is_alive()


def test_flush_from_a_callback_is_refused(target: Target) -> None:
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    got: list[BaseException | None] = []
    done = threading.Event()

    def cb(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        try:
            producer.flush(1)
            got.append(None)
        except BaseException as e:
            got.append(e)
        done.set()

    producer.send(topic, value=b"x", callback=cb)
    assert done.wait(15)
    assert isinstance(got[0], errors.IllegalStateError)


# --------------------------------------------------------------------------- dead brokers


def test_flush_and_close_bounded_when_all_brokers_are_down(mock_target: Target) -> None:
    mock = mock_target.mock
    assert mock is not None
    topic = mock_target.topic(3)
    producer = mock_target.producer({"linger.ms": 60_000, "request.timeout.ms": 2000,
                                     "delivery.timeout.ms": 62_000})
    producer.partitions_for(topic)
    # queued (lingering) before the brokers go: once every broker is unreachable the metadata falls
    # back to the bootstrap list (metadata.recovery.strategy=rebootstrap) and new sends would wait
    futures = [producer.send(topic, value=b"%d" % i) for i in range(100)]
    for broker_id in (1, 2, 3):
        mock.broker_set_down(broker_id)

    started = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError):
        producer.flush(1.0)
    assert time.monotonic() - started < 1.0 + SLACK_S

    started = time.monotonic()
    producer.close(1.0)
    assert time.monotonic() - started < 1.0 + SLACK_S
    for f in futures:
        exc = f.exception(0)  # failed by the time close() returns, never left pending
        assert isinstance(exc, errors.KafkaError), exc
        assert isinstance(exc, (errors.ProducerClosedError, errors.KafkaTimeoutError,
                                errors.KafkaConnectionError, errors.RetriableBrokerError)), repr(exc)


def test_close_zero_timeout_fails_pending_at_once(mock_target: Target) -> None:
    mock = mock_target.mock
    assert mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 0})
    producer.send(topic, value=b"before").result(10)
    mock.broker_set_rtt(-1, 10_000)  # requests go out but are not answered before close
    futures = [producer.send(topic, value=b"%d" % i) for i in range(10)]
    started = time.monotonic()
    producer.close(0)
    assert time.monotonic() - started < SLACK_S
    for f in futures:  # already failed when close() returns
        assert isinstance(f.exception(0), errors.ProducerClosedError)


def test_flush_without_timeout_returns_at_delivery_timeout(mock_target: Target) -> None:
    """Brokers down and no flush timeout: the records expire at delivery.timeout.ms and flush returns."""
    mock = mock_target.mock
    assert mock is not None
    topic = mock_target.topic(1)
    producer = mock_target.producer({"linger.ms": 500, "request.timeout.ms": 500, "delivery.timeout.ms": 1000})
    producer.partitions_for(topic)
    futures = [producer.send(topic, value=b"%d" % i) for i in range(20)]
    mock.broker_set_down(-1)
    started = time.monotonic()
    producer.flush()
    assert time.monotonic() - started < 1.0 + SLACK_S
    for f in futures:
        assert isinstance(f.exception(0), errors.DeliveryTimeoutError)


def test_close_wakes_a_send_blocked_on_metadata(mock_target: Target) -> None:
    mock = mock_target.mock
    assert mock is not None
    topic = mock_target._unique_topic("never")
    mock.topic_set_error(topic, 3)  # UNKNOWN_TOPIC_OR_PARTITION: metadata never arrives
    producer = mock_target.producer({"max.block.ms": 60_000})
    outcome: list[BaseException] = []
    waiting = threading.Event()
    await_update = producer._metadata.await_update

    def spy(version: int, timeout_ms: float) -> None:
        waiting.set()  # send() is in the metadata wait now
        await_update(version, timeout_ms)

    producer._metadata.await_update = spy  # type: ignore[method-assign]

    def blocked() -> None:
        try:
            producer.send(topic, value=b"x")
        except BaseException as e:
            outcome.append(e)

    thread = threading.Thread(target=blocked)
    thread.start()
    assert waiting.wait(10), "send() never waited for metadata"
    assert thread.is_alive()
    started = time.monotonic()
    producer.close(1.0)
    thread.join(1.0 + SLACK_S)
    assert not thread.is_alive(), "send() stayed blocked after close()"
    assert time.monotonic() - started < 1.0 + SLACK_S
    assert isinstance(outcome[0], errors.ProducerClosedError)


def test_nobody_listening(unique_topic: object) -> None:
    """A bootstrap address nobody listens on: send fails after max.block.ms; close never hangs."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    producer = KafkaProducer({"bootstrap.servers": f"127.0.0.1:{port}", "max.block.ms": 500,
                              "reconnect.backoff.ms": 20})
    try:
        started = time.monotonic()
        error = producer.send("nobody-home", value=b"x").exception(0)  # failed in send(): Java's contract
        assert isinstance(error, errors.MetadataTimeoutError)
        assert time.monotonic() - started < 0.5 + SLACK_S
        assert "nobody-home" in str(error)
        started = time.monotonic()
        producer.flush(0.5)  # nothing buffered: returns
        producer.close(1.0)
        assert time.monotonic() - started < 1.5 + SLACK_S
    finally:
        producer.close(0)


# --------------------------------------------------------------------------- threads and fork


def test_four_threads_share_one_producer(target: Target) -> None:
    topic = target.topic(4)
    producer = target.producer({"linger.ms": 2})
    per_thread = 1500
    futures: dict[int, list[object]] = defaultdict(list)
    failures: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(per_thread):
                key = b"t%d-k%d" % (t, i % 5)
                futures[t].append(producer.send(topic, value=b"%d:%d" % (t, i), key=key))
        except BaseException as e:
            failures.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    assert not failures
    producer.flush(20)
    total = 4 * per_thread
    records = consume_all(target.bootstrap, topic, expected_count=total, timeout=30)
    values = [r.value for r in records]
    assert len(values) == total
    assert set(values) == {b"%d:%d" % (t, i) for t in range(4) for i in range(per_thread)}
    # each thread's records with the same key are in the log in that thread's send order
    order: dict[bytes | None, list[int]] = defaultdict(list)
    for r in records:
        assert r.value is not None
        order[r.key].append(int(r.value.split(b":")[1]))
    for key, seqs in order.items():
        assert seqs == sorted(seqs), key


def _wait_child(pid: int, timeout: float) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    raise AssertionError(f"the forked child hung for {timeout}s")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_gets_clear_error_parent_keeps_working(target: Target) -> None:
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    producer.send(topic, value=b"before fork").result(10)
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            try:
                producer.send(topic, value=b"from the child")
                code = 10
            except errors.ProducerClosedError as e:
                if "fork" not in str(e):
                    code = 11
            try:
                producer.flush(1)
                code = code or 12
            except errors.ProducerClosedError:
                pass
            producer.close(1)  # returns at once
            # a new producer made in the child works
            fresh = KafkaProducer({"bootstrap.servers": target.bootstrap, "linger.ms": 0})
            if fresh.send(topic, value=b"child's own producer").result(10).offset < 0:
                code = code or 14
            fresh.close(5)
        except BaseException:
            code = 13
        os._exit(code)
    assert _wait_child(pid, 20) == 0
    assert producer.send(topic, value=b"after fork").result(10).offset == 2
    records = consume_all(target.bootstrap, topic, expected_count=3, timeout=15)
    assert [r.value for r in records] == [b"before fork", b"child's own producer", b"after fork"]


def _established(local_ports: set[int]) -> int:
    """This machine's IPv4 TCP connections in state ESTABLISHED from one of ``local_ports`` (/proc/net/tcp)."""
    count = 0
    with open("/proc/net/tcp") as f:
        for line in f.read().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "01" and int(fields[1].split(":")[1], 16) in local_ports:
                count += 1
    return count


@pytest.mark.skipif(not hasattr(os, "fork") or not os.path.exists("/proc/net/tcp"), reason="needs os.fork, /proc")
def test_a_forked_child_closes_its_copies_of_the_connections(target: Target) -> None:
    """The child's copies of a producer's sockets were never closed (close() in the child returns at once),
    so the parent's connections stayed up after the parent's close() for as long as a child lived (a prefork
    server's workers). Now the fork closes them in the child, without touching the parent's connections."""
    topic = target.topic(1)
    producer = target.producer({"linger.ms": 0})
    producer.send(topic, value=b"before fork").result(10)
    ports = {c._sock.getsockname()[1] for c in producer._client._conns.values() if c._sock is not None}
    assert _established(ports) >= 1  # the producer's own connections (their local ports)
    ready_r, ready_w = os.pipe()
    done_r, done_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never return into pytest
        code = 0
        try:
            if producer._client._wake_r.fileno() != -1 or any(
                    c._sock is not None for c in producer._client._conns.values()):
                code = 20
            os.write(ready_w, b"1")
            os.read(done_r, 1)  # alive until the parent has looked
        except BaseException:
            code = 21
        os._exit(code)
    try:
        os.read(ready_r, 1)
        assert producer.send(topic, value=b"after fork").result(10).offset == 1  # the parent's connections work
        producer.close(10)
        deadline = time.monotonic() + 5
        while _established(ports) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _established(ports) == 0, "a connection outlived the parent's close() while the child lives"
    finally:
        os.write(done_w, b"1")
        for fd in (ready_r, ready_w, done_r, done_w):
            os.close(fd)
        assert _wait_child(pid, 20) == 0
