"""``register(spark)``: make the ``sparkafka`` format known to a Spark session, on the driver.

How it works: ``register`` first makes sure the executors can import this sparkafka
(``shipping.ensure_executors_can_import``: ask them once, ship a pure-Python zip if they cannot; Spark
captures the session's Python includes when a data source is registered, so this comes first), then
calls ``spark.dataSource.register(SparkafkaDataSource)``. On a classic
session it also quiets one of PySpark's own messages: stopping a streaming query interrupts the
query thread, and if that thread was passing a task's accumulator updates to the driver's Python
accumulator server (``pyspark.accumulators.AccumulatorTCPServer``, a ``socketserver``), the JVM's
socket closes and the server's handler, waiting for the next update, prints an ``EOFError``
traceback to stderr, although nothing went wrong that the user can act on. The server's
``handle_error`` is wrapped so that this one case (an ``EOFError``: the JVM hung up) becomes a
single DEBUG line of the ``sparkafka.spark`` logger; every other error still reaches PySpark's
handler. The interrupted micro-batch itself is reported by the writer's ``abort`` (one WARNING line:
what completed tasks left in Kafka).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sparkafka.spark.datasource import SparkafkaDataSource
from sparkafka.spark.shipping import ensure_executors_can_import

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["quiet_accumulator_hangups", "register"]

log = logging.getLogger("sparkafka.spark")

_QUIET_MARK = "_sparkafka_quiet_hangups"


def register(spark: SparkSession, ship: bool | None = None) -> None:
    """Register the ``sparkafka`` format with a Spark session (classic or Spark Connect).

    ``ship=None`` (default): if the executors cannot import this sparkafka (asked once per SparkContext or
    Connect session), ship them a pure-Python copy of it, with a warning; executors that have it keep
    theirs. ``ship=True``: always ship; ``ship=False``: never. Raises ``ExecutorEnvironmentError`` when
    the executors lack pyarrow."""
    ensure_executors_can_import(spark, ship)
    spark.dataSource.register(SparkafkaDataSource)
    server = _accumulator_server(spark)
    if server is not None:
        quiet_accumulator_hangups(server)


def _accumulator_server(spark: Any) -> Any:
    try:
        return spark.sparkContext._accumulatorServer
    except Exception:  # Spark Connect: no SparkContext on the client
        return None


def quiet_accumulator_hangups(server: Any) -> None:
    """Make ``server`` (PySpark's accumulator server) log the JVM hanging up in one DEBUG line
    instead of printing a traceback; other errors still go to its own ``handle_error``. Idempotent."""
    if getattr(server, _QUIET_MARK, False):
        return
    pyspark_handler: Callable[[Any, Any], None] = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, EOFError):
            log.debug("the JVM closed its accumulator-update connection (a stopped query or a cancelled job "
                      "interrupts it); nothing to do")
            return
        pyspark_handler(request, client_address)

    server.handle_error = handle_error
    setattr(server, _QUIET_MARK, True)
