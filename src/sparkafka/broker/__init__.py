"""The embedded broker (Tansu, from the ``broker`` extra) for local runs, demos and tests.

How it works: see ``sparkafka.broker.tansu``; this package only re-exports its public names.
"""

from __future__ import annotations

from sparkafka.broker.tansu import BrokerStartError, EmbeddedBroker, probe_api_versions, resolve_tansu_binary

__all__ = ["BrokerStartError", "EmbeddedBroker", "probe_api_versions", "resolve_tansu_binary"]
