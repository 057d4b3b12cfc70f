"""A prefix scan of the database alone runs in rocksdict's iterator, bounded by RocksDB at the
prefix's end (docs/decisions/079-first-write-consumes-answer.md): it must return exactly the keys
that start with the prefix, in key
order, whatever bytes the prefix ends in."""

from __future__ import annotations

import itertools

import pytest

from local_store import reading
from ttlstate.engine import prefix_end

BYTES = (b"\x00", b"\x01", b"a", b"\xfe", b"\xff")
# every key of up to three of those bytes: prefixes ending in 0xff, keys equal to a prefix,
# keys one byte past a prefix's end
KEYS = sorted(b"".join(t) for n in range(1, 4) for t in itertools.product(BYTES, repeat=n))


@pytest.mark.parametrize("prefix,end", [(b"ab", b"ac"), (b"a\xff", b"b"), (b"a\xff\xff", b"b"),
                                        (b"\x00", b"\x01"), (b"\xff", None), (b"\xff\xff", None)])
def test_a_prefix_ends_at_the_least_key_above_all_it_starts(prefix, end):
    assert prefix_end(prefix) == end


def test_a_prefix_scan_returns_exactly_the_keys_under_the_prefix(tmp_path):
    with reading(tmp_path, KEYS) as t:
        for n in range(1, 3):
            for prefix in (b"".join(p) for p in itertools.product(BYTES, repeat=n)):
                expected = [(k, b"v" + k) for k in KEYS if k.startswith(prefix)]
                assert list(t.iterate(prefix)) == expected, prefix
