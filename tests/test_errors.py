"""The error tree: every class is declared statically, so ``mypy --strict`` (which checks this module)
accepts each class DESIGN.md promises callers; the broker classes form one table of codes.

How it works: ``_DOCUMENTED`` names each error class DESIGN.md and the README mention by plain
attribute access on ``sparkafka.errors`` (a class created at run time would fail mypy here), and a
test reads both documents so the list cannot fall behind them. The table tests walk every
``BrokerError`` subclass and check it against ``error_for_code``.
"""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import pytest

from sparkafka import errors
from sparkafka.compat.kafka_python import errors as kafka_python_errors
from sparkafka.protocol.messages import ApiKey
from sparkafka.protocol.versions import ApiVersionsTable

_ROOT = Path(__file__).resolve().parents[1]

_DOCUMENTED: tuple[type[errors.KafkaError], ...] = (
    errors.AuthenticationError,
    errors.BrokerError,
    errors.BufferExhaustedError,
    errors.ClusterAuthorizationFailedError,
    errors.CommitFailedError,
    errors.ConfigError,
    errors.DeliveryTimeoutError,
    errors.ExecutorEnvironmentError,
    errors.IllegalStateError,
    errors.InvalidRecordInputError,
    errors.InvalidTopicNameError,
    errors.KafkaError,
    errors.KafkaTimeoutError,
    errors.MetadataTimeoutError,
    errors.ProducerClosedError,
    errors.ProducerFencedError,
    errors.ProtocolError,
    errors.RecordTooLargeError,
    errors.SerializationError,
    errors.TopicAuthorizationFailedError,
    errors.TransactionError,
    errors.TransactionLostError,
    errors.UnsupportedVersionError,
)


_KAFKA_PYTHON_DOCUMENTED = ("BrokerResponseError", "MessageSizeTooLargeError", "InvalidTopicError")
"""Classes of ``sparkafka.compat.kafka_python.errors`` (kafka-python's names) the README names."""


def _subclasses(cls: type[errors.BrokerError]) -> set[type[errors.BrokerError]]:
    found: set[type[errors.BrokerError]] = set()
    for sub in cls.__subclasses__():
        found.add(sub)
        found |= _subclasses(sub)
    return found


def test_every_error_class_the_documents_name_is_declared() -> None:
    named = set()
    for doc in ("docs/DESIGN.md", "README.md"):
        named |= set(re.findall(r"\b([A-Z][A-Za-z]+Error)\b", (_ROOT / doc).read_text()))
    named -= set(dir(builtins))  # Python's own (TypeError, BufferError in the compat sections)
    assert named, "the documents name no error class"
    named = {name for name in named if not hasattr(builtins, name)}  # Python's own (TypeError, BufferError)
    # the kafka-python layer's own classes the compat section names (they exist there, under those names)
    compat = {name for name in _KAFKA_PYTHON_DOCUMENTED if isinstance(getattr(kafka_python_errors, name), type)}
    assert compat == set(_KAFKA_PYTHON_DOCUMENTED)
    assert named <= {cls.__name__ for cls in _DOCUMENTED} | compat


def test_broker_error_classes_carry_their_code() -> None:
    err: errors.TopicAuthorizationFailedError = errors.TopicAuthorizationFailedError("no access to t")
    assert (err.code, err.name, err.retriable) == (29, "TOPIC_AUTHORIZATION_FAILED", False)
    assert str(err) == "[TOPIC_AUTHORIZATION_FAILED (29)] no access to t"
    assert errors.NotLeaderOrFollowerError.retriable and errors.NotLeaderOrFollowerError.invalid_metadata
    assert isinstance(errors.error_for_code(29), errors.TopicAuthorizationFailedError)


def test_one_class_per_code_and_every_class_in_the_table() -> None:
    with_code = {cls for cls in _subclasses(errors.BrokerError) if "code" in vars(cls)}
    by_code = {code: errors.error_class_for_code(code) for code in range(-1, 200)}
    table = {cls for code, cls in by_code.items() if code == cls.code}
    assert with_code == table
    assert len({cls.code for cls in with_code}) == len(with_code)
    assert all(vars(cls)["name"] == errors.error_name(cls.code) for cls in with_code)
    assert all(isinstance(errors.error_for_code(cls.code), cls) for cls in with_code)


def test_unknown_codes_map_to_unknown_server_error_keeping_the_code() -> None:
    err = errors.error_for_code(4242, "from Produce")
    assert type(err) is errors.UnknownServerError
    assert "unknown error code 4242" in str(err) and "from Produce" in str(err)
    assert errors.error_name(4242) == "UNKNOWN_CODE_4242" and errors.error_name(0) == "NONE"


def test_codes_of_apis_this_client_never_sends_are_named() -> None:
    """Codes without a class of their own (consumer groups, fetch sessions, ...) keep Kafka's name in
    ``error_name`` and in the message, and still map to ``UnknownServerError``. Every code from -1 to 129
    has a name (Kafka 4.x's Errors.java)."""
    assert errors.error_name(27) == "REBALANCE_IN_PROGRESS" and errors.error_name(88) == "UNSTABLE_OFFSET_COMMIT"
    err = errors.error_for_code(27, "from TxnOffsetCommit")
    assert type(err) is errors.UnknownServerError
    assert "error code 27 (REBALANCE_IN_PROGRESS)" in str(err) and "from TxnOffsetCommit" in str(err)
    assert not any(errors.error_name(code).startswith("UNKNOWN_CODE_") for code in range(-1, 130))
    assert not set(errors._NAMES_WITHOUT_CLASS) & {errors.error_class_for_code(c).code for c in range(-1, 130)}


def test_one_unsupported_version_error_for_the_broker_code_and_the_client_check() -> None:
    assert errors.error_class_for_code(35) is errors.UnsupportedVersionError
    with pytest.raises(errors.UnsupportedVersionError) as info:
        ApiVersionsTable.from_response({"error_code": 35, "api_keys": []})
    assert type(info.value) is errors.UnsupportedVersionError
    with pytest.raises(errors.UnsupportedVersionError, match="Produce") as info:  # no shared version: before sending
        ApiVersionsTable({int(ApiKey.PRODUCE): (0, 2)}).pick_version(ApiKey.PRODUCE)
    assert type(info.value) is errors.UnsupportedVersionError
    assert len([cls for cls in _subclasses(errors.BrokerError) | {errors.BrokerError}
                if cls.__name__ == "UnsupportedVersionError"]) == 1


def test_named_codes_come_from_the_classes() -> None:
    assert errors.NOT_LEADER_OR_FOLLOWER == errors.NotLeaderOrFollowerError.code == 6
    assert errors.PRODUCER_FENCED == errors.ProducerFencedError.code == 90
    assert errors.INVALID_TOPIC_EXCEPTION == errors.InvalidTopicError.code == 17
