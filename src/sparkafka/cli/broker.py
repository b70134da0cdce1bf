"""``sparkafka broker``: run the embedded Tansu broker in the foreground.

How it works: starts an ``EmbeddedBroker`` (in-memory storage), prints its bootstrap
address on stdout (``bootstrap.servers=HOST:PORT``), then waits until SIGINT (Ctrl-C) or
SIGTERM arrives, or the broker exits on its own, and stops it cleanly. Exit code 0 after a
signal, 1 if the broker could not start (a host it cannot listen on, a log it cannot write) or died,
2 for a bad option value (a port outside 1..65535).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
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


def run(args: argparse.Namespace) -> int:
    try:
        broker = EmbeddedBroker(port=args.port, host=args.host, log_path=args.log)
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
