"""Decode Spark's UnsafeRow bytes (the state store's keys and values) with a schema.

An UnsafeRow is a null bit set (one bit per field, in 64-bit words), one 8-byte slot per
field, then a variable-length region. A fixed-width value (integral, float/double,
boolean, date, timestamp, decimal of precision <= 18, intervals of one unit) sits in its
slot; any other value (string, binary, larger decimal, struct, array, map, calendar
interval) is `offset << 32 | size` in its slot, the offset counted from the row's start.
All numbers are little-endian. Arrays and maps are UnsafeArrayData / UnsafeMapData.

Schemas are Spark's JSON form (`StructType.json`), as Spark writes them into a
checkpoint's state schema file. Decoded values are JSON-ready: a struct is a dict, an
array a list, a map a list of [key, value] pairs (a field name that occurs twice in
a struct gets `#<position>`), a timestamp an ISO-8601 string (UTC,
`Z`), a date `YYYY-MM-DD`, a decimal a string, binary a hex string. Bytes that do not fit
the schema raise `UnsafeRowError` rather than decode to garbage.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import struct

_EPOCH = dt.datetime(1970, 1, 1)
_EPOCH_DATE = dt.date(1970, 1, 1)
_DECIMAL = re.compile(r"^decimal\((\d+),\s*(-?\d+)\)$")
_MAX_LONG_DIGITS = 18  # Decimal.MAX_LONG_DIGITS: up to this precision a decimal is a long

# fixed-width types: name -> (struct format, width in an array)
_FIXED = {
    "boolean": ("<?", 1), "byte": ("<b", 1), "short": ("<h", 2), "integer": ("<i", 4),
    "long": ("<q", 8), "float": ("<f", 4), "double": ("<d", 8), "date": ("<i", 4),
    "timestamp": ("<q", 8), "timestamp_ntz": ("<q", 8),
    "interval year to month": ("<i", 4), "interval day to second": ("<q", 8),
}


class UnsafeRowError(ValueError):
    """The bytes are not an UnsafeRow of the schema."""


def parse_schema(text: str | dict) -> dict:
    """A schema (`StructType.json`, or its parsed dict) as a dict; checks it is a struct."""
    schema = json.loads(text) if isinstance(text, str) else text
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise ValueError(f"not a Spark struct schema: {str(text)[:200]}")
    return schema


def type_name(t) -> str:
    """A short readable name of a schema type (`string`, `struct<a:long>`, ...)."""
    if isinstance(t, str):
        return t
    kind = t.get("type")
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{type_name(f['type'])}" for f in t["fields"]) + ">"
    if kind == "array":
        return f"array<{type_name(t['elementType'])}>"
    if kind == "map":
        return f"map<{type_name(t['keyType'])},{type_name(t['valueType'])}>"
    if kind == "udt":
        return type_name(t.get("sqlType", "udt"))
    return str(kind)


def decode_row(buf: bytes, schema: dict) -> dict:
    """The fields of the UnsafeRow `buf` (the whole buffer) by name."""
    return _Reader(memoryview(buf)).row(0, len(buf), schema)


def field_names(schema: dict) -> list[str]:
    """The struct's field names, a name that occurs more than once suffixed `#<position>`
    (Spark names every computed grouping expression `_groupingexpression`)."""
    names = [f["name"] for f in schema["fields"]]
    return [f"{n}#{i}" if names.count(n) > 1 else n for i, n in enumerate(names)]


def _norm(t):
    """The type with UDTs unwrapped and type-name variants mapped to the canonical name."""
    while isinstance(t, dict) and t.get("type") == "udt":
        t = t["sqlType"]
    if isinstance(t, str):
        if t.startswith("string") or t.startswith("char(") or t.startswith("varchar("):
            return "string"
        if t.startswith("interval year") or t.startswith("interval month"):
            return "interval year to month"
        if t.startswith("interval day") or t.startswith("interval hour") or \
                t.startswith("interval minute") or t.startswith("interval second"):
            return "interval day to second"
        if t == "decimal":
            return "decimal(10,0)"
        if t == "void":
            return "null"
    return t


def _decimal_precision(t) -> tuple[int, int] | None:
    m = _DECIMAL.match(t) if isinstance(t, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


def _fixed(t) -> bool:
    """Whether values of type `t` live in their 8-byte slot (not the variable region)."""
    if not isinstance(t, str):
        return False
    if t in _FIXED or t == "null":
        return True
    p = _decimal_precision(t)
    return p is not None and p[0] <= _MAX_LONG_DIGITS


def _words(n: int) -> int:
    return ((n + 63) // 64) * 8


class _Reader:
    def __init__(self, buf: memoryview):
        self.buf = buf

    def _check(self, start: int, size: int, what: str):
        if start < 0 or size < 0 or start + size > len(self.buf):
            raise UnsafeRowError(f"{what}: bytes {start}..{start + size} outside the "
                                 f"{len(self.buf)}-byte buffer")

    def row(self, start: int, size: int, schema: dict) -> dict:
        fields = schema["fields"]
        n = len(fields)
        bits = _words(n)
        fixed_end = bits + 8 * n
        if size < fixed_end:
            raise UnsafeRowError(f"a row of {n} fields needs at least {fixed_end} bytes, got {size}")
        self._check(start, size, "row")
        nulls = int.from_bytes(self.buf[start:start + bits], "little")
        if nulls >> n:
            raise UnsafeRowError(f"null bits set beyond the {n} fields of the row")
        out = {}
        for i, (name, f) in enumerate(zip(field_names(schema), fields)):
            slot = start + bits + 8 * i
            if nulls >> i & 1:
                out[name] = None
                continue
            t = _norm(f["type"])
            if _fixed(t):
                out[name] = self.fixed(slot, t)
            else:
                word = struct.unpack_from("<Q", self.buf, slot)[0]
                off, length = word >> 32, word & 0xFFFFFFFF
                if off < fixed_end or off + length > size:
                    raise UnsafeRowError(f"field {name!r}: variable data at {off}+{length} "
                                         f"outside the row's {fixed_end}..{size}")
                out[name] = self.var(start + off, length, t)
        return out

    def fixed(self, pos: int, t):
        if t == "null":
            return None
        p = _decimal_precision(t)
        if p is not None:
            unscaled = struct.unpack_from("<q", self.buf, pos)[0]
            return str(decimal.Decimal(unscaled).scaleb(-p[1]))
        fmt, _ = _FIXED[t]
        v = struct.unpack_from(fmt, self.buf, pos)[0]
        return _render(t, v)

    def var(self, pos: int, length: int, t):
        self._check(pos, length, "variable-length value")
        data = self.buf[pos:pos + length]
        if t == "string":
            return bytes(data).decode("utf-8", errors="replace")
        if t == "binary":
            return bytes(data).hex()
        p = _decimal_precision(t)
        if p is not None:
            unscaled = int.from_bytes(data, "big", signed=True)
            return str(decimal.Decimal(unscaled).scaleb(-p[1]))
        if t == "calendarinterval" or t == "interval":
            if length < 16:
                raise UnsafeRowError(f"a calendar interval needs 16 bytes, got {length}")
            months, days, micros = struct.unpack_from("<iiq", data, 0)
            return {"months": months, "days": days, "microseconds": micros}
        if isinstance(t, dict):
            kind = t.get("type")
            if kind == "struct":
                return self.row(pos, length, t)
            if kind == "array":
                return self.array(pos, length, _norm(t["elementType"]))
            if kind == "map":
                if length < 8:
                    raise UnsafeRowError(f"a map needs at least 8 bytes, got {length}")
                key_bytes = struct.unpack_from("<q", data, 0)[0]
                if not 0 <= key_bytes <= length - 8:
                    raise UnsafeRowError(f"map key array of {key_bytes} bytes in a {length}-byte map")
                keys = self.array(pos + 8, key_bytes, _norm(t["keyType"]))
                values = self.array(pos + 8 + key_bytes, length - 8 - key_bytes, _norm(t["valueType"]))
                if len(keys) != len(values):
                    raise UnsafeRowError(f"map with {len(keys)} keys and {len(values)} values")
                return [[k, v] for k, v in zip(keys, values)]
        raise UnsafeRowError(f"type {type_name(t)} is not decoded")

    def array(self, pos: int, length: int, et) -> list:
        if length < 8:
            raise UnsafeRowError(f"an array needs at least 8 bytes, got {length}")
        n = struct.unpack_from("<q", self.buf, pos)[0]
        if not 0 <= n <= length * 8:
            raise UnsafeRowError(f"array of {n} elements in {length} bytes")
        bits = _words(n)
        width = _FIXED[et][1] if et in _FIXED else 8  # var-length, decimal, null: 8-byte slots
        if et == "null":
            width = 1
        values_start = 8 + bits
        if values_start + n * width > length:
            raise UnsafeRowError(f"array of {n} elements of {width} bytes overruns its {length} bytes")
        nulls = int.from_bytes(self.buf[pos + 8:pos + 8 + bits], "little")
        out = []
        for i in range(n):
            if nulls >> i & 1:
                out.append(None)
                continue
            slot = pos + values_start + i * width
            if _fixed(et):
                out.append(self.fixed(slot, et))
            else:
                word = struct.unpack_from("<Q", self.buf, slot)[0]
                off, size = word >> 32, word & 0xFFFFFFFF
                if off + size > length:
                    raise UnsafeRowError(f"array element {i} at {off}+{size} outside the array")
                out.append(self.var(pos + off, size, et))
        return out


def _render(t: str, v):
    if t == "date":
        return (_EPOCH_DATE + dt.timedelta(days=v)).isoformat()
    if t in ("timestamp", "timestamp_ntz"):
        text = format_micros(v)
        return text + "Z" if t == "timestamp" else text
    if t in ("float", "double") and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if t == "float":
        return float(f"{v:.7g}")  # the float32 value as Spark prints it, not its float64 widening
    return v


def format_micros(us: int) -> str:
    """Microseconds since the epoch as ISO-8601 (`2024-01-01T00:03:56[.123456]`, no zone)."""
    try:
        return (_EPOCH + dt.timedelta(microseconds=us)).isoformat()
    except OverflowError:
        return f"{us}us"
