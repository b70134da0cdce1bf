"""The ``sparkafka`` command line: ``sparkafka <command> [options]`` (also ``python -m sparkafka``).

How it works: each command is a module ``sparkafka.cli.<name>`` with two functions,
``add_parser(subparsers)`` (adds its argparse sub-parser named ``<name>``) and
``run(args) -> int`` (does the work, returns the exit code). ``main`` imports the modules
listed in ``COMMANDS``, builds the parser, and dispatches on the chosen command name.

To add a command: write ``sparkafka/cli/<name>.py`` with ``add_parser`` and ``run``, and
add ``"<name>"`` to ``COMMANDS`` below. Modules not in ``COMMANDS`` are a command's helpers: the
pipeline's demo data generator (``orders``) and its Avro encoder (``avro_fallback``).
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType
from typing import Any, Protocol, cast

from sparkafka._version import __version__

# ---- The command registry: one module name per command, in --help order. -------------------
COMMANDS: tuple[str, ...] = (
    "broker",
    "pipeline",
    "perf",
)
# ---------------------------------------------------------------------------------------------


class CommandModule(Protocol):
    """What a module in ``COMMANDS`` provides."""

    def add_parser(self, subparsers: argparse._SubParsersAction[Any]) -> None: ...

    def run(self, args: argparse.Namespace) -> int: ...


def _load(name: str) -> CommandModule:
    return cast(CommandModule, importlib.import_module(f"sparkafka.cli.{name}"))


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, CommandModule]]:
    """The top-level parser and the command modules by name."""
    parser = argparse.ArgumentParser(
        prog="sparkafka",
        description="A fast Kafka producer in Python, with a PySpark sink.",
    )
    parser.add_argument("--version", action="version", version=f"sparkafka {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="<command>")
    modules: dict[str, CommandModule] = {}
    for name in COMMANDS:
        module = _load(name)
        module.add_parser(subparsers)
        modules[name] = module
    return parser, modules


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C's KeyboardInterrupt is, so that a command stops the same
    clean way (the producer closed, the embedded broker and Spark stopped) instead of being killed."""


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the process exit code (130 after Ctrl-C, 143 after SIGTERM)."""
    parser, modules = build_parser()
    args = parser.parse_args(argv)
    command: str | None = args.command
    if command is None:
        parser.print_help(sys.stderr)
        return 2
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        return modules[command].run(args)
    except Terminated:
        return 143
    except KeyboardInterrupt:
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
