"""Which shared broker a parametrized test runs on, by name: ``broker_endpoint(request, "kafka"|"tansu")``.

How it works: the session fixtures ``kafka`` (Apache Kafka, tests/conftest.py) and ``tansu`` are looked up
through the test's ``request``, so a fixture parametrized over broker names starts only the brokers its
parameters name. ``BrokerEndpoint`` is what such tests get: the name and the PLAINTEXT bootstrap address.
"""

from __future__ import annotations

import pytest

__all__ = ["BrokerEndpoint", "broker_endpoint"]


class BrokerEndpoint:
    """A running broker under test, by name (``kafka`` or ``tansu``) and PLAINTEXT bootstrap address."""

    def __init__(self, name: str, bootstrap_servers: str) -> None:
        self.name = name
        self.bootstrap_servers = bootstrap_servers

    def __repr__(self) -> str:
        return f"BrokerEndpoint({self.name}, {self.bootstrap_servers})"


def broker_endpoint(request: pytest.FixtureRequest, name: str) -> BrokerEndpoint:
    """The session's shared ``kafka`` or ``tansu`` broker as a ``BrokerEndpoint``."""
    if name == "kafka":
        return BrokerEndpoint("kafka", str(request.getfixturevalue("kafka").bootstrap))
    if name == "tansu":
        return BrokerEndpoint("tansu", str(request.getfixturevalue("tansu").bootstrap_servers))
    raise ValueError(f"no shared broker named {name!r} (kafka or tansu)")
