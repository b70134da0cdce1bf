"""Parsing ``bootstrap.servers``.

How it works: accepts a comma-separated string or a sequence of ``host:port`` strings (IPv6 hosts in
brackets: ``[::1]:9092``), strips blanks, drops duplicates while keeping order, and returns
``(host, port)`` tuples. Anything malformed raises ``ConfigError`` naming ``bootstrap.servers``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ConfigError

_KEY = "bootstrap.servers"


def parse_bootstrap_servers(value: str | Sequence[str]) -> list[tuple[str, int]]:
    """``"a:9092,b:9093"`` (or ``["a:9092", "b:9093"]``) -> ``[("a", 9092), ("b", 9093)]``."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, Sequence):
        items = []
        for item in value:
            if not isinstance(item, str):
                raise ConfigError(f"{_KEY} entries must be strings, got {type(item).__name__}", _KEY)
            items.extend(item.split(","))
    else:
        raise ConfigError(f"{_KEY} must be a string or a list of strings, got {type(value).__name__}", _KEY)
    out: list[tuple[str, int]] = []
    for raw in items:
        entry = raw.strip()
        if not entry:
            continue
        address = _parse_one(entry)
        if address not in out:
            out.append(address)
    if not out:
        raise ConfigError(f"{_KEY} must name at least one host:port, got {value!r}", _KEY)
    return out


def _parse_one(entry: str) -> tuple[str, int]:
    if "://" in entry:  # tolerate a listener-style URL such as tcp://host:port
        entry = entry.split("://", 1)[1].rstrip("/")
    if entry.startswith("["):
        close = entry.find("]")
        if close < 0 or close + 1 >= len(entry) or entry[close + 1] != ":":
            raise ConfigError(f"invalid {_KEY} entry {entry!r}: expected [ipv6]:port", _KEY)
        host, port_text = entry[1:close], entry[close + 2 :]
    else:
        host, sep, port_text = entry.rpartition(":")
        if not sep or not host:
            raise ConfigError(f"invalid {_KEY} entry {entry!r}: expected host:port", _KEY)
        if ":" in host:
            raise ConfigError(f"invalid {_KEY} entry {entry!r}: put IPv6 addresses in brackets", _KEY)
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(
            f"invalid {_KEY} entry {entry!r}: port {port_text!r} is not a number", _KEY
        ) from None
    if not 0 < port < 65536:
        raise ConfigError(f"invalid {_KEY} entry {entry!r}: port must be in 1..65535", _KEY)
    return host, port
