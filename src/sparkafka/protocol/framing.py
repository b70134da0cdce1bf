"""Request/response framing and a sans-I/O per-connection protocol state machine.

How it works: on the wire every message is ``int32 size`` + header + body. Request header v1 is
``api_key int16, api_version int16, correlation_id int32, client_id`` (a nullable string that keeps
its int16 length even in v2); v2 adds an empty tagged-field section. Response header v0 is the
correlation id; v1 adds a tagged-field section. A flexible API version uses request header v2 and
response header v1, except that ApiVersions responses always carry header v0 (so a client can read
the answer of a broker that does not know the requested version).

``KafkaProtocol`` does no I/O: ``send_request`` turns a request into frame bytes for the caller to
write and remembers ``(correlation_id, api_key, api_version)`` in a FIFO of in-flight requests;
``receive_data`` takes whatever bytes the socket produced, buffers partial frames, and returns the
decoded ``Response``s of the complete frames. Kafka answers in order on a connection, so the
correlation id of each response must match the oldest in-flight request. Every error
(``FrameTooLargeError``, ``CorrelationIdMismatchError``, ``ProtocolError`` for an undecodable body)
means the connection is unusable: the state machine keeps raising it, and the in-flight requests
whose responses were decoded in the failing call are put back, so ``reset()`` hands every request
without a delivered response to the caller to fail or retry.

ApiVersions special case: if the body does not parse at the requested version, or parses but
carries UNSUPPORTED_VERSION, it is re-parsed as v0 (a broker that does not know the requested
version answers with a v0 body); ``Response.api_version`` is then 0.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any, NamedTuple

from sparkafka.errors import (
    UNSUPPORTED_VERSION,
    CorrelationIdMismatchError,
    FrameTooLargeError,
    KafkaError,
    ProtocolError,
    UnsupportedVersionError,
)
from sparkafka.protocol.messages import API_BY_KEY, ApiKey, ApiSpec
from sparkafka.protocol.primitives import INT16, INT32, MAX_STRING_BYTES, Buffer, Reader
from sparkafka.protocol.produce import decode_produce_response
from sparkafka.protocol.schema import Body

DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

_REQ_FIXED = struct.Struct(">hhi")
_PRODUCE = int(ApiKey.PRODUCE)


class InFlight(NamedTuple):
    """A request waiting for its response."""

    correlation_id: int
    api_key: int
    api_version: int


class Response(NamedTuple):
    """A decoded response."""

    correlation_id: int
    api_key: int
    api_version: int
    body: dict[str, Any]


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def _spec(api_key: int) -> ApiSpec:
    spec = API_BY_KEY.get(api_key)
    if spec is None:
        raise UnsupportedVersionError(f"api key {api_key} is not known to this client")
    return spec


def request_header_version(api_key: int, api_version: int) -> int:
    """2 for a flexible API version, else 1."""
    return 2 if _spec(api_key).is_flexible(api_version) else 1


_API_VERSIONS = ApiKey.API_VERSIONS  # a module constant (docs/DESIGN.md, Performance notes)


def response_header_version(api_key: int, api_version: int) -> int:
    """1 for a flexible API version, else 0; always 0 for ApiVersions."""
    if api_key == _API_VERSIONS:
        return 0
    return 1 if _spec(api_key).is_flexible(api_version) else 0


def _client_id_bytes(client_id: str | None) -> bytes:
    if client_id is None:
        return b"\xff\xff"
    data = client_id.encode()
    if len(data) > MAX_STRING_BYTES:
        raise ProtocolError(
            f"client_id: {len(data)} UTF-8 bytes exceed the int16 length limit {MAX_STRING_BYTES}"
        )
    return INT16.pack(len(data)) + data


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None
) -> bytes:
    """The request header (v1 or v2, chosen from the API version)."""
    try:
        fixed = _REQ_FIXED.pack(api_key, api_version, correlation_id)
    except struct.error:
        raise ProtocolError(
            f"request header: api_key {api_key} / api_version {api_version} must fit int16, "
            f"correlation_id {correlation_id} int32"
        ) from None
    tail = b"\x00" if request_header_version(api_key, api_version) == 2 else b""
    return fixed + _client_id_bytes(client_id) + tail


def decode_request_header(data: Buffer) -> tuple[RequestHeader, int]:
    """Parse a request header (v1/v2 decided from the API key and version); returns it and the body offset."""
    r = Reader(data)
    api_key = r.int16("request header api_key")
    api_version = r.int16("request header api_version")
    correlation_id = r.int32("request header correlation_id")
    client_id = r.nullable_string("request header client_id")
    if request_header_version(api_key, api_version) == 2:
        r.skip_tagged_fields("request header tagged fields")
    return RequestHeader(api_key, api_version, correlation_id, client_id), r.pos


def encode_response_header(api_key: int, api_version: int, correlation_id: int) -> bytes:
    head = INT32.pack(correlation_id)
    return head + b"\x00" if response_header_version(api_key, api_version) == 1 else head


def decode_response_header(api_key: int, api_version: int, data: Buffer) -> tuple[int, int]:
    """Parse a response header; returns ``(correlation_id, body_offset)``."""
    r = Reader(data)
    correlation_id = r.int32("response header correlation_id")
    if response_header_version(api_key, api_version) == 1:
        r.skip_tagged_fields("response header tagged fields")
    return correlation_id, r.pos


def encode_request_frame(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: Buffer
) -> bytes:
    """``int32 size`` + request header + body."""
    header = encode_request_header(api_key, api_version, correlation_id, client_id)
    return b"".join((INT32.pack(len(header) + len(body)), header, body))


def encode_response_frame(api_key: int, api_version: int, correlation_id: int, body: Buffer) -> bytes:
    """``int32 size`` + response header + body (for tests and fake brokers)."""
    header = encode_response_header(api_key, api_version, correlation_id)
    return b"".join((INT32.pack(len(header) + len(body)), header, body))


def decode_response_body(api_key: int, api_version: int, payload: Buffer) -> tuple[int, dict[str, Any]]:
    """Decode a response body; returns ``(version actually used, body)``.

    Applies the ApiVersions v0 fallback. Produce responses go through the hand-written decoder
    (``protocol.produce``) when it takes them (same result as the generic codec)."""
    if api_key == _PRODUCE:
        fast = decode_produce_response(api_version, payload)
        if fast is not None:
            return api_version, fast
    spec = _spec(api_key)
    try:
        body = spec.decode_response(api_version, payload)
    except ProtocolError as e:
        if api_key == ApiKey.API_VERSIONS and api_version != 0:
            try:
                return 0, spec.decode_response(0, payload)
            except ProtocolError:
                pass
        raise ProtocolError(f"cannot decode {spec.name} v{api_version} response: {e}") from None
    if api_key == ApiKey.API_VERSIONS and api_version != 0 and body.get("error_code") == UNSUPPORTED_VERSION:
        try:
            return 0, spec.decode_response(0, payload)
        except ProtocolError:
            pass
    return api_version, body


class KafkaProtocol:
    """Sans-I/O state of one broker connection: correlation ids, in-flight requests, frame reassembly."""

    __slots__ = (
        "_buf",
        "_client_id",
        "_client_id_bytes",
        "_error",
        "_in_flight",
        "_next_correlation_id",
        "_unanswered",
        "max_frame_size",
    )

    def __init__(self, client_id: str | None, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size <= 0:
            raise ProtocolError(f"max_frame_size must be positive, got {max_frame_size}")
        self._client_id = client_id
        self._client_id_bytes = _client_id_bytes(client_id)
        self.max_frame_size = max_frame_size
        self._next_correlation_id = 0
        self._in_flight: deque[InFlight] = deque()
        self._buf = bytearray()
        self._error: KafkaError | None = None
        # Correlation ids of requests sent with expect_response=False (acks=0 Produce). Kafka never
        # answers them; some brokers (Tansu) do, and such an answer is skipped, not a protocol error.
        self._unanswered: deque[int] = deque(maxlen=1024)

    @property
    def client_id(self) -> str | None:
        return self._client_id

    # ---- sending

    def send_request(
        self, api_key: int, version: int, body: Body | Buffer | tuple[Buffer, ...], expect_response: bool = True
    ) -> tuple[int, bytes]:
        """Encode a request frame; returns ``(correlation_id, frame bytes)``.

        ``body`` is a dict for the schema codec, or already-encoded body bytes used as-is, or a tuple of
        such pieces (the producer's hand-built Produce body) joined in order. With
        ``expect_response=False`` (Produce with acks=0) the request is not tracked, since the broker will
        not answer it.
        """
        correlation_id, pieces, _ = self.send_request_parts(api_key, version, body, expect_response)
        return correlation_id, b"".join(pieces)

    def send_request_parts(
        self, api_key: int, version: int, body: Body | Buffer | tuple[Buffer, ...], expect_response: bool = True
    ) -> tuple[int, list[Buffer], int]:
        """``send_request`` without the final join: ``(correlation_id, pieces, frame size)``; the first
        piece is the size prefix and header, the others are the body's pieces, not copied. A caller that
        queues the pieces must copy whatever it keeps beyond the lifetime of the body's buffers."""
        spec = _spec(api_key)
        spec.check_version(version)
        pieces: list[Buffer] = [b""]
        if isinstance(body, tuple):
            pieces += body
        elif isinstance(body, (bytes, bytearray, memoryview)):
            pieces.append(body)
        else:
            pieces.append(spec.encode_request(version, body))
        correlation_id = self._next_correlation_id
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF
        header = _REQ_FIXED.pack(api_key, version, correlation_id) + self._client_id_bytes
        if spec.is_flexible(version):
            header += b"\x00"
        size = len(header)
        for piece in pieces:
            size += piece.nbytes if isinstance(piece, memoryview) else len(piece)
        pieces[0] = INT32.pack(size) + header
        if expect_response:
            self._in_flight.append(InFlight(correlation_id, api_key, version))
        else:
            self._unanswered.append(correlation_id)
        return correlation_id, pieces, size + 4

    # ---- receiving

    def receive_data(self, data: Buffer) -> list[Response]:
        """Feed received bytes; returns the responses of every frame completed so far, in order."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        buf += data
        responses: list[Response] = []
        popped: list[InFlight] = []
        pos = 0
        end = len(buf)
        try:
            while end - pos >= 4:
                size = INT32.unpack_from(buf, pos)[0]
                if size < 0 or size > self.max_frame_size:
                    raise FrameTooLargeError(
                        f"response frame size {size} is outside [0, {self.max_frame_size}] (max_frame_size)"
                    )
                if end - pos - 4 < size:
                    break
                frame = buf[pos + 4 : pos + 4 + size]
                pos += 4 + size
                if self._unanswered and len(frame) >= 4 and self._is_unanswered(INT32.unpack_from(frame, 0)[0]):
                    continue
                responses.append(self._handle_frame(frame, popped))
        except KafkaError as e:
            self._in_flight.extendleft(reversed(popped))
            self._error = e
            raise
        if pos:
            del buf[:pos]
        return responses

    def _is_unanswered(self, correlation_id: int) -> bool:
        """True (and forgets it) if the id belongs to a request sent without expecting a response."""
        if self._in_flight and self._in_flight[0].correlation_id == correlation_id:
            return False
        try:
            self._unanswered.remove(correlation_id)
        except ValueError:
            return False
        return True

    def _handle_frame(self, frame: bytearray, popped: list[InFlight]) -> Response:
        if len(frame) < 4:
            raise ProtocolError(f"response frame of {len(frame)} byte(s) is too short for a correlation id")
        correlation_id = INT32.unpack_from(frame, 0)[0]
        if not self._in_flight:
            raise CorrelationIdMismatchError(
                f"received a response with correlation id {correlation_id} but no request is in flight"
            )
        expected = self._in_flight[0]
        if correlation_id != expected.correlation_id:
            raise CorrelationIdMismatchError(
                f"response correlation id {correlation_id} does not match the oldest in-flight request "
                f"({_spec(expected.api_key).name} v{expected.api_version}, "
                f"correlation id {expected.correlation_id})"
            )
        offset = 4
        if response_header_version(expected.api_key, expected.api_version) == 1:
            if len(frame) > 4 and frame[4] == 0:
                offset = 5  # the usual empty tagged-field section
            else:
                r = Reader(frame, 4)
                r.skip_tagged_fields("response header tagged fields")
                offset = r.pos
        version, body = decode_response_body(
            expected.api_key, expected.api_version, memoryview(frame)[offset:]
        )
        popped.append(self._in_flight.popleft())
        return Response(correlation_id, expected.api_key, version, body)

    # ---- state

    def in_flight_count(self) -> int:
        return len(self._in_flight)

    @property
    def pending(self) -> tuple[InFlight, ...]:
        """In-flight requests, oldest first (the caller tracks their send times for timeouts)."""
        return tuple(self._in_flight)

    def oldest_pending(self) -> InFlight | None:
        return self._in_flight[0] if self._in_flight else None

    def buffered_bytes(self) -> int:
        """Bytes of a partial frame waiting for the rest."""
        return len(self._buf)

    @property
    def error(self) -> KafkaError | None:
        """The error that broke this connection, if any."""
        return self._error

    def reset(self) -> list[InFlight]:
        """Forget buffered bytes, errors and in-flight requests (on disconnect); returns the requests
        that will never get a response, oldest first."""
        pending = list(self._in_flight)
        self._in_flight.clear()
        self._buf.clear()
        self._error = None
        return pending
