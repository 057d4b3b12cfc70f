"""A MULTI_GET larger than one RocksDB MultiGet is read in slices (DESIGN 86): the answers are
the values of the keys asked, in the order asked, whatever that order and however many."""

from __future__ import annotations

import random

from ttlstate import engine
from ttlstate.store import Store


def test_values_come_back_in_request_order_across_slices(tmp_path):
    n = 2 * engine.MULTI_GET_SLICE + 123
    stored = [b"k%07d" % i for i in range(0, 2 * n, 2)]  # every other key
    store = Store("s", str(tmp_path / "s"))
    try:
        t = store.begin(0, read_only=False)
        for key in stored:
            t.put(key, b"v" + key)
        store.commit(t, 1, str(tmp_path / "1.changelog"))
        t = store.begin(1, read_only=True)
        try:
            asked = [b"k%07d" % i for i in range(2 * n)]  # half of them absent
            random.Random(7).shuffle(asked)
            for keys in (asked, sorted(asked), asked[:engine.MULTI_GET_SLICE], asked[:1]):
                assert t.plain_values(keys) == [t.get(k) for k in keys]
            assert sum(v is not None for v in t.plain_values(asked)) == n
        finally:
            t.end()
    finally:
        store.close(delete_files=True)
