"""Key and value serializers.

How it works: a serializer is any callable ``(topic, obj) -> bytes | None``, the shape of Java's
``Serializer.serialize(topic, data)``. The built-ins mirror Java's ``org.apache.kafka.common.serialization``
classes (``bytes``, ``str``, ``int`` = 4-byte big-endian like ``IntegerSerializer``, ``long``, ``short``,
``float``, ``double``, ``uuid``) plus compact UTF-8 ``json``. Every built-in returns ``None`` for ``None``
(a null key / a tombstone) and returns ``bytes`` input unchanged, so the producer may skip the call
entirely when ``type(obj) is bytes`` and ``passes_bytes_through(serializer)`` is true.

``resolve_serializer(spec, field)`` turns a config value into a serializer: ``None`` (= ``bytes``), a
built-in name, a Java class name such as ``org.apache.kafka.common.serialization.StringSerializer``, a
``"module:attr"`` string, a callable, a class (instantiated without arguments), or an object with a
Java-style ``serialize(topic, data)`` method. A callable's shape is decided once from its signature: one
required positional parameter means kafka-python's ``f(value)`` (adapted), two mean ``f(topic, value)``.
Resolved serializers must be picklable to be shipped to Spark executors: the built-ins and module-level
functions are.

``serialize(serializer, topic, field, obj)`` calls a serializer and turns any failure into a
``SerializationError`` that names the field and topic and chains the original exception.
"""

from __future__ import annotations

import importlib
import inspect
import json
import struct
import uuid
from collections.abc import Callable
from typing import Any, Literal

from sparkafka.errors import ConfigError, SerializationError

Serializer = Callable[[str, Any], "bytes | None"]
"""``(topic, obj) -> bytes | None``."""

Field = Literal["key", "value"]


class UnsupportedInputError(TypeError):
    """A built-in serializer got an object of a type it does not handle."""

    def __init__(self, serializer: str, accepts: str, got: object) -> None:
        self.serializer = serializer
        self.accepts = accepts
        self.got_type = type(got).__name__
        super().__init__(f"serializer '{serializer}' accepts {accepts}, got {self.got_type}")


# ---------------------------------------------------------------------------------------------- built-ins

_INT = struct.Struct(">i")
_LONG = struct.Struct(">q")
_SHORT = struct.Struct(">h")
_FLOAT = struct.Struct(">f")
_DOUBLE = struct.Struct(">d")
_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def serialize_bytes(topic: str, obj: Any) -> bytes | None:
    """bytes, bytearray or memoryview as bytes (Java's ``ByteArraySerializer``)."""
    if type(obj) is bytes or obj is None:
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    raise UnsupportedInputError("bytes", "bytes, bytearray or memoryview", obj)


def serialize_str(topic: str, obj: Any) -> bytes | None:
    """A str as UTF-8 (Java's ``StringSerializer``)."""
    if type(obj) is str:
        return obj.encode("utf-8")
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, str):
        return str.encode(obj, "utf-8")
    raise UnsupportedInputError("str", "str", obj)


def _integer(name: str, obj: Any, bits: int) -> int:
    if type(obj) is int:
        value: int = obj
    elif isinstance(obj, bool) or not hasattr(obj, "__index__"):
        raise UnsupportedInputError(name, "int", obj)
    else:
        value = obj.__index__()
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise OverflowError(f"serializer '{name}' needs {-limit} <= value <= {limit - 1}, got {value}")
    return value


def serialize_int(topic: str, obj: Any) -> bytes | None:
    """A signed 32-bit int, 4 bytes big-endian (Java's ``IntegerSerializer``)."""
    if obj is None or type(obj) is bytes:
        return obj
    return _INT.pack(_integer("int", obj, 32))


def serialize_long(topic: str, obj: Any) -> bytes | None:
    """A signed 64-bit int, 8 bytes big-endian (Java's ``LongSerializer``)."""
    if obj is None or type(obj) is bytes:
        return obj
    return _LONG.pack(_integer("long", obj, 64))


def serialize_short(topic: str, obj: Any) -> bytes | None:
    """A signed 16-bit int, 2 bytes big-endian (Java's ``ShortSerializer``)."""
    if obj is None or type(obj) is bytes:
        return obj
    return _SHORT.pack(_integer("short", obj, 16))


def _real(name: str, obj: Any) -> float:
    if isinstance(obj, bool) or not isinstance(obj, (int, float)):
        raise UnsupportedInputError(name, "float or int", obj)
    return float(obj)


def serialize_float(topic: str, obj: Any) -> bytes | None:
    """An IEEE-754 single, 4 bytes big-endian (Java's ``FloatSerializer``)."""
    if obj is None or type(obj) is bytes:
        return obj
    return _FLOAT.pack(_real("float", obj))


def serialize_double(topic: str, obj: Any) -> bytes | None:
    """An IEEE-754 double, 8 bytes big-endian (Java's ``DoubleSerializer``)."""
    if obj is None or type(obj) is bytes:
        return obj
    return _DOUBLE.pack(_real("double", obj))


def serialize_uuid(topic: str, obj: Any) -> bytes | None:
    """A UUID as its canonical 36-character text in UTF-8 (Java's ``UUIDSerializer``); str input is parsed."""
    if obj is None or type(obj) is bytes:
        return obj
    if isinstance(obj, uuid.UUID):
        return str(obj).encode("ascii")
    if isinstance(obj, str):
        return str(uuid.UUID(obj)).encode("ascii")
    raise UnsupportedInputError("uuid", "uuid.UUID or str", obj)


def serialize_json(topic: str, obj: Any) -> bytes | None:
    """Compact UTF-8 JSON (no spaces, non-ASCII kept); None stays None (a tombstone), bytes pass through."""
    if obj is None or type(obj) is bytes:
        return obj
    return _JSON.encode(obj).encode("utf-8")


BUILTIN_SERIALIZERS: dict[str, Serializer] = {
    "bytes": serialize_bytes,
    "str": serialize_str,
    "int": serialize_int,
    "long": serialize_long,
    "short": serialize_short,
    "float": serialize_float,
    "double": serialize_double,
    "uuid": serialize_uuid,
    "json": serialize_json,
}
"""Canonical built-in names -> serializers."""

_ALIASES: dict[str, str] = {
    "bytearray": "bytes",
    "binary": "bytes",
    "string": "str",
    "integer": "int",
    "int32": "int",
    "int64": "long",
    "int16": "short",
}

_JAVA_PACKAGE = "org.apache.kafka.common.serialization."
_JAVA_CLASSES: dict[str, str] = {
    "ByteArraySerializer": "bytes",
    "BytesSerializer": "bytes",
    "ByteBufferSerializer": "bytes",
    "StringSerializer": "str",
    "IntegerSerializer": "int",
    "LongSerializer": "long",
    "ShortSerializer": "short",
    "FloatSerializer": "float",
    "DoubleSerializer": "double",
    "UUIDSerializer": "uuid",
}

_NAME_OF: dict[int, str] = {id(fn): name for name, fn in BUILTIN_SERIALIZERS.items()}


def passes_bytes_through(serializer: Serializer) -> bool:
    """True for the built-ins, which return ``bytes`` input unchanged (the producer may skip the call)."""
    return id(serializer) in _NAME_OF and BUILTIN_SERIALIZERS.get(_NAME_OF[id(serializer)]) is serializer


def builtin_name(spec: str) -> str | None:
    """The canonical built-in name for a name, alias or Java class name (any case), else None."""
    text = spec.strip()
    lowered = text.lower()
    if lowered in BUILTIN_SERIALIZERS:
        return lowered
    if lowered in _ALIASES:
        return _ALIASES[lowered]
    short = text[len(_JAVA_PACKAGE):] if text.startswith(_JAVA_PACKAGE) else text
    return _JAVA_CLASSES.get(short)


def serializer_name(serializer: Serializer) -> str:
    """A readable name: the built-in name, or ``module:qualname`` of a custom serializer."""
    if passes_bytes_through(serializer):
        return _NAME_OF[id(serializer)]
    target: Any = serializer.func if isinstance(serializer, _OneArgument) else serializer
    owner = getattr(target, "__self__", None)
    if owner is not None and getattr(target, "__name__", None) == "serialize":
        target = type(owner)
    return callable_name(target)


def callable_name(obj: object) -> str:
    """``module:qualname`` of a function or class, or of an instance's class."""
    target = obj if hasattr(obj, "__qualname__") else type(obj)
    return f"{getattr(target, '__module__', '?')}:{getattr(target, '__qualname__', '?')}"


def original_spec(serializer: Serializer) -> str | Callable[..., Any]:
    """What to write back into a config mapping: the built-in name, or the user's callable."""
    if passes_bytes_through(serializer):
        return _NAME_OF[id(serializer)]
    if isinstance(serializer, _OneArgument):
        return serializer.func
    return serializer


# ---------------------------------------------------------------------------------------------- resolution


class _OneArgument:
    """Adapts a one-argument callable ``f(obj)`` to ``(topic, obj)``; picklable if ``f`` is."""

    __slots__ = ("func",)

    def __init__(self, func: Callable[[Any], bytes | None]) -> None:
        self.func = func

    def __call__(self, topic: str, obj: Any) -> bytes | None:
        return self.func(obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _OneArgument) and other.func == self.func

    def __hash__(self) -> int:
        return hash(self.func)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_OneArgument, (self.func,))


def import_object(spec: str, key: str) -> object:
    """Import ``"package.module:attr.path"`` (or ``"package.module.attr"``); ConfigError naming ``key``."""
    text = spec.strip()
    if ":" in text:
        module_name, _, attr_path = text.partition(":")
    else:
        module_name, _, attr_path = text.rpartition(".")
    if not module_name or not attr_path:
        raise ConfigError(f"{key!r} must be 'module:attribute', got {spec!r}", key)
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except Exception as exc:
        raise ConfigError(f"could not import {spec!r} for {key!r}: {type(exc).__name__}: {exc}", key) from exc
    return obj


def _positional_arity(func: Callable[..., Any]) -> tuple[int, int | None] | None:
    """(required, most) positional parameters of ``func`` (most is None with ``*args``), or None when
    Python cannot tell (some built-ins have no signature)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    required = 0
    most: int | None = 0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            most = None
        elif parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            if most is not None:
                most += 1
            if parameter.default is inspect.Parameter.empty:
                required += 1
    return required, most


def _first_positional_name(func: Callable[..., Any]) -> str | None:
    for parameter in inspect.signature(func).parameters.values():
        if parameter.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            return parameter.name
    return None


def _takes_one_argument(func: Callable[..., Any], key: str) -> bool:
    """Whether a serializer callable is called as ``f(obj)`` (kafka-python's shape) rather than
    ``f(topic, obj)`` (Java's ``Serializer.serialize``), decided once from its signature: one required
    positional parameter means ``f(obj)`` (``str.encode``, ``lambda v: ...``) unless it is named ``topic`` and a
    second may follow (``f(topic, data=None)``), two mean ``f(topic, obj)``; with none required, what it
    accepts decides; without a signature, ``f(topic, obj)``."""
    arity = _positional_arity(func)
    if arity is None:
        return False
    required, most = arity
    if required == 1:
        # Java's shape with a defaulted value, f(topic, data=None): called f(obj), the value would land in
        # ``topic`` and the call return a tombstone without a word
        return not ((most is None or most >= 2) and _first_positional_name(func) == "topic")
    if required == 2:
        return False
    if required > 2:
        raise ConfigError(
            f"{key!r} {callable_name(func)} needs {required} positional arguments; a serializer is called "
            "as f(obj) or f(topic, obj)", key)
    if most is None or most >= 2:
        return False
    if most == 1:
        return True
    raise ConfigError(
        f"{key!r} {callable_name(func)} takes no positional argument; a serializer is called as f(obj) or "
        "f(topic, obj)", key)


def _from_object(obj: object, key: str) -> Serializer:
    if isinstance(obj, type):
        cls = obj
        try:
            obj = cls()
        except Exception as exc:
            raise ConfigError(f"could not instantiate {cls.__qualname__} for {key!r}: {exc}", key) from exc
    method = getattr(obj, "serialize", None)
    if callable(method) and not inspect.isfunction(obj) and not inspect.ismethod(obj):
        bound: Serializer = method
        return bound
    if not callable(obj):
        raise ConfigError(
            f"{key!r} must be a serializer name, a callable (topic, value) -> bytes, or 'module:attr', "
            f"got {type(obj).__name__}",
            key,
        )
    if _takes_one_argument(obj, key):
        return _OneArgument(obj)
    return obj


def resolve_serializer(spec: object, field: Field) -> Serializer:
    """Turn a ``key.serializer`` / ``value.serializer`` config value into a serializer (see module doc)."""
    key = f"{field}.serializer"
    if spec is None:
        return serialize_bytes
    if isinstance(spec, str):
        name = builtin_name(spec)
        if name is not None:
            return BUILTIN_SERIALIZERS[name]
        text = spec.strip()
        if ":" not in text and (text.startswith(("org.apache.kafka.", "io.confluent.")) or "." not in text):
            choices = ", ".join(repr(n) for n in BUILTIN_SERIALIZERS)
            raise ConfigError(
                f"unknown {key} {spec!r}: use one of {choices}, a Java serialization class name "
                f"({', '.join(sorted(_JAVA_CLASSES))}), a callable or 'module:attr'",
                key,
            )
        return _from_object(import_object(text, key), key)
    return _from_object(spec, key)


# ---------------------------------------------------------------------------------------------- calling


def _describe(field: Field, exc: BaseException) -> str:
    if isinstance(exc, UnsupportedInputError):
        hint = "'str', 'json'" if exc.serializer == "bytes" else "'bytes', 'json'"
        return (
            f"got {exc.got_type}, but {field}.serializer is '{exc.serializer}', which accepts {exc.accepts}; "
            f"set {field}.serializer (e.g. {hint} or a callable)"
        )
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def serialize(serializer: Serializer, topic: str, field: Field, obj: Any) -> bytes | None:
    """Run ``serializer`` and check its result; every failure becomes a ``SerializationError``."""
    try:
        out = serializer(topic, obj)
    except SerializationError:
        raise
    except Exception as exc:
        message = f"could not serialize {field} for topic {topic!r}: {_describe(field, exc)}"
        raise SerializationError(message) from exc
    if out is None or type(out) is bytes:
        return out
    if isinstance(out, (bytes, bytearray, memoryview)):
        return bytes(out)
    raise SerializationError(
        f"could not serialize {field} for topic {topic!r}: {field}.serializer "
        f"{serializer_name(serializer)} returned {type(out).__name__}, expected bytes or None"
    )
