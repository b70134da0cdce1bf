"""sparkafka: a fast Kafka producer in Python, wire-compatible with real brokers, with a PySpark sink."""

from __future__ import annotations

__version__ = "0.1.0"
