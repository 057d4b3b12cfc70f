"""One state store: a rocksdict database at one committed version, plus transactions.

A transaction is an overlay (key -> value, or None for a remove) over the committed
version. Reads see the overlay, then the committed version; `commit` applies the overlay
in one WriteBatch and writes it as the version's changelog; `abort` drops it. Nothing is
ever rolled back inside RocksDB (DESIGN.md 4.1).

With TTL (docs/DESIGN.md, "State TTL") every stored value carries Flink's 8-byte
timestamp; the transaction hides, cleans and refreshes entries by its clock, and the
store keeps a histogram of timestamps so live counts need no scan.
"""

from __future__ import annotations

import heapq
import logging
import math
import os
import re
import shutil
from typing import Iterator

from rocksdict import AccessType, Options, Rdict, WriteBatch

from . import statefile
from .errors import StorageError, TtlStateError, VersionMismatchError
from .protocol import FILE_CHANGELOG, FILE_SNAPSHOT
from .statefile import LAYOUT_PLAIN, LAYOUT_TTL, FileMeta
from .ttl import MAX_TS, TtlTimeProvider, WallClock, expired
from .ttl import codec
from .ttl.config import StateVisibility, TimeCharacteristic, TtlConfig, UpdateType
from .ttl.histogram import TsHistogram

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


def _options(statistics: bool) -> Options:
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    if statistics:
        opts.enable_statistics()
    return opts


_DROPPED_BY_FILTER = re.compile(r"rocksdb\.compaction\.key\.drop\.user COUNT : (\d+)")
_INCREMENTAL_BATCH = 1024  # incremental-cleanup work is done in steps of this many entries
_HINT_REFRESH_MS = 1000  # ProcessingTime: recount expired entries at most once a second
METRIC_EXPIRED_ON_READ = "ttlstateExpiredOnRead"
METRIC_EXPIRED_INCREMENTAL = "ttlstateExpiredIncremental"
METRIC_EXPIRED_BY_COMPACTION = "ttlstateExpiredByCompaction"
METRIC_TTL_MS = "ttlstateTtlMs"


class Store:
    """A store's local database. Owned by one worker; callers hold `lock`."""

    def __init__(self, store_id: str, local_dir: str, ttl: TtlConfig = TtlConfig(),
                 clock: TtlTimeProvider | None = None):
        self.store_id = store_id
        self.local_dir = local_dir
        self.db_dir = os.path.join(local_dir, "db")
        self.ttl = ttl
        self.ttl_ms = ttl.ttl_ms if ttl.enabled else 0
        self.layout = LAYOUT_TTL if self.ttl_ms else LAYOUT_PLAIN
        self.clock = clock or WallClock()
        self.version = 0
        self.num_keys = 0
        self.hist = TsHistogram()  # entries per TTL timestamp (TTL only)
        self.batch_ts = -1  # the TTL clock of the committed version's commit
        self.cursor = b""  # the incremental cleanup goes on after this key
        self.migrated = False  # the loaded files had another value layout
        self.txns: set[Txn] = set()
        self.dropped_seen = 0  # compaction-filter drops counted so far
        self.dropped_unreported = 0
        self.last_compaction = self.clock.current_timestamp()
        shutil.rmtree(local_dir, ignore_errors=True)
        os.makedirs(local_dir, exist_ok=True)
        self.db = self._open_empty(-1)

    @engine_errors
    def _open_empty(self, batch_ts: int) -> Rdict:
        """A fresh database; with the TTL compaction filter, RocksDB's own TTL is
        ttl + safety margin + how far the batch about to run lags the wall clock."""
        shutil.rmtree(self.db_dir, ignore_errors=True)
        self.dropped_seen = 0
        if not self.ttl.compaction_cleanup:
            self.opts = _options(False)
            return Rdict(self.db_dir, self.opts)
        now = self.clock.current_timestamp()
        lag = max(0, now - batch_ts) if batch_ts >= 0 else 0
        secs = math.ceil(min(MAX_TS, self.ttl_ms + self.ttl.compaction_margin_ms + lag) / 1000)
        self.opts = _options(True)
        return Rdict(self.db_dir, self.opts, access_type=AccessType.with_ttl(min(max(secs, 1), 2**31 - 1)))

    def __repr__(self):
        return f"Store({self.store_id}, v{self.version})"

    # -- versions ---------------------------------------------------------------------

    @engine_errors
    def load(self, version: int, files: list[tuple[int, int, str]], batch_ts: int = -1) -> int:
        """Rebuild the database from an optional snapshot plus changelogs, in order.

        Files of the other value layout (TTL turned on or off since they were written) are
        migrated: values gaining a TTL get the restore time (`batch_ts`, else the clock).
        """
        self._end_txns()
        self.db.close()
        self.db = self._open_empty(batch_ts)
        self.version = 0
        self.num_keys = 0
        self.hist.clear()
        self.migrated = False
        self.batch_ts, self.cursor = -1, b""
        restore_ts = batch_ts if batch_ts >= 0 else self.clock.current_timestamp()
        ttl = bool(self.ttl_ms)
        hist = self.hist
        last = 0
        for kind, file_version, path in files:
            meta, records = statefile.read(path, kind, file_version)
            if meta.layout != self.layout:
                self.migrated = True
                records = _migrated(records, ttl, restore_ts)
            batch = WriteBatch(raw_mode=True)
            delta = 0
            if kind == FILE_SNAPSHOT:
                if last != 0:
                    raise StorageError(f"snapshot {path} must come first in a load")
                for key, value in records:
                    batch.put(key, value)
                    delta += 1
                    if ttl:
                        hist.add(codec.timestamp(value))
            else:
                if file_version != last + 1:
                    raise StorageError(
                        f"changelog {path} is version {file_version}, expected {last + 1}")
                pending: dict[bytes, bytes | None] = {}
                for key, value in records:
                    pending[key] = value
                for key, value in pending.items():
                    old = self.db.get(key)
                    if value is None:
                        batch.delete(key)
                        delta -= old is not None
                    else:
                        batch.put(key, value)
                        delta += old is None
                        if ttl:
                            hist.add(codec.timestamp(value))
                    if ttl and old is not None:
                        hist.add(codec.timestamp(old), -1)
            self.db.write(batch)
            self.num_keys += delta
            self.batch_ts, self.cursor = meta.batch_ts, meta.cursor
            last = file_version
        if last != version:
            raise StorageError(f"files end at version {last}, asked to load {version}")
        self.version = version
        if self.migrated:
            log.info("%s: migrated version %d to the %s value layout (restore time %d)",
                     self.store_id, version, statefile.LAYOUT_NAMES[self.layout], restore_ts)
        return self.num_keys

    def begin(self, version: int, read_only: bool, batch_ts: int = -1) -> "Txn":
        if version != self.version:
            raise VersionMismatchError(
                f"{self.store_id}: store is at version {self.version}, asked for {version}")
        txn = Txn(self, read_only, batch_ts)
        self.txns.add(txn)
        return txn

    @engine_errors
    def commit(self, txn: "Txn", new_version: int, changelog_path: str) -> tuple[int, int]:
        if txn.store_version != self.version:
            raise VersionMismatchError(
                f"{self.store_id}: transaction began at version {txn.store_version}, "
                f"store is at {self.version}")
        txn.finish_cleanup()
        now = txn.now()
        overlay = txn.overlay
        for other in self.txns:
            if other is not txn:
                other.preserve(overlay.keys())
        meta = FileMeta(self.layout, now, txn.cursor)
        size = statefile.write(changelog_path, FILE_CHANGELOG, new_version, overlay.items(), meta)
        batch = WriteBatch(raw_mode=True)
        for key, value in overlay.items():
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        self.db.write(batch)
        self.num_keys += txn.key_delta
        self.hist.merge(txn.hist_delta)
        self.version = new_version
        self.batch_ts, self.cursor = now, txn.cursor
        self._count_compaction_drops()
        txn.end()
        return self.visible_keys(now), size

    def visible_keys(self, now: int, delta: TsHistogram | None = None, key_delta: int = 0) -> int:
        """numKeys as Spark sees it: without expired entries under NeverReturnExpired."""
        if self.ttl_ms and self.ttl.state_visibility is StateVisibility.NEVER_RETURN_EXPIRED:
            return self.hist.live_count(self.ttl_ms, now, delta)
        return self.num_keys + key_delta

    def take_metrics(self, txn: "Txn", final: bool) -> list[tuple[str, int]]:
        """The TTL metrics of a transaction; `final` (at commit) resets the store's drops."""
        if not self.ttl_ms:
            return []
        dropped = self.dropped_unreported
        if final:
            self.dropped_unreported = 0
        return [(METRIC_EXPIRED_ON_READ, txn.expired_on_read),
                (METRIC_EXPIRED_INCREMENTAL, txn.expired_incremental),
                (METRIC_EXPIRED_BY_COMPACTION, dropped),
                (METRIC_TTL_MS, self.ttl_ms)]

    def _count_compaction_drops(self):
        """Entries RocksDB's TTL filter dropped since last asked (its statistics say so)."""
        if not self.ttl.compaction_cleanup:
            return 0
        m = _DROPPED_BY_FILTER.search(self.opts.get_statistics() or "")
        total = int(m.group(1)) if m else 0
        new = total - self.dropped_seen
        if new > 0:
            self.dropped_seen = total
            self.dropped_unreported += new
            self.num_keys -= new
        return max(new, 0)

    @engine_errors
    def maintain(self) -> None:
        """Periodic compaction with the TTL filter, between transactions.

        Afterwards the key count and the timestamp histogram are rebuilt by a scan, since
        the filter removed entries behind the store's back.
        """
        if not self.ttl.compaction_cleanup or self.txns:
            return
        now = self.clock.current_timestamp()
        if now - self.last_compaction < self.ttl.periodic_compaction_ms:
            return
        self.last_compaction = now
        self.db.compact_range(None, None)
        if self._count_compaction_drops():
            self._recount()
        log.info("%s: periodic compaction done, %d entries dropped by the TTL filter so far",
                 self.store_id, self.dropped_seen)

    def _recount(self):
        self.hist.clear()
        n = 0
        for _, value in _db_items(self.db, b"", set()):
            self.hist.add(codec.timestamp(value))
            n += 1
        self.num_keys = n

    @engine_errors
    def snapshot(self, path: str) -> tuple[int, int, int]:
        """Write every entry of the committed version to `path`.

        With the full-snapshot cleanup, entries expired at the version's clock are left out.
        """
        items = _db_items(self.db, b"", set())
        if self.ttl_ms and self.ttl.full_snapshot:
            now = self.batch_ts
            if self.ttl.time_characteristic is TimeCharacteristic.PROCESSING_TIME or now < 0:
                now = self.clock.current_timestamp()
            ttl = self.ttl_ms
            items = ((k, v) for k, v in items if not expired(codec.timestamp(v), ttl, now))
        written = _Counted(items)
        size = statefile.write(path, FILE_SNAPSHOT, self.version, written,
                               FileMeta(self.layout, self.batch_ts, self.cursor))
        self.migrated = False
        return self.version, size, written.n

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

    Values in the overlay and the database are stored bytes (with the TTL timestamp when
    the store has a TTL); `get`, `put` and `iterate` speak the caller's values.
    """

    def __init__(self, store: Store, read_only: bool, batch_ts: int = -1):
        self.store = store
        self.store_version = store.version
        self.read_only = read_only
        self.overlay: dict[bytes, bytes | None] = {}
        self.shadow: dict[bytes, bytes | None] = {}
        self.key_delta = 0
        self.overlay_bytes = 0
        self.deferred_error: TtlStateError | None = None
        self.open = True
        ttl = store.ttl
        self.ttl_ms = store.ttl_ms
        self.hist_delta = TsHistogram()
        self.expired_on_read = 0
        self.expired_incremental = 0
        self.cursor = store.cursor
        if ttl.time_characteristic is TimeCharacteristic.PROCESSING_TIME:
            self.now = store.clock.current_timestamp
        else:  # the batch's timestamp; the clock at BEGIN when the JVM does not know it
            fixed = batch_ts if batch_ts >= 0 else store.clock.current_timestamp()
            self.now = lambda: fixed
        self.return_expired = ttl.state_visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
        self.refresh_on_read = ttl.update_type is UpdateType.ON_READ_AND_WRITE and not read_only
        self.cleans = bool(self.ttl_ms) and ttl.incremental_cleanup and not read_only
        self.cleanup_step = ttl.incremental_size
        self.every_record = ttl.incremental_every_record
        self.debt = 0  # entries the incremental cleanup owes
        self._hint_now: int | None = None  # when the expired entries were last counted
        self._hint_expired = 0  # expired entries left to find, as last counted
        self.scanned = 0  # entries it checked in this transaction (at most one pass)

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

    def _stored(self, key: bytes) -> bytes | None:
        overlay = self.overlay
        if key in overlay:
            return overlay[key]
        return self._base_get(key)

    def get(self, key: bytes) -> bytes | None:
        stored = self._stored(key)
        if not self.ttl_ms or stored is None:
            return stored
        value = self._visible(key, stored)
        if self.cleans:
            self._accessed(1)
        return value

    def _visible(self, key: bytes, stored: bytes) -> bytes | None:
        """The caller's value of a stored entry at `now`, cleaning or refreshing it."""
        now = self.now()
        ts, value = codec.decode(stored)
        if expired(ts, self.ttl_ms, now):
            if not self.read_only:  # cleanup on read
                self._remove_stored(key)
                self.expired_on_read += 1
            return value if self.return_expired else None
        if self.refresh_on_read and ts != now:
            self._put_stored(key, codec.encode(now, value))
        return value

    def put(self, key: bytes, value: bytes):
        if not self.ttl_ms:
            self._put_stored(key, value)
            return
        self._put_stored(key, codec.encode(self.now(), value))
        if self.cleans:
            self._accessed(1)

    def _put_stored(self, key: bytes, stored: bytes):
        old = self.overlay.get(key, _ABSENT)
        if old is _ABSENT:  # first write of this key in the transaction
            old = self._base_get(key)
            self.overlay_bytes += len(key)
        else:
            self.overlay_bytes -= len(old) if old else 0
        if old is None:
            self.key_delta += 1
        elif self.ttl_ms:
            self.hist_delta.add(codec.timestamp(old), -1)
        if self.ttl_ms:
            self.hist_delta.add(codec.timestamp(stored))
        self.overlay_bytes += len(stored)
        self.overlay[key] = stored

    def remove(self, key: bytes):
        self._remove_stored(key)
        if self.cleans:
            self._accessed(1)

    def _remove_stored(self, key: bytes):
        old = self.overlay.get(key, _ABSENT)
        if old is _ABSENT:
            old = self._base_get(key)
            if old is None:
                return  # removing a missing key is a no-op
            self.overlay_bytes += len(key)
        elif old is None:
            return  # already removed in this transaction
        else:
            self.overlay_bytes -= len(old)
        if self.ttl_ms:
            self.hist_delta.add(codec.timestamp(old), -1)
        self.key_delta -= 1
        self.overlay[key] = None

    @property
    def num_keys(self) -> int:
        return self.store.visible_keys(self.now(), self.hist_delta, self.key_delta)

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
        if not self.ttl_ms:
            for key, value in merged:
                if value is not None:
                    yield key, value
            return
        for key, stored in merged:
            if stored is None:
                continue
            if self.cleans and self.every_record:
                self._accessed(1)
            value = self._visible(key, stored)
            if value is not None:
                yield key, value

    # -- incremental cleanup --------------------------------------------------------------

    def _accessed(self, n: int):
        """Count state accesses; the cleanup runs in steps to share one RocksDB iterator."""
        self.debt += n * self.cleanup_step
        if self.debt >= _INCREMENTAL_BATCH:
            self._clean_incrementally()

    def finish_cleanup(self):
        if self.cleans and self.debt:
            self._clean_incrementally()

    def _clean_incrementally(self):
        """Check `debt` entries after the cursor (wrapping around) and remove expired ones.

        Skipped when the timestamp histogram shows no expired entry; at most one pass over
        the committed entries per transaction.
        """
        store = self.store
        budget = min(self.debt, store.num_keys - self.scanned)
        self.debt = 0
        if budget <= 0:
            return
        now = self.now()
        if self._hint_now is None or now - self._hint_now >= _HINT_REFRESH_MS:
            self._hint_now = now  # the histogram pass costs O(timestamps): not per step
            self._hint_expired = store.hist.expired_count(self.ttl_ms, now, self.hist_delta)
        if self._hint_expired <= 0:
            return
        found = self.expired_incremental
        it = store.db.iter()
        if self.cursor:
            it.seek(self.cursor)
            if it.valid() and it.key() == self.cursor:
                it.next()
        else:
            it.seek_to_first()
        overlay, shadow, ttl = self.overlay, self.shadow, self.ttl_ms
        wrapped = False
        key = self.cursor
        while budget > 0:
            if not it.valid():
                if wrapped:
                    break
                wrapped = True
                it.seek_to_first()
                key = b""
                continue
            key = it.key()
            budget -= 1
            self.scanned += 1
            if key not in overlay:
                stored = shadow[key] if shadow and key in shadow else it.value()
                if stored is not None and expired(codec.timestamp(stored), ttl, now):
                    self._remove_stored(key)
                    self.expired_incremental += 1
            it.next()
        self.cursor = key if it.valid() else b""
        del it
        self._hint_expired -= self.expired_incremental - found


class _Counted:
    """Wraps an iterable and counts what passed through."""

    def __init__(self, items):
        self.items = items
        self.n = 0

    def __iter__(self):
        for item in self.items:
            self.n += 1
            yield item


def _migrated(records, to_ttl: bool, restore_ts: int):
    for key, value in records:
        yield key, None if value is None else codec.migrate(value, to_ttl, restore_ts)


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
