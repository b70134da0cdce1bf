"""kafka-python's error names (``kafka.errors``) for code moved to ``sparkafka.compat.kafka_python``.

How it works: each name is the sparkafka class that plays that part, so
``from sparkafka.compat.kafka_python.errors import KafkaError, KafkaTimeoutError`` catches what the compat
producer raises or puts on a future, as ``kafka.errors`` did for kafka-python. Several kafka-python names
can be the same sparkafka class (``NoBrokersAvailable`` and ``KafkaConnectionError``).
"""

from __future__ import annotations

from sparkafka import errors

__all__ = [
    "AuthenticationFailedError",
    "BrokerResponseError",
    "IllegalStateError",
    "IncompatibleBrokerVersion",
    "InvalidTopicError",
    "KafkaConfigurationError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "MessageSizeTooLargeError",
    "NoBrokersAvailable",
    "NotLeaderForPartitionError",
    "ProducerFencedError",
    "RequestTimedOutError",
    "TopicAuthorizationFailedError",
    "UnknownTopicOrPartitionError",
    "UnsupportedVersionError",
]

KafkaError = errors.KafkaError
KafkaTimeoutError = errors.KafkaTimeoutError
IllegalStateError = errors.IllegalStateError
KafkaConfigurationError = errors.ConfigError
MessageSizeTooLargeError = errors.RecordTooLargeError
"""kafka-python raises it for a record over max_request_size; so does sparkafka (RecordTooLargeError)."""
BrokerResponseError = errors.BrokerError
KafkaConnectionError = errors.KafkaConnectionError
NoBrokersAvailable = errors.KafkaConnectionError
"""kafka-python raises it from the constructor; sparkafka connects lazily and fails sends instead."""
AuthenticationFailedError = errors.AuthenticationError
UnsupportedVersionError = errors.UnsupportedVersionError
IncompatibleBrokerVersion = errors.UnsupportedVersionError
InvalidTopicError = errors.InvalidTopicNameError
ProducerFencedError = errors.ProducerFencedError
TopicAuthorizationFailedError = errors.error_class_for_code(29)
UnknownTopicOrPartitionError = errors.error_class_for_code(3)
NotLeaderForPartitionError = errors.error_class_for_code(6)
RequestTimedOutError = errors.error_class_for_code(7)
