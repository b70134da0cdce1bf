"""A version cap below our highest (Produce 11 for transactional producers, 12 without topic ids) is
chosen as Java's ``latestUsableVersion(key, oldest, cap)``: the highest shared version under the cap,
or ``UnsupportedVersionError`` naming both ranges when the broker has none of ours."""

from __future__ import annotations

import time

import pytest

from sparkafka import errors
from sparkafka.net.client import NetworkClient
from sparkafka.protocol.messages import CLIENT_VERSIONS, ApiKey

from .fake_broker import FakeBroker


def _ready(client: NetworkClient, node: int) -> None:
    deadline = time.monotonic() + 10
    while not client.is_connected(node):
        assert time.monotonic() < deadline, "no connection"
        now = client.clock.monotonic_ms()
        client.ready(node, now)
        client.poll(20, now)


@pytest.mark.parametrize(("broker_range", "cap", "expected"), [((3, 13), 11, 11), ((3, 13), 12, 12), ((3, 9), 11, 9)])
def test_capped_version_is_the_highest_shared_under_the_cap(broker_range: tuple[int, int], cap: int,
                                                            expected: int) -> None:
    broker = FakeBroker()
    broker.api_versions[int(ApiKey.PRODUCE)] = broker_range
    client = NetworkClient(broker.bootstrap)
    try:
        _ready(client, -1)
        assert client.api_version(-1, ApiKey.PRODUCE, cap) == expected
        assert client.api_version(-1, ApiKey.PRODUCE) == min(broker_range[1], CLIENT_VERSIONS[ApiKey.PRODUCE][1])
    finally:
        client.close()
        broker.close()


def test_no_shared_version_under_the_cap_is_a_typed_error() -> None:
    broker = FakeBroker()
    broker.api_versions[int(ApiKey.PRODUCE)] = (13, 13)
    client = NetworkClient(broker.bootstrap)
    try:
        _ready(client, -1)
        with pytest.raises(errors.UnsupportedVersionError, match="broker 13-13"):
            client.api_version(-1, ApiKey.PRODUCE, 12)
    finally:
        client.close()
        broker.close()


def test_api_versions_names_this_package_and_its_version(fake_broker: FakeBroker) -> None:
    """client_software_version is the package's version (it was a second hard-coded copy), and the
    package's version is the one pyproject.toml publishes."""
    import pathlib

    import sparkafka

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+

    client = NetworkClient(fake_broker.bootstrap)
    try:
        _ready(client, -1)
    finally:
        client.close()
    body = next(r.body for r in fake_broker.requests if r.api_key == ApiKey.API_VERSIONS)
    assert body is not None
    assert (body["client_software_name"], body["client_software_version"]) == ("sparkafka", sparkafka.__version__)
    pyproject = pathlib.Path(__file__).resolve().parents[2] / "pyproject.toml"
    assert tomllib.loads(pyproject.read_text())["project"]["version"] == sparkafka.__version__
