"""confluent-kafka's ``KafkaError`` and ``KafkaException`` for ``sparkafka.compat.confluent``.

How it works: ``KafkaError`` carries librdkafka's error codes as class constants (the same names and
values as ``confluent_kafka.KafkaError``: negative codes are local, positive ones are Kafka's) and the
methods code(), name(), str(), retriable(), fatal(), txn_requires_abort(); it compares equal to its
code. ``KafkaException`` wraps one as ``args[0]``; ``ConfigException`` (a bad config) is also sparkafka's
``ConfigError``. ``from_exception`` turns any error sparkafka puts on a
record or raises into the ``KafkaError`` librdkafka would have reported for it (the table below).
"""

from __future__ import annotations

import builtins
from typing import ClassVar, Final

from sparkafka import errors

__all__ = ["ConfigException", "KafkaError", "KafkaException", "PurgedError", "from_exception"]


class KafkaError:
    """An error or event code, as confluent-kafka's ``KafkaError``."""

    __slots__ = ("_code", "_fatal", "_reason", "_retriable", "_txn_requires_abort")

    _BAD_MSG: Final = -199
    _BAD_COMPRESSION: Final = -198
    _DESTROY: Final = -197
    _FAIL: Final = -196
    _TRANSPORT: Final = -195
    _CRIT_SYS_RESOURCE: Final = -194
    _RESOLVE: Final = -193
    _MSG_TIMED_OUT: Final = -192
    _PARTITION_EOF: Final = -191
    _UNKNOWN_PARTITION: Final = -190
    _FS: Final = -189
    _UNKNOWN_TOPIC: Final = -188
    _ALL_BROKERS_DOWN: Final = -187
    _INVALID_ARG: Final = -186
    _TIMED_OUT: Final = -185
    _QUEUE_FULL: Final = -184
    _ISR_INSUFF: Final = -183
    _NODE_UPDATE: Final = -182
    _SSL: Final = -181
    _WAIT_COORD: Final = -180
    _UNKNOWN_GROUP: Final = -179
    _IN_PROGRESS: Final = -178
    _PREV_IN_PROGRESS: Final = -177
    _EXISTING_SUBSCRIPTION: Final = -176
    _ASSIGN_PARTITIONS: Final = -175
    _REVOKE_PARTITIONS: Final = -174
    _CONFLICT: Final = -173
    _STATE: Final = -172
    _UNKNOWN_PROTOCOL: Final = -171
    _NOT_IMPLEMENTED: Final = -170
    _AUTHENTICATION: Final = -169
    _NO_OFFSET: Final = -168
    _OUTDATED: Final = -167
    _TIMED_OUT_QUEUE: Final = -166
    _UNSUPPORTED_FEATURE: Final = -165
    _WAIT_CACHE: Final = -164
    _INTR: Final = -163
    _KEY_SERIALIZATION: Final = -162
    _VALUE_SERIALIZATION: Final = -161
    _KEY_DESERIALIZATION: Final = -160
    _VALUE_DESERIALIZATION: Final = -159
    _PARTIAL: Final = -158
    _READ_ONLY: Final = -157
    _NOENT: Final = -156
    _UNDERFLOW: Final = -155
    _INVALID_TYPE: Final = -154
    _RETRY: Final = -153
    _PURGE_QUEUE: Final = -152
    _PURGE_INFLIGHT: Final = -151
    _FATAL: Final = -150
    _INCONSISTENT: Final = -149
    _GAPLESS_GUARANTEE: Final = -148
    _MAX_POLL_EXCEEDED: Final = -147
    _UNKNOWN_BROKER: Final = -146
    _NOT_CONFIGURED: Final = -145
    _FENCED: Final = -144
    _APPLICATION: Final = -143
    _ASSIGNMENT_LOST: Final = -142
    _NOOP: Final = -141
    _AUTO_OFFSET_RESET: Final = -140
    _LOG_TRUNCATION: Final = -139
    _INVALID_DIFFERENT_RECORD: Final = -138
    _DESTROY_BROKER: Final = -137
    UNKNOWN: Final = -1
    NO_ERROR: Final = 0
    OFFSET_OUT_OF_RANGE: Final = 1
    INVALID_MSG: Final = 2
    UNKNOWN_TOPIC_OR_PART: Final = 3
    INVALID_MSG_SIZE: Final = 4
    LEADER_NOT_AVAILABLE: Final = 5
    NOT_LEADER_FOR_PARTITION: Final = 6
    REQUEST_TIMED_OUT: Final = 7
    BROKER_NOT_AVAILABLE: Final = 8
    REPLICA_NOT_AVAILABLE: Final = 9
    MSG_SIZE_TOO_LARGE: Final = 10
    STALE_CTRL_EPOCH: Final = 11
    OFFSET_METADATA_TOO_LARGE: Final = 12
    NETWORK_EXCEPTION: Final = 13
    COORDINATOR_LOAD_IN_PROGRESS: Final = 14
    COORDINATOR_NOT_AVAILABLE: Final = 15
    NOT_COORDINATOR: Final = 16
    TOPIC_EXCEPTION: Final = 17
    RECORD_LIST_TOO_LARGE: Final = 18
    NOT_ENOUGH_REPLICAS: Final = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND: Final = 20
    INVALID_REQUIRED_ACKS: Final = 21
    ILLEGAL_GENERATION: Final = 22
    INCONSISTENT_GROUP_PROTOCOL: Final = 23
    INVALID_GROUP_ID: Final = 24
    UNKNOWN_MEMBER_ID: Final = 25
    INVALID_SESSION_TIMEOUT: Final = 26
    REBALANCE_IN_PROGRESS: Final = 27
    INVALID_COMMIT_OFFSET_SIZE: Final = 28
    TOPIC_AUTHORIZATION_FAILED: Final = 29
    GROUP_AUTHORIZATION_FAILED: Final = 30
    CLUSTER_AUTHORIZATION_FAILED: Final = 31
    INVALID_TIMESTAMP: Final = 32
    UNSUPPORTED_SASL_MECHANISM: Final = 33
    ILLEGAL_SASL_STATE: Final = 34
    UNSUPPORTED_VERSION: Final = 35
    TOPIC_ALREADY_EXISTS: Final = 36
    INVALID_PARTITIONS: Final = 37
    INVALID_REPLICATION_FACTOR: Final = 38
    INVALID_REPLICA_ASSIGNMENT: Final = 39
    INVALID_CONFIG: Final = 40
    NOT_CONTROLLER: Final = 41
    INVALID_REQUEST: Final = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT: Final = 43
    POLICY_VIOLATION: Final = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER: Final = 45
    DUPLICATE_SEQUENCE_NUMBER: Final = 46
    INVALID_PRODUCER_EPOCH: Final = 47
    INVALID_TXN_STATE: Final = 48
    INVALID_PRODUCER_ID_MAPPING: Final = 49
    INVALID_TRANSACTION_TIMEOUT: Final = 50
    CONCURRENT_TRANSACTIONS: Final = 51
    TRANSACTION_COORDINATOR_FENCED: Final = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED: Final = 53
    SECURITY_DISABLED: Final = 54
    OPERATION_NOT_ATTEMPTED: Final = 55
    KAFKA_STORAGE_ERROR: Final = 56
    LOG_DIR_NOT_FOUND: Final = 57
    SASL_AUTHENTICATION_FAILED: Final = 58
    UNKNOWN_PRODUCER_ID: Final = 59
    REASSIGNMENT_IN_PROGRESS: Final = 60
    DELEGATION_TOKEN_AUTH_DISABLED: Final = 61
    DELEGATION_TOKEN_NOT_FOUND: Final = 62
    DELEGATION_TOKEN_OWNER_MISMATCH: Final = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: Final = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED: Final = 65
    DELEGATION_TOKEN_EXPIRED: Final = 66
    INVALID_PRINCIPAL_TYPE: Final = 67
    NON_EMPTY_GROUP: Final = 68
    GROUP_ID_NOT_FOUND: Final = 69
    FETCH_SESSION_ID_NOT_FOUND: Final = 70
    INVALID_FETCH_SESSION_EPOCH: Final = 71
    LISTENER_NOT_FOUND: Final = 72
    TOPIC_DELETION_DISABLED: Final = 73
    FENCED_LEADER_EPOCH: Final = 74
    UNKNOWN_LEADER_EPOCH: Final = 75
    UNSUPPORTED_COMPRESSION_TYPE: Final = 76
    STALE_BROKER_EPOCH: Final = 77
    OFFSET_NOT_AVAILABLE: Final = 78
    MEMBER_ID_REQUIRED: Final = 79
    PREFERRED_LEADER_NOT_AVAILABLE: Final = 80
    GROUP_MAX_SIZE_REACHED: Final = 81
    FENCED_INSTANCE_ID: Final = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE: Final = 83
    ELECTION_NOT_NEEDED: Final = 84
    NO_REASSIGNMENT_IN_PROGRESS: Final = 85
    GROUP_SUBSCRIBED_TO_TOPIC: Final = 86
    INVALID_RECORD: Final = 87
    UNSTABLE_OFFSET_COMMIT: Final = 88
    THROTTLING_QUOTA_EXCEEDED: Final = 89
    PRODUCER_FENCED: Final = 90
    RESOURCE_NOT_FOUND: Final = 91
    DUPLICATE_RESOURCE: Final = 92
    UNACCEPTABLE_CREDENTIAL: Final = 93
    INCONSISTENT_VOTER_SET: Final = 94
    INVALID_UPDATE_VERSION: Final = 95
    FEATURE_UPDATE_FAILED: Final = 96
    PRINCIPAL_DESERIALIZATION_FAILURE: Final = 97
    UNKNOWN_TOPIC_ID: Final = 100
    INCONSISTENT_TOPIC_ID: Final = 103
    FENCED_MEMBER_EPOCH: Final = 110
    UNRELEASED_INSTANCE_ID: Final = 111
    UNSUPPORTED_ASSIGNOR: Final = 112
    STALE_MEMBER_EPOCH: Final = 113
    MISMATCHED_ENDPOINT_TYPE: Final = 114
    UNSUPPORTED_ENDPOINT_TYPE: Final = 115
    UNKNOWN_CONTROLLER_ID: Final = 116
    UNKNOWN_SUBSCRIPTION_ID: Final = 117
    TELEMETRY_TOO_LARGE: Final = 118
    INVALID_REGISTRATION: Final = 119
    TRANSACTION_ABORTABLE: Final = 120
    INVALID_RECORD_STATE: Final = 121
    SHARE_SESSION_NOT_FOUND: Final = 122
    INVALID_SHARE_SESSION_EPOCH: Final = 123
    FENCED_STATE_EPOCH: Final = 124
    INVALID_VOTER_KEY: Final = 125
    DUPLICATE_VOTER: Final = 126
    VOTER_NOT_FOUND: Final = 127
    INVALID_REGULAR_EXPRESSION: Final = 128
    REBOOTSTRAP_REQUIRED: Final = 129
    STREAMS_INVALID_TOPOLOGY: Final = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH: Final = 131
    STREAMS_TOPOLOGY_FENCED: Final = 132
    SHARE_SESSION_LIMIT_REACHED: Final = 133

    NAMES: ClassVar[dict[int, str]]
    """code -> librdkafka's name (filled below from the constants)."""

    def __init__(self, error: int, reason: str | None = None, fatal: bool = False, retriable: bool = False,
                 txn_requires_abort: bool = False) -> None:
        if type(error) is not int:
            raise TypeError(f"KafkaError code must be an int, got {type(error).__name__}")
        self._code = error
        self._reason = reason
        self._fatal = bool(fatal)
        self._retriable = bool(retriable)
        self._txn_requires_abort = bool(txn_requires_abort)

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return KafkaError.NAMES.get(self._code, f"ERR_{self._code}?")

    def str(self) -> builtins.str:
        """The reason given, else librdkafka's description of the code."""
        if self._reason:
            return self._reason
        return _DESCRIPTIONS.get(self._code) or (f"Local: {self.name().lstrip('_')}" if self._code < -1
                                                 else f"Broker: {self.name()}")

    def retriable(self) -> bool:
        return self._retriable

    def fatal(self) -> bool:
        return self._fatal

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return other._code == self._code
        if type(other) is int:
            return other == self._code
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __repr__(self) -> builtins.str:
        return f'KafkaError{{code={self.name()},val={self._code},str="{self.str()}"}}'

    __str__ = __repr__


KafkaError.NAMES = {value: name for name, value in vars(KafkaError).items()
                    if type(value) is int and name.lstrip("_").isupper()}

_DESCRIPTIONS: dict[int, str] = {
    KafkaError._DESTROY: "Local: Broker handle destroyed for termination",
    KafkaError._FAIL: "Local: Communication failure with broker",
    KafkaError._TRANSPORT: "Local: Broker transport failure",
    KafkaError._MSG_TIMED_OUT: "Local: Message timed out",
    KafkaError._UNKNOWN_PARTITION: "Local: Unknown partition",
    KafkaError._UNKNOWN_TOPIC: "Local: Unknown topic",
    KafkaError._INVALID_ARG: "Local: Invalid argument or configuration",
    KafkaError._TIMED_OUT: "Local: Timed out",
    KafkaError._QUEUE_FULL: "Local: Queue full",
    KafkaError._SSL: "Local: SSL error",
    KafkaError._STATE: "Local: Erroneous state",
    KafkaError._NOT_IMPLEMENTED: "Local: Not implemented",
    KafkaError._AUTHENTICATION: "Local: Authentication failure",
    KafkaError._UNSUPPORTED_FEATURE: "Local: Required feature not supported by broker",
    KafkaError._PURGE_QUEUE: "Local: Purged in queue",
    KafkaError._PURGE_INFLIGHT: "Local: Purged in flight",
    KafkaError._FATAL: "Local: Fatal error",
    KafkaError._FENCED: "Local: This instance has been fenced by a newer instance",
}


class KafkaException(Exception):
    """confluent-kafka's exception: ``args[0]`` is the ``KafkaError``."""

    def __init__(self, error: KafkaError | int, reason: str | None = None) -> None:
        if type(error) is int:
            error = KafkaError(error, reason)
        super().__init__(error)

    @property
    def error(self) -> KafkaError:
        err = self.args[0]
        assert isinstance(err, KafkaError)
        return err

    def __str__(self) -> str:
        return str(self.args[0])


class ConfigException(KafkaException, errors.ConfigError):
    """A bad config for ``Producer(conf)``: confluent-kafka's ``KafkaException`` with ``_INVALID_ARG`` (so
    ``except KafkaException`` catches it, as it does librdkafka's refusal), and sparkafka's
    ``ConfigError`` (``key`` names the property)."""

    def __init__(self, error: KafkaError | int, reason: str | None = None, key: str | None = None) -> None:
        KafkaException.__init__(self, error, reason)
        self.key = key


class PurgedError(errors.KafkaError):
    """A record removed from the queue by ``Producer.purge()`` before it was sent."""


def from_exception(exc: BaseException, *, fatal: bool | None = None,
                   txn_requires_abort: bool | None = None) -> KafkaError:
    """The ``KafkaError`` librdkafka reports for what sparkafka raised or put on a record; ``fatal`` and
    ``txn_requires_abort`` override what the error class says (the producer's state knows better)."""
    text = str(exc) or type(exc).__name__
    if fatal is None:
        fatal = isinstance(exc, errors.BrokerError) and exc.code in _FATAL_BROKER_CODES
    if txn_requires_abort is None:
        txn_requires_abort = False
    retriable = isinstance(exc, errors.RetriableError)
    if isinstance(exc, errors.BrokerError):
        return KafkaError(exc.code, text, fatal, retriable, txn_requires_abort)
    if isinstance(exc, errors.CommitFailedError) and isinstance(exc.__cause__, errors.BrokerError):
        return KafkaError(exc.__cause__.code, text, fatal, retriable, txn_requires_abort)  # as librdkafka reports it
    for kind, code in _LOCAL_CODES:
        if isinstance(exc, kind):
            return KafkaError(code, text, fatal, retriable, txn_requires_abort)
    return KafkaError(KafkaError._FAIL, f"{type(exc).__name__}: {text}", fatal, False, txn_requires_abort)


_FATAL_BROKER_CODES: Final = frozenset({KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.PRODUCER_FENCED,
                                        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED})
"""Broker errors after which the producer cannot go on (Java's fatal transactional errors)."""

_LOCAL_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (PurgedError, KafkaError._PURGE_QUEUE),
    (errors.DeliveryTimeoutError, KafkaError._MSG_TIMED_OUT),
    (errors.MetadataTimeoutError, KafkaError._MSG_TIMED_OUT),
    (errors.KafkaTimeoutError, KafkaError._TIMED_OUT),
    (errors.RecordTooLargeError, KafkaError.MSG_SIZE_TOO_LARGE),
    (errors.InvalidTopicNameError, KafkaError.TOPIC_EXCEPTION),
    (errors.InvalidRecordInputError, KafkaError._INVALID_ARG),
    (errors.ConfigError, KafkaError._INVALID_ARG),
    (errors.ProducerClosedError, KafkaError._DESTROY),
    (errors.IllegalStateError, KafkaError._STATE),
    (errors.AuthenticationError, KafkaError._AUTHENTICATION),
    (errors.KafkaConnectionError, KafkaError._TRANSPORT),
    (errors.UnsupportedVersionError, KafkaError._UNSUPPORTED_FEATURE),
    (errors.TransactionError, KafkaError._STATE),
)
"""sparkafka's error classes -> librdkafka's local codes, most specific first."""
