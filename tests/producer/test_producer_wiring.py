"""Config values reach the component that acts on them (KafkaProducer builds its parts from the config)."""

from __future__ import annotations

from sparkafka.producer.producer import KafkaProducer


def test_metadata_recovery_settings_reach_metadata() -> None:
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "metadata.recovery.strategy": "none",
                              "metadata.recovery.rebootstrap.trigger.ms": 1234})
    try:
        assert producer._metadata.recovery_strategy == "none"
        assert producer._metadata.rebootstrap_trigger_ms == 1234
    finally:
        producer.close(0)


def test_metadata_recovery_defaults_to_rebootstrap() -> None:
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1"})
    try:
        assert producer._metadata.recovery_strategy == "rebootstrap"
        assert producer._metadata.rebootstrap_trigger_ms == 300_000
    finally:
        producer.close(0)
