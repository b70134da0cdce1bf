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


def test_network_settings_reach_the_network_client() -> None:
    settings = {"request.timeout.ms": 12_345, "reconnect.backoff.ms": 77, "reconnect.backoff.max.ms": 777,
                "socket.connection.setup.timeout.ms": 4_321, "socket.connection.setup.timeout.max.ms": 54_321,
                "max.in.flight.requests.per.connection": 3, "send.buffer.bytes": 65_536,
                "receive.buffer.bytes": 65_537, "connections.max.idle.ms": 98_765}
    producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", **settings})
    try:
        client = producer._client
        assert (client.request_timeout_ms, client.reconnect_backoff_ms, client.reconnect_backoff_max_ms) \
            == (12_345, 77, 777)
        assert (client._setup_backoff._initial, client._setup_backoff._max) == (4_321, 54_321)
        assert client.max_in_flight == 3
        assert (client.send_buffer_bytes, client.receive_buffer_bytes) == (65_536, 65_537)
        assert client.connections_max_idle_ms == 98_765  # was never passed: always 540,000
    finally:
        producer.close(0)
