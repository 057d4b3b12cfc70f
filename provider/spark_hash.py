"""Spark's shuffle placement of a row: `HashPartitioning` = `pmod(Murmur3Hash(columns, 42), n)`.

This is Spark's `Murmur3Hash` expression (`hash()` in SQL, seed 42) over the columns of an
UnsafeRow, read straight from its bytes with its schema (`unsaferow`'s format): each column
hashed with the previous column's hash as seed, a null leaving the seed as it is, a struct
its fields in turn, an array its elements in turn. Values as Spark hashes them:
boolean/byte/short/int/date `hashInt`, long/timestamp `hashLong`, float/double by their bits
with -0.0 as 0.0 (`hashInt`/`hashLong`), decimal up to 18 digits `hashLong` of the unscaled
value, larger ones `hashUnsafeBytes` of the unscaled big-endian two's complement bytes,
string (UTF8_BINARY) and binary `hashUnsafeBytes` of their bytes. `hashUnsafeBytes` is
Spark's (not standard Murmur3's) tail handling: each trailing byte mixed as a signed int.
Other types (maps, calendar intervals) raise `UnhashableError`; a string of a
collation other than UTF8_BINARY (recorded in the field's `__COLLATIONS` metadata, the type
being "string") would be hashed as bytes, wrongly: `unhashable_column` names such columns
from the schema, before any row is hashed.
"""

from __future__ import annotations

import struct

from .unsaferow import _decimal_precision, _fixed, _norm, _words

SEED = 42
_M32 = 0xFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593


class UnhashableError(ValueError):
    """A type whose Spark hash is not reproduced here."""


_BINARY_COLLATION = "spark.UTF8_BINARY"
_SQL_NAMES = {"integer": "int", "long": "bigint", "short": "smallint", "byte": "tinyint"}


def sql_type(t) -> str:
    """A schema JSON type as Spark's SQL names it (`map<string,bigint>`)."""
    t = _norm(t)
    if isinstance(t, str):
        return _SQL_NAMES.get(t, t)
    kind = t.get("type")
    if kind == "map":
        return f"map<{sql_type(t['keyType'])},{sql_type(t['valueType'])}>"
    if kind == "array":
        return f"array<{sql_type(t['elementType'])}>"
    if kind == "struct":
        return "struct<" + ",".join(f"{f['name']}:{sql_type(f['type'])}" for f in t["fields"]) + ">"
    return str(t)


def _type_unhashable(t) -> bool:
    t = _norm(t)
    if isinstance(t, str):
        return not (_fixed(t) or t in ("string", "binary") or _decimal_precision(t) is not None)
    kind = t.get("type")
    if kind == "struct":
        return unhashable_column(t) is not None
    if kind == "array":
        return _type_unhashable(t["elementType"])
    return True  # map, and anything else


def unhashable_column(schema: dict, num_fields: int | None = None) -> tuple[str, str] | None:
    """(column, type) of the first of the first `num_fields` columns whose hash `hash_row`
    does not reproduce (a map, a calendar interval, a string of a collation other than
    UTF8_BINARY, which Spark hashes by its collation key), else None."""
    fields = schema["fields"]
    for f in fields[:num_fields] if num_fields is not None else fields:
        collations = (f.get("metadata") or {}).get("__COLLATIONS") or {}
        for path, collation in sorted(collations.items()):
            if collation != _BINARY_COLLATION:
                return path, f"string collate {collation.split('.', 1)[-1]}"
        t = _norm(f["type"])
        if isinstance(t, dict) and t.get("type") == "struct":
            inner = unhashable_column(t)
            if inner is not None:
                return f"{f['name']}.{inner[0]}", inner[1]
        elif _type_unhashable(t):
            return f["name"], sql_type(f["type"])
    return None


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _M32
    return (_rotl(k1, 15) * _C2) & _M32


def _mix_h1(h1: int, k1: int) -> int:
    h1 = _rotl(h1 ^ k1, 13)
    return (h1 * 5 + 0xE6546B64) & _M32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _M32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _M32
    return h1 ^ (h1 >> 16)


def hash_int(value: int, seed: int) -> int:
    """`Murmur3_x86_32.hashInt` (unsigned 32-bit in, unsigned 32-bit out)."""
    return _fmix(_mix_h1(seed & _M32, _mix_k1(value & _M32)), 4)


def hash_long(value: int, seed: int) -> int:
    """`Murmur3_x86_32.hashLong`: the low int, then the high int."""
    value &= 0xFFFFFFFFFFFFFFFF
    h1 = _mix_h1(seed & _M32, _mix_k1(value & _M32))
    h1 = _mix_h1(h1, _mix_k1(value >> 32))
    return _fmix(h1, 8)


def hash_bytes(data: bytes, seed: int) -> int:
    """`Murmur3_x86_32.hashUnsafeBytes`: little-endian ints, then each tail byte as a signed int."""
    n = len(data)
    aligned = n - n % 4
    h1 = seed & _M32
    for (word,) in struct.iter_unpack("<I", data[:aligned]):
        h1 = _mix_h1(h1, _mix_k1(word))
    for b in data[aligned:]:
        h1 = _mix_h1(h1, _mix_k1((b - 256 if b > 127 else b) & _M32))
    return _fmix(h1, n)


def signed(h: int) -> int:
    """A 32-bit hash as Java's int."""
    return h - (1 << 32) if h & 0x80000000 else h


def partition_of(row: bytes, schema: dict, num_partitions: int, num_fields: int | None = None) -> int:
    """The shuffle partition of an UnsafeRow among `num_partitions`: Spark's
    `pmod(hash(col_1, ..., col_k), num_partitions)` over its first `num_fields` columns (all)."""
    return signed(hash_row(row, schema, num_fields)) % num_partitions


def hash_row(row: bytes, schema: dict, num_fields: int | None = None, seed: int = SEED) -> int:
    """Spark's Murmur3Hash of the first `num_fields` columns (default all) of an UnsafeRow."""
    return _Hasher(memoryview(row)).row(0, schema, seed, num_fields)


class _Hasher:
    def __init__(self, buf: memoryview):
        self.buf = buf

    def row(self, start: int, schema: dict, seed: int, num_fields: int | None = None) -> int:
        fields = schema["fields"]
        bits = _words(len(fields))
        nulls = int.from_bytes(self.buf[start:start + bits], "little")
        h = seed
        for i, f in enumerate(fields[:num_fields] if num_fields is not None else fields):
            if nulls >> i & 1:
                continue
            h = self.value(start, start + bits + 8 * i, _norm(f["type"]), h)
        return h

    def value(self, base: int, slot: int, t, seed: int) -> int:
        """The hash of the value in `slot`; a variable-length one's offset counts from `base`."""
        if _fixed(t):
            return self.fixed(slot, t, seed)
        word = struct.unpack_from("<Q", self.buf, slot)[0]
        pos, length = base + (word >> 32), word & 0xFFFFFFFF
        data = self.buf[pos:pos + length]
        if t in ("string", "binary"):
            return hash_bytes(bytes(data), seed)
        if _decimal_precision(t) is not None:
            return hash_bytes(bytes(data), seed)  # BigInteger.toByteArray, as UnsafeRow stores it
        if isinstance(t, dict) and t.get("type") == "struct":
            return self.row(pos, t, seed)
        if isinstance(t, dict) and t.get("type") == "array":
            return self.array(pos, _norm(t["elementType"]), seed)
        raise UnhashableError(f"Spark's hash of type {t!r} is not reproduced")

    def fixed(self, slot: int, t: str, seed: int) -> int:
        if t == "null":
            return seed
        if _decimal_precision(t) is not None or t in ("long", "timestamp", "timestamp_ntz",
                                                       "interval day to second"):
            return hash_long(struct.unpack_from("<q", self.buf, slot)[0], seed)
        if t == "double":
            d = struct.unpack_from("<d", self.buf, slot)[0]
            if d != d:
                return hash_long(0x7FF8000000000000, seed)  # doubleToLongBits' canonical NaN
            return hash_long(0 if d == 0.0 else struct.unpack_from("<q", self.buf, slot)[0], seed)
        if t == "float":
            f = struct.unpack_from("<f", self.buf, slot)[0]
            if f != f:
                return hash_int(0x7FC00000, seed)
            return hash_int(0 if f == 0.0 else struct.unpack_from("<i", self.buf, slot)[0], seed)
        if t == "boolean":
            return hash_int(1 if self.buf[slot] else 0, seed)
        if t == "byte":
            return hash_int(struct.unpack_from("<b", self.buf, slot)[0], seed)
        if t == "short":
            return hash_int(struct.unpack_from("<h", self.buf, slot)[0], seed)
        if t in ("integer", "date", "interval year to month"):
            return hash_int(struct.unpack_from("<i", self.buf, slot)[0], seed)
        raise UnhashableError(f"Spark's hash of type {t!r} is not reproduced")

    def array(self, pos: int, et, seed: int) -> int:
        n = struct.unpack_from("<q", self.buf, pos)[0]
        bits = _words(n)
        if et == "null":
            return seed
        widths = {"boolean": 1, "byte": 1, "short": 2, "integer": 4, "date": 4, "float": 4,
                  "interval year to month": 4}
        width = widths.get(et, 8) if isinstance(et, str) else 8
        nulls = int.from_bytes(self.buf[pos + 8:pos + 8 + bits], "little")
        h = seed
        for i in range(n):
            if nulls >> i & 1:
                continue
            slot = pos + 8 + bits + i * width
            if isinstance(et, str) and _fixed(et) and width < 8:
                h = self._narrow(slot, et, h)
            else:
                h = self.value(pos, slot, et, h)
        return h

    def _narrow(self, slot: int, t: str, seed: int) -> int:
        if t == "float":
            f = struct.unpack_from("<f", self.buf, slot)[0]
            if f != f:
                return hash_int(0x7FC00000, seed)
            return hash_int(0 if f == 0.0 else struct.unpack_from("<i", self.buf, slot)[0], seed)
        fmt = {"boolean": "<?", "byte": "<b", "short": "<h"}.get(t, "<i")
        v = struct.unpack_from(fmt, self.buf, slot)[0]
        return hash_int(int(v), seed)
