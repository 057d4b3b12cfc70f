"""A worker's store used in-process (no service), for tests of what the worker computes."""

from __future__ import annotations

import contextlib
import glob
import os
import pathlib
from typing import Iterable, Iterator

from ttlstate.store import Store
from ttlstate.txn import Txn


@contextlib.contextmanager
def reading(tmp_path: pathlib.Path, keys: Iterable[bytes]) -> Iterator[Txn]:
    """A read-only transaction of a store whose version 1 holds `keys`, each valued
    `b"v" + key`; the transaction ends and the store's files go afterwards."""
    store = Store("s", str(tmp_path / "s"))
    try:
        t = store.begin(0, read_only=False)
        for key in keys:
            t.put(key, b"v" + key)
        store.commit(t, 1, str(tmp_path / "1.changelog"))
        t = store.begin(1, read_only=True)
        try:
            yield t
        finally:
            t.end()
    finally:
        store.close(delete_files=True)


def options_file(store: Store) -> dict[str, str]:
    """The `name=value` lines of the newest OPTIONS file RocksDB wrote for the store's database
    (a name in several sections: its first value)."""
    path = sorted(glob.glob(os.path.join(store.db_dir, "OPTIONS-*")))[-1]
    out = {}
    with open(path) as f:
        for line in f:
            name, eq, value = line.strip().partition("=")
            if eq:
                out.setdefault(name, value)
    return out
