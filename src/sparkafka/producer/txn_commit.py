"""Ending a transaction from another process: the second phase of a two-phase commit.

How it works: a transactional producer that sends and flushes without committing leaves an open
transaction that its coordinator identifies only by (transactional id, producer id, epoch) — nothing
ties it to the producer's connection (Kafka's ``TransactionCoordinator.endTransaction``; Flink's
``FlinkKafkaInternalProducer.resumeTransaction`` relies on the same). ``TransactionFinisher`` owns an
``AdminClient`` of its own: it finds the coordinator of an id (FindCoordinator, key type 1, cached per
id), and ``commit``/``abort`` send EndTxn with the ``TransactionHandle`` a producer reported
(``producer.transaction_info()``), without InitProducerId. The EndTxn version must match the protocol the
transaction was opened with: 5 under Transactions V2 (KIP-890: the coordinator bumps the epoch), at most
4 under V1.

Answers. Retriable ones (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: find the coordinator again;
COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS while markers are written) are retried every
``retry.backoff.ms`` until the deadline (``max.block.ms``, as Java's ``commitTransaction``). NONE also
answers an EndTxn repeated after it completed (V1: a COMMIT of a completed commit; V2: the previous epoch
after the bump), so ``commit`` and ``abort`` are idempotent. A COMMIT answered INVALID_TXN_STATE,
PRODUCER_FENCED / INVALID_PRODUCER_EPOCH or INVALID_PRODUCER_ID_MAPPING means the coordinator aborted the
transaction (it outlived ``transaction.timeout.ms``, or the id was initialized again): that is
``TransactionLostError``. An ABORT answered by the fencing codes is done (whoever moved the epoch ended the
transaction); INVALID_TXN_STATE on an ABORT means it was committed, which is an error.

Sweeping. ``fence(id)`` sends InitProducerId for the id, which aborts its open transaction and bumps its
epoch (an epoch of 0 in the answer: the id had never been used). ``list_open(prefix)`` asks every broker
for its Ongoing transactions (ListTransactions, KIP-664; the id pattern filter of v2 when the broker has
it, the prefix is checked here as well), ``describe(ids)`` asks their coordinators for state, epoch,
timeout, start time and partitions (DescribeTransactions). Blocking, not thread-safe, driver-side only.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .. import errors
from .._clock import SYSTEM_CLOCK, Clock
from ..config import ProducerConfig
from ..net.admin import AdminClient
from ..protocol.messages import END_TXN_MAX_VERSION_TRANSACTIONS_V1, ApiKey
from .transactions import TransactionInfo

__all__ = ["ListedTransaction", "TransactionDescription", "TransactionFinisher", "TransactionHandle"]

log = logging.getLogger("sparkafka.producer")

_FIND_AGAIN = frozenset({errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE})
_WAIT = frozenset({errors.COORDINATOR_LOAD_IN_PROGRESS, errors.CONCURRENT_TRANSACTIONS})
_LOST = frozenset({errors.INVALID_TXN_STATE, errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH,
                   errors.INVALID_PRODUCER_ID_MAPPING})
_FENCED = frozenset({errors.PRODUCER_FENCED, errors.INVALID_PRODUCER_EPOCH, errors.INVALID_PRODUCER_ID_MAPPING})
_END_TXN_V2 = 5
_ONGOING = "Ongoing"


@dataclass(frozen=True)
class TransactionHandle:
    """What the coordinator knows an open transaction by, and the protocol it was opened with."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_version: int
    """2: Transactions V2 (KIP-890, EndTxn v5); 1: the classic protocol (EndTxn <= v4)."""

    @classmethod
    def of(cls, info: TransactionInfo) -> TransactionHandle:
        return cls(info.transactional_id, info.producer_id, info.producer_epoch, info.transaction_version)

    def describe(self) -> str:
        return (f"transaction {self.transactional_id!r} (producer id {self.producer_id}, epoch "
                f"{self.producer_epoch}, transaction version {self.transaction_version})")


@dataclass(frozen=True)
class ListedTransaction:
    """One entry of ListTransactions."""

    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    """One entry of DescribeTransactions (``state`` None: the coordinator does not know the id)."""

    transactional_id: str
    state: str | None
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    """The coordinator's wall clock when the transaction started (-1 when none is open)."""
    partitions: tuple[tuple[str, int], ...]


def _lost_message(handle: TransactionHandle, code: int, timeout_ms: int | None) -> str:
    configured = f" (the producer's was {timeout_ms} ms)" if timeout_ms is not None else ""
    return (
        f"cannot commit {handle.describe()}: the coordinator answered {errors.error_name(code)}, so it "
        f"already aborted the transaction and its records will never be visible. A transaction is aborted "
        f"by its coordinator when it stays open longer than transaction.timeout.ms{configured}, which the "
        "broker caps at transaction.max.timeout.ms (default 900000 ms): raise both above the time from a "
        "task's first record to the commit, or commit sooner. It is also aborted when another producer "
        "initializes the same transactional.id.")


class TransactionFinisher:
    """Commit, abort, fence and list transactions of other producers, over a connection of its own."""

    def __init__(self, config: ProducerConfig | Mapping[str, Any], *, clock: Clock = SYSTEM_CLOCK,
                 timeout_ms: float | None = None) -> None:
        cfg = config if isinstance(config, ProducerConfig) else ProducerConfig.from_mapping(dict(config))
        self._clock = clock
        self._timeout_ms = float(cfg.max_block_ms if timeout_ms is None else timeout_ms)
        self._backoff_ms = float(cfg.retry_backoff_ms)
        self._transaction_timeout_ms = cfg.transaction_timeout_ms
        self.admin = AdminClient(list(cfg.bootstrap_servers), client_id=f"{cfg.client_id}-finisher",
                                 request_timeout_ms=cfg.request_timeout_ms, clock=clock, security=cfg)
        self._coordinators: dict[str, int] = {}

    # ------------------------------------------------------------------ plumbing
    def _deadline(self, timeout_ms: float | None) -> float:
        return self._clock.monotonic_ms() + (self._timeout_ms if timeout_ms is None else timeout_ms)

    def _remaining(self, deadline: float) -> float:
        return max(deadline - self._clock.monotonic_ms(), 1.0)

    def _backoff(self, deadline: float, what: str, last: str) -> None:
        now = self._clock.monotonic_ms()
        if now + self._backoff_ms >= deadline:
            raise errors.KafkaTimeoutError(f"{what} did not complete in time (last answer: {last})")
        self.admin.client.poll(self._backoff_ms, now)

    def _coordinator(self, transactional_id: str, deadline: float) -> int:
        node = self._coordinators.get(transactional_id)
        if node is not None:
            return node
        body = {"key": transactional_id, "key_type": 1, "coordinator_keys": [transactional_id]}
        what = f"FindCoordinator for transactional id {transactional_id!r}"
        while True:
            try:
                _, answer = self.admin.request(ApiKey.FIND_COORDINATOR, body, timeout_ms=self._remaining(deadline))
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                self._backoff(deadline, what, repr(exc))
                continue
            entries = answer.get("coordinators")
            entry = entries[0] if entries else answer
            code = int(entry.get("error_code", 0) or 0)
            node_id = entry.get("node_id")
            if code == 0 and node_id is not None and int(node_id) >= 0:
                self.admin.add_node(int(node_id), str(entry["host"]), int(entry["port"]))
                self._coordinators[transactional_id] = int(node_id)
                return int(node_id)
            if code and not errors.error_class_for_code(code).retriable:
                raise errors.error_for_code(code, what)
            self._backoff(deadline, what, errors.error_name(code))

    def _coordinator_call(self, transactional_id: str, api_key: int, body: Mapping[str, Any], what: str,
                          deadline: float, *, max_version: int | None = None,
                          min_version: int | None = None) -> dict[str, Any]:
        """Send ``body`` to the id's coordinator until an answer that is not retriable; returns it."""
        while True:
            node = self._coordinator(transactional_id, deadline)
            try:
                version = self.admin.negotiated_version(api_key, node, self._remaining(deadline))
                if max_version is not None:
                    version = min(version, max_version)
                if min_version is not None and version < min_version:
                    raise errors.UnsupportedVersionError(
                        f"{what} needs version {min_version}+ of the API; the coordinator (node {node}) "
                        f"speaks up to {version}")
                _, answer = self.admin.request(api_key, body, node_id=node, version=version,
                                               timeout_ms=self._remaining(deadline))
            except errors.KafkaError as exc:
                if not exc.retriable:
                    raise
                self._coordinators.pop(transactional_id, None)
                self._backoff(deadline, what, repr(exc))
                continue
            code = int(answer.get("error_code", 0) or 0)
            if code in _FIND_AGAIN:
                self._coordinators.pop(transactional_id, None)
            elif code not in _WAIT:
                return answer
            self._backoff(deadline, what, errors.error_name(code))

    # ------------------------------------------------------------------ EndTxn
    def _end(self, handle: TransactionHandle, commit: bool, deadline: float) -> int:
        body = {"transactional_id": handle.transactional_id, "producer_id": handle.producer_id,
                "producer_epoch": handle.producer_epoch, "committed": commit}
        v2 = handle.transaction_version >= 2
        what = f"EndTxn({'COMMIT' if commit else 'ABORT'}) of {handle.describe()}"
        answer = self._coordinator_call(
            handle.transactional_id, ApiKey.END_TXN, body, what, deadline,
            max_version=None if v2 else END_TXN_MAX_VERSION_TRANSACTIONS_V1, min_version=_END_TXN_V2 if v2 else None)
        return int(answer.get("error_code", 0) or 0)

    def commit(self, handle: TransactionHandle, timeout_ms: float | None = None) -> None:
        """Commit the open transaction ``handle`` names; a transaction already committed is left as is.

        Raises ``TransactionLostError`` when the coordinator aborted it before (its records are gone)."""
        code = self._end(handle, True, self._deadline(timeout_ms))
        if code == 0:
            return
        if code in _LOST:
            raise errors.TransactionLostError(_lost_message(handle, code, self._transaction_timeout_ms),
                                              handle.transactional_id, code)
        raise errors.error_for_code(code, f"EndTxn(COMMIT) of {handle.describe()}")

    def abort(self, handle: TransactionHandle, timeout_ms: float | None = None) -> None:
        """Abort the open transaction ``handle`` names; one already aborted (or fenced) is left as is."""
        code = self._end(handle, False, self._deadline(timeout_ms))
        if code == 0:
            return
        if code in _FENCED:
            # the epoch moved on: InitProducerId or the coordinator's time-out aborted the transaction
            log.debug("abort of %s: %s, already ended", handle.describe(), errors.error_name(code))
            return
        if code == errors.INVALID_TXN_STATE:
            raise errors.error_for_code(code, f"cannot abort {handle.describe()}: it was committed (or is "
                                              "being committed) already")
        raise errors.error_for_code(code, f"EndTxn(ABORT) of {handle.describe()}")

    # ------------------------------------------------------------------ fencing and listing
    def fence(self, transactional_id: str, transaction_timeout_ms: int | None = None,
              timeout_ms: float | None = None) -> tuple[int, int]:
        """InitProducerId on ``transactional_id``: aborts its open transaction, fences its producers; returns
        ``(producer_id, epoch)`` now current (epoch 0: the id had never been used)."""
        txn_timeout = self._transaction_timeout_ms if transaction_timeout_ms is None else transaction_timeout_ms
        body = {"transactional_id": transactional_id, "transaction_timeout_ms": txn_timeout,
                "producer_id": -1, "producer_epoch": -1}
        what = f"InitProducerId fencing transactional id {transactional_id!r}"
        answer = self._coordinator_call(transactional_id, ApiKey.INIT_PRODUCER_ID, body, what,
                                        self._deadline(timeout_ms))
        code = int(answer.get("error_code", 0) or 0)
        if code == errors.INVALID_TRANSACTION_TIMEOUT:
            raise errors.ConfigError(
                f"{what}: transaction.timeout.ms={txn_timeout} is above the broker's transaction.max.timeout.ms",
                "transaction.timeout.ms")
        if code:
            raise errors.error_for_code(code, what)
        return int(answer["producer_id"]), int(answer["producer_epoch"])

    def list_open(self, prefix: str, timeout_ms: float | None = None) -> list[ListedTransaction]:
        """Every Ongoing transaction whose transactional id starts with ``prefix``, from every broker."""
        deadline = self._deadline(timeout_ms)
        cluster = self.admin.metadata([], self._remaining(deadline))
        found: dict[str, ListedTransaction] = {}
        for node in sorted(cluster.nodes):
            version = self.admin.negotiated_version(ApiKey.LIST_TRANSACTIONS, node, self._remaining(deadline))
            body = {"state_filters": [_ONGOING], "producer_id_filters": [], "duration_filter": -1,
                    "transactional_id_pattern": "^" + re.escape(prefix) + ".*" if version >= 2 else None}
            what = f"ListTransactions on node {node}"
            while True:
                _, answer = self.admin.request(ApiKey.LIST_TRANSACTIONS, body, node_id=node, version=version,
                                               timeout_ms=self._remaining(deadline))
                code = int(answer.get("error_code", 0) or 0)
                if code == 0:
                    break
                if code not in _WAIT and code not in _FIND_AGAIN:
                    raise errors.error_for_code(code, what)
                self._backoff(deadline, what, errors.error_name(code))
            for entry in answer.get("transaction_states") or ():
                tid = str(entry["transactional_id"])
                if tid.startswith(prefix) and entry.get("transaction_state") == _ONGOING:
                    found[tid] = ListedTransaction(tid, int(entry["producer_id"]), _ONGOING)
        return [found[k] for k in sorted(found)]

    def describe(self, transactional_ids: Iterable[str], timeout_ms: float | None = None
                 ) -> dict[str, TransactionDescription]:
        """The coordinators' view of each id (DescribeTransactions, grouped by coordinator)."""
        deadline = self._deadline(timeout_ms)
        pending = sorted(set(transactional_ids))
        result: dict[str, TransactionDescription] = {}
        while pending:
            by_node: dict[int, list[str]] = {}
            for tid in pending:
                by_node.setdefault(self._coordinator(tid, deadline), []).append(tid)
            retry: list[str] = []
            last = "NONE"
            for node, ids in sorted(by_node.items()):
                try:
                    _, answer = self.admin.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": ids},
                                                   node_id=node, timeout_ms=self._remaining(deadline))
                except errors.KafkaError as exc:
                    if not exc.retriable:
                        raise
                    for tid in ids:
                        self._coordinators.pop(tid, None)
                    retry += ids
                    last = repr(exc)
                    continue
                for entry in answer.get("transaction_states") or ():
                    tid = str(entry["transactional_id"])
                    code = int(entry.get("error_code", 0) or 0)
                    if code in _FIND_AGAIN or code in _WAIT:
                        self._coordinators.pop(tid, None)
                        retry.append(tid)
                        last = errors.error_name(code)
                    elif code == errors.TRANSACTIONAL_ID_NOT_FOUND:
                        result[tid] = TransactionDescription(tid, None, -1, -1, -1, -1, ())
                    elif code:
                        raise errors.error_for_code(code, f"DescribeTransactions of {tid!r}")
                    else:
                        parts = tuple(sorted((str(t["topic"]), int(p)) for t in entry.get("topics") or ()
                                             for p in t.get("partitions") or ()))
                        result[tid] = TransactionDescription(
                            tid, str(entry["transaction_state"]), int(entry["producer_id"]),
                            int(entry["producer_epoch"]), int(entry["transaction_timeout_ms"]),
                            int(entry["transaction_start_time_ms"]), parts)
            pending = sorted(set(retry))
            if pending:
                self._backoff(deadline, f"DescribeTransactions of {pending}", last)
        return result

    def close(self) -> None:
        self.admin.close()

    def __enter__(self) -> TransactionFinisher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
