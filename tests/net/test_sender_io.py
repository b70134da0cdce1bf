"""The Sender thread's accelerated I/O (``_c/_sender_io.c``): socket calls that keep the GIL, the epoll wait
that announces its return, and the sending threads handing the GIL over to it.

How it works: the C functions are called directly on socket pairs and checked against what the socket
module and ``select.epoll`` do; the hand-over is shown with a switch interval of 30 s, where a thread
back from its wait would otherwise get the GIL only when the busy main thread's interval ran out; and a
``NetworkClient`` talking to the fake broker is checked to use these calls for a plaintext connection
(the TLS and pure-Python paths keep the socket module's calls; the whole suite runs both ways).
Skipped when the accelerator is not built (or SPARKAFKA_NO_ACCEL=1).
"""

from __future__ import annotations

import errno
import random
import select
import selectors
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from sparkafka import accel
from sparkafka.net.client import NetworkClient
from sparkafka.protocol.messages import ApiKey

from .fake_broker import FakeBroker

pytestmark = pytest.mark.skipif(accel.ACCEL is None, reason="the C accelerator is not built (or SPARKAFKA_NO_ACCEL=1)")
pytest.importorskip("select").epoll  # noqa: B018  (Linux: the epoll wait is Linux only)

A: Any = accel.ACCEL


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    left, right = socket.socketpair()
    left.setblocking(False)
    right.setblocking(False)
    yield left, right
    left.close()
    right.close()


def test_send_nowait_writes_every_piece_in_order(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    pieces = [b"abc", bytearray(b"def"), memoryview(b"--ghi--")[2:5]]
    assert A.send_nowait(left.fileno(), pieces) == 9
    assert right.recv(100) == b"abcdefghi"


def test_send_nowait_takes_at_most_64_pieces(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    pieces = [bytes([i]) for i in range(70)]
    assert A.send_nowait(left.fileno(), pieces) == 64
    assert right.recv(100) == bytes(range(64))


def test_send_nowait_returns_0_when_the_socket_is_full(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    chunk = b"x" * 65536
    total = 0
    for _ in range(10_000):
        sent = A.send_nowait(left.fileno(), [chunk])
        if sent == 0:
            break
        total += sent
    else:
        pytest.fail("the socket never filled up")
    received = 0
    while True:  # every byte reported as written arrives
        try:
            data = right.recv(1 << 20)
        except BlockingIOError:
            break
        received += len(data)
    assert received == total


def test_send_nowait_releases_the_gil_only_for_large_writes(pair: tuple[socket.socket, socket.socket]) -> None:
    """With a 30 s switch interval another thread runs only when this one releases the GIL: small writes
    (and ``recv_nowait``) keep it, a write of at least 16 KiB releases it around ``sendmsg`` and takes it
    back through the hand-over (the other thread calls ``hand_over_gil``, as the send lane does)."""
    left, right = pair
    runs = [0]
    stop = threading.Event()
    started = threading.Event()

    def other() -> None:
        started.set()
        while not stop.is_set():
            runs[0] += 1
            A.hand_over_gil()
            time.sleep(0)

    def write_and_drain(size: int, times: int) -> int:
        """How often the other thread ran while ``times`` writes of ``size`` bytes were made and read."""
        chunk = b"x" * size
        before = runs[0]
        for _ in range(times):
            sent = A.send_nowait(left.fileno(), [chunk])
            assert 0 < sent <= size
            got = 0
            while got < sent:
                got += len(A.recv_nowait(right.fileno(), 1 << 22))
        return runs[0] - before

    for sock, option in ((left, socket.SO_SNDBUF), (right, socket.SO_RCVBUF)):
        sock.setsockopt(socket.SOL_SOCKET, option, 4 << 20)
    previous = sys.getswitchinterval()
    thread = threading.Thread(target=other, daemon=True)
    try:
        sys.setswitchinterval(30.0)
        thread.start()
        assert started.wait(10)
        assert write_and_drain(16383, 200) == 0  # kept the GIL throughout
        # released: the other thread wakes up in time to take it during some of the writes (large ones,
        # so that the kernel's copy outlasts its wake-up on a loaded machine)
        assert write_and_drain(1 << 20, 200) > 0
    finally:
        sys.setswitchinterval(previous)
        stop.set()
        thread.join(30)


def test_recv_nowait_reads_raises_when_empty_and_sees_the_end(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    with pytest.raises(BlockingIOError):
        A.recv_nowait(right.fileno(), 16)
    left.sendall(b"hello world")
    assert A.recv_nowait(right.fileno(), 5) == b"hello"
    assert A.recv_nowait(right.fileno(), 100) == b" world"
    left.close()
    assert A.recv_nowait(right.fileno(), 100) == b""


def test_errors_are_oserrors_with_the_errno() -> None:
    left, right = socket.socketpair()
    fd = left.fileno()
    left.close()
    right.close()
    with pytest.raises(OSError) as sent:
        A.send_nowait(fd, [b"x"])
    assert sent.value.errno == errno.EBADF
    with pytest.raises(OSError) as got:
        A.recv_nowait(fd, 10)
    assert got.value.errno == errno.EBADF
    with pytest.raises(ValueError, match="fd"):
        A.send_nowait(-1, [b"x"])
    with pytest.raises(ValueError, match="size must be >= 1"):
        A.recv_nowait(0, 0)
    with pytest.raises(TypeError):
        A.send_nowait(0, (b"x",))


def test_send_nowait_on_a_closed_peer_raises_instead_of_a_sigpipe(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    right.close()
    with pytest.raises(OSError) as exc:
        for _ in range(3):
            A.send_nowait(left.fileno(), [b"x" * 1000])
    assert exc.value.errno in (errno.EPIPE, errno.ECONNRESET)


def test_wait_for_io_reports_what_epoll_reports(pair: tuple[socket.socket, socket.socket]) -> None:
    left, right = pair
    epoll = select.epoll()
    try:
        epoll.register(left.fileno(), select.EPOLLIN | select.EPOLLOUT)
        epoll.register(right.fileno(), select.EPOLLIN)
        assert A.wait_for_io(epoll.fileno(), 0, 8, True) == [(left.fileno(), select.EPOLLOUT)]
        left.sendall(b"x")
        got = sorted(A.wait_for_io(epoll.fileno(), 1000, 8, False))
        assert got == sorted(epoll.poll(0, 8))
        assert (right.fileno(), select.EPOLLIN) in got
        right.recv(10)
        epoll.modify(left.fileno(), select.EPOLLIN)
        assert A.wait_for_io(epoll.fileno(), 10, 8, True) == []  # nothing ready: the timeout ends the wait
    finally:
        epoll.close()


def test_a_thread_back_from_wait_for_io_gets_the_gil_from_a_busy_thread(
        pair: tuple[socket.socket, socket.socket]) -> None:
    """With a 30 s switch interval the waiting thread would run only when the main thread blocks or its
    interval ends; ``hand_over_gil`` (what the C send lane calls per record) gives it the GIL at once."""
    left, right = pair
    epoll = select.epoll()
    epoll.register(right.fileno(), select.EPOLLIN)
    done = threading.Event()
    waiting = threading.Event()

    def sender() -> None:
        waiting.set()
        A.wait_for_io(epoll.fileno(), 20_000, 4, True)
        done.set()

    previous = sys.getswitchinterval()
    thread = threading.Thread(target=sender, daemon=True)
    try:
        thread.start()
        assert waiting.wait(10)
        sys.setswitchinterval(30.0)
        time.sleep(0.05)  # the thread is in epoll_wait (it released the GIL before it)
        left.sendall(b"x")
        deadline = time.monotonic() + 10.0  # time.monotonic() keeps the GIL
        spins = 0
        while not done.is_set() and time.monotonic() < deadline:  # is_set() keeps the GIL too
            A.hand_over_gil()
            spins += 1
        assert done.is_set(), f"the thread back from its wait never got the GIL ({spins} hand-overs)"
    finally:
        sys.setswitchinterval(previous)
        left.sendall(b"x")
        thread.join(30)
        epoll.close()


def test_a_plaintext_connection_does_its_io_through_the_accelerator(fake_broker: FakeBroker) -> None:
    client = NetworkClient(fake_broker.bootstrap, client_id="test", rng=random.Random(1))
    try:
        assert isinstance(client._selector, selectors.EpollSelector)
        assert client._epoll_fd == client._selector.fileno()
        deadline = time.monotonic() + 10
        while not client.ready(-1, client.clock.monotonic_ms()):
            assert time.monotonic() < deadline, "no connection"
            client.poll(20, client.clock.monotonic_ms())
        conn = client._conns[-1]
        assert conn._fd == conn._sock.fileno() >= 0  # type: ignore[union-attr]
        box: list[Any] = []
        client.send(-1, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False},
                    callback=box.append)
        while not box:
            assert time.monotonic() < deadline, "no answer"
            client.poll(20, client.clock.monotonic_ms())
        assert box[0].error is None and box[0].body is not None
    finally:
        client.close()
    assert conn._fd == -1


def test_without_hand_over_the_connection_uses_the_socket_methods(
        fake_broker: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """``poll(hand_over=False)`` (the Sender with no full batch waiting) leaves the GIL to CPython's
    switching: the plaintext socket's calls go through the socket methods until a ``poll`` asks again."""
    from sparkafka.net import connection

    calls = {"send": 0, "recv": 0}

    def counting_send(fd: int, pieces: list[Any]) -> int:
        calls["send"] += 1
        return int(A.send_nowait(fd, pieces))

    def counting_recv(fd: int, size: int) -> bytes:
        calls["recv"] += 1
        return bytes(A.recv_nowait(fd, size))

    monkeypatch.setattr(connection, "_SEND_NOWAIT", counting_send)
    monkeypatch.setattr(connection, "_RECV_NOWAIT", counting_recv)
    client = NetworkClient(fake_broker.bootstrap, client_id="test", rng=random.Random(1))

    def metadata(hand_over: bool) -> None:
        box: list[Any] = []
        client.send(-1, ApiKey.METADATA, {"topics": None, "allow_auto_topic_creation": False},
                    callback=box.append)
        deadline = time.monotonic() + 10
        while not box:
            assert time.monotonic() < deadline, "no answer"
            client.poll(20, client.clock.monotonic_ms(), hand_over)
        assert box[0].error is None

    try:
        deadline = time.monotonic() + 10
        while not client.ready(-1, client.clock.monotonic_ms()):
            assert time.monotonic() < deadline, "no connection"
            client.poll(20, client.clock.monotonic_ms(), False)
        client.poll(0, client.clock.monotonic_ms(), False)
        before = dict(calls)
        metadata(False)
        assert calls == before, "the socket methods were not used with hand_over=False"
        client.poll(0, client.clock.monotonic_ms(), True)
        metadata(True)
        assert calls["send"] > before["send"] and calls["recv"] > before["recv"]
    finally:
        client.close()
