"""Every error sparkafka raises or puts on a future.

How it works: one tree, so callers can catch as broadly or narrowly as they need.
Broker error codes map to classes through ``error_for_code`` (a table of Kafka's
codes with their retriable / invalid-metadata flags, as in Java's ``Errors``).

    KafkaError
    ├── ConfigError                     bad or conflicting configuration (names the key)
    ├── SerializationError              a key/value serializer failed (names topic and field)
    ├── InvalidRecordInputError         bad argument to send() (topic name, partition, headers…)
    │   └── InvalidTopicNameError
    ├── RecordTooLargeError             record bigger than max.request.size / buffer.memory
    ├── ProducerClosedError             send/flush after close()
    ├── IllegalStateError               illegal call for the current state (transactions)
    ├── KafkaTimeoutError               also a TimeoutError
    │   ├── BufferExhaustedError        no memory within max.block.ms
    │   ├── MetadataTimeoutError        topic/partition metadata not available within max.block.ms
    │   └── DeliveryTimeoutError        batch expired at delivery.timeout.ms
    ├── ProtocolError                   the bytes on the wire are wrong
    │   ├── FrameTooLargeError
    │   ├── CorruptRecordBatchError
    │   └── CorrelationIdMismatchError
    ├── KafkaConnectionError            could not connect / connection lost (retriable)
    ├── UnsupportedVersionError         the broker does not support an API version we need
    ├── AuthenticationError             SASL or TLS handshake rejected
    ├── TransactionError                fatal transactional states
    │   └── ProducerFencedError
    └── BrokerError                     an error code returned by a broker (.code, .name, .retriable)
        ├── RetriableBrokerError        (also RetriableError)
        └── … one class per code in ``_CODES``

``RetriableError`` is a mixin marking errors the producer may retry.
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base of every sparkafka error."""

    retriable: ClassVar[bool] = False


class RetriableError(KafkaError):
    """An error after which the same request may succeed if retried."""

    retriable: ClassVar[bool] = True


class ConfigError(KafkaError, ValueError):
    """A configuration key is unknown, has the wrong type, is out of range or conflicts with another."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class SerializationError(KafkaError):
    """A serializer failed for a key or value."""


class InvalidRecordInputError(KafkaError, ValueError):
    """An argument passed to ``send()`` is not acceptable."""


class InvalidTopicNameError(InvalidRecordInputError):
    """The topic name is empty, too long, or has illegal characters."""


class RecordTooLargeError(KafkaError):
    """A single record is larger than ``max.request.size`` or ``buffer.memory``."""


class ProducerClosedError(KafkaError):
    """The producer is closed (or closing) and cannot accept the call."""


class IllegalStateError(KafkaError):
    """The call is not legal in the current state (e.g. commit without begin)."""


class KafkaTimeoutError(KafkaError, TimeoutError):
    """An operation did not complete within its configured time."""


class BufferExhaustedError(KafkaTimeoutError):
    """``buffer.memory`` was exhausted for longer than ``max.block.ms``."""


class MetadataTimeoutError(KafkaTimeoutError):
    """Metadata for a topic or partition was not available within ``max.block.ms``."""


class DeliveryTimeoutError(KafkaTimeoutError):
    """A batch was not acknowledged within ``delivery.timeout.ms``."""


class ProtocolError(KafkaError):
    """The bytes received do not follow the Kafka protocol."""


class FrameTooLargeError(ProtocolError):
    """A response frame declared a size beyond the allowed maximum."""


class CorruptRecordBatchError(ProtocolError):
    """A record batch failed its CRC or could not be decoded."""


class CorrelationIdMismatchError(ProtocolError):
    """A response carried a correlation id that was not the next expected one."""


class KafkaConnectionError(RetriableError):
    """Could not connect to a broker, or the connection was lost."""


class UnsupportedVersionError(KafkaError):
    """The broker supports no version of an API that both sides share."""


class AuthenticationError(KafkaError):
    """Authentication (SASL or TLS) with the broker failed."""


class TransactionError(KafkaError):
    """The transactional producer hit an error it cannot continue after."""


class BrokerError(KafkaError):
    """An error code returned by a broker.

    ``code`` and ``name`` are Kafka's; ``invalid_metadata`` says the client should refresh metadata.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    invalid_metadata: ClassVar[bool] = False

    def __init__(self, message: str | None = None) -> None:
        self.message = message
        text = f"[{self.name} ({self.code})]"
        if message:
            text += f" {message}"
        super().__init__(text)


class RetriableBrokerError(BrokerError, RetriableError):
    """A broker error that may succeed on retry."""

    retriable: ClassVar[bool] = True


class ProducerFencedError(BrokerError, TransactionError):
    """Another producer with the same transactional.id (and a newer epoch) is active."""

    code = 90
    name = "PRODUCER_FENCED"


# code, name, retriable, invalid_metadata  (from Kafka's Errors.java; see docs/DESIGN.md)
_CODES: tuple[tuple[int, str, bool, bool], ...] = (
    (-1, "UNKNOWN_SERVER_ERROR", False, False),
    (1, "OFFSET_OUT_OF_RANGE", False, False),
    (2, "CORRUPT_MESSAGE", True, False),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True),
    (4, "INVALID_FETCH_SIZE", False, False),
    (5, "LEADER_NOT_AVAILABLE", True, True),
    (6, "NOT_LEADER_OR_FOLLOWER", True, True),
    (7, "REQUEST_TIMED_OUT", True, False),
    (8, "BROKER_NOT_AVAILABLE", False, False),
    (9, "REPLICA_NOT_AVAILABLE", True, True),
    (10, "MESSAGE_TOO_LARGE", False, False),
    (12, "OFFSET_METADATA_TOO_LARGE", False, False),
    (13, "NETWORK_EXCEPTION", True, True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, False),
    (15, "COORDINATOR_NOT_AVAILABLE", True, False),
    (16, "NOT_COORDINATOR", True, False),
    (17, "INVALID_TOPIC_EXCEPTION", False, False),
    (18, "RECORD_LIST_TOO_LARGE", False, False),
    (19, "NOT_ENOUGH_REPLICAS", True, False),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, False),
    (21, "INVALID_REQUIRED_ACKS", False, False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, False),
    (30, "GROUP_AUTHORIZATION_FAILED", False, False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, False),
    (32, "INVALID_TIMESTAMP", False, False),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, False),
    (34, "ILLEGAL_SASL_STATE", False, False),
    (35, "UNSUPPORTED_VERSION", False, False),
    (36, "TOPIC_ALREADY_EXISTS", False, False),
    (37, "INVALID_PARTITIONS", False, False),
    (38, "INVALID_REPLICATION_FACTOR", False, False),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, False),
    (40, "INVALID_CONFIG", False, False),
    (41, "NOT_CONTROLLER", True, False),
    (42, "INVALID_REQUEST", False, False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, False),
    (44, "POLICY_VIOLATION", False, False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, False),
    (47, "INVALID_PRODUCER_EPOCH", False, False),
    (48, "INVALID_TXN_STATE", False, False),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, False),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, False),
    (51, "CONCURRENT_TRANSACTIONS", True, False),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, False),
    (54, "SECURITY_DISABLED", False, False),
    (55, "OPERATION_NOT_ATTEMPTED", False, False),
    (56, "KAFKA_STORAGE_ERROR", True, True),
    (57, "LOG_DIR_NOT_FOUND", False, False),
    (58, "SASL_AUTHENTICATION_FAILED", False, False),
    (59, "UNKNOWN_PRODUCER_ID", False, False),
    (60, "REASSIGNMENT_IN_PROGRESS", False, False),
    (67, "INVALID_PRINCIPAL_TYPE", False, False),
    (72, "LISTENER_NOT_FOUND", True, True),
    (74, "FENCED_LEADER_EPOCH", True, True),
    (75, "UNKNOWN_LEADER_EPOCH", True, False),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, False),
    (78, "OFFSET_NOT_AVAILABLE", True, False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, True),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, True),
    (87, "INVALID_RECORD", False, False),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, False),
    (93, "UNACCEPTABLE_CREDENTIAL", False, False),
    (100, "UNKNOWN_TOPIC_ID", True, True),
    (103, "INCONSISTENT_TOPIC_ID", True, True),
    (120, "TRANSACTION_ABORTABLE", False, False),
    (129, "REBOOTSTRAP_REQUIRED", False, False),
)

_BY_CODE: dict[int, type[BrokerError]] = {ProducerFencedError.code: ProducerFencedError}


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Error"


for _code, _name, _retriable, _meta in _CODES:
    _base: type[BrokerError] = RetriableBrokerError if _retriable else BrokerError
    _cls_name = _class_name(_name)
    _existing = globals().get(_cls_name)
    # A hand-written class of the same name (UnsupportedVersionError) stays the public one; the
    # broker code's class derives from it so ``except UnsupportedVersionError`` catches both.
    _bases: tuple[type, ...] = (_base, _existing) if isinstance(_existing, type) else (_base,)
    _cls = type(
        _cls_name,
        _bases,
        {"code": _code, "name": _name, "invalid_metadata": _meta, "__module__": __name__,
         "__doc__": f"Broker error {_name} ({_code})."},
    )
    _BY_CODE[_code] = _cls
    if _existing is None:
        globals()[_cls_name] = _cls


def error_class_for_code(code: int) -> type[BrokerError]:
    """The class for a Kafka error code; unknown codes map to UNKNOWN_SERVER_ERROR's class,
    keeping the code in the message."""
    cls = _BY_CODE.get(code)
    if cls is None:
        return _BY_CODE[-1]
    return cls


def error_for_code(code: int, message: str | None = None) -> BrokerError:
    """An exception instance for a broker error code (``code`` must not be 0)."""
    cls = _BY_CODE.get(code)
    if cls is None:
        text = f"unknown error code {code} from broker" + (f": {message}" if message else "")
        return _BY_CODE[-1](text)
    return cls(message)


def error_name(code: int) -> str:
    """Kafka's name for an error code (``NONE`` for 0)."""
    if code == 0:
        return "NONE"
    cls = _BY_CODE.get(code)
    return cls.name if cls is not None else f"UNKNOWN_CODE_{code}"


# Named aliases for the codes the producer handles by name (typed access for mypy).
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
NETWORK_EXCEPTION = 13
REBOOTSTRAP_REQUIRED = 129
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
UNKNOWN_PRODUCER_ID = 59
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
UNSUPPORTED_VERSION = 35
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
INVALID_PRODUCER_EPOCH = 47
PRODUCER_FENCED = 90
