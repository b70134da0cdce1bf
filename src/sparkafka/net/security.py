"""``SecuritySettings``: what the network layer needs to know about TLS and SASL, secrets kept hidden.

How it works: ``resolve_security(source)`` turns whatever the caller has into one validated
``SecuritySettings``: ``None`` (PLAINTEXT), a ``ProducerConfig`` or any object with the same attribute
names (``security_protocol``, ``ssl_ca_location``, ``sasl_password``, ...), a mapping of Java key names
(``{"security.protocol": "SASL_SSL", ...}``, validated through ``ProducerConfig``'s table), or a
``SecuritySettings`` itself. The password, the key password and the OAUTHBEARER token provider live in
private slots; ``repr``/``str`` print ``[hidden]`` for them and the object refuses to be pickled, so a
settings object in a log line, a traceback or an error message shows no secret. ``net.tls`` builds the
``ssl.SSLContext`` from these settings and ``net.sasl`` the SASL handshake step.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from .. import errors

__all__ = ["PROTOCOLS", "SASL_MECHANISMS", "SecuritySettings", "resolve_security"]

PROTOCOLS: Final = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS: Final = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
HIDDEN: Final = "[hidden]"


class SecuritySettings:
    """Validated security settings of one client (immutable by convention; secrets never printed)."""

    __slots__ = (
        "_sasl_password",
        "_ssl_key_password",
        "_token_provider",
        "protocol",
        "sasl_mechanism",
        "sasl_username",
        "ssl_ca_location",
        "ssl_certificate_location",
        "ssl_context",
        "ssl_endpoint_identification_algorithm",
        "ssl_key_location",
    )

    def __init__(
        self,
        protocol: str = "PLAINTEXT",
        *,
        ssl_ca_location: str | None = None,
        ssl_certificate_location: str | None = None,
        ssl_key_location: str | None = None,
        ssl_key_password: str | None = None,
        ssl_endpoint_identification_algorithm: str = "https",
        ssl_context: Any = None,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl_oauthbearer_token_provider: Callable[..., Any] | None = None,
    ) -> None:
        protocol = str(protocol or "PLAINTEXT").strip().upper()
        if protocol not in PROTOCOLS:
            raise errors.ConfigError(
                f"'security.protocol' must be one of {', '.join(PROTOCOLS)}; got {protocol!r}",
                "security.protocol",
            )
        algorithm = (ssl_endpoint_identification_algorithm or "").strip().lower()
        if algorithm not in ("https", ""):
            raise errors.ConfigError(
                "'ssl.endpoint.identification.algorithm' must be 'https' or '' (off); "
                f"got {ssl_endpoint_identification_algorithm!r}",
                "ssl.endpoint.identification.algorithm",
            )
        self.protocol = protocol
        self.ssl_ca_location = ssl_ca_location
        self.ssl_certificate_location = ssl_certificate_location
        self.ssl_key_location = ssl_key_location
        self._ssl_key_password = ssl_key_password
        self.ssl_endpoint_identification_algorithm = algorithm
        self.ssl_context = ssl_context
        self.sasl_mechanism = (sasl_mechanism or "").strip().upper() or None
        self.sasl_username = sasl_username
        self._sasl_password = sasl_password
        self._token_provider = sasl_oauthbearer_token_provider
        self._validate()

    # ------------------------------------------------------------------ queries
    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def ssl_key_password(self) -> str | None:
        return self._ssl_key_password

    @property
    def sasl_password(self) -> str | None:
        return self._sasl_password

    @property
    def token_provider(self) -> Callable[..., Any] | None:
        return self._token_provider

    def secrets(self) -> tuple[str, ...]:
        """The secret strings (for scrubbing text that might echo them); empty ones left out."""
        return tuple(s for s in (self._sasl_password, self._ssl_key_password) if s)

    # ------------------------------------------------------------------ validation
    def _validate(self) -> None:
        if self.ssl_key_location is not None and self.ssl_certificate_location is None:
            raise errors.ConfigError("'ssl.key.location' needs 'ssl.certificate.location'", "ssl.key.location")
        if self.ssl_context is not None:
            import ssl

            if not isinstance(self.ssl_context, ssl.SSLContext):
                raise errors.ConfigError(
                    f"'ssl.context' must be an ssl.SSLContext, got {type(self.ssl_context).__name__}",
                    "ssl.context",
                )
            for key in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
                if getattr(self, key) is not None:
                    name = key.replace("_", ".")
                    raise errors.ConfigError(f"set either 'ssl.context' or {name!r}, not both", name)
        if not self.uses_sasl:
            return
        mechanism = self.sasl_mechanism
        if mechanism not in SASL_MECHANISMS:
            raise errors.ConfigError(
                f"'sasl.mechanism' {mechanism!r} is not supported with security.protocol {self.protocol}; "
                f"use one of {', '.join(SASL_MECHANISMS)}",
                "sasl.mechanism",
            )
        if mechanism == "OAUTHBEARER":
            if self._token_provider is None or not callable(self._token_provider):
                raise errors.ConfigError(
                    "'sasl.mechanism' OAUTHBEARER needs a callable 'sasl.oauthbearer.token.provider'",
                    "sasl.oauthbearer.token.provider",
                )
            return
        if not self.sasl_username:
            raise errors.ConfigError(f"'sasl.mechanism' {mechanism} needs 'sasl.username'", "sasl.username")
        if self._sasl_password is None:
            raise errors.ConfigError(f"'sasl.mechanism' {mechanism} needs 'sasl.password'", "sasl.password")

    # ------------------------------------------------------------------ printing
    def __repr__(self) -> str:
        parts = [f"security.protocol={self.protocol!r}"]
        if self.uses_tls:
            if self.ssl_context is not None:
                parts.append("ssl.context=<SSLContext>")
            for key in ("ssl_ca_location", "ssl_certificate_location", "ssl_key_location"):
                value = getattr(self, key)
                if value is not None:
                    parts.append(f"{key.replace('_', '.')}={value!r}")
            if self._ssl_key_password is not None:
                parts.append(f"ssl.key.password={HIDDEN!r}")
            parts.append(
                f"ssl.endpoint.identification.algorithm={self.ssl_endpoint_identification_algorithm!r}"
            )
        if self.uses_sasl:
            parts.append(f"sasl.mechanism={self.sasl_mechanism!r}")
            if self.sasl_username is not None:
                parts.append(f"sasl.username={self.sasl_username!r}")
            if self._sasl_password is not None:
                parts.append(f"sasl.password={HIDDEN!r}")
            if self._token_provider is not None:
                parts.append(f"sasl.oauthbearer.token.provider={HIDDEN!r}")
        return f"SecuritySettings({', '.join(parts)})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("SecuritySettings holds secrets and is not picklable; pickle the ProducerConfig")


_ATTRS: Final = (
    "ssl_ca_location",
    "ssl_certificate_location",
    "ssl_key_location",
    "ssl_key_password",
    "ssl_endpoint_identification_algorithm",
    "ssl_context",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "sasl_oauthbearer_token_provider",
)


def resolve_security(source: object | None) -> SecuritySettings:
    """``SecuritySettings`` from None, a ProducerConfig-like object, a mapping of Java keys, or itself."""
    if source is None:
        return SecuritySettings()
    if isinstance(source, SecuritySettings):
        return source
    if isinstance(source, Mapping):
        from ..config import ProducerConfig

        merged: dict[str, Any] = {"client.id": "sparkafka-security"}
        merged.update(source)
        source = ProducerConfig.from_mapping(merged, allow_empty_bootstrap=True)
    protocol = getattr(source, "security_protocol", None) or "PLAINTEXT"
    values: dict[str, Any] = {name: getattr(source, name, None) for name in _ATTRS}
    if values["ssl_endpoint_identification_algorithm"] is None:
        values["ssl_endpoint_identification_algorithm"] = "https"
    return SecuritySettings(str(protocol), **values)
