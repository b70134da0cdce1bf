"""Compiles a ``Schema`` at one version into an encoder/decoder pair, and encodes and decodes with it.

How it works: ``encode(schema, body, version)`` and ``decode(schema, data, version)`` check the version
and use ``codec_for(schema, version)``, which compiles each ``(schema, version, flexible)`` once and
caches the result. ``compile_codec(schema, version, flexible)`` resolves
everything that depends on the version: which fields exist, which are tagged, classic (int16/int32
lengths) or compact (unsigned varint length+1) encodings, nullability and defaults. Consecutive
fixed-width fields (ints, bool, float64; uuid when decoding) form one run handled by a single
``struct.Struct``.

Decoding is the hot path (every response), so the decoder of each struct is generated Python source,
compiled with ``exec`` the way ``dataclasses`` builds methods: straight-line code that unpacks each
fixed-width run into locals, reads string/bytes/array lengths inline (the one-byte varint case without
a call), reads arrays of numbers with one ``unpack_from(">{n}i")``, calls the nested struct's decoder
per array element, checks the tagged-field section with one byte test when it is empty, and finally
builds one dict literal in schema order in which absent fields are precomputed defaults. Running out
of bytes surfaces as ``struct.error``/``IndexError``; a single ``try`` per struct (free when nothing
is raised) turns it into a ``ProtocolError`` naming the field, and errors from nested structs get the
parent field as a prefix: ``ProduceResponse.responses -> TopicProduceResponse.partition_responses
(v9): ...``. Unknown tags are skipped.

Encoding uses a tuple of per-field closures (requests are small, and Produce has its own encoder). A
missing key takes the field's default, fields outside the version are skipped, and a value that does
not fit (out-of-range int, null for a non-nullable field, too-long string, wrong type) raises
``ProtocolError`` naming the field and the limit. Tagged fields are written only when their encoded
value differs from the encoded default, in ascending tag order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

from sparkafka.errors import ProtocolError
from sparkafka.protocol.primitives import (
    INT16,
    INT32,
    INT_LIMITS,
    MAX_STRING_BYTES,
    Buffer,
    Reader,
    read_uvarint,
    uuid_bytes,
    write_uvarint,
)
from sparkafka.protocol.schema import FIXED_TYPES, MISSING, ArrayOf, Body, Field, Schema

Encoder = Callable[[bytearray, Any], None]
Decoder = Callable[[Reader], Any]
StructEncoder = Callable[[bytearray, Body], None]
StructDecoder = Callable[[Reader], dict[str, Any]]

_UNPACK16 = INT16.unpack_from
_UNPACK32 = INT32.unpack_from
_PACK16 = INT16.pack
_PACK32 = INT32.pack
_TAGS = "<tagged fields>"


class Codec:
    """The compiled encoder/decoder of one schema at one version."""

    __slots__ = ("decode", "encode", "min_size")

    def __init__(self, encode: StructEncoder, decode: StructDecoder, min_size: int) -> None:
        self.encode = encode
        self.decode = decode
        self.min_size = min_size


_COMPILED: dict[tuple[Schema, int, bool], Codec] = {}
"""Compiled codecs by (schema, version, flexible); schemas are compared by identity."""


def codec_for(schema: Schema, version: int, flexible: bool | None = None) -> Codec:
    """The compiled codec of a schema at a version (``flexible`` defaults to the schema's flexibleVersions)."""
    if flexible is None:
        flexible = version in schema.flexible_versions
    key = (schema, version, flexible)
    c = _COMPILED.get(key)
    if c is None:
        c = _COMPILED[key] = compile_codec(schema, version, flexible)
    return c


def encode(schema: Schema, body: Body, version: int) -> bytes:
    """``body`` encoded as ``schema`` at ``version`` (``ProtocolError`` naming the field when a value does
    not fit, ``UnsupportedVersionError`` for a version the schema does not have)."""
    out = bytearray()
    encode_into(out, schema, body, version)
    return bytes(out)


def encode_into(out: bytearray, schema: Schema, body: Body, version: int) -> None:
    schema.check_version(version)
    codec_for(schema, version).encode(out, body)


def decode(schema: Schema, data: Buffer, version: int) -> dict[str, Any]:
    """The body encoded in ``data`` (``ProtocolError`` naming the field when the bytes do not fit)."""
    schema.check_version(version)
    return codec_for(schema, version).decode(Reader(data))


def decode_from(schema: Schema, reader: Reader, version: int) -> dict[str, Any]:
    schema.check_version(version)
    return codec_for(schema, version).decode(reader)


# --------------------------------------------------------------------------------------------- helpers


def _type_name(t: str | ArrayOf | Schema) -> str:
    return t if isinstance(t, str) else repr(t) if isinstance(t, ArrayOf) else t.name


def _is_fixed(t: str | ArrayOf | Schema) -> bool:
    return isinstance(t, str) and t in FIXED_TYPES


def _fits(kind: str, value: Any) -> bool:
    try:
        struct.pack(">" + FIXED_TYPES[kind][0], value)
    except (struct.error, TypeError):
        return False
    return True


def _describe_value_error(kind: str, value: Any) -> str:
    if kind in INT_LIMITS:
        lo, hi = INT_LIMITS[kind]
        return f"cannot encode {value!r:.60} as {kind} (range [{lo}, {hi}])"
    return f"cannot encode {value!r:.60} as {kind}"


def _null_error(label: str) -> ProtocolError:
    return ProtocolError(f"{label}: null is not allowed in this version (field is not nullable)")


def _truncated(label: str, pos: int, need: int, left: int) -> ProtocolError:
    return ProtocolError(f"truncated input reading {label} at offset {pos}: need {need} byte(s), {left} left")


def _compact(f: Field, version: int, flexible: bool) -> bool:
    return flexible and (f.flexible_versions is None or version in f.flexible_versions)


def _default_factory(f: Field) -> Callable[[], Any]:
    """A cheap maker of fresh copies of a mutable default."""
    t = f.type
    if f.default is MISSING and isinstance(t, ArrayOf):
        return list
    template = f.default_value()
    if isinstance(template, dict) and not any(isinstance(v, (list, dict)) for v in template.values()):
        return template.copy
    return f.default_value


# --------------------------------------------------------------------------------------------- encoders


def _string_encoder(label: str, nullable: bool, compact: bool) -> Encoder:
    def enc_string(out: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise _null_error(label)
            out += b"\x00" if compact else b"\xff\xff"
            return
        b = v.encode()
        n = len(b)
        if n > MAX_STRING_BYTES:
            raise ProtocolError(f"{label}: {n} UTF-8 bytes exceed the string length limit {MAX_STRING_BYTES}")
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += _PACK16(n)
        out += b

    return enc_string


def _bytes_encoder(label: str, nullable: bool, compact: bool) -> Encoder:
    def enc_bytes(out: bytearray, v: Any) -> None:
        if v is None:
            if not nullable:
                raise _null_error(label)
            out += b"\x00" if compact else b"\xff\xff\xff\xff"
            return
        n = v.nbytes if isinstance(v, memoryview) else len(v)
        if compact:
            write_uvarint(out, n + 1)
        else:
            out += _PACK32(n)
        out += v

    return enc_bytes


def _scalar_encoder(label: str, kind: str, nullable: bool, compact: bool) -> Encoder:
    if kind == "string":
        return _string_encoder(label, nullable, compact)
    if kind in ("bytes", "records"):
        return _bytes_encoder(label, nullable, compact)
    if kind == "uuid":

        def enc_uuid(out: bytearray, v: Any) -> None:
            out += uuid_bytes(v, label)

        return enc_uuid
    pack = struct.Struct(">" + FIXED_TYPES[kind][0]).pack

    def enc_fixed(out: bytearray, v: Any) -> None:
        try:
            out += pack(v)
        except (struct.error, TypeError):
            raise ProtocolError(f"{label}: {_describe_value_error(kind, v)}") from None

    return enc_fixed


def _array_encoder(
    label: str, element: str | Schema, nullable: bool, compact: bool, version: int, flexible: bool
) -> Encoder:
    def write_count(out: bytearray, v: Any) -> bool:
        if v is None:
            if not nullable:
                raise _null_error(label)
            out += b"\x00" if compact else b"\xff\xff\xff\xff"
            return False
        if compact:
            write_uvarint(out, len(v) + 1)
        else:
            out += _PACK32(len(v))
        return True

    if isinstance(element, Schema):
        el_enc = codec_for(element, version, flexible).encode

        def enc_structs(out: bytearray, v: Any) -> None:
            if write_count(out, v):
                for item in v:
                    el_enc(out, item)

        return enc_structs
    if element in FIXED_TYPES and element != "uuid":
        fmt = FIXED_TYPES[element][0]

        def enc_numbers(out: bytearray, v: Any) -> None:
            if write_count(out, v):
                try:
                    out += struct.pack(f">{len(v)}{fmt}", *v)
                except (struct.error, TypeError):
                    bad = next((x for x in v if not _fits(element, x)), v)
                    raise ProtocolError(f"{label}: {_describe_value_error(element, bad)}") from None

        return enc_numbers
    item_enc = _scalar_encoder(label, element, False, compact)

    def enc_items(out: bytearray, v: Any) -> None:
        if write_count(out, v):
            for item in v:
                item_enc(out, item)

    return enc_items


def _value_encoder(label: str, f: Field, version: int, flexible: bool) -> Encoder:
    t = f.type
    nullable = version in f.nullable_versions
    compact = _compact(f, version, flexible)
    if isinstance(t, ArrayOf):
        return _array_encoder(label, t.element, nullable, compact, version, flexible)
    if isinstance(t, Schema):
        inner = codec_for(t, version, flexible).encode

        def enc_struct(out: bytearray, v: Any) -> None:
            if v is None:
                raise _null_error(label)
            inner(out, v)

        return enc_struct
    return _scalar_encoder(label, t, nullable, compact)


def _tags_encoder(tagged: list[Field], version: int, label_of: Callable[[Field], str]) -> StructEncoder:
    entries = []
    for f in tagged:
        enc = _value_encoder(label_of(f), f, version, True)
        default_bytes = bytearray()
        enc(default_bytes, f.default_value())
        entries.append((f.tag or 0, f.name, enc, bytes(default_bytes)))
    entries_t = tuple(entries)

    def enc_tags(out: bytearray, body: Body) -> None:
        present: list[tuple[int, bytearray]] = []
        for tag, fname, enc, default_bytes in entries_t:
            v = body.get(fname, MISSING)
            if v is MISSING:
                continue
            data = bytearray()
            enc(data, v)
            if data != default_bytes:
                present.append((tag, data))
        write_uvarint(out, len(present))
        for tag, data in present:
            write_uvarint(out, tag)
            write_uvarint(out, len(data))
            out += data

    return enc_tags


# --------------------------------------------------------------------------------------------- decoders


def _fixed_decoder(kind: str) -> Decoder:
    s = struct.Struct(">" + FIXED_TYPES[kind][0])
    unpack_from, size = s.unpack_from, s.size

    def dec_fixed(r: Reader) -> Any:
        pos = r.pos
        v = unpack_from(r.buf, pos)[0]
        r.pos = pos + size
        return v

    return dec_fixed


def _length_decoder(label: str, compact: bool, width: int) -> Callable[[Reader], int]:
    """Reads a length/count: compact -> uvarint - 1; classic -> int16 (width 2) or int32 (width 4).
    Returns -1 for null."""
    unpack = _UNPACK16 if width == 2 else _UNPACK32
    if compact:

        def dec_compact_len(r: Reader) -> int:
            buf, pos = r.buf, r.pos
            n = buf[pos]
            if n & 0x80:
                n, r.pos = read_uvarint(buf, pos, label + " length")
            else:
                r.pos = pos + 1
            return int(n) - 1

        return dec_compact_len

    def dec_classic_len(r: Reader) -> int:
        pos = r.pos
        n: int = unpack(r.buf, pos)[0]
        r.pos = pos + width
        if n < -1:
            raise ProtocolError(f"{label}: invalid length {n} at offset {pos}")
        return n

    return dec_classic_len


def _string_decoder(label: str, nullable: bool, compact: bool) -> Decoder:
    read_len = _length_decoder(label, compact, 2)

    def dec_string(r: Reader) -> Any:
        n = read_len(r)
        if n < 0:
            if nullable:
                return None
            raise ProtocolError(f"{label}: null found at offset {r.pos} for a non-nullable string")
        buf, pos = r.buf, r.pos
        end = pos + n
        if end > len(buf):
            raise _truncated(label, pos, n, len(buf) - pos)
        r.pos = end
        try:
            return str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(f"{label} at offset {pos}: invalid UTF-8 ({e.reason})") from None

    return dec_string


def _bytes_decoder(label: str, nullable: bool, compact: bool) -> Decoder:
    read_len = _length_decoder(label, compact, 4)

    def dec_bytes(r: Reader) -> Any:
        n = read_len(r)
        if n < 0:
            if nullable:
                return None
            raise ProtocolError(f"{label}: null found at offset {r.pos} for non-nullable bytes")
        buf, pos = r.buf, r.pos
        end = pos + n
        if end > len(buf):
            raise _truncated(label, pos, n, len(buf) - pos)
        r.pos = end
        return bytes(buf[pos:end])

    return dec_bytes


def _scalar_decoder(label: str, kind: str, nullable: bool, compact: bool) -> Decoder:
    if kind == "string":
        return _string_decoder(label, nullable, compact)
    if kind in ("bytes", "records"):
        return _bytes_decoder(label, nullable, compact)
    return _fixed_decoder(kind)


def _array_decoder(
    label: str, element: str | Schema, nullable: bool, compact: bool, version: int, flexible: bool
) -> Decoder:
    read_count = _length_decoder(label, compact, 4)
    if isinstance(element, Schema):
        codec = codec_for(element, version, flexible)
        el_dec: Decoder = codec.decode
        min_size = codec.min_size
    elif element in FIXED_TYPES:
        min_size = FIXED_TYPES[element][1]
        el_dec = _fixed_decoder(element)
    else:
        min_size = 1 if compact else (2 if element == "string" else 4)
        el_dec = _scalar_decoder(label, element, False, compact)

    def count(r: Reader) -> int:
        n = read_count(r)
        if n < 0:
            if nullable:
                return -1
            raise ProtocolError(f"{label}: null array found at offset {r.pos} for a non-nullable array")
        if n * min_size > len(r.buf) - r.pos:
            raise ProtocolError(
                f"{label}: array of {n} item(s) at offset {r.pos} cannot fit "
                f"in the {len(r.buf) - r.pos} byte(s) left"
            )
        return n

    if isinstance(element, str) and element in FIXED_TYPES and element != "uuid":
        fmt, size = FIXED_TYPES[element]

        def dec_numbers(r: Reader) -> Any:
            n = count(r)
            if n < 0:
                return None
            pos = r.pos
            vals = struct.unpack_from(f">{n}{fmt}", r.buf, pos)
            r.pos = pos + n * size
            return list(vals)

        return dec_numbers

    def dec_items(r: Reader) -> Any:
        n = count(r)
        if n < 0:
            return None
        return [el_dec(r) for _ in range(n)]

    return dec_items


def _value_decoder(label: str, f: Field, version: int, flexible: bool) -> Decoder:
    t = f.type
    nullable = version in f.nullable_versions
    compact = _compact(f, version, flexible)
    if isinstance(t, ArrayOf):
        return _array_decoder(label, t.element, nullable, compact, version, flexible)
    if isinstance(t, Schema):
        return codec_for(t, version, flexible).decode
    return _scalar_decoder(label, t, nullable, compact)


def _tags_decoder(
    tagged: list[Field], version: int, label_of: Callable[[Field], str]
) -> Callable[[Reader, dict[str, Any]], None]:
    known = {f.tag: (f.name, _value_decoder(label_of(f), f, version, True)) for f in tagged}

    def dec_tags(r: Reader, d: dict[str, Any]) -> None:
        buf = r.buf
        count, pos = read_uvarint(buf, r.pos, "tagged field count")
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, "tag")
            size, pos = read_uvarint(buf, pos, f"size of tag {tag}")
            end = pos + size
            if end > len(buf):
                raise _truncated(f"tag {tag}", pos, size, len(buf) - pos)
            entry = known.get(tag)
            if entry is not None:
                d[entry[0]] = entry[1](Reader(memoryview(buf)[pos:end]))
            pos = end
        r.pos = pos

    return dec_tags


def _min_size(f: Field, version: int, flexible: bool) -> int:
    t = f.type
    compact = _compact(f, version, flexible)
    if isinstance(t, Schema):
        return codec_for(t, version, flexible).min_size
    if isinstance(t, ArrayOf):
        return 1 if compact else 4
    if t in FIXED_TYPES:
        return FIXED_TYPES[t][1]
    if compact:
        return 1
    return 2 if t == "string" else 4


def _nested(f: Field) -> bool:
    t = f.type
    return isinstance(t, Schema) or (isinstance(t, ArrayOf) and isinstance(t.element, Schema))


# --------------------------------------------------------------------------------------------- compile


def compile_codec(schema: Schema, version: int, flexible: bool) -> Codec:
    """Build the encoder and decoder of ``schema`` at ``version``."""
    name = schema.name
    regular: list[Field] = []
    tagged: list[Field] = []
    for f in schema.fields:
        is_tagged = f.tag is not None and version in f.tagged_versions
        if is_tagged and flexible:
            tagged.append(f)
        elif version in f.versions and not is_tagged:
            regular.append(f)
    tagged.sort(key=lambda f: f.tag or 0)

    def label_of(f: Field) -> str:
        return f"{name}.{f.name} (v{version})"

    # consecutive fixed-width fields form one run (one struct pack/unpack)
    groups: list[tuple[Field, ...]] = []
    for f in regular:
        if _is_fixed(f.type) and groups and len(groups[-1]) and _is_fixed(groups[-1][0].type):
            groups[-1] = (*groups[-1], f)
        else:
            groups.append((f,))

    encode = _compile_encoder(name, version, flexible, groups, tagged, label_of)
    decode = _compile_decoder(name, version, flexible, schema.fields, groups, tagged, label_of)
    min_size = (1 if flexible else 0) + sum(_min_size(f, version, flexible) for f in regular)
    return Codec(encode, decode, min_size)


def _compile_encoder(
    name: str,
    version: int,
    flexible: bool,
    groups: list[tuple[Field, ...]],
    tagged: list[Field],
    label_of: Callable[[Field], str],
) -> StructEncoder:
    steps: list[tuple[str | None, Any, Callable[..., None], tuple[Field, ...]]] = []
    for fields in groups:
        uuid_free = all(f.type != "uuid" for f in fields)
        if len(fields) > 1 and uuid_free:
            pack = struct.Struct(">" + "".join(FIXED_TYPES[_type_name(f.type)][0] for f in fields)).pack
            pairs = tuple((f.name, f.default_value()) for f in fields)

            def enc_run(out: bytearray, body: Body, pack: Any = pack, pairs: Any = pairs) -> None:
                out += pack(*[body.get(n, d) for n, d in pairs])

            steps.append((None, None, enc_run, fields))
            continue
        for f in fields:
            steps.append((f.name, f.default_value(), _value_encoder(label_of(f), f, version, flexible), (f,)))
    tags_enc = _tags_encoder(tagged, version, label_of) if flexible and tagged else None
    steps_t = tuple(steps)

    def encode(out: bytearray, body: Body) -> None:
        fields: tuple[Field, ...] = ()
        try:
            for fname, default, enc, fields in steps_t:  # noqa: B007 - `fields` names the failing step
                if fname is None:
                    enc(out, body)
                else:
                    enc(out, body.get(fname, default))
            fields = ()
            if flexible:
                if tags_enc is None:
                    out.append(0)
                else:
                    tags_enc(out, body)
        except ProtocolError as e:
            if not fields:
                raise ProtocolError(f"{name} tagged fields -> {e}") from None
            f = fields[0]
            if _nested(f) and not str(e).startswith(label_of(f)):
                raise ProtocolError(f"{name}.{f.name} -> {e}") from None
            raise
        except (struct.error, TypeError, ValueError, AttributeError, OverflowError) as e:
            if not isinstance(body, Mapping):
                raise ProtocolError(
                    f"{name} (v{version}): expected a mapping, got {type(body).__name__}"
                ) from None
            raise _explain_encode_error(fields, body, label_of, e) from None

    return encode


def _gen_len(compact: bool, width: int) -> list[str]:
    """Lines reading a length/count into ``n`` (-1 = null), advancing ``pos``."""
    if compact:
        return [
            "n = buf[pos]",
            "if n & 0x80:",
            "    n, pos = RUV(buf, pos)",
            "else:",
            "    pos += 1",
            "n -= 1",
        ]
    fmt = "h" if width == 2 else "i"
    return [
        f"n, = UNPACK_{fmt}(buf, pos)",
        f"pos += {width}",
        "if n < -1:",
        "    raise ProtocolError(f'{LABELS[step]}: invalid length {n} at offset {pos}')",
    ]


def _gen_null(i: int, nullable: bool, what: str) -> list[str]:
    if nullable:
        return [f"    v{i} = None"]
    return [
        "    raise ProtocolError(f'{LABELS[step]}: null found at offset {pos} "
        f"for a non-nullable {what}')"
    ]


def _gen_field(i: int, f: Field, version: int, flexible: bool, label: str, ns: dict[str, Any]) -> list[str]:
    """Generated lines decoding one non-fixed-width field into ``v{i}``."""
    t = f.type
    nullable = version in f.nullable_versions
    compact = _compact(f, version, flexible)
    ns.setdefault("UNPACK_h", _UNPACK16)
    ns.setdefault("UNPACK_i", _UNPACK32)
    if isinstance(t, str) and t in ("string", "bytes", "records"):
        conv = "str(buf[pos:end], 'utf-8')" if t == "string" else "bytes(buf[pos:end])"
        return [
            *_gen_len(compact, 2 if t == "string" else 4),
            "if n < 0:",
            *_gen_null(i, nullable, t),
            "else:",
            "    end = pos + n",
            "    if end > len(buf):",
            "        raise ProtocolError(f'truncated input reading {LABELS[step]} at offset {pos}: "
            "need {n} byte(s), {len(buf) - pos} left')",
            f"    v{i} = {conv}",
            "    pos = end",
        ]
    if isinstance(t, ArrayOf) and (isinstance(t.element, Schema) or t.element in FIXED_TYPES):
        el = t.element
        if isinstance(el, Schema):
            codec = codec_for(el, version, flexible)
            ns[f"E{i}"] = codec.decode
            min_size = codec.min_size
            read = [
                "    r.pos = pos",
                f"    v{i} = [E{i}(r) for _ in range(n)]",
                "    pos = r.pos",
            ]
        elif el == "uuid":
            min_size = 16
            read = [
                f"    v{i} = [bytes(buf[p:p + 16]) for p in range(pos, pos + 16 * n, 16)]",
                "    pos += 16 * n",
            ]
        else:
            fmt, min_size = FIXED_TYPES[el]
            read = [f"    v{i} = list(unpack_from('>%d{fmt}' % n, buf, pos))", f"    pos += {min_size} * n"]
            ns["unpack_from"] = struct.unpack_from
        check = []
        if min_size:
            check = [
                f"    if n * {min_size} > len(buf) - pos:",
                "        raise ProtocolError(f'{LABELS[step]}: array of {n} item(s) at offset {pos} "
                "cannot fit in the {len(buf) - pos} byte(s) left')",
            ]
        return [*_gen_len(compact, 4), "if n < 0:", *_gen_null(i, nullable, "array"), "else:", *check, *read]
    ns[f"D{i}"] = _value_decoder(label, f, version, flexible)
    return ["r.pos = pos", f"v{i} = D{i}(r)", "pos = r.pos"]


def _compile_decoder(
    name: str,
    version: int,
    flexible: bool,
    schema_fields: tuple[Field, ...],
    groups: list[tuple[Field, ...]],
    tagged: list[Field],
    label_of: Callable[[Field], str],
) -> StructDecoder:
    """Generate straight-line Python for this struct at this version (like ``dataclasses`` does).

    Fixed-width runs become one ``unpack_from`` into locals; other fields call their precompiled
    decoder closure; the result is one dict literal in schema order, with defaults as constants.
    """
    ns: dict[str, Any] = {}
    body: list[str] = []
    value_of: dict[str, str] = {}
    labels: list[str] = []
    nested: list[str | None] = []
    for i, fields in enumerate(groups):
        body.append(f"step = {i}")
        f0 = fields[0]
        if _is_fixed(f0.type):
            run = struct.Struct(">" + "".join(FIXED_TYPES[_type_name(f.type)][0] for f in fields))
            ns[f"U{i}"] = run.unpack_from
            names = [f"v{i}_{j}" for j in range(len(fields))]
            body.append(f"{', '.join(names)}, = U{i}(buf, pos)")
            body.append(f"pos += {run.size}")
            value_of.update({f.name: n for f, n in zip(fields, names)})
            labels.append(", ".join(f"{name}.{f.name}" for f in fields) + f" (v{version})")
            nested.append(None)
            continue
        body += _gen_field(i, f0, version, flexible, label_of(f0), ns)
        value_of[f0.name] = f"v{i}"
        labels.append(label_of(f0))
        nested.append(f0.name if _nested(f0) else None)
    if flexible:
        ns["TAGS"] = _tags_decoder(tagged, version, label_of)
        body += [
            "step = -1",
            "if buf[pos]:",
            "    r.pos = pos",
            "    tags = {}",
            "    TAGS(r, tags)",
            "    pos = r.pos",
            "else:",
            "    pos += 1",
            "    tags = None",
        ]
    items: list[str] = []
    for k, f in enumerate(schema_fields):
        expr = value_of.get(f.name)
        if expr is None:
            if f.has_mutable_default():
                ns[f"MK{k}"] = _default_factory(f)
                expr = f"MK{k}()"
            else:
                ns[f"C{k}"] = f.default_value()
                expr = f"C{k}"
        items.append(f"{f.name!r}: {expr}")

    def fail(e: Exception, step: int, r: Reader, pos: int) -> ProtocolError:
        if isinstance(e, ProtocolError):
            if step == -1:
                return ProtocolError(f"{name} tagged fields -> {e}")
            field = nested[step] if step >= 0 else None
            if field is not None and not str(e).startswith(f"{name}.{field} ("):
                return ProtocolError(f"{name}.{field} -> {e}")
            return e
        label = labels[step] if step >= 0 else f"{name} tagged fields (v{version})" if step == -1 else name
        pos = max(pos, r.pos)
        return ProtocolError(
            f"truncated or invalid input reading {label} at offset {pos} "
            f"({max(len(r.buf) - pos, 0)} byte(s) left)"
        )

    ns["fail"] = fail
    ns["RUV"] = read_uvarint
    ns["LABELS"] = labels
    ns["ProtocolError"] = ProtocolError
    ns["Errors"] = (ProtocolError, struct.error, IndexError, ValueError, OverflowError, MemoryError)
    src = ["def decode(r):", "    buf = r.buf", "    pos = r.pos", "    step = -2", "    try:"]
    src += ["        " + line for line in body] or ["        pass"]
    src += ["    except Errors as e:", "        raise fail(e, step, r, pos) from None", "    r.pos = pos"]
    src.append("    d = {" + ", ".join(items) + "}")
    if flexible:
        src += ["    if tags:", "        d.update(tags)"]
    src.append("    return d")
    exec(compile("\n".join(src), f"<decode {name} v{version}>", "exec"), ns)
    decode: StructDecoder = ns["decode"]
    return decode


def _explain_encode_error(
    fields: tuple[Field, ...], body: Body, label_of: Callable[[Field], str], err: Exception
) -> ProtocolError:
    """Find which field of a failed step holds the bad value and say why."""
    for f in fields:
        v = body.get(f.name, MISSING)
        if v is MISSING:
            continue
        kind = _type_name(f.type)
        if kind in FIXED_TYPES and kind != "uuid" and not _fits(kind, v):
            return ProtocolError(f"{label_of(f)}: {_describe_value_error(kind, v)}")
    if len(fields) == 1:
        f = fields[0]
        v = body.get(f.name)
        return ProtocolError(f"{label_of(f)}: cannot encode {v!r:.60} as {_type_name(f.type)} ({err})")
    names = ", ".join(label_of(f) for f in fields) or "?"
    return ProtocolError(f"{names}: {err}")
