"""``sparkafka broker``: run the embedded Tansu broker in the foreground.

How it works: starts an ``EmbeddedBroker`` (in-memory storage), prints its bootstrap
address on stdout (``bootstrap.servers=HOST:PORT``), then waits until SIGINT (Ctrl-C) or
SIGTERM arrives, or the broker exits on its own, and stops it cleanly. The options are checked
first: ``--host`` must be an address this machine can listen on (a socket is bound to it, port 0) and
``--log`` a file it can append to (created, with its directories, as the broker would). Exit code 0
after a signal, 2 for a bad option (a port outside 1..65535, such a host or log), 1 if the broker
could not start otherwise (no Tansu binary, the port in use, no answer in time) or died.
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import Any

from sparkafka.broker import BrokerStartError, EmbeddedBroker
from sparkafka.errors import ConfigError

_POLL_S = 0.5


def add_parser(subparsers: argparse._SubParsersAction[Any]) -> None:
    parser = subparsers.add_parser(
        "broker",
        help="run the embedded Kafka-compatible broker (Tansu) until Ctrl-C",
        description="Run the embedded Tansu broker with in-memory storage until Ctrl-C or SIGTERM.",
    )
    parser.add_argument("--port", type=int, default=None, help="port to listen on (default: a free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    parser.add_argument("--log", default=None, metavar="PATH", help="append the broker's output to PATH")


def _check_host(host: str) -> None:
    """A host name or address that no socket here can be bound to (an unknown name, another machine's address)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((host, 0))
        except OSError as exc:
            raise ConfigError(f"--host: cannot listen on host {host!r}: {exc}", "host") from exc


def _check_log(path: str) -> None:
    """A log the broker could not append to (a directory, no permission); creates it as the broker would."""
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "ab"):
            pass
    except OSError as exc:
        raise ConfigError(f"--log: cannot write the broker's log to {path!r}: {exc}", "log") from exc


def run(args: argparse.Namespace) -> int:
    if args.port is not None and not 1 <= args.port <= 65535:
        print(f"sparkafka broker: --port must be in 1..65535, got {args.port}", file=sys.stderr)
        return 2
    try:
        broker = EmbeddedBroker(port=args.port, host=args.host, log_path=args.log)
        _check_host(args.host)
        if args.log is not None:
            _check_log(args.log)
    except ConfigError as exc:
        print(f"sparkafka broker: {exc}", file=sys.stderr)
        return 2
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            broker.start()
        except BrokerStartError as exc:
            print(f"sparkafka broker: {exc}", file=sys.stderr)
            return 1
        print(f"bootstrap.servers={broker.bootstrap_servers}", flush=True)
        print(f"Tansu running (pid {broker.pid}); Ctrl-C to stop", file=sys.stderr, flush=True)
        while not stop.wait(_POLL_S):
            if not broker.running:
                print(f"sparkafka broker: the broker exited; log tail:\n{broker.log_tail()}", file=sys.stderr)
                return 1
        print("stopping the broker", file=sys.stderr, flush=True)
        return 0
    finally:
        broker.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
