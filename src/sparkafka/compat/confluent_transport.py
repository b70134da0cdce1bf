"""Connection failures as librdkafka reports them to ``error_cb``: ``_TRANSPORT`` and ``_ALL_BROKERS_DOWN``.

How it works: librdkafka calls the application's ``error_cb`` (from ``poll()``) when a connection to a broker
fails or is lost (``_TRANSPORT``, "host:port/id: what happened") and when every broker it knows is down
(``_ALL_BROKERS_DOWN``, "n/n brokers are down": each broker it knows failed since one was last up); a producer
whose brokers are unreachable is only told so there (its records wait, then time out). ``TransportEvents``
listens to the producer's ``NetworkClient`` (its disconnect and ready listeners, on the I/O thread) and queues
such ``KafkaError``s where the compat ``Producer`` serves its ``error_cb`` events. A connection the client
closed itself (idle, shut down) is no failure. A login refused is left to the delivery reports'
``_AUTHENTICATION`` path. A node's failure with the same text as the one last reported for it is reported
again only after ``REPEAT_AFTER_MS`` or once the node was ready in between (a broker that stays down retries
every ``reconnect.backoff.max.ms`` and would repeat it for ever); ``_ALL_BROKERS_DOWN`` once per outage: until
some connection is ready again. At most ``MAX_QUEUED`` events wait for ``poll()``: a producer whose owner
never polls queues no more than that. The listeners hold the queue and a wake-up function, not the ``Producer``, so they
do not keep a dropped one alive.
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from sparkafka import errors
from sparkafka._clock import Clock
from sparkafka.compat.librdkafka_errors import KafkaError
from sparkafka.net.client import NetworkClient

__all__ = ["TransportEvents"]

REPEAT_AFTER_MS = 30_000.0
"""A node's identical failure is reported again after this long (while it stays down)."""

MAX_QUEUED = 100
"""No transport event is queued while this many events wait for ``poll()``."""


class TransportEvents:
    """Queues ``_TRANSPORT`` / ``_ALL_BROKERS_DOWN`` errors from ``client``'s connections into ``events``."""

    def __init__(self, client: NetworkClient, clock: Clock, events: collections.deque[KafkaError],
                 wake: Callable[[], None]) -> None:
        self._client = client
        self._clock = clock
        self._events = events
        self._wake = wake
        self._up: set[int] = set()
        self._down: set[int] = set()
        self._last: dict[int, tuple[str, float]] = {}
        """Per node, the text of the failure last reported and when (monotonic ms)."""
        self._all_down_reported = False
        client.add_disconnect_listener(self._on_disconnect)
        client.add_ready_listener(self._on_ready)

    def _on_ready(self, node_id: int) -> None:
        self._up.add(node_id)
        self._down.discard(node_id)
        self._last.pop(node_id, None)
        self._all_down_reported = False

    def _on_disconnect(self, node_id: int, error: Exception | None) -> None:
        self._up.discard(node_id)
        if error is None or isinstance(error, errors.AuthenticationError):
            return
        self._down.add(node_id)
        address = self._client.nodes().get(node_id)
        where = f"{address[0]}:{address[1]}" if address is not None else "?"
        text = f"{where}/{'bootstrap' if node_id < 0 else node_id}: {error}"
        now = self._clock.monotonic_ms()
        last = self._last.get(node_id)
        if last is None or last[0] != text or now - last[1] >= REPEAT_AFTER_MS:
            self._last[node_id] = (text, now)
            self._queue(KafkaError(KafkaError._TRANSPORT, text))
        known = self._client.nodes()
        if not self._up and not self._all_down_reported and known and self._down.issuperset(known):
            self._all_down_reported = True
            self._queue(KafkaError(KafkaError._ALL_BROKERS_DOWN, f"{len(known)}/{len(known)} brokers are down"))

    def _queue(self, error: KafkaError) -> None:
        if len(self._events) < MAX_QUEUED:
            self._events.append(error)
            self._wake()
