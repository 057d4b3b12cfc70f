"""Regenerate tests/vectors/prefix_keys.tsv: `python tests/vectors/make_key_vectors.py`.

The stored key of a store scanned by prefix (docs/DESIGN.md, `[u32 big-endian n][prefix row, n
bytes][key row]`; no prefix columns: the key row): `name <TAB> key schema (Spark's JSON) <TAB>
prefix columns <TAB> the key's values (JSON list) <TAB> stored key in hex` per line. The bytes
are computed here from the definitions of Spark's UnsafeRow (null bits, 8-byte slots,
variable-length data 8-byte aligned at `offset << 32 | size`) and of the envelope, with neither
side's code, so a change of either side alone fails its test: the JVM's `KeyCodec` must write
them (`PrefixKeyVectorsTest`), Python's `ttlstate.prefix_key` read them
(`tests/test_prefix_key_vectors.py`).
"""

import json
import pathlib

OUT = pathlib.Path(__file__).with_name("prefix_keys.tsv")


def schema(*fields):
    return {"type": "struct", "fields": [{"name": n, "type": t, "nullable": True, "metadata": {}} for n, t in fields]}


def unsafe_row(types, values) -> bytes:
    n = len(types)
    bits = (n + 63) // 64 * 8
    nulls, fixed, var = 0, bytearray(8 * n), bytearray()
    for i, (t, v) in enumerate(zip(types, values)):
        if v is None:
            nulls |= 1 << i
        elif t == "long":
            fixed[8 * i:8 * i + 8] = v.to_bytes(8, "little", signed=True)
        elif t == "integer":
            fixed[8 * i:8 * i + 4] = v.to_bytes(4, "little", signed=True)
        elif t == "string":
            data = v.encode("utf-8")
            fixed[8 * i:8 * i + 8] = ((bits + 8 * n + len(var)) << 32 | len(data)).to_bytes(8, "little")
            var += data + bytes(-len(data) % 8)
        else:
            raise ValueError(t)
    return nulls.to_bytes(bits, "little") + bytes(fixed) + bytes(var)


def stored_key(types, values, prefix_cols: int) -> bytes:
    row = unsafe_row(types, values)
    if not prefix_cols:
        return row
    prefix = unsafe_row(types[:prefix_cols], values[:prefix_cols])
    return len(prefix).to_bytes(4, "big") + prefix + row


SESSION = (("user", "string"), ("session", "long"))
MIXED = (("a", "integer"), ("b", "string"), ("c", "long"))


def cases():
    yield "no-prefix", SESSION, 0, ["alice", 7]
    yield "one-column", SESSION, 1, ["alice", 7]
    yield "every-column", SESSION, 2, ["alice", -1]
    yield "long-prefix-row", SESSION, 1, ["x" * 300, 9223372036854775807]
    yield "null-prefix", SESSION, 1, [None, 3]
    yield "empty-string", SESSION, 1, ["", -9223372036854775808]
    yield "unicode", SESSION, 1, ["é日本", 0]
    yield "mixed-two", MIXED, 2, [-5, "k", 9]
    yield "mixed-null-key-column", MIXED, 1, [2147483647, "v", None]
    yield "mixed-no-prefix", MIXED, 0, [-2147483648, None, 1]


def main():
    lines = ["# name\tkey schema\tprefix columns\tkey values\tstored key (hex)  (see make_key_vectors.py)"]
    for name, fields, n, values in cases():
        types = [t for _, t in fields]
        lines.append("\t".join((name, json.dumps(schema(*fields), separators=(",", ":")), str(n),
                                json.dumps(values, ensure_ascii=True), stored_key(types, values, n).hex())))
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {len(lines) - 1} vectors to {OUT}")


if __name__ == "__main__":
    main()
