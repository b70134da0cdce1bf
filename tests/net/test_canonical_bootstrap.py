"""client.dns.lookup=resolve_canonical_bootstrap_servers_only, as Java's ClientUtils.parseAndValidateAddresses:
every address of a bootstrap name becomes an entry under its canonical (reverse-looked-up) name."""

from __future__ import annotations

import socket
from typing import Any, cast

import pytest

from sparkafka import errors
from sparkafka.net.addresses import canonical_bootstrap_servers

ADDRS = {"kafka.example": ["10.0.0.1", "10.0.0.2"], "v6.example": ["fd00::1"], "same.example": ["10.0.0.1"]}
NAMES = {"10.0.0.1": "b1.internal.example", "10.0.0.2": "b2.internal.example"}


def _getaddrinfo(host: str, port: int, family: int, kind: int) -> list[Any]:
    if host not in ADDRS:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    return [(socket.AF_INET6 if ":" in a else socket.AF_INET, kind, 6, "", (a, port)) for a in ADDRS[host]]


def _gethostbyaddr(address: str) -> tuple[str, list[str], list[str]]:
    if address not in NAMES:
        raise socket.herror(1, "Unknown host")
    return NAMES[address], [], [address]


def _canonical(value: str) -> list[str]:
    return canonical_bootstrap_servers(value, _getaddrinfo, _gethostbyaddr)


def test_each_address_becomes_its_canonical_name_and_duplicates_go() -> None:
    assert _canonical("kafka.example:9092,same.example:9092") == ["b1.internal.example:9092",
                                                                   "b2.internal.example:9092"]


def test_an_address_without_a_reverse_name_stays_an_address_ipv6_in_brackets() -> None:
    assert _canonical("v6.example:9093") == ["[fd00::1]:9093"]


def test_unresolvable_names_are_skipped_and_none_resolvable_is_a_config_error() -> None:
    assert _canonical("nope.example:9092,kafka.example:9094") == ["b1.internal.example:9094",
                                                                   "b2.internal.example:9094"]
    with pytest.raises(errors.ConfigError, match="no resolvable host") as info:
        _canonical("nope.example:9092")
    assert info.value.key == "bootstrap.servers"


def test_a_producer_in_canonical_mode_bootstraps_by_name_and_delivers(tansu: Any, unique_topic: Any) -> None:
    from sparkafka.producer.producer import KafkaProducer

    host, port = tansu.bootstrap_servers.split(",")[0].rsplit(":", 1)
    try:
        name = socket.gethostbyaddr(cast(str, socket.getaddrinfo(host, int(port))[0][4][0]))[0]  # an IP literal
    except OSError:
        pytest.skip("no reverse name for the broker's address on this machine")
    producer = KafkaProducer({"bootstrap.servers": tansu.bootstrap_servers, "linger.ms": 0,
                              "client.dns.lookup": "resolve_canonical_bootstrap_servers_only"})
    try:
        assert producer._metadata.bootstrap_addresses[0] == (name, int(port))
        metadata = producer.send(unique_topic("canon"), b"v").get(20)
        assert metadata.offset == 0
    finally:
        producer.close(5)
