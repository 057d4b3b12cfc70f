"""The read-ahead's key sort (`BytewiseSort`, DESIGN 88) orders keys as RocksDB does, bytewise
(unsigned), which is Python's order of `bytes`: key sets made to hit its cases (a long common
prefix, keys that are prefixes of others, equal six-byte prefixes, duplicates, bytes above 0x7f,
empty keys, the largest block it sorts packed and one past it) go through the Java sort and come
back in `sorted()`'s order."""

from __future__ import annotations

import random

import pytest


def _key_sets() -> list[list[bytes]]:
    rng = random.Random(88)
    unsafe_row = [bytes(8) + rng.randrange(10_000_000).to_bytes(8, "little") for _ in range(5000)]
    sets = [
        [],
        [b"only"],
        [b"", b"\x00", b"", b"a"],
        unsafe_row,  # an UnsafeRow of one long: 8 bytes of null bits in common
        [b"p" * 20 + bytes([rng.randrange(256) for _ in range(rng.randrange(0, 12))]) for _ in range(3000)],
        [b"same6!" + bytes([rng.randrange(256)]) for _ in range(400)] + [b"same6!", b"same6"],  # ties on six bytes
        [bytes([rng.randrange(256) for _ in range(rng.randrange(1, 9))]) for _ in range(2000)],  # high bytes
        [rng.choice(unsafe_row[:50]) for _ in range(500)],  # duplicates
        [rng.randrange(1 << 40).to_bytes(8, "big") for _ in range(1 << 16)],  # the largest packed block
        [rng.randrange(1 << 40).to_bytes(8, "big") for _ in range((1 << 16) + 1)],  # one past: the comparator
    ]
    for s in sets:
        rng.shuffle(s)
    return sets


def _line(keys: list[bytes]) -> str:
    return " ".join(k.hex() if k else "-" for k in keys)


@pytest.mark.usefixtures("ttlstate_jar")
def test_java_bytewise_sort_matches_pythons_order_of_bytes(tmp_path):
    from checkpoint_queries import run_jvm_check
    sets = _key_sets()
    path = tmp_path / "keys.txt"
    path.write_text("".join(_line(s) + "\n" for s in sets))
    out = run_jvm_check("io.ttlstate.spark.store.SortCheck", str(path))
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    lines = out.stdout.split("\n")[:len(sets)]
    assert len(lines) == len(sets), out.stdout[-2000:]
    for s, line in zip(sets, lines):
        assert line == _line(sorted(s)), (len(s), line[:200])
