"""kafka-python's error names (``kafka.errors``) for code moved to ``sparkafka.compat.kafka_python``.

How it works: each name is the sparkafka class that plays that part, so
``from sparkafka.compat.kafka_python.errors import KafkaError, KafkaTimeoutError`` catches what the compat
producer raises or puts on a future, as ``kafka.errors`` did for kafka-python. Several kafka-python names
can be the same sparkafka class (``NoBrokersAvailable`` and ``KafkaConnectionError``). Each broker error
code sparkafka has a class for is exported under kafka-python's name for that code (``NotEnoughReplicasError``
is code 19's class, ``NotLeaderForPartitionError`` code 6's, ...), so they are ``BrokerResponseError``
subclasses as in kafka-python; codes a producer never sees (group, admin, KRaft) are not exported.
Two differ from sparkafka's classes: ``MessageSizeTooLargeError`` is code 10's class and sparkafka's
``RecordTooLargeError`` at once (the compat producer raises it, and fails futures with it, for either);
``IncompatibleBrokerVersion`` is a subclass of ``UnsupportedVersionError`` (as in kafka-python) that
sparkafka does not raise: a broker too old is ``UnsupportedVersionError`` (code 35) itself here.
``as_kafka_python`` turns an error of sparkafka's into the one kafka-python code expects.
"""

from __future__ import annotations

from sparkafka import errors

__all__ = [
    "AuthenticationFailedError",
    "BrokerNotAvailableError",
    "BrokerResponseError",
    "ClusterAuthorizationFailedError",
    "ConcurrentTransactionsError",
    "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError",
    "CorruptRecordError",
    "DuplicateSequenceNumberError",
    "EligibleLeadersNotAvailableError",
    "FencedInstanceIdError",
    "FencedLeaderEpochError",
    "GroupAuthorizationFailedError",
    "IllegalGenerationError",
    "IllegalSaslStateError",
    "IllegalStateError",
    "IncompatibleBrokerVersion",
    "InconsistentTopicIdError",
    "InvalidConfigurationError",
    "InvalidFetchRequestError",
    "InvalidPartitionsError",
    "InvalidPrincipalTypeError",
    "InvalidProducerEpochError",
    "InvalidProducerIdMappingError",
    "InvalidRecordError",
    "InvalidReplicationAssignmentError",
    "InvalidReplicationFactorError",
    "InvalidRequestError",
    "InvalidRequiredAcksError",
    "InvalidTimestampError",
    "InvalidTopicError",
    "InvalidTransactionTimeoutError",
    "InvalidTxnStateError",
    "KafkaConfigurationError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaStorageError",
    "KafkaTimeoutError",
    "LeaderNotAvailableError",
    "ListenerNotFoundError",
    "LogDirNotFoundError",
    "MessageSizeTooLargeError",
    "NetworkExceptionError",
    "NoBrokersAvailable",
    "NotControllerError",
    "NotCoordinatorError",
    "NotEnoughReplicasAfterAppendError",
    "NotEnoughReplicasError",
    "NotLeaderForPartitionError",
    "OffsetMetadataTooLargeError",
    "OffsetNotAvailableError",
    "OffsetOutOfRangeError",
    "OperationNotAttemptedError",
    "OutOfOrderSequenceNumberError",
    "PolicyViolationError",
    "PreferredLeaderNotAvailableError",
    "ProducerFencedError",
    "ReassignmentInProgressError",
    "RecordListTooLargeError",
    "ReplicaNotAvailableError",
    "RequestTimedOutError",
    "RetriableError",
    "SaslAuthenticationFailedError",
    "SecurityDisabledError",
    "ThrottlingQuotaExceededError",
    "TopicAlreadyExistsError",
    "TopicAuthorizationFailedError",
    "TransactionAbortableError",
    "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError",
    "TransactionalIdNotFoundError",
    "UnacceptableCredentialError",
    "UnknownError",
    "UnknownLeaderEpochError",
    "UnknownMemberIdError",
    "UnknownProducerIdError",
    "UnknownTopicIdError",
    "UnknownTopicOrPartitionError",
    "UnsupportedCompressionTypeError",
    "UnsupportedForMessageFormatError",
    "UnsupportedSaslMechanismError",
    "UnsupportedVersionError",
    "as_kafka_python",
]

KafkaError = errors.KafkaError
RetriableError = errors.RetriableError
KafkaTimeoutError = errors.KafkaTimeoutError
IllegalStateError = errors.IllegalStateError
KafkaConfigurationError = errors.ConfigError
BrokerResponseError = errors.BrokerError
KafkaConnectionError = errors.KafkaConnectionError
NoBrokersAvailable = errors.KafkaConnectionError
"""kafka-python raises it from the constructor; sparkafka connects lazily and fails sends instead."""
AuthenticationFailedError = errors.AuthenticationError


class MessageSizeTooLargeError(errors.MessageTooLargeError, errors.RecordTooLargeError):
    """kafka-python's MESSAGE_TOO_LARGE (10), a ``BrokerResponseError``, which it raises for a record over
    max_request_size too: the compat producer raises (or fails a future with) this class for both
    sparkafka's ``RecordTooLargeError`` (local) and ``MessageTooLargeError`` (the broker's)."""


class IncompatibleBrokerVersion(errors.UnsupportedVersionError):
    """kafka-python's broker-too-old error, a subclass of ``UnsupportedVersionError`` as there; sparkafka
    raises ``UnsupportedVersionError`` itself for a broker too old, so catch that (this class is never
    raised; it is here for imports)."""


def as_kafka_python(error: BaseException) -> BaseException:
    """``error`` as kafka-python shows it: a too-large record is ``MessageSizeTooLargeError`` (same text,
    cause and traceback); anything else is returned as is."""
    if isinstance(error, (errors.RecordTooLargeError, errors.MessageTooLargeError)) and not isinstance(
            error, MessageSizeTooLargeError):
        copy = MessageSizeTooLargeError(str(error), from_broker=False)
        copy.__cause__ = error.__cause__
        copy.__traceback__ = error.__traceback__
        return copy
    return error


# one per broker error code (kafka-python's name -> the class for that code)
UnknownError = errors.error_class_for_code(-1)
OffsetOutOfRangeError = errors.error_class_for_code(1)
CorruptRecordError = errors.error_class_for_code(2)
UnknownTopicOrPartitionError = errors.error_class_for_code(3)
InvalidFetchRequestError = errors.error_class_for_code(4)
LeaderNotAvailableError = errors.error_class_for_code(5)
NotLeaderForPartitionError = errors.error_class_for_code(6)
RequestTimedOutError = errors.error_class_for_code(7)
BrokerNotAvailableError = errors.error_class_for_code(8)
ReplicaNotAvailableError = errors.error_class_for_code(9)
OffsetMetadataTooLargeError = errors.error_class_for_code(12)
NetworkExceptionError = errors.error_class_for_code(13)
CoordinatorLoadInProgressError = errors.error_class_for_code(14)
CoordinatorNotAvailableError = errors.error_class_for_code(15)
NotCoordinatorError = errors.error_class_for_code(16)
InvalidTopicError = errors.error_class_for_code(17)
RecordListTooLargeError = errors.error_class_for_code(18)
NotEnoughReplicasError = errors.error_class_for_code(19)
NotEnoughReplicasAfterAppendError = errors.error_class_for_code(20)
InvalidRequiredAcksError = errors.error_class_for_code(21)
IllegalGenerationError = errors.error_class_for_code(22)
UnknownMemberIdError = errors.error_class_for_code(25)
TopicAuthorizationFailedError = errors.error_class_for_code(29)
GroupAuthorizationFailedError = errors.error_class_for_code(30)
ClusterAuthorizationFailedError = errors.error_class_for_code(31)
InvalidTimestampError = errors.error_class_for_code(32)
UnsupportedSaslMechanismError = errors.error_class_for_code(33)
IllegalSaslStateError = errors.error_class_for_code(34)
UnsupportedVersionError = errors.error_class_for_code(35)
TopicAlreadyExistsError = errors.error_class_for_code(36)
InvalidPartitionsError = errors.error_class_for_code(37)
InvalidReplicationFactorError = errors.error_class_for_code(38)
InvalidReplicationAssignmentError = errors.error_class_for_code(39)
InvalidConfigurationError = errors.error_class_for_code(40)
NotControllerError = errors.error_class_for_code(41)
InvalidRequestError = errors.error_class_for_code(42)
UnsupportedForMessageFormatError = errors.error_class_for_code(43)
PolicyViolationError = errors.error_class_for_code(44)
OutOfOrderSequenceNumberError = errors.error_class_for_code(45)
DuplicateSequenceNumberError = errors.error_class_for_code(46)
InvalidProducerEpochError = errors.error_class_for_code(47)
InvalidTxnStateError = errors.error_class_for_code(48)
InvalidProducerIdMappingError = errors.error_class_for_code(49)
InvalidTransactionTimeoutError = errors.error_class_for_code(50)
ConcurrentTransactionsError = errors.error_class_for_code(51)
TransactionCoordinatorFencedError = errors.error_class_for_code(52)
TransactionalIdAuthorizationFailedError = errors.error_class_for_code(53)
SecurityDisabledError = errors.error_class_for_code(54)
OperationNotAttemptedError = errors.error_class_for_code(55)
KafkaStorageError = errors.error_class_for_code(56)
LogDirNotFoundError = errors.error_class_for_code(57)
SaslAuthenticationFailedError = errors.error_class_for_code(58)
UnknownProducerIdError = errors.error_class_for_code(59)
ReassignmentInProgressError = errors.error_class_for_code(60)
InvalidPrincipalTypeError = errors.error_class_for_code(67)
ListenerNotFoundError = errors.error_class_for_code(72)
FencedLeaderEpochError = errors.error_class_for_code(74)
UnknownLeaderEpochError = errors.error_class_for_code(75)
UnsupportedCompressionTypeError = errors.error_class_for_code(76)
OffsetNotAvailableError = errors.error_class_for_code(78)
PreferredLeaderNotAvailableError = errors.error_class_for_code(80)
FencedInstanceIdError = errors.error_class_for_code(82)
EligibleLeadersNotAvailableError = errors.error_class_for_code(83)
InvalidRecordError = errors.error_class_for_code(87)
ThrottlingQuotaExceededError = errors.error_class_for_code(89)
ProducerFencedError = errors.error_class_for_code(90)
UnacceptableCredentialError = errors.error_class_for_code(93)
UnknownTopicIdError = errors.error_class_for_code(100)
InconsistentTopicIdError = errors.error_class_for_code(103)
TransactionalIdNotFoundError = errors.error_class_for_code(105)
TransactionAbortableError = errors.error_class_for_code(120)
