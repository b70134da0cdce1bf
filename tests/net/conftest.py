"""Fixtures for the network-layer tests: fake brokers on loopback (real brokers come from the shared
``tansu`` / ``mock_cluster`` fixtures in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from .fake_broker import FakeBroker


@pytest.fixture
def fake_broker() -> Iterator[FakeBroker]:
    broker = FakeBroker()
    yield broker
    broker.close()
