"""Every error sparkafka raises or puts on a future.

How it works: one tree, so callers can catch as broadly or narrowly as they need. Every class is
declared here, statically (so a type checker sees each one): below the client's own errors comes one
class per Kafka error code with its name and its retriable / invalid-metadata flags, as Java's
``Errors`` enum (and franz-go's ``kerr``) declares them; ``_BROKER_ERRORS`` lists them once, and
``error_for_code`` / ``error_class_for_code`` look a code up there. The codes the producer handles by
name are module constants taken from those classes (``NOT_LEADER_OR_FOLLOWER``...): plain ints,
cheap to compare per batch.

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
    ├── AuthenticationError             SASL or TLS handshake rejected
    ├── ExecutorEnvironmentError        Spark executors' Python lacks what the sink needs (pyarrow)
    ├── TransactionError                fatal transactional states
    │   ├── ProducerFencedError         (also a BrokerError: PRODUCER_FENCED)
    │   └── TransactionLostError        a prepared transaction the coordinator no longer lets commit
    ├── CommitFailedError               offsets sent to a transaction refused: the group moved on
    └── BrokerError                     an error code returned by a broker (.code, .name, .retriable)
        ├── UnsupportedVersionError     UNSUPPORTED_VERSION, also raised when the broker shares no
        │                               version of an API we need
        ├── RetriableBrokerError        (also RetriableError)
        │   └── … one class per retriable code (NotLeaderOrFollowerError, ...)
        └── … one class per other code (TopicAuthorizationFailedError, ...)

``RetriableError`` is a mixin marking errors the producer may retry.
"""

from __future__ import annotations

from typing import ClassVar


class KafkaError(Exception):
    """Base of every sparkafka error."""

    retriable: ClassVar[bool] = False
    send_partition: int = -1
    """The partition ``send()`` had placed the record in when this error failed it there (no buffer memory
    within max.block.ms, the producer closed): its callback's metadata names it, as Java's, whose
    ``RecordAccumulator.append`` calls ``AppendCallbacks.setPartition`` first. -1 elsewhere."""


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


class AuthenticationError(KafkaError):
    """Authentication (SASL or TLS) with the broker failed."""


class ExecutorEnvironmentError(KafkaError):
    """The Python of a Spark session's executors lacks something the sink cannot do without (pyarrow), or
    could not be asked what it has (``sparkafka.spark.register``)."""


class TransactionError(KafkaError):
    """The transactional producer hit an error it cannot continue after."""


class TransactionLostError(TransactionError):
    """A transaction ended from its handle (``producer.txn_commit``) cannot be committed any more: the
    coordinator aborted it (it outlived ``transaction.timeout.ms``, or the transactional.id was initialized
    again), so its records will never be visible. ``code`` is the coordinator's answer."""

    def __init__(self, message: str, transactional_id: str, code: int) -> None:
        super().__init__(message)
        self.transactional_id = transactional_id
        self.code = code


class CommitFailedError(KafkaError):
    """Offsets sent to a transaction were refused because the consumer group moved on (Java's
    ``CommitFailedException``: UNKNOWN_MEMBER_ID or ILLEGAL_GENERATION); the transaction must be aborted."""


class BrokerError(KafkaError):
    """An error code returned by a broker.

    ``code`` and ``name`` are Kafka's; ``invalid_metadata`` says the client should refresh metadata.
    """

    code: ClassVar[int] = -1
    name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    invalid_metadata: ClassVar[bool] = False

    def __init__(self, message: str | None = None, *, from_broker: bool = True) -> None:
        self.message = message
        text = f"[{self.name} ({self.code})]" if from_broker else ""
        if message:
            text = f"{text} {message}" if text else message
        super().__init__(text)


class RetriableBrokerError(BrokerError, RetriableError):
    """A broker error that may succeed on retry."""

    retriable: ClassVar[bool] = True


class ProducerFencedError(BrokerError, TransactionError):
    """Another producer with the same transactional.id (and a newer epoch) is active."""

    code = 90
    name = "PRODUCER_FENCED"


class UnsupportedVersionError(BrokerError):
    """UNSUPPORTED_VERSION (35): the broker refused a request's version, or the broker and this client
    share no version of an API the producer needs (raised before sending, naming both ranges)."""

    code = 35
    name = "UNSUPPORTED_VERSION"

    def __init__(self, message: str | None = None, *, from_broker: bool = False) -> None:
        # raised by this client more often than answered by a broker: the code is in the text only
        # when a broker sent it (``error_for_code``)
        super().__init__(message, from_broker=from_broker)


# ---------------------------------------------------------------- one class per Kafka error code
# Kafka's Errors.java: code, name, whether a retry may succeed (RetriableBrokerError) and whether the
# client should refresh its metadata (invalid_metadata). ProducerFencedError (90) and
# UnsupportedVersionError (35) are declared above.


class UnknownServerError(BrokerError):
    """UNKNOWN_SERVER_ERROR (-1)."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(BrokerError):
    """OFFSET_OUT_OF_RANGE (1)."""

    code = 1
    name = "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(RetriableBrokerError):
    """CORRUPT_MESSAGE (2)."""

    code = 2
    name = "CORRUPT_MESSAGE"


class UnknownTopicOrPartitionError(RetriableBrokerError):
    """UNKNOWN_TOPIC_OR_PARTITION (3)."""

    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"
    invalid_metadata = True


class InvalidFetchSizeError(BrokerError):
    """INVALID_FETCH_SIZE (4)."""

    code = 4
    name = "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(RetriableBrokerError):
    """LEADER_NOT_AVAILABLE (5)."""

    code = 5
    name = "LEADER_NOT_AVAILABLE"
    invalid_metadata = True


class NotLeaderOrFollowerError(RetriableBrokerError):
    """NOT_LEADER_OR_FOLLOWER (6)."""

    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"
    invalid_metadata = True


class RequestTimedOutError(RetriableBrokerError):
    """REQUEST_TIMED_OUT (7)."""

    code = 7
    name = "REQUEST_TIMED_OUT"


class BrokerNotAvailableError(BrokerError):
    """BROKER_NOT_AVAILABLE (8)."""

    code = 8
    name = "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(RetriableBrokerError):
    """REPLICA_NOT_AVAILABLE (9)."""

    code = 9
    name = "REPLICA_NOT_AVAILABLE"
    invalid_metadata = True


class MessageTooLargeError(BrokerError):
    """MESSAGE_TOO_LARGE (10)."""

    code = 10
    name = "MESSAGE_TOO_LARGE"


class OffsetMetadataTooLargeError(BrokerError):
    """OFFSET_METADATA_TOO_LARGE (12)."""

    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"


class NetworkExceptionError(RetriableBrokerError):
    """NETWORK_EXCEPTION (13)."""

    code = 13
    name = "NETWORK_EXCEPTION"
    invalid_metadata = True


class CoordinatorLoadInProgressError(RetriableBrokerError):
    """COORDINATOR_LOAD_IN_PROGRESS (14)."""

    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"


class CoordinatorNotAvailableError(RetriableBrokerError):
    """COORDINATOR_NOT_AVAILABLE (15)."""

    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"


class NotCoordinatorError(RetriableBrokerError):
    """NOT_COORDINATOR (16)."""

    code = 16
    name = "NOT_COORDINATOR"


class InvalidTopicError(BrokerError):
    """INVALID_TOPIC_EXCEPTION (17)."""

    code = 17
    name = "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(BrokerError):
    """RECORD_LIST_TOO_LARGE (18)."""

    code = 18
    name = "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(RetriableBrokerError):
    """NOT_ENOUGH_REPLICAS (19)."""

    code = 19
    name = "NOT_ENOUGH_REPLICAS"


class NotEnoughReplicasAfterAppendError(RetriableBrokerError):
    """NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)."""

    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"


class InvalidRequiredAcksError(BrokerError):
    """INVALID_REQUIRED_ACKS (21)."""

    code = 21
    name = "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(BrokerError):
    """ILLEGAL_GENERATION (22): the consumer group's generation moved on (TxnOffsetCommit)."""

    code = 22
    name = "ILLEGAL_GENERATION"


class UnknownMemberIdError(BrokerError):
    """UNKNOWN_MEMBER_ID (25): the consumer is no longer a member of the group (TxnOffsetCommit)."""

    code = 25
    name = "UNKNOWN_MEMBER_ID"


class TopicAuthorizationFailedError(BrokerError):
    """TOPIC_AUTHORIZATION_FAILED (29)."""

    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(BrokerError):
    """GROUP_AUTHORIZATION_FAILED (30)."""

    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(BrokerError):
    """CLUSTER_AUTHORIZATION_FAILED (31)."""

    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(BrokerError):
    """INVALID_TIMESTAMP (32)."""

    code = 32
    name = "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(BrokerError):
    """UNSUPPORTED_SASL_MECHANISM (33)."""

    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(BrokerError):
    """ILLEGAL_SASL_STATE (34)."""

    code = 34
    name = "ILLEGAL_SASL_STATE"


class TopicAlreadyExistsError(BrokerError):
    """TOPIC_ALREADY_EXISTS (36)."""

    code = 36
    name = "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(BrokerError):
    """INVALID_PARTITIONS (37)."""

    code = 37
    name = "INVALID_PARTITIONS"


class InvalidReplicationFactorError(BrokerError):
    """INVALID_REPLICATION_FACTOR (38)."""

    code = 38
    name = "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(BrokerError):
    """INVALID_REPLICA_ASSIGNMENT (39)."""

    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(BrokerError):
    """INVALID_CONFIG (40)."""

    code = 40
    name = "INVALID_CONFIG"


class NotControllerError(RetriableBrokerError):
    """NOT_CONTROLLER (41)."""

    code = 41
    name = "NOT_CONTROLLER"


class InvalidRequestError(BrokerError):
    """INVALID_REQUEST (42)."""

    code = 42
    name = "INVALID_REQUEST"


class UnsupportedForMessageFormatError(BrokerError):
    """UNSUPPORTED_FOR_MESSAGE_FORMAT (43)."""

    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(BrokerError):
    """POLICY_VIOLATION (44)."""

    code = 44
    name = "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(BrokerError):
    """OUT_OF_ORDER_SEQUENCE_NUMBER (45)."""

    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(BrokerError):
    """DUPLICATE_SEQUENCE_NUMBER (46)."""

    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(BrokerError):
    """INVALID_PRODUCER_EPOCH (47)."""

    code = 47
    name = "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(BrokerError):
    """INVALID_TXN_STATE (48)."""

    code = 48
    name = "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(BrokerError):
    """INVALID_PRODUCER_ID_MAPPING (49)."""

    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(BrokerError):
    """INVALID_TRANSACTION_TIMEOUT (50)."""

    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(RetriableBrokerError):
    """CONCURRENT_TRANSACTIONS (51)."""

    code = 51
    name = "CONCURRENT_TRANSACTIONS"


class TransactionCoordinatorFencedError(BrokerError):
    """TRANSACTION_COORDINATOR_FENCED (52)."""

    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(BrokerError):
    """TRANSACTIONAL_ID_AUTHORIZATION_FAILED (53)."""

    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(BrokerError):
    """SECURITY_DISABLED (54)."""

    code = 54
    name = "SECURITY_DISABLED"


class OperationNotAttemptedError(BrokerError):
    """OPERATION_NOT_ATTEMPTED (55)."""

    code = 55
    name = "OPERATION_NOT_ATTEMPTED"


class KafkaStorageErrorError(RetriableBrokerError):
    """KAFKA_STORAGE_ERROR (56)."""

    code = 56
    name = "KAFKA_STORAGE_ERROR"
    invalid_metadata = True


class LogDirNotFoundError(BrokerError):
    """LOG_DIR_NOT_FOUND (57)."""

    code = 57
    name = "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(BrokerError):
    """SASL_AUTHENTICATION_FAILED (58)."""

    code = 58
    name = "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(BrokerError):
    """UNKNOWN_PRODUCER_ID (59)."""

    code = 59
    name = "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(BrokerError):
    """REASSIGNMENT_IN_PROGRESS (60)."""

    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"


class InvalidPrincipalTypeError(BrokerError):
    """INVALID_PRINCIPAL_TYPE (67)."""

    code = 67
    name = "INVALID_PRINCIPAL_TYPE"


class ListenerNotFoundError(RetriableBrokerError):
    """LISTENER_NOT_FOUND (72)."""

    code = 72
    name = "LISTENER_NOT_FOUND"
    invalid_metadata = True


class FencedLeaderEpochError(RetriableBrokerError):
    """FENCED_LEADER_EPOCH (74)."""

    code = 74
    name = "FENCED_LEADER_EPOCH"
    invalid_metadata = True


class UnknownLeaderEpochError(RetriableBrokerError):
    """UNKNOWN_LEADER_EPOCH (75)."""

    code = 75
    name = "UNKNOWN_LEADER_EPOCH"


class UnsupportedCompressionTypeError(BrokerError):
    """UNSUPPORTED_COMPRESSION_TYPE (76)."""

    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"


class OffsetNotAvailableError(RetriableBrokerError):
    """OFFSET_NOT_AVAILABLE (78)."""

    code = 78
    name = "OFFSET_NOT_AVAILABLE"


class PreferredLeaderNotAvailableError(RetriableBrokerError):
    """PREFERRED_LEADER_NOT_AVAILABLE (80)."""

    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"
    invalid_metadata = True


class EligibleLeadersNotAvailableError(RetriableBrokerError):
    """ELIGIBLE_LEADERS_NOT_AVAILABLE (83)."""

    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    invalid_metadata = True


class FencedInstanceIdError(BrokerError):
    """FENCED_INSTANCE_ID (82): another consumer with the same group.instance.id joined (TxnOffsetCommit)."""

    code = 82
    name = "FENCED_INSTANCE_ID"


class InvalidRecordError(BrokerError):
    """INVALID_RECORD (87)."""

    code = 87
    name = "INVALID_RECORD"


class ThrottlingQuotaExceededError(RetriableBrokerError):
    """THROTTLING_QUOTA_EXCEEDED (89)."""

    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"


class UnacceptableCredentialError(BrokerError):
    """UNACCEPTABLE_CREDENTIAL (93)."""

    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"


class UnknownTopicIdError(RetriableBrokerError):
    """UNKNOWN_TOPIC_ID (100)."""

    code = 100
    name = "UNKNOWN_TOPIC_ID"
    invalid_metadata = True


class InconsistentTopicIdError(RetriableBrokerError):
    """INCONSISTENT_TOPIC_ID (103)."""

    code = 103
    name = "INCONSISTENT_TOPIC_ID"
    invalid_metadata = True


class TransactionalIdNotFoundError(BrokerError):
    """TRANSACTIONAL_ID_NOT_FOUND (105)."""

    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"


class TransactionAbortableError(BrokerError):
    """TRANSACTION_ABORTABLE (120)."""

    code = 120
    name = "TRANSACTION_ABORTABLE"


class RebootstrapRequiredError(BrokerError):
    """REBOOTSTRAP_REQUIRED (129)."""

    code = 129
    name = "REBOOTSTRAP_REQUIRED"


# Every broker error class, once (tests/test_errors.py checks that no BrokerError subclass with a code is missing).
_BROKER_ERRORS: tuple[type[BrokerError], ...] = (
    UnknownServerError, OffsetOutOfRangeError, CorruptMessageError, UnknownTopicOrPartitionError,
    InvalidFetchSizeError, LeaderNotAvailableError, NotLeaderOrFollowerError, RequestTimedOutError,
    BrokerNotAvailableError, ReplicaNotAvailableError, MessageTooLargeError, OffsetMetadataTooLargeError,
    NetworkExceptionError, CoordinatorLoadInProgressError, CoordinatorNotAvailableError, NotCoordinatorError,
    InvalidTopicError, RecordListTooLargeError, NotEnoughReplicasError, NotEnoughReplicasAfterAppendError,
    InvalidRequiredAcksError, IllegalGenerationError, UnknownMemberIdError, TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    ClusterAuthorizationFailedError, InvalidTimestampError, UnsupportedSaslMechanismError,
    IllegalSaslStateError, UnsupportedVersionError, TopicAlreadyExistsError, InvalidPartitionsError,
    InvalidReplicationFactorError, InvalidReplicaAssignmentError, InvalidConfigError, NotControllerError,
    InvalidRequestError, UnsupportedForMessageFormatError, PolicyViolationError, OutOfOrderSequenceNumberError,
    DuplicateSequenceNumberError, InvalidProducerEpochError, InvalidTxnStateError,
    InvalidProducerIdMappingError, InvalidTransactionTimeoutError, ConcurrentTransactionsError,
    TransactionCoordinatorFencedError, TransactionalIdAuthorizationFailedError, SecurityDisabledError,
    OperationNotAttemptedError, KafkaStorageErrorError, LogDirNotFoundError, SaslAuthenticationFailedError,
    UnknownProducerIdError, ReassignmentInProgressError, InvalidPrincipalTypeError, ListenerNotFoundError,
    FencedLeaderEpochError, UnknownLeaderEpochError, UnsupportedCompressionTypeError, OffsetNotAvailableError,
    PreferredLeaderNotAvailableError, EligibleLeadersNotAvailableError, FencedInstanceIdError, InvalidRecordError,
    ThrottlingQuotaExceededError, ProducerFencedError, UnacceptableCredentialError, UnknownTopicIdError,
    InconsistentTopicIdError, TransactionalIdNotFoundError, TransactionAbortableError, RebootstrapRequiredError,
)
_BY_CODE: dict[int, type[BrokerError]] = {cls.code: cls for cls in _BROKER_ERRORS}


_NAMES_WITHOUT_CLASS: dict[int, str] = {
    11: "STALE_CONTROLLER_EPOCH", 23: "INCONSISTENT_GROUP_PROTOCOL", 24: "INVALID_GROUP_ID",
    26: "INVALID_SESSION_TIMEOUT", 27: "REBALANCE_IN_PROGRESS", 28: "INVALID_COMMIT_OFFSET_SIZE",
    61: "DELEGATION_TOKEN_AUTH_DISABLED", 62: "DELEGATION_TOKEN_NOT_FOUND", 63: "DELEGATION_TOKEN_OWNER_MISMATCH",
    64: "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", 65: "DELEGATION_TOKEN_AUTHORIZATION_FAILED",
    66: "DELEGATION_TOKEN_EXPIRED", 68: "NON_EMPTY_GROUP", 69: "GROUP_ID_NOT_FOUND",
    70: "FETCH_SESSION_ID_NOT_FOUND", 71: "INVALID_FETCH_SESSION_EPOCH", 73: "TOPIC_DELETION_DISABLED",
    77: "STALE_BROKER_EPOCH", 79: "MEMBER_ID_REQUIRED", 81: "GROUP_MAX_SIZE_REACHED", 84: "ELECTION_NOT_NEEDED",
    85: "NO_REASSIGNMENT_IN_PROGRESS", 86: "GROUP_SUBSCRIBED_TO_TOPIC", 88: "UNSTABLE_OFFSET_COMMIT",
    91: "RESOURCE_NOT_FOUND", 92: "DUPLICATE_RESOURCE", 94: "INCONSISTENT_VOTER_SET", 95: "INVALID_UPDATE_VERSION",
    96: "FEATURE_UPDATE_FAILED", 97: "PRINCIPAL_DESERIALIZATION_FAILURE", 98: "SNAPSHOT_NOT_FOUND",
    99: "POSITION_OUT_OF_RANGE", 101: "DUPLICATE_BROKER_REGISTRATION", 102: "BROKER_ID_NOT_REGISTERED",
    104: "INCONSISTENT_CLUSTER_ID", 106: "FETCH_SESSION_TOPIC_ID_ERROR", 107: "INELIGIBLE_REPLICA",
    108: "NEW_LEADER_ELECTED", 109: "OFFSET_MOVED_TO_TIERED_STORAGE", 110: "FENCED_MEMBER_EPOCH",
    111: "UNRELEASED_INSTANCE_ID", 112: "UNSUPPORTED_ASSIGNOR", 113: "STALE_MEMBER_EPOCH",
    114: "MISMATCHED_ENDPOINT_TYPE", 115: "UNSUPPORTED_ENDPOINT_TYPE", 116: "UNKNOWN_CONTROLLER_ID",
    117: "UNKNOWN_SUBSCRIPTION_ID", 118: "TELEMETRY_TOO_LARGE", 119: "INVALID_REGISTRATION",
    121: "INVALID_RECORD_STATE", 122: "SHARE_SESSION_NOT_FOUND", 123: "INVALID_SHARE_SESSION_EPOCH",
    124: "FENCED_STATE_EPOCH", 125: "INVALID_VOTER_KEY", 126: "DUPLICATE_VOTER", 127: "VOTER_NOT_FOUND",
    128: "INVALID_REGULAR_EXPRESSION",
}
"""Kafka's names (``Errors.java``) of the codes that only APIs this client never sends return (consumer groups,
fetch sessions, delegation tokens, the KRaft controller's, share groups): no class of their own, so an answer
with one maps to ``UnknownServerError``, but ``error_name`` and the message name it."""


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
        name = _NAMES_WITHOUT_CLASS.get(code)
        what = f"error code {code} ({name})" if name is not None else f"unknown error code {code}"
        return _BY_CODE[-1](f"{what} from broker" + (f": {message}" if message else ""))
    return cls(message, from_broker=True)


def error_name(code: int) -> str:
    """Kafka's name for an error code (``NONE`` for 0)."""
    if code == 0:
        return "NONE"
    cls = _BY_CODE.get(code)
    if cls is not None:
        return cls.name
    return _NAMES_WITHOUT_CLASS.get(code, f"UNKNOWN_CODE_{code}")


# The codes the producer handles by name, as plain ints (compared per batch; an Enum member read costs
# far more on Python 3.11, see docs/DESIGN.md, Performance notes). Each comes from its class above.
UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code
LEADER_NOT_AVAILABLE = LeaderNotAvailableError.code
NOT_LEADER_OR_FOLLOWER = NotLeaderOrFollowerError.code
REQUEST_TIMED_OUT = RequestTimedOutError.code
MESSAGE_TOO_LARGE = MessageTooLargeError.code
NETWORK_EXCEPTION = NetworkExceptionError.code
COORDINATOR_LOAD_IN_PROGRESS = CoordinatorLoadInProgressError.code
COORDINATOR_NOT_AVAILABLE = CoordinatorNotAvailableError.code
NOT_COORDINATOR = NotCoordinatorError.code
INVALID_TOPIC_EXCEPTION = InvalidTopicError.code
TOPIC_AUTHORIZATION_FAILED = TopicAuthorizationFailedError.code
GROUP_AUTHORIZATION_FAILED = GroupAuthorizationFailedError.code
ILLEGAL_GENERATION = IllegalGenerationError.code
UNKNOWN_MEMBER_ID = UnknownMemberIdError.code
FENCED_INSTANCE_ID = FencedInstanceIdError.code
UNSUPPORTED_FOR_MESSAGE_FORMAT = UnsupportedForMessageFormatError.code
CLUSTER_AUTHORIZATION_FAILED = ClusterAuthorizationFailedError.code
UNSUPPORTED_SASL_MECHANISM = UnsupportedSaslMechanismError.code
UNSUPPORTED_VERSION = UnsupportedVersionError.code
TOPIC_ALREADY_EXISTS = TopicAlreadyExistsError.code
OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumberError.code
DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceNumberError.code
INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code
INVALID_TXN_STATE = InvalidTxnStateError.code
INVALID_PRODUCER_ID_MAPPING = InvalidProducerIdMappingError.code
CONCURRENT_TRANSACTIONS = ConcurrentTransactionsError.code
INVALID_TRANSACTION_TIMEOUT = InvalidTransactionTimeoutError.code
TRANSACTIONAL_ID_NOT_FOUND = TransactionalIdNotFoundError.code
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = TransactionalIdAuthorizationFailedError.code
OPERATION_NOT_ATTEMPTED = OperationNotAttemptedError.code
UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code
PRODUCER_FENCED = ProducerFencedError.code
TRANSACTION_ABORTABLE = TransactionAbortableError.code
REBOOTSTRAP_REQUIRED = RebootstrapRequiredError.code
