"""sparkafka: a fast Kafka producer in Python, wire-compatible with real brokers, with a PySpark sink.

``from sparkafka import KafkaProducer`` is the entry point; ``sparkafka.spark`` holds the PySpark data
source; ``sparkafka.errors`` the error tree.

How it works: the names below are imported on first use (PEP 562 ``__getattr__``), so importing one
layer (``sparkafka.protocol``, ``sparkafka.record``) does not load the producer, its sockets and its
threads (``tests/test_layers.py`` checks it). Only ``errors`` and ``__version__`` are loaded with the
package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import errors
from ._version import __version__

if TYPE_CHECKING:
    from .config import ProducerConfig
    from .producer.arrow.report import ArrowSendResult, DeliveryReport, OffsetRange
    from .producer.future import FailedFuture, FutureRecordMetadata, RecordMetadata
    from .producer.group_metadata import ConsumerGroupMetadata
    from .producer.interceptors import ProducerInterceptor, ProducerRecord
    from .producer.partitioner import Partitioner
    from .producer.producer import KafkaProducer

__all__ = [
    "ArrowSendResult",
    "ConsumerGroupMetadata",
    "DeliveryReport",
    "FailedFuture",
    "FutureRecordMetadata",
    "KafkaProducer",
    "OffsetRange",
    "Partitioner",
    "ProducerConfig",
    "ProducerInterceptor",
    "ProducerRecord",
    "RecordMetadata",
    "__version__",
    "errors",
]

_LAZY: dict[str, str] = {
    "ArrowSendResult": "sparkafka.producer.arrow.report",
    "ConsumerGroupMetadata": "sparkafka.producer.group_metadata",
    "DeliveryReport": "sparkafka.producer.arrow.report",
    "FailedFuture": "sparkafka.producer.future",
    "FutureRecordMetadata": "sparkafka.producer.future",
    "KafkaProducer": "sparkafka.producer.producer",
    "OffsetRange": "sparkafka.producer.arrow.report",
    "Partitioner": "sparkafka.producer.partitioner",
    "ProducerConfig": "sparkafka.config",
    "ProducerInterceptor": "sparkafka.producer.interceptors",
    "ProducerRecord": "sparkafka.producer.interceptors",
    "RecordMetadata": "sparkafka.producer.future",
}

if not TYPE_CHECKING:  # mypy reads the imports above; a module __getattr__ would make every name Any

    def __getattr__(name: str) -> Any:
        module = _LAZY.get(name)
        if module is None:
            raise AttributeError(f"module 'sparkafka' has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(globals()) | set(_LAZY))
