"""TLS for broker connections: the client ``ssl.SSLContext`` and readable handshake errors.

How it works: ``build_ssl_context(settings)`` returns the user's ``ssl.context`` unchanged (the escape
hatch; a warning is logged if it does not verify certificates or host names) or builds one from the
``ssl.*`` keys: a TLS client context (certificate verification required, minimum TLS 1.2) trusting
``ssl.ca.location`` (a PEM file or a hashed directory) or the system store, with the client certificate
chain and key for mutual TLS (``ssl.key.password`` decrypts the key; an encrypted key without a password
is a ConfigError, never an interactive prompt). ``ssl.endpoint.identification.algorithm=""`` turns the
host-name check off, with a warning. Every file or key problem is a ``ConfigError`` naming the key, raised
when the client is built, before any connection.

``BrokerConnection`` wraps the connected socket with the context (SNI = the broker's host) and runs
the non-blocking handshake; ``handshake_error`` turns what OpenSSL reports into an ``AuthenticationError``
(untrusted certificate, host-name mismatch, an alert from the broker such as a missing client
certificate, a peer that does not speak TLS) or, for a connection that merely dropped, a
``KafkaConnectionError``. ``TLS_ALERT_PREFIXES`` lets a PLAINTEXT connection recognise a TLS listener's
alert and say so instead of failing on a nonsense frame size.
"""

from __future__ import annotations

import logging
import os
import ssl
from typing import Final

from .. import errors
from .security import SecuritySettings

__all__ = ["TLS_ALERT_PREFIXES", "build_ssl_context", "handshake_error", "looks_like_tls_alert"]

log = logging.getLogger("sparkafka.net.tls")

TLS_ALERT_PREFIXES: Final = (b"\x15\x03\x00", b"\x15\x03\x01", b"\x15\x03\x02", b"\x15\x03\x03")
"""A TLS alert record (content type 21, version SSL 3.0 .. TLS 1.2 on the record layer)."""


class _NoKeyPassword(Exception):
    """Raised by the password callback when the key is encrypted and ssl.key.password is unset."""


def looks_like_tls_alert(data: bytes | bytearray | memoryview) -> bool:
    return bytes(data[:3]) in TLS_ALERT_PREFIXES


def build_ssl_context(settings: SecuritySettings) -> ssl.SSLContext:
    """The client context for ``settings`` (see the module docstring); ConfigError on a bad key/file."""
    user = settings.ssl_context
    if user is not None:
        assert isinstance(user, ssl.SSLContext)
        if user.verify_mode == ssl.CERT_NONE:
            log.warning("ssl.context does not verify broker certificates (verify_mode CERT_NONE): "
                        "connections are open to man-in-the-middle attacks")
        elif not user.check_hostname:
            log.warning("ssl.context does not check broker host names (check_hostname is False)")
        return user
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname by default
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_trust(ctx, settings.ssl_ca_location)
    if settings.ssl_certificate_location is not None:
        _load_client_certificate(ctx, settings)
    if settings.ssl_endpoint_identification_algorithm == "":
        ctx.check_hostname = False
        log.warning(
            "ssl.endpoint.identification.algorithm is empty: broker host names are NOT checked against "
            "their certificates, so any holder of a certificate from a trusted CA can impersonate a broker"
        )
    return ctx


def _load_trust(ctx: ssl.SSLContext, location: str | None) -> None:
    key = "ssl.ca.location"
    if location is None:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        return
    if not os.path.exists(location):
        raise errors.ConfigError(f"{key!r}: {location!r} does not exist", key)
    try:
        if os.path.isdir(location):
            ctx.load_verify_locations(capath=location)
        else:
            ctx.load_verify_locations(cafile=location)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise errors.ConfigError(
            f"{key!r}: {location!r} holds no usable PEM CA certificate ({_reason(exc)})", key
        ) from None


def _load_client_certificate(ctx: ssl.SSLContext, settings: SecuritySettings) -> None:
    cert = settings.ssl_certificate_location
    key_file = settings.ssl_key_location
    assert cert is not None
    for name, path in (("ssl.certificate.location", cert), ("ssl.key.location", key_file)):
        if path is not None and not os.path.isfile(path):
            raise errors.ConfigError(f"{name!r}: {path!r} is not a readable file", name)
    password = settings.ssl_key_password

    def provide_password() -> bytes:
        if password is None:
            raise _NoKeyPassword
        return password.encode()

    try:
        ctx.load_cert_chain(cert, key_file, password=provide_password)
    except _NoKeyPassword:
        raise errors.ConfigError(
            "'ssl.key.password' is needed: the private key in "
            f"{key_file or cert!r} is encrypted", "ssl.key.password"
        ) from None
    except ssl.SSLError as exc:
        reason = _reason(exc)
        if "KEY_VALUES_MISMATCH" in reason.upper().replace(" ", "_"):
            raise errors.ConfigError(
                f"'ssl.key.location': the key in {key_file or cert!r} does not belong to the certificate "
                f"in {cert!r}", "ssl.key.location"
            ) from None
        if password is not None:
            raise errors.ConfigError(
                f"'ssl.key.password' does not decrypt the private key in {key_file or cert!r}, or the file "
                f"is not a PEM key ({reason})", "ssl.key.password"
            ) from None
        raise errors.ConfigError(
            f"'ssl.certificate.location' / 'ssl.key.location': cannot load a PEM certificate and key from "
            f"{cert!r} / {key_file!r} ({reason})", "ssl.certificate.location"
        ) from None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        return str(exc.verify_message or exc.reason or exc)
    if isinstance(exc, ssl.SSLError):
        return str(exc.reason or exc.strerror or exc)
    return f"{type(exc).__name__}: {exc}"


def handshake_error(exc: BaseException, node_id: int, host: str, port: int) -> errors.KafkaError:
    """The error for a TLS failure on a connection that was not yet READY."""
    where = f"node {node_id} ({host}:{port})"
    if isinstance(exc, ssl.SSLCertVerificationError):
        message = _reason(exc)
        if "hostname mismatch" in message.lower() or "ip address mismatch" in message.lower():
            hint = (f"the broker's certificate is not valid for {host!r} "
                    "(ssl.endpoint.identification.algorithm=https checks it)")
        elif "self-signed" in message.lower() or "issuer" in message.lower():
            hint = "the broker's certificate is not signed by a trusted CA (ssl.ca.location)"
        elif "expired" in message.lower():
            hint = "the broker's certificate has expired"
        else:
            hint = "the broker's certificate was rejected"
        return errors.AuthenticationError(f"TLS handshake with {where} failed: {message}: {hint}")
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)) or (
        isinstance(exc, OSError) and not isinstance(exc, ssl.SSLError)
    ):
        return errors.KafkaConnectionError(
            f"connection to {where} closed during the TLS handshake ({_reason(exc)}); "
            "is it a TLS listener? (security.protocol)"
        )
    reason = _reason(exc)
    upper = reason.upper().replace(" ", "_")
    if "WRONG_VERSION_NUMBER" in upper or "UNKNOWN_PROTOCOL" in upper or "PACKET_LENGTH_TOO_LONG" in upper:
        hint = "the broker did not answer in TLS: is it a PLAINTEXT or SASL_PLAINTEXT listener? (security.protocol)"
    elif "CERTIFICATE_REQUIRED" in upper or "HANDSHAKE_FAILURE" in upper or "BAD_CERTIFICATE" in upper:
        hint = ("the broker rejected the handshake; if it requires client certificates (mutual TLS) set "
                "ssl.certificate.location and ssl.key.location to a certificate it trusts")
    elif "UNKNOWN_CA" in upper or "CERTIFICATE_UNKNOWN" in upper:  # Kafka's Java TLS sends certificate_unknown
        hint = "the broker does not trust the CA of the client certificate (ssl.certificate.location)"
    elif "PROTOCOL_VERSION" in upper or "UNSUPPORTED_PROTOCOL" in upper:
        hint = "no TLS version in common (sparkafka requires TLS 1.2 or newer)"
    else:
        hint = "check the ssl.* settings against the broker's listener"
    return errors.AuthenticationError(f"TLS with {where} failed: {reason}: {hint}")
