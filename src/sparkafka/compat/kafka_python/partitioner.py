"""kafka-python partitioners on sparkafka's ``Partitioner`` interface.

How it works: ``adapt_partitioner`` looks at the object once. kafka-python's own ``DefaultPartitioner``
and ``StickyPartitioner`` become None: sparkafka's built-in partitioning, which puts keyed records on the
same partition (murmur2 of the serialized key, masked with 0x7fffffff, modulo the partition count) and
keyless ones on KIP-794's sticky partition (kafka-python: a random partition per record, or its sticky
one). Anything else is called as kafka-python calls it, decided from its shape: an object whose
``partition`` takes six arguments ``(topic, key, serialized_key, value, serialized_value, cluster)``
(kafka-python 3's ``Partitioner``), one whose ``partition`` takes three ``(topic, serialized_key,
cluster)`` (its legacy form), or a plain callable ``(serialized_key, all_partitions,
available_partitions)`` (kafka-python 1.x/2.x). ``cluster`` is ``KafkaPythonCluster``: the part of
kafka-python's ``ClusterMetadata`` partitioners read, over sparkafka's metadata snapshot.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from sparkafka._types import ClusterView, TopicPartition
from sparkafka.errors import ConfigError

__all__ = ["KafkaPythonCluster", "KafkaPythonPartitioner", "adapt_partitioner"]

_BUILT_IN = frozenset({("kafka.partitioner.default", "DefaultPartitioner"),
                       ("kafka.partitioner.sticky", "StickyPartitioner")})
"""kafka-python's own partitioners (module, class): murmur2 for keys, as sparkafka's built-in."""


class KafkaPythonCluster:
    """kafka-python's ``ClusterMetadata`` methods a partitioner uses, over a sparkafka snapshot."""

    __slots__ = ("_view",)

    def __init__(self, view: ClusterView) -> None:
        self._view = view

    def topics(self, exclude_internal_topics: bool = True) -> set[str]:
        names = getattr(self._view, "topics", None)
        return set(names) if isinstance(names, (set, frozenset)) else set()

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        count = self._view.partition_count(topic)
        return None if count is None else set(range(count))

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        if self._view.partition_count(topic) is None:
            return None
        return set(self._view.available_partitions(topic))

    def leader_for_partition(self, partition: TopicPartition) -> int | None:
        return self._view.leader_for((partition[0], partition[1]))


def _required_positional(func: Callable[..., Any]) -> int | None:
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    return sum(1 for p in signature.parameters.values()
               if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty)


class KafkaPythonPartitioner:
    """A kafka-python partitioner as a sparkafka ``Partitioner`` (see the module docstring)."""

    __slots__ = ("_call", "_shape", "inner")

    def __init__(self, inner: object) -> None:
        self.inner = inner
        method = getattr(inner, "partition", None)
        if callable(method):
            required = _required_positional(method)
            if required == 3:
                self._shape = "legacy"
            elif required in (6, None):
                self._shape = "partitioner"
            else:
                raise ConfigError(f"partitioner {type(inner).__name__}.partition takes {required} arguments; "
                                  "kafka-python calls partition(topic, key, serialized_key, value, "
                                  "serialized_value, cluster) or partition(topic, serialized_key, cluster)",
                                  "partitioner")
            self._call: Callable[..., Any] = method
        elif callable(inner):
            self._shape = "function"
            self._call = inner
        else:
            raise ConfigError(f"partitioner must be a kafka-python Partitioner or a callable (key_bytes, "
                              f"all_partitions, available_partitions), got {type(inner).__name__}", "partitioner")

    def partition(self, topic: str, key: object, key_bytes: bytes | None, value: object,
                  value_bytes: bytes | None, cluster: ClusterView) -> int:
        shape = self._shape
        if shape == "function":
            count = cluster.partition_count(topic) or 0
            result = self._call(key_bytes, list(range(count)), list(cluster.available_partitions(topic)))
        elif shape == "partitioner":
            result = self._call(topic, key, key_bytes, value, value_bytes, KafkaPythonCluster(cluster))
        else:
            result = self._call(topic, key_bytes, KafkaPythonCluster(cluster))
        if type(result) is not int:
            raise ValueError(f"Partitioner did not assign a partition for topic {topic}! (got {result!r})")
        return result

    def on_new_batch(self, topic: str, cluster: ClusterView, prev_partition: int) -> None:
        return None

    def close(self) -> None:
        return None


def adapt_partitioner(partitioner: object) -> KafkaPythonPartitioner | None:
    """None for kafka-python's built-in partitioners (sparkafka's built-in does the same for keys), else
    the adapter."""
    cls = type(partitioner)
    if (cls.__module__, cls.__name__) in _BUILT_IN:
        return None
    return KafkaPythonPartitioner(partitioner)
