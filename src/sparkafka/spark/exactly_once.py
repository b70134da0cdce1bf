"""Exactly-once writes: tasks prepare Kafka transactions, the driver commits them all or none.

How it works. A Kafka transaction covers one transactional id, so the tasks of a write cannot share one;
this is a two-phase commit over many (as Flink's KafkaSink). Phase one, in each task
(``writer.write_partition``): a producer with the transactional id ``sparkafka/<sink id>/<Spark
partition>/<attempt>`` (the same ids in every micro-batch, so the broker does not accumulate them)
initializes (fencing an earlier user of the id and aborting its open transaction), sends, flushes and
does not commit; its commit message carries the ``SinkTransaction`` (transactional id, producer id,
epoch, transaction version, partitions, counts). A task with no rows opens no transaction; a task that
fails aborts its own.

Phase two, on the driver (each ``commit``/``abort`` runs in a fresh Python process, so the state lives in
the ``DecisionLog``, a compacted topic keyed by sink id):

- ``commit(batch, messages)``: if the log says the batch is committed already (a micro-batch re-run after a
  restart; a batch write whose sink id completed before), abort the new transactions and return. Else
  check with DescribeTransactions that every transaction is still open with the task's producer id and
  epoch (a transaction the coordinator timed out fails the write here, before anything is visible), record
  PREPARED with the list (the commit point), end each with EndTxn(COMMIT) through the
  ``TransactionFinisher`` (an answer meaning "already committed" is fine), abort every other open
  transaction of the sink (losing, killed or speculative attempts, found with ListTransactions by the
  id prefix), record COMMITTED.
- ``abort(batch, messages)``: if PREPARED is recorded, finish the commit (never roll back after the
  commit point); else abort the batch's transactions and sweep the sink's open ones, record ABORTED.
- ``recover()`` (from ``writer()``/``streamWriter()``, before any task of the query runs): finish a
  PREPARED write a dead driver left; a batch write also sweeps the sink's open transactions then. Were
  a task to initialize a PREPARED transaction's id first, it would abort a committed decision.

A transaction lost after the commit point (timed out between the check and its EndTxn) cannot be
brought back: the write is recorded COMMITTED with the lost ids and ``TransactionLostError`` names the
Spark partitions, the Kafka partitions and the settings to raise.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sparkafka import errors
from sparkafka.producer.txn_commit import TransactionFinisher
from sparkafka.protocol.messages import ApiKey
from sparkafka.spark.decision_log import (
    ABORTED,
    COMMITTED,
    DEFAULT_LOG_TOPIC,
    PREPARED,
    Decision,
    DecisionLog,
    SinkTransaction,
)
from sparkafka.spark.options import DRIVER_EXIT_OPTION, GUARANTEE_OPTION, SinkOptions

__all__ = ["BATCH_WRITE", "BATCH_WRITE_QUERY", "ExactlyOnceSink", "Outcome", "transactional_id",
           "transactional_id_prefix"]

log = logging.getLogger("sparkafka.spark")

BATCH_WRITE = 0
"""The batch id of a batch write: a sink id names one batch write."""
BATCH_WRITE_QUERY = "batch-write"
"""The query id a batch write's decisions record (``commit``/``abort`` with ``query``): a streaming query that
meets it is refused like one meeting another query's id, instead of having its batch 0 skipped as written
by the batch write. Decision logs written before it hold no query id for batch writes."""
_ONGOING = "Ongoing"


def _check_broker(finisher: TransactionFinisher) -> None:
    """The admin APIs phase two needs, asked of the broker before any task runs (``recover``, from ``writer()``
    and ``streamWriter()``): without them (Tansu; Kafka before 3.0) a streaming query failed at its first
    commit, with every task's transaction prepared, saying only "Writing job failed"."""
    for api in (ApiKey.DESCRIBE_TRANSACTIONS, ApiKey.LIST_TRANSACTIONS):
        try:
            finisher.admin.negotiated_version(api)
        except errors.UnsupportedVersionError as exc:
            raise errors.ConfigError(
                f"{GUARANTEE_OPTION}=exactly_once needs a broker that answers DescribeTransactions and "
                f"ListTransactions (Apache Kafka 3.0 or newer, KIP-664): {exc}", GUARANTEE_OPTION) from exc


def transactional_id_prefix(sink_id: str) -> str:
    return f"sparkafka/{sink_id}/"


def transactional_id(sink_id: str, spark_partition: int, attempt: int) -> str:
    """The transactional id of a task (a sink id has no '/', so prefixes of two sinks never overlap)."""
    return f"{transactional_id_prefix(sink_id)}{spark_partition}/{attempt}"


@dataclass(frozen=True)
class Outcome:
    """What the driver did with a write."""

    status: str
    """``committed``, ``aborted``, or ``skipped`` (committed by an earlier run)."""
    transactions: int
    """Transactions committed now (or, for ``aborted``, aborted now)."""


def _transactions(messages: Sequence[Any]) -> list[SinkTransaction]:
    found = [getattr(m, "transaction", None) for m in messages if m is not None]
    return [t for t in found if isinstance(t, SinkTransaction)]


def _query_id(messages: Sequence[Any]) -> str | None:
    return next((q for m in messages if m is not None and (q := getattr(m, "query_id", None))), None)


def _recorded_query(query: str | None, latest: Decision | None) -> str | None:
    """The query id a new decision records: the tasks' (``query``), else the sink's latest decision's. A
    micro-batch whose tasks all failed or were cancelled (Spark's abort gets no messages) or that had no
    task carries none, and recording None would drop the sink's query id: a new query reusing the sink id
    would then pass ``_skip``'s check and have its first batches skipped as already written."""
    if query is not None:
        return query
    return latest.query_id if latest is not None else None


def _settings_hint(options: SinkOptions) -> str:
    timeout = options.driver_config()["transaction.timeout.ms"]
    return (f"kafka.transaction.timeout.ms is {timeout} ms and the broker caps it at transaction.max.timeout.ms "
            "(default 900000): raise both above the time from a task's first record to the driver's commit "
            "(the slowest task plus the commit), or make the write smaller")


class ExactlyOnceSink:
    """The driver side of one exactly-once sink (``options.sink_id`` must be set)."""

    def __init__(self, options: SinkOptions) -> None:
        if options.sink_id is None:
            raise errors.ConfigError("an exactly-once sink needs a sink id", "sparkafka.sink.id")
        self.options = options
        self.sink_id = options.sink_id
        self.prefix = transactional_id_prefix(options.sink_id)
        self._log_topic = options.log_topic or DEFAULT_LOG_TOPIC

    def _open(self) -> tuple[DecisionLog, TransactionFinisher]:
        config = self.options.driver_config()
        return DecisionLog(config, self._log_topic), TransactionFinisher(config)

    # ------------------------------------------------------------------ entry points
    def recover(self, *, sweep: bool) -> Decision | None:
        """Finish a write a dead driver left PREPARED; with ``sweep``, abort the sink's open transactions
        (only when no task of this sink can be running). Returns the latest decision."""
        dlog, finisher = self._open()
        try:
            _check_broker(finisher)
            latest = dlog.latest(self.sink_id)
            if latest is not None and latest.state == PREPARED:
                log.warning("sink %r: batch %d was PREPARED but not COMMITTED (the driver stopped after the "
                            "commit point): committing it now", self.sink_id, latest.batch)
                latest = self._finish(dlog, finisher, latest)
            if sweep:
                self._sweep(finisher, frozenset())
            return latest
        finally:
            finisher.close()
            dlog.close()

    def sweep(self) -> None:
        """Abort the sink's open transactions (only when no task of this sink can be running)."""
        finisher = TransactionFinisher(self.options.driver_config())
        try:
            self._sweep(finisher, frozenset())
        finally:
            finisher.close()

    def commit(self, batch: int, messages: Sequence[Any], query: str | None = None) -> Outcome:
        """Commit every task transaction of ``batch`` or none. ``query``: the writer's query id (a batch write
        passes ``BATCH_WRITE_QUERY``); else the one the tasks' messages carry."""
        txns = _transactions(messages)
        query = query if query is not None else _query_id(messages)
        dlog, finisher = self._open()
        try:
            _check_broker(finisher)
            latest = dlog.latest(self.sink_id)
            if latest is not None and latest.state == PREPARED:
                # a commit of this batch (or, were recovery skipped, an earlier one) passed its commit point
                latest = self._finish(dlog, finisher, latest)
                if latest.batch == batch:
                    self._abort_others(finisher, txns, latest.transactions)
                    return Outcome("committed", len(latest.transactions))
            if latest is not None and latest.is_committed(batch):
                return self._skip(finisher, latest, batch, txns, query)
            recorded = _recorded_query(query, latest)
            self._check_open(dlog, finisher, latest, batch, txns, recorded)
            last = latest.last_committed if latest is not None else None
            prepared = Decision(self.sink_id, batch, PREPARED, last, tuple(txns), recorded)
            if txns:
                dlog.record(prepared)  # the commit point
            self._finish(dlog, finisher, prepared)
            return Outcome("committed", len(txns))
        finally:
            finisher.close()
            dlog.close()

    def abort(self, batch: int, messages: Sequence[Any], query: str | None = None) -> Outcome:
        """Abort ``batch`` (or finish its commit past the commit point); ``query`` as for ``commit``."""
        if self.options.driver_exit_after_commits is not None:
            _injected_exit("abort")  # the driver is "dead": nothing may finish its commit but a new run
        txns = _transactions(messages)
        query = query if query is not None else _query_id(messages)
        dlog, finisher = self._open()
        try:
            _check_broker(finisher)
            latest = dlog.latest(self.sink_id)
            if latest is not None and latest.state == PREPARED:
                log.warning("sink %r: abort of batch %d after the commit point of batch %d: committing that "
                            "one instead (a decision to commit is never rolled back)", self.sink_id, batch,
                            latest.batch)
                latest = self._finish(dlog, finisher, latest)
                if latest.batch == batch:
                    self._abort_others(finisher, txns, latest.transactions)
                    return Outcome("committed", len(latest.transactions))
            if latest is not None and latest.is_committed(batch):
                return self._skip(finisher, latest, batch, txns, query)
            for txn in txns:
                finisher.abort(txn.handle)
            self._sweep(finisher, frozenset())
            last = latest.last_committed if latest is not None else None
            dlog.record(Decision(self.sink_id, batch, ABORTED, last, tuple(txns), _recorded_query(query, latest)))
            return Outcome("aborted", len(txns))
        finally:
            finisher.close()
            dlog.close()

    # ------------------------------------------------------------------ steps
    def _skip(self, finisher: TransactionFinisher, latest: Decision, batch: int, txns: list[SinkTransaction],
              query: str | None) -> Outcome:
        if query is not None and latest.query_id is not None and query != latest.query_id:
            for txn in txns:
                finisher.abort(txn.handle)
            owner = ("a batch write" if latest.query_id == BATCH_WRITE_QUERY
                     else f"streaming query {latest.query_id}")
            this = "a batch write" if query == BATCH_WRITE_QUERY else f"query {query} at batch {batch}"
            raise errors.ConfigError(
                f"sink id {self.sink_id!r} already committed batches up to {latest.last_committed} for {owner}, "
                f"and this is {this} (a new checkpoint?): its rows would be skipped as already written. Give "
                "the new query a new sparkafka.sink.id.", "sparkafka.sink.id")
        kept = latest.transactions if latest.batch == batch else ()
        self._abort_others(finisher, txns, kept)
        self._sweep(finisher, frozenset())
        log.warning("sink %r: batch %d was committed by an earlier run (last committed batch %s): its %d new "
                    "transactions were aborted, nothing is written twice", self.sink_id, batch,
                    latest.last_committed, len([t for t in txns if t not in kept]))
        return Outcome("skipped", 0)

    def _abort_others(self, finisher: TransactionFinisher, txns: list[SinkTransaction],
                      keep: Sequence[SinkTransaction]) -> None:
        kept = {t.handle for t in keep}
        for txn in txns:
            if txn.handle not in kept:
                finisher.abort(txn.handle)

    def _check_open(self, dlog: DecisionLog, finisher: TransactionFinisher, latest: Decision | None, batch: int,
                    txns: list[SinkTransaction], query: str | None) -> None:
        """Before the commit point: every transaction must be open as its task left it, or nothing commits."""
        if not txns:
            return
        described = finisher.describe([t.handle.transactional_id for t in txns])
        gone = []
        for txn in txns:
            d = described.get(txn.handle.transactional_id)
            if d is None or d.state != _ONGOING or (d.producer_id, d.producer_epoch) != (
                    txn.handle.producer_id, txn.handle.producer_epoch):
                gone.append((txn, "unknown" if d is None else f"{d.state}, producer id {d.producer_id} epoch "
                             f"{d.producer_epoch}"))
        if not gone:
            return
        for txn in txns:
            finisher.abort(txn.handle)
        self._sweep(finisher, frozenset())
        last = latest.last_committed if latest is not None else None
        dlog.record(Decision(self.sink_id, batch, ABORTED, last, tuple(txns), query))
        lost = "; ".join(f"{t.describe()} is now {state}" for t, state in gone)
        raise errors.TransactionLostError(
            f"sink {self.sink_id!r} batch {batch}: {len(gone)} of {len(txns)} task transactions were aborted by "
            f"the broker before the driver could commit ({lost}). Nothing of this write was committed (every "
            f"transaction of it is aborted); the write fails. {_settings_hint(self.options)}.",
            gone[0][0].handle.transactional_id, errors.INVALID_TXN_STATE)

    def _finish(self, dlog: DecisionLog, finisher: TransactionFinisher, prepared: Decision) -> Decision:
        """Commit every transaction of a PREPARED decision, sweep, record COMMITTED."""
        lost: list[tuple[SinkTransaction, errors.TransactionLostError]] = []
        exit_after = self.options.driver_exit_after_commits
        for index, txn in enumerate(prepared.transactions):
            if index == exit_after:
                _injected_exit(f"commit after {index} of {len(prepared.transactions)} transactions")
            try:
                finisher.commit(txn.handle)
            except errors.TransactionLostError as exc:
                lost.append((txn, exc))
        self._sweep(finisher, frozenset(t.handle.transactional_id for t in prepared.transactions))
        last = prepared.batch if prepared.last_committed is None else max(prepared.batch, prepared.last_committed)
        committed = Decision(self.sink_id, prepared.batch, COMMITTED, last, prepared.transactions,
                             prepared.query_id, tuple(t.handle.transactional_id for t, _ in lost))
        dlog.record(committed)
        if lost:
            raise errors.TransactionLostError(
                f"sink {self.sink_id!r} batch {prepared.batch} is committed INCOMPLETELY: {len(lost)} of "
                f"{len(prepared.transactions)} task transactions were aborted by the broker after the commit "
                f"point and their records are lost: {'; '.join(t.describe() for t, _ in lost)}. "
                f"{_settings_hint(self.options)}.", lost[0][0].handle.transactional_id, lost[0][1].code)
        return committed

    def _sweep(self, finisher: TransactionFinisher, keep: frozenset[str]) -> None:
        """Abort the sink's open transactions except ``keep`` (attempts whose message never reached us)."""
        for listed in finisher.list_open(self.prefix):
            if listed.transactional_id in keep:
                continue
            log.info("sink %r: aborting the orphaned open transaction %r (a failed, killed or speculative task "
                     "attempt)", self.sink_id, listed.transactional_id)
            finisher.fence(listed.transactional_id)


def _injected_exit(where: str) -> None:
    log.warning("%s: the driver's Python process exits in %s", DRIVER_EXIT_OPTION, where)
    logging.shutdown()
    os._exit(19)
