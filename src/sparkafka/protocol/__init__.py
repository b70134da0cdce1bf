"""The Kafka wire protocol, sans I/O: primitives, a table-driven message codec, framing and versions.

How it works: ``primitives`` reads/writes the basic encodings; ``schema`` compiles a ``Schema`` (one
definition for all versions of a message, like Kafka's JSON specs) into cached per-version
encoder/decoder closures; ``messages`` defines the APIs the producer needs; ``framing`` adds headers,
size prefixes and the per-connection ``KafkaProtocol`` state machine; ``versions`` negotiates API
versions; ``produce`` is the fast hand-written Produce request encoder. Nothing here does I/O or
reads the clock.
"""

from __future__ import annotations

from sparkafka.protocol.framing import (
    InFlight,
    KafkaProtocol,
    Response,
    encode_request_frame,
    request_header_version,
    response_header_version,
)
from sparkafka.protocol.messages import API_BY_KEY, CLIENT_VERSIONS, ApiKey, ApiSpec
from sparkafka.protocol.produce import encode_produce_request
from sparkafka.protocol.schema import ArrayOf, Field, Schema
from sparkafka.protocol.versions import ApiVersionsTable

__all__ = [
    "API_BY_KEY",
    "CLIENT_VERSIONS",
    "ApiKey",
    "ApiSpec",
    "ApiVersionsTable",
    "ArrayOf",
    "Field",
    "InFlight",
    "KafkaProtocol",
    "Response",
    "Schema",
    "encode_produce_request",
    "encode_request_frame",
    "request_header_version",
    "response_header_version",
]
