"""Choosing a partition: the user partitioner protocol, round-robin, and the KIP-794 built-in partitioner.

How it works:

* ``Partitioner`` is the interface of a user partitioner (Java's ``Partitioner``); ``as_partitioner``
  also accepts a plain function ``(topic, key_bytes, num_partitions) -> int`` and adapts it.
* ``RoundRobinPartitioner`` is Java's: a per-topic counter, taken modulo the *available* partitions
  (those with a leader) or, if none is available, modulo all partitions.
* Unlike Java, the producer asks a user partitioner once per record and never calls ``on_new_batch``
  (deprecated by KIP-794). Java's ``doSend`` aborts the append of a record that needs a new batch,
  calls ``onNewBatch`` and asks ``partition()`` again, so its ``RoundRobinPartitioner`` counts such a
  record twice and skips partitions (KAFKA-9965: with 2 partitions and a batch per record, all go to
  partition 1); here round-robin is strict.
* ``BuiltInPartitioner`` (one per topic) places keyless records "uniform sticky" (KIP-794). It keeps
  the current ``StickyPartitionInfo`` (partition + bytes produced to it). The accumulator reads it,
  locks that partition's queue, re-checks it is still current, appends, then calls
  ``update_partition_info`` with the bytes the batch grew by. After ``batch.size`` bytes it switches —
  but only if the partition's last batch is full (``enable_switch``), and unconditionally at twice
  ``batch.size``, so switches line up with batch boundaries. The next partition is drawn uniformly
  among available partitions, or — when the Sender's ``ready()`` has published load stats — weighted by
  a cumulative frequency table (CFT) built from queue lengths, so that partitions whose brokers drain
  faster (shorter queues) get more records.
"""

from __future__ import annotations

import bisect
import inspect
import itertools
import operator
import random
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sparkafka._types import ClusterView
from sparkafka.accel import ACCEL
from sparkafka.errors import ConfigError, IllegalStateError
from sparkafka.producer.murmur2 import partition_for_key

__all__ = [
    "BuiltInPartitioner",
    "Partitioner",
    "PartitionerFunc",
    "RoundRobinPartitioner",
    "StickyPartitionInfo",
    "as_partitioner",
    "resolve_partitioner",
    "partition_for_key",
]

PartitionerFunc = Callable[[str, "bytes | None", int], int]
"""A plain partitioner function: ``(topic, key_bytes, num_partitions) -> partition``."""


@runtime_checkable
class Partitioner(Protocol):
    """A user partitioner (Java's ``org.apache.kafka.clients.producer.Partitioner``). A class given as
    ``partitioner.class`` may also define ``configure(configs: dict)``, called once after it is created."""

    def partition(
        self,
        topic: str,
        key: object,
        key_bytes: bytes | None,
        value: object,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int:
        """The partition for the record (0-based, < the topic's partition count)."""
        ...

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        """Java's deprecated hook before a new batch; never called by sparkafka (see the module docstring)."""
        ...

    def close(self) -> None:
        """Called once when the producer closes."""
        ...


def _partition_count(topic: str, cluster: ClusterView) -> int:
    count = cluster.partition_count(topic)
    if not count:
        raise IllegalStateError(f"no partitions are known for topic {topic!r}")
    return count


class _FunctionPartitioner:
    """Adapts ``fn(topic, key_bytes, num_partitions) -> int`` to ``Partitioner``."""

    __slots__ = ("_fn",)

    def __init__(self, fn: PartitionerFunc) -> None:
        self._fn = fn

    def partition(
        self,
        topic: str,
        key: object,
        key_bytes: bytes | None,
        value: object,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int:
        return self._fn(topic, key_bytes, _partition_count(topic, cluster))

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        return None

    def close(self) -> None:
        return None

    def __repr__(self) -> str:
        return f"FunctionPartitioner({self._fn!r})"


class _PartialPartitioner:
    """Adds no-op ``on_new_batch`` / ``close`` to an object that only has ``partition``."""

    __slots__ = ("_inner",)

    def __init__(self, inner: object) -> None:
        self._inner = inner

    def partition(
        self,
        topic: str,
        key: object,
        key_bytes: bytes | None,
        value: object,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int:
        result: int = self._inner.partition(  # type: ignore[attr-defined]
            topic, key, key_bytes, value, value_bytes, cluster
        )
        return result

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        hook = getattr(self._inner, "on_new_batch", None)
        if hook is not None:
            hook(topic, cluster, prev_partition)

    def close(self) -> None:
        hook = getattr(self._inner, "close", None)
        if hook is not None:
            hook()


def as_partitioner(obj: object) -> Partitioner:
    """A ``Partitioner`` from a partitioner object (missing optional methods become no-ops) or from a
    plain function ``(topic, key_bytes, num_partitions) -> int``."""
    if isinstance(obj, Partitioner):
        _check_call_shape(obj.partition, 6, "its partition(topic, key, key_bytes, value, value_bytes, cluster)")
        return obj
    method = getattr(obj, "partition", None)
    if callable(method):
        _check_call_shape(method, 6, "its partition(topic, key, key_bytes, value, value_bytes, cluster)")
        return _PartialPartitioner(obj)
    if callable(obj):
        _check_call_shape(obj, 3, "a function (topic, key_bytes, num_partitions) -> int")
        return _FunctionPartitioner(obj)
    raise ConfigError(
        f"partitioner must be a Partitioner object or a function (topic, key_bytes, num_partitions) -> int, "
        f"got {type(obj).__name__}",
        "partitioner.class",
    )


def _check_call_shape(func: Callable[..., Any], count: int, shape: str) -> None:
    """A ConfigError now, rather than a TypeError from the first send(), when ``func`` cannot take ``count``
    positional arguments (a callable without a signature Python can read is taken as it is)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * count))
    except TypeError as exc:
        raise ConfigError(f"partitioner {func!r:.80} does not fit {shape}: {exc}", "partitioner.class") from None


def resolve_partitioner(spec: object | None, configs: Mapping[str, Any] | None = None) -> Partitioner | None:
    """The user partitioner for a ``partitioner.class`` value: None (built-in partitioning) stays None,
    ``"round_robin"`` is ``RoundRobinPartitioner``, a class is instantiated without arguments and, if
    it has a ``configure`` method, configured with ``configs`` (as Java configures a partitioner it
    creates from ``partitioner.class``: the producer's settings as given, plus ``client.id``), and an
    object or function goes through ``as_partitioner`` (used as given, not configured)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        if spec == "round_robin":
            return RoundRobinPartitioner()
        raise ConfigError(f"unknown partitioner.class {spec!r}: use 'round_robin', a class or a function",
                          "partitioner.class")
    if isinstance(spec, type):
        cls = spec
        try:
            spec = cls()
        except Exception as exc:
            raise ConfigError(f"partitioner.class {cls.__name__} could not be created without arguments: "
                              f"{exc}", "partitioner.class") from exc
        configure = getattr(spec, "configure", None)
        if callable(configure):
            try:
                configure(dict(configs or {}))
            except Exception as exc:
                raise ConfigError(f"partitioner.class {cls.__name__}.configure() failed: {exc}",
                                  "partitioner.class") from exc
    return as_partitioner(spec)


class RoundRobinPartitioner:
    """Java's ``RoundRobinPartitioner``: ignores keys and cycles through the available partitions,
    without Java's double count of records that open a batch (see the module docstring)."""

    __slots__ = ("_counters",)

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def _next_value(self, topic: str) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters.setdefault(topic, itertools.count())
        return next(counter)  # atomic under the GIL, like AtomicInteger.getAndIncrement

    def partition(
        self,
        topic: str,
        key: object,
        key_bytes: bytes | None,
        value: object,
        value_bytes: bytes | None,
        cluster: ClusterView,
    ) -> int:
        positive = self._next_value(topic) & 0x7FFFFFFF  # toPositive of a wrapping Java int
        available = cluster.available_partitions(topic)
        if available:
            return available[positive % len(available)]
        return positive % _partition_count(topic, cluster)

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        return None

    def close(self) -> None:
        return None


class _StickyStatePy:
    """``StickyPartitionInfo``'s fields, for builds without the accelerator: the attributes (and
    constructor) of ``sparkafka._accel.StickyState``, which the C send lane reads (``_c/_append.h``)."""

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0


class _PartitionerStatePy:
    """The built-in partitioner's current ``StickyPartitionInfo``, for builds without the accelerator:
    the attribute of ``sparkafka._accel.PartitionerState``, which the C send lane reads (``_c/_append.h``)."""

    __slots__ = ("_info",)

    _info: StickyPartitionInfo | None


if TYPE_CHECKING:
    _StickyState = _StickyStatePy
    _PartitionerState = _PartitionerStatePy
else:
    _StickyState = _StickyStatePy if ACCEL is None else ACCEL.StickyState
    _PartitionerState = _PartitionerStatePy if ACCEL is None else ACCEL.PartitionerState


class StickyPartitionInfo(_StickyState):
    """The built-in partitioner's current partition and the bytes produced to it so far (made with the
    partition; ``produced_bytes`` starts at 0)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"StickyPartitionInfo(partition={self.partition}, produced_bytes={self.produced_bytes})"


class BuiltInPartitioner(_PartitionerState):
    """KIP-794 uniform sticky partitioning for one topic (used directly by the accumulator).

    Threading contract (as in Java): ``is_partition_changed`` and ``update_partition_info`` are called
    with the lock of the sticky partition's queue held, so only one thread at a time updates a given
    ``StickyPartitionInfo``; installing the first one races and is settled under a small lock.
    """

    __slots__ = ("_init_lock", "_load_stats", "_random", "double_batch_size", "sticky_batch_size", "topic")

    def __init__(
        self, topic: str, sticky_batch_size: int, random_source: Callable[[], int] | None = None
    ) -> None:
        if sticky_batch_size < 1:
            raise ConfigError(
                f"batch.size used for sticky partitioning must be >= 1, got {sticky_batch_size}", "batch.size"
            )
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        self.double_batch_size = 2 * sticky_batch_size
        """Bytes after which the partition switches even if its batch is not full."""
        self._info: StickyPartitionInfo | None = None
        self._init_lock = threading.Lock()
        self._load_stats: tuple[list[int], list[int], int] | None = None  # (CFT, partition ids, length)
        self._random: Callable[[], int] = random_source or _random31

    # -- partition choice ----------------------------------------------------------------------
    def next_partition(self, cluster: ClusterView) -> int:
        """Draw the next sticky partition (weighted by load stats if there are any)."""
        rnd = self._random()
        stats = self._load_stats
        if stats is None:
            available = cluster.available_partitions(self.topic)
            if available:
                return available[rnd % len(available)]
            return rnd % _partition_count(self.topic, cluster)
        cft, partition_ids, length = stats
        weighted = rnd % cft[length - 1]
        # The CFT is strictly increasing; pick the first entry strictly greater than ``weighted``.
        return partition_ids[bisect.bisect_right(cft, weighted, 0, length)]

    def peek_current_partition_info(self, cluster: ClusterView) -> StickyPartitionInfo:
        """The current sticky partition, choosing the first one if there is none yet."""
        info = self._info
        if info is not None:
            return info
        with self._init_lock:
            if self._info is None:
                self._info = StickyPartitionInfo(self.next_partition(cluster))
            return self._info

    def is_partition_changed(self, info: StickyPartitionInfo | None) -> bool:
        """True if another thread switched partitions since ``info`` was read (call under the queue lock)."""
        return info is not None and self._info is not info

    def update_partition_info(
        self,
        info: StickyPartitionInfo | None,
        appended_bytes: int,
        cluster: ClusterView,
        enable_switch: bool = True,
    ) -> None:
        """Count ``appended_bytes`` and switch partition once enough was produced (call under the queue lock).

        Switches at ``batch.size`` bytes if ``enable_switch`` (the queue's last batch is full), and at
        ``2 * batch.size`` bytes regardless.
        """
        if info is None:
            return
        produced = info.produced_bytes + appended_bytes
        info.produced_bytes = produced
        size = self.sticky_batch_size
        if (produced >= size and enable_switch) or produced >= 2 * size:
            self._info = StickyPartitionInfo(self.next_partition(cluster))

    @property
    def current_partition(self) -> int | None:
        """The current sticky partition, or None before the first keyless record (for tests/metrics)."""
        info = self._info
        return None if info is None else info.partition

    # -- adaptive load stats -------------------------------------------------------------------
    def update_partition_load_stats(
        self, queue_sizes: list[int] | None, partition_ids: Sequence[int] | None, length: int
    ) -> None:
        """Publish load stats from the queue sizes of the partitions with a leader.

        ``queue_sizes``/``partition_ids`` cover every partition that has a leader; ``length`` is the
        logical length after partitions on unresponsive brokers were dropped (may be less). The CFT is
        built in place in ``queue_sizes``. None, fewer than 2 partitions, ``length < 1`` or all-equal
        sizes with nothing dropped mean "no stats" (uniform choice).
        """
        if queue_sizes is None or partition_ids is None or length < 1 or len(queue_sizes) < 2:
            self._load_stats = None
            return
        sizes = queue_sizes if length == len(queue_sizes) else queue_sizes[:length]
        largest = max(sizes)  # builtins, not a Python loop: ready() does this per topic per Sender loop
        if length == len(queue_sizes) and min(sizes) == largest:  # all equal, nothing dropped
            self._load_stats = None
            return
        # Invert (shorter queue -> larger weight: max + 1 - size) and make it a running sum.
        queue_sizes[:length] = itertools.accumulate(map(operator.sub, itertools.repeat(largest + 1, length), sizes))
        self._load_stats = (queue_sizes, list(partition_ids), length)

    def load_stats_range_end(self) -> int | None:
        """The exclusive end of the weighted random range (the last CFT entry), or None without stats."""
        stats = self._load_stats
        return None if stats is None else stats[0][stats[2] - 1]

    @property
    def load_stats(self) -> tuple[list[int], list[int], int] | None:
        """``(cumulative frequency table, partition ids, length)`` or None."""
        return self._load_stats


def _random31() -> int:
    """A uniformly random non-negative 31-bit int (Java's ``toPositive(nextInt())``)."""
    return random.getrandbits(31)
