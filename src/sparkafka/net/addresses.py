"""Parsing ``bootstrap.servers``, and ``client.dns.lookup=resolve_canonical_bootstrap_servers_only``.

How it works: accepts a comma-separated string or a sequence of ``host:port`` strings (IPv6 hosts in
brackets: ``[::1]:9092``), strips blanks, drops duplicates while keeping order, and returns
``(host, port)`` tuples. Anything malformed raises ``ConfigError`` naming ``bootstrap.servers``.
``canonical_bootstrap_servers`` does what Java's ``ClientUtils.parseAndValidateAddresses`` does in the
canonical mode: every address a bootstrap name resolves to becomes an entry under that address's
canonical host name (a reverse lookup; the address itself when there is none); names that do not
resolve are skipped with a warning, and none resolving at all is a ``ConfigError``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ConfigError

_KEY = "bootstrap.servers"
log = logging.getLogger(__name__)


def canonical_bootstrap_servers(
    value: str | Sequence[str],
    getaddrinfo: Callable[..., list[Any]] = socket.getaddrinfo,
    gethostbyaddr: Callable[[str], tuple[str, list[str], list[str]]] = socket.gethostbyaddr,
) -> list[str]:
    """The bootstrap list with each name replaced by the canonical names of its addresses, as
    ``host:port`` strings (IPv6 addresses in brackets)."""
    out: list[str] = []
    for host, port in parse_bootstrap_servers(value):
        try:
            infos = getaddrinfo(host, port, 0, socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            log.warning("could not resolve %s from %s: %s", host, _KEY, exc)
            continue
        for info in infos:
            address = str(info[4][0])
            try:
                name = gethostbyaddr(address)[0]
            except (OSError, UnicodeError):
                name = address  # Java's getCanonicalHostName gives the address text then
            entry = f"[{name}]:{port}" if ":" in name else f"{name}:{port}"
            if entry not in out:
                out.append(entry)
    if not out:
        raise ConfigError(f"no resolvable host in {_KEY} {value!r} "
                          "(client.dns.lookup=resolve_canonical_bootstrap_servers_only)", _KEY)
    return out


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
