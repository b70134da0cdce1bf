"""Hypothesis strategies built from a protocol ``Schema``, and the dict a decode should give back.

How it works: ``body_strategy(schema, version)`` walks the schema's fields that exist at that version
(regular or tagged) and draws a value for each from its type (ints within their range, short UTF-8
strings, 16-byte uuids, small arrays, nested structs; ``None`` where the field is nullable at that
version). ``expected_decode`` fills in what the decoder adds: defaults for fields outside the version.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hypothesis import strategies as st

from sparkafka.protocol.primitives import INT_LIMITS
from sparkafka.protocol.schema import ArrayOf, Field, Schema

_TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=8)


def field_present(f: Field, version: int, flexible: bool) -> bool:
    if f.tag is not None and flexible and version in f.tagged_versions:
        return True
    return version in f.versions and not (f.tag is not None and version in f.tagged_versions)


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in INT_LIMITS:
        lo, hi = INT_LIMITS[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16)
    if kind == "string":
        return _TEXT
    if kind in ("bytes", "records"):
        return st.binary(max_size=24)
    raise AssertionError(kind)


def value_strategy(f: Field, version: int, flexible: bool) -> st.SearchStrategy[Any]:
    t = f.type
    s: st.SearchStrategy[Any]
    if isinstance(t, ArrayOf):
        el = t.element
        item = body_strategy(el, version, flexible) if isinstance(el, Schema) else _scalar(el)
        s = st.lists(item, max_size=3)
    elif isinstance(t, Schema):
        s = body_strategy(t, version, flexible)
    else:
        s = _scalar(t)
    if version in f.nullable_versions:
        s = st.none() | s
    return s


@cache
def body_strategy(
    schema: Schema, version: int, flexible: bool | None = None
) -> st.SearchStrategy[dict[str, Any]]:
    if flexible is None:
        flexible = schema.is_flexible(version)
    return st.fixed_dictionaries(
        {
            f.name: value_strategy(f, version, flexible)
            for f in schema.fields
            if field_present(f, version, flexible)
        }
    )


def expected_decode(
    schema: Schema, version: int, body: dict[str, Any], flexible: bool | None = None
) -> dict[str, Any]:
    """What decoding ``codec.encode(schema, body, version)`` must give: ``body`` plus defaults for the absent fields."""
    if flexible is None:
        flexible = schema.is_flexible(version)
    out: dict[str, Any] = {}
    for f in schema.fields:
        if f.name not in body or not field_present(f, version, flexible):
            out[f.name] = f.default_value()
            continue
        v = body[f.name]
        t = f.type
        if v is not None and isinstance(t, Schema):
            v = expected_decode(t, version, v, flexible)
        elif v is not None and isinstance(t, ArrayOf) and isinstance(t.element, Schema):
            v = [expected_decode(t.element, version, x, flexible) for x in v]
        out[f.name] = v
    return out
