"""One state store: a rocksdict database at one committed version, plus transactions.

A transaction is an overlay (key -> value, or None for a remove) over a RocksDB snapshot
of the committed version. Reads see the overlay, then the snapshot; `commit` applies the
overlay in one WriteBatch and writes it as the version's changelog; `abort` drops it.
Nothing is ever rolled back inside RocksDB (DESIGN.md 4.1).
"""

from __future__ import annotations

import heapq
import logging
import os
import shutil
from typing import Iterator

from rocksdict import Options, Rdict, WriteBatch

from . import statefile
from .errors import StorageError, TtlStateError, VersionMismatchError
from .protocol import FILE_CHANGELOG, FILE_SNAPSHOT

log = logging.getLogger("ttlstate.store")

_MEMORY_PROPERTIES = (
    "rocksdb.cur-size-all-mem-tables",
    "rocksdb.estimate-table-readers-mem",
    "rocksdb.block-cache-usage",
)


def engine_errors(fn):
    """Decorator: the one place that turns rocksdict/OS errors into `StorageError`."""
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TtlStateError:
            raise
        except Exception as e:  # OSError, and rocksdict's plain Exception subclasses
            raise StorageError(f"{fn.__qualname__}: {type(e).__name__}: {e}") from e
    wrapped.__name__ = fn.__name__
    wrapped.__qualname__ = fn.__qualname__
    wrapped.__doc__ = fn.__doc__
    return wrapped


def _options() -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    return opts


class Store:
    """A store's local database. Owned by one worker; callers hold `lock`."""

    def __init__(self, store_id: str, local_dir: str):
        self.store_id = store_id
        self.local_dir = local_dir
        self.db_dir = os.path.join(local_dir, "db")
        self.version = 0
        self.num_keys = 0
        self.txns: set[Txn] = set()
        shutil.rmtree(local_dir, ignore_errors=True)
        os.makedirs(local_dir, exist_ok=True)
        self.db = self._open_empty()

    @engine_errors
    def _open_empty(self) -> Rdict:
        shutil.rmtree(self.db_dir, ignore_errors=True)
        return Rdict(self.db_dir, _options())

    def __repr__(self):
        return f"Store({self.store_id}, v{self.version})"

    # -- versions ---------------------------------------------------------------------

    @engine_errors
    def load(self, version: int, files: list[tuple[int, int, str]]) -> int:
        """Rebuild the database from an optional snapshot plus changelogs, in order."""
        self._end_txns()
        self.db.close()
        self.db = self._open_empty()
        self.version = 0
        self.num_keys = 0
        last = 0
        for kind, file_version, path in files:
            records = statefile.read(path, kind, file_version)
            batch = WriteBatch(raw_mode=True)
            delta = 0
            if kind == FILE_SNAPSHOT:
                if last != 0:
                    raise StorageError(f"snapshot {path} must come first in a load")
                for key, value in records:
                    batch.put(key, value)
                    delta += 1
            else:
                if file_version != last + 1:
                    raise StorageError(
                        f"changelog {path} is version {file_version}, expected {last + 1}")
                pending: dict[bytes, bytes | None] = {}
                for key, value in records:
                    pending[key] = value
                for key, value in pending.items():
                    existed = self.db.get(key) is not None
                    if value is None:
                        batch.delete(key)
                        delta -= existed
                    else:
                        batch.put(key, value)
                        delta += not existed
            self.db.write(batch)
            self.num_keys += delta
            last = file_version
        if last != version:
            raise StorageError(f"files end at version {last}, asked to load {version}")
        self.version = version
        return self.num_keys

    def begin(self, version: int, read_only: bool) -> "Txn":
        if version != self.version:
            raise VersionMismatchError(
                f"{self.store_id}: store is at version {self.version}, asked for {version}")
        txn = Txn(self, read_only)
        self.txns.add(txn)
        return txn

    @engine_errors
    def commit(self, txn: "Txn", new_version: int, changelog_path: str) -> tuple[int, int]:
        if txn.store_version != self.version:
            raise VersionMismatchError(
                f"{self.store_id}: transaction began at version {txn.store_version}, "
                f"store is at {self.version}")
        overlay = txn.overlay
        for other in self.txns:
            if other is not txn:
                other.preserve(overlay.keys())
        size = statefile.write(changelog_path, FILE_CHANGELOG, new_version, overlay.items())
        batch = WriteBatch(raw_mode=True)
        for key, value in overlay.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self.db.write(batch)
        self.num_keys += txn.key_delta
        self.version = new_version
        txn.end()
        return self.num_keys, size

    @engine_errors
    def snapshot(self, path: str) -> tuple[int, int, int]:
        """Write every entry of the committed version to `path`."""
        size = statefile.write(path, FILE_SNAPSHOT, self.version, _db_items(self.db, b"", set()))
        return self.version, size, self.num_keys

    @engine_errors
    def memory_used(self) -> int:
        total = 0
        for prop in _MEMORY_PROPERTIES:
            total += self.db.property_int_value(prop) or 0
        for txn in self.txns:
            total += txn.overlay_bytes
        return total

    def _end_txns(self):
        for txn in list(self.txns):
            txn.end()

    @engine_errors
    def close(self, delete_files: bool):
        self._end_txns()
        self.db.close()
        if delete_files:
            shutil.rmtree(self.local_dir, ignore_errors=True)


class Txn:
    """An uncommitted version: an overlay over the committed version it began at.

    rocksdict 0.3.29 snapshots honour `get` but not iteration, so versions are kept apart
    by hand: when another transaction of the store commits, this one receives the
    pre-images of the keys that commit changes (`shadow`), and reads consult
    overlay -> shadow -> database.
    """

    def __init__(self, store: Store, read_only: bool):
        self.store = store
        self.store_version = store.version
        self.read_only = read_only
        self.overlay: dict[bytes, bytes | None] = {}
        self.shadow: dict[bytes, bytes | None] = {}
        self.key_delta = 0
        self.overlay_bytes = 0
        self.deferred_error: TtlStateError | None = None
        self.open = True

    def end(self):
        if self.open:
            self.open = False
            self.store.txns.discard(self)
            self.overlay = {}
            self.shadow = {}

    def preserve(self, keys):
        """Record the current values of `keys` before another transaction overwrites them."""
        db_get = self.store.db.get
        shadow = self.shadow
        for key in keys:
            if key not in shadow:
                shadow[key] = db_get(key)

    def _base_get(self, key: bytes) -> bytes | None:
        shadow = self.shadow
        if shadow and key in shadow:
            return shadow[key]
        return self.store.db.get(key)

    def get(self, key: bytes) -> bytes | None:
        overlay = self.overlay
        if key in overlay:
            return overlay[key]
        return self._base_get(key)

    def put(self, key: bytes, value: bytes):
        old = self.overlay.get(key, _ABSENT)
        if old is _ABSENT:  # first write of this key in the transaction
            existed = self._base_get(key) is not None
            self.overlay_bytes += len(key)
        else:
            existed = old is not None
            self.overlay_bytes -= len(old) if old else 0
        if not existed:
            self.key_delta += 1
        self.overlay_bytes += len(value)
        self.overlay[key] = value

    def remove(self, key: bytes):
        old = self.overlay.get(key, _ABSENT)
        if old is _ABSENT:
            if self._base_get(key) is None:
                return  # removing a missing key is a no-op
            self.overlay_bytes += len(key)
        elif old is None:
            return  # already removed in this transaction
        else:
            self.overlay_bytes -= len(old)
        self.key_delta -= 1
        self.overlay[key] = None

    @property
    def num_keys(self) -> int:
        return self.store.num_keys + self.key_delta

    def iterate(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Entries whose key starts with `prefix`, as of now, in key order.

        The overlay and shadow are copied and the RocksDB iterator pins the database as
        of its creation, so later writes (this transaction's or a concurrent commit) do
        not disturb the iteration (the RocksDB provider's behaviour).
        """
        base = _sorted_prefixed(self.shadow, prefix)
        base_iter = _db_items(self.store.db, prefix, {k for k, _ in base})
        staged = _sorted_prefixed(self.overlay, prefix)
        staged_keys = {k for k, _ in staged}
        committed = heapq.merge(base_iter, base, key=_first)
        merged = heapq.merge((kv for kv in committed if kv[0] not in staged_keys), staged, key=_first)
        for key, value in merged:
            if value is not None:
                yield key, value


_ABSENT = object()  # "not in the overlay", as opposed to None: "removed"


def _first(kv):
    return kv[0]


def _sorted_prefixed(d: dict, prefix: bytes) -> list:
    if not d:
        return []
    if prefix:
        return sorted((k, v) for k, v in d.items() if k.startswith(prefix))
    return sorted(d.items())


def _db_items(db: Rdict, prefix: bytes, skip: set[bytes]) -> Iterator[tuple[bytes, bytes]]:
    it = db.iter()
    if prefix:
        it.seek(prefix)
    else:
        it.seek_to_first()
    while it.valid():
        key = it.key()
        if prefix and not key.startswith(prefix):
            return
        if key not in skip:
            yield key, it.value()
        it.next()
