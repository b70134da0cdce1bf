"""sparkafka: a fast Kafka producer in Python, wire-compatible with real brokers, with a PySpark sink.

``from sparkafka import KafkaProducer`` is the entry point; ``sparkafka.spark`` holds the PySpark data
source; ``sparkafka.errors`` the error tree.
"""

from __future__ import annotations

from . import errors
from ._version import __version__
from .config import ProducerConfig
from .producer.future import FutureRecordMetadata, RecordMetadata
from .producer.producer import KafkaProducer

__all__ = [
    "FutureRecordMetadata",
    "KafkaProducer",
    "ProducerConfig",
    "RecordMetadata",
    "__version__",
    "errors",
]
