"""The stored key of a store scanned by prefix (Spark's `PrefixKeyScanStateEncoderSpec`), as the
JVM writes it (`cache/PrefixedKey`, `store/KeyCodec`): `[u32 big-endian n][prefix row, n
bytes][key row]`. The offline tools (`cli`'s dump, `repartition`) read a stored key's row with
`key_row`; `tests/vectors/prefix_keys.tsv` pins both sides."""

from __future__ import annotations

LENGTH_BYTES = 4


def split(stored: bytes) -> tuple[bytes, bytes]:
    """(prefix row, key row) of a stored prefix-scan key; ValueError if `stored` is none (too
    short for its length field, or for what that field says)."""
    if len(stored) < LENGTH_BYTES:
        raise ValueError(f"a {len(stored)}-byte prefix-scan key")
    n = int.from_bytes(stored[:LENGTH_BYTES], "big")
    if n > len(stored) - LENGTH_BYTES:
        raise ValueError(f"a {len(stored)}-byte prefix-scan key whose prefix row would be {n} bytes")
    return stored[LENGTH_BYTES:LENGTH_BYTES + n], stored[LENGTH_BYTES + n:]


def key_row(stored: bytes, prefix_cols: int) -> bytes:
    """The key row of a stored key of a store with `prefix_cols` prefix columns (0: the stored
    key is the row); ValueError as `split`."""
    return split(stored)[1] if prefix_cols else stored
