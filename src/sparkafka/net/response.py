"""``ClientResponse``: what a request's callback receives.

How it works: exactly one ``ClientResponse`` is delivered per request sent through the network layer,
whatever happened: ``body`` is the decoded response (``None`` for acks=0 Produce, which completes once its
bytes are written, and for failures); ``error`` is ``None`` on success, otherwise a typed exception:
``RequestTimedOutError`` (request.timeout.ms expired; the connection was closed), ``NetworkExceptionError``
(the connection was lost or was not usable), a ``ProtocolError`` subclass (bad bytes from the broker) or
``UnsupportedVersionError`` (the broker shares no version of the API with us).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class ClientResponse:
    __slots__ = ("api_key", "body", "correlation_id", "error", "latency_ms", "node_id", "version")

    def __init__(
        self,
        node_id: int,
        api_key: int,
        version: int,
        correlation_id: int,
        body: dict[str, Any] | None,
        error: Exception | None,
        latency_ms: float,
    ) -> None:
        self.node_id = node_id
        self.api_key = api_key
        self.version = version
        self.correlation_id = correlation_id
        self.body = body
        self.error = error
        self.latency_ms = latency_ms

    @property
    def ok(self) -> bool:
        return self.error is None

    def __repr__(self) -> str:
        state = "ok" if self.error is None else f"error={self.error!r}"
        return (
            f"ClientResponse(node={self.node_id}, api_key={self.api_key}, v{self.version}, "
            f"corr={self.correlation_id}, {state}, latency={self.latency_ms:.1f}ms)"
        )


ResponseCallback = Callable[[ClientResponse], None]
