"""Kafka's topic-name rule, in one place (Java ``org.apache.kafka.common.internals.Topic.validate``).

How it works: ``validate_topic_name`` returns a legal name unchanged and raises ``InvalidTopicNameError``
naming the rule it breaks: a str, not empty, not ``.`` or ``..``, at most 249 characters, only ASCII
letters, digits, ``.``, ``_`` and ``-`` (checked with ``fullmatch``: ``$`` would accept a trailing
newline). ``send()``, ``send_arrow()`` (per topic, naming the column or option it came from) and the
metadata wait all call it.
"""

from __future__ import annotations

import re

from sparkafka.errors import InvalidTopicNameError

__all__ = ["MAX_TOPIC_NAME_LENGTH", "validate_topic_name"]

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_CHARACTERS = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(topic: object, where: str | None = None) -> str:
    """``topic`` if it is a legal topic name, else ``InvalidTopicNameError`` (``where`` says where the
    name came from, e.g. "column 'topic'")."""
    if not isinstance(topic, str):
        raise InvalidTopicNameError(f"topic must be a str, got {type(topic).__name__}" + _in(where))
    if not topic:
        problem = "it is empty"
    elif topic in (".", ".."):
        problem = "it cannot be '.' or '..'"
    elif len(topic) > MAX_TOPIC_NAME_LENGTH:
        problem = f"it is {len(topic)} characters long; the limit is {MAX_TOPIC_NAME_LENGTH}"
    elif _LEGAL_CHARACTERS.fullmatch(topic) is None:
        problem = "it has illegal characters; only ASCII letters, digits, '.', '_' and '-' are allowed"
    else:
        return topic
    raise InvalidTopicNameError(f"invalid topic name {topic!r}{_in(where)}: {problem}")


def _in(where: str | None) -> str:
    return f" in {where}" if where else ""
