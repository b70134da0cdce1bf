"""Table-driven descriptions of Kafka messages: one ``Schema`` describes every version of a message.

How it works: a ``Schema`` is an ordered list of ``Field``s, written like Kafka's JSON message specs
(``validVersions``, ``flexibleVersions``; per field ``versions``, ``nullableVersions``, ``tag`` /
``taggedVersions``, ``flexibleVersions: none``, ``default``). Field types are the primitive names
(``int8 int16 int32 int64 uint16 uint32 float64 bool uuid string bytes records``), ``ArrayOf(x)``
where ``x`` is a primitive name or a nested ``Schema``, or a nested ``Schema`` (a struct).

Values are plain dicts keyed by the snake_case field names. On encode a missing key takes the field's
default and fields outside the version are skipped. On decode every field of the schema is present:
fields outside the version (and tagged fields the peer did not send) hold their default.
Unknown tags are skipped.

This module only describes messages; ``protocol.codec`` compiles a schema at each ``(version,
flexible)`` once into an encoder/decoder pair and encodes and decodes with it (``codec.encode``,
``codec.decode``), so the description does not depend on the codec.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sparkafka.errors import ProtocolError, UnsupportedVersionError
from sparkafka.protocol.primitives import ZERO_UUID

MAX_VERSION = 0x7FFF

Body = Mapping[str, Any]

MISSING: Any = object()

# fixed-width types: struct format char(s), size
FIXED_TYPES: dict[str, tuple[str, int]] = {
    "int8": ("b", 1),
    "int16": ("h", 2),
    "int32": ("i", 4),
    "int64": ("q", 8),
    "uint16": ("H", 2),
    "uint32": ("I", 4),
    "float64": ("d", 8),
    "bool": ("?", 1),
    "uuid": ("16s", 16),
}
_VARIABLE = frozenset({"string", "bytes", "records"})
PRIMITIVE_TYPES = frozenset(FIXED_TYPES) | _VARIABLE


class Versions:
    """An inclusive version range parsed from Kafka's notation: ``"3+"``, ``"0-12"``, ``"5"``, ``"none"``."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: int, hi: int) -> None:
        self.lo = lo
        self.hi = hi

    @classmethod
    def parse(cls, spec: str | Versions | None) -> Versions:
        if isinstance(spec, Versions):
            return spec
        if spec is None or spec == "none":
            return NO_VERSIONS
        try:
            if spec.endswith("+"):
                return cls(int(spec[:-1]), MAX_VERSION)
            if "-" in spec:
                lo, hi = spec.split("-", 1)
                return cls(int(lo), int(hi))
            v = int(spec)
        except ValueError:
            raise ProtocolError(f"bad version range {spec!r} (expected 'N+', 'N-M', 'N' or 'none')") from None
        return cls(v, v)

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __bool__(self) -> bool:
        return self.lo <= self.hi

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Versions) and (self.lo, self.hi) == (other.lo, other.hi)

    def __hash__(self) -> int:
        return hash((self.lo, self.hi))

    def __repr__(self) -> str:
        if not self:
            return "none"
        if self.hi == MAX_VERSION:
            return f"{self.lo}+"
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"

    def intersect(self, other: Versions) -> Versions:
        lo, hi = max(self.lo, other.lo), min(self.hi, other.hi)
        return Versions(lo, hi) if lo <= hi else NO_VERSIONS


NO_VERSIONS = Versions(1, 0)


class ArrayOf:
    """An array type: ``ArrayOf("int32")`` or ``ArrayOf(SomeStructSchema)``."""

    __slots__ = ("element",)

    def __init__(self, element: str | Schema) -> None:
        if isinstance(element, str) and element not in PRIMITIVE_TYPES:
            raise ProtocolError(f"unknown array element type {element!r}")
        self.element = element

    def __repr__(self) -> str:
        inner = self.element if isinstance(self.element, str) else self.element.name
        return f"[]{inner}"


class Field:
    """One field of a message or struct (see the module docstring)."""

    __slots__ = (
        "default",
        "flexible_versions",
        "name",
        "nullable_versions",
        "tag",
        "tagged_versions",
        "type",
        "versions",
    )

    def __init__(
        self,
        name: str,
        type: str | ArrayOf | Schema,
        versions: str = "0+",
        *,
        nullable_versions: str | None = None,
        tag: int | None = None,
        tagged_versions: str | None = None,
        flexible_versions: str | None = None,
        default: Any = MISSING,
    ) -> None:
        if isinstance(type, str) and type not in PRIMITIVE_TYPES:
            raise ProtocolError(f"field {name}: unknown type {type!r}")
        if (tag is None) != (tagged_versions is None):
            raise ProtocolError(f"field {name}: tag and tagged_versions go together")
        self.name = name
        self.type = type
        self.versions = Versions.parse(versions)
        self.nullable_versions = Versions.parse(nullable_versions)
        self.tag = tag
        self.tagged_versions = Versions.parse(tagged_versions)
        # None = follow the message's flexibleVersions; "none" = never use compact encodings
        self.flexible_versions = None if flexible_versions is None else Versions.parse(flexible_versions)
        if isinstance(type, Schema) and self.nullable_versions:
            raise ProtocolError(f"field {name}: nullable structs are not supported")
        self.default = default

    def __repr__(self) -> str:
        t = (
            self.type.name
            if isinstance(self.type, Schema)
            else repr(self.type)
            if isinstance(self.type, ArrayOf)
            else self.type
        )
        return f"Field({self.name!r}, {t}, {self.versions!r})"

    def default_value(self) -> Any:
        """The field's default (a fresh list/dict for arrays and structs)."""
        t = self.type
        if self.default is not MISSING:
            d = self.default
            return list(d) if isinstance(d, list) else dict(d) if isinstance(d, dict) else d
        if isinstance(t, ArrayOf):
            return []
        if isinstance(t, Schema):
            return t.default_body()
        if t == "bool":
            return False
        if t == "float64":
            return 0.0
        if t == "uuid":
            return ZERO_UUID
        if t == "string":
            return ""
        if t == "bytes":
            return b""
        if t == "records":
            return None
        return 0

    def has_mutable_default(self) -> bool:
        if self.default is not MISSING:
            return isinstance(self.default, (list, dict))
        return isinstance(self.type, (ArrayOf, Schema))


class Schema:
    """An ordered list of fields; top-level schemas also carry the message's valid and flexible versions."""

    __slots__ = ("fields", "flexible_versions", "name", "valid_versions")

    def __init__(
        self,
        name: str,
        fields: Sequence[Field],
        *,
        valid_versions: str = "0+",
        flexible_versions: str = "none",
    ) -> None:
        self.name = name
        self.fields: tuple[Field, ...] = tuple(fields)
        self.valid_versions = Versions.parse(valid_versions)
        self.flexible_versions = Versions.parse(flexible_versions)
        seen: set[str] = set()
        tags: set[int] = set()
        for f in self.fields:
            if f.name in seen:
                raise ProtocolError(f"{name}: duplicate field {f.name}")
            seen.add(f.name)
            if f.tag is not None:
                if f.tag in tags:
                    raise ProtocolError(f"{name}: duplicate tag {f.tag}")
                tags.add(f.tag)

    def __repr__(self) -> str:
        return f"Schema({self.name!r}, {len(self.fields)} fields)"

    def default_body(self) -> dict[str, Any]:
        """Every field at its default."""
        return {f.name: f.default_value() for f in self.fields}

    def is_flexible(self, version: int) -> bool:
        return version in self.flexible_versions

    def check_version(self, version: int) -> None:
        if version not in self.valid_versions:
            raise UnsupportedVersionError(
                f"{self.name} has no version {version} (valid versions {self.valid_versions!r})"
            )
