"""One state store's lifecycle: a rocksdict database at one committed version, the
transactions on it (`txn`), commits, snapshots and closing.

A transaction either writes straight into the database (the only one open) or keeps an
overlay applied at commit; `commit` also writes the version's changelog. Nothing is ever
rolled back inside RocksDB (docs/decisions/001-read-isolation-by-pre-images.md). A snapshot is a
RocksDB checkpoint described by
a manifest (`ttlstate.manifest`); a load rebuilds the database from a snapshot and the
changelogs after it (`restore`). With TTL the store keeps a histogram of timestamps so live
counts need no scan; the cleanups are in `ttl_cleanup`, the engine calls in `engine`.
"""

from __future__ import annotations

import itertools
import logging
import os
import secrets
import shutil

from rocksdict import Checkpoint, Rdict, WriteBatch

from . import manifest, restore, rocksdb_options, statefile, ttl_cleanup
from .engine import engine_errors, file_crc32, memory_used, open_database
from .errors import StoreBusyError, TtlstateError, VersionMismatchError
from .manifest import Manifest, SstFile
from .statefile import FILE_CHANGELOG, LAYOUT_PLAIN, LAYOUT_TTL, FileMeta
from .ttl import MAX_TS, MIN_TS, TtlTimeProvider, WallClock, expiration_ts
from .ttl.config import StateVisibility, TimeCharacteristic, TtlConfig
from .ttl.histogram import TsHistogram
from .txn import Txn

log = logging.getLogger("ttlstate.store")

METRIC_EXPIRED_ON_READ = "ttlstateExpiredOnRead"
METRIC_EXPIRED_INCREMENTAL = "ttlstateExpiredIncremental"
METRIC_EXPIRED_BY_COMPACTION = "ttlstateExpiredByCompaction"
METRIC_TTL_MS = "ttlstateTtlMs"
METRIC_TTL_CLOCK_MS = "ttlstateTtlClockMs"
METRIC_TTL_EVENT_TIME = "ttlstateTtlEventTime"
METRIC_OPEN_TRANSACTIONS = "ttlstateOpenTransactions"


# What `Store._tune` sets on a database once (names for its log lines).
_MEMTABLE_BLOOM = "memtable Bloom filter"
_SCANNED_L0 = "level-0 compaction trigger of a scanned store"


class Store:
    """A store's local database. Owned by one worker; callers hold `lock`."""

    def __init__(self, store_id: str, local_dir: str, ttl: TtlConfig = TtlConfig(),
                 clock: TtlTimeProvider | None = None,
                 rocksdb: rocksdb_options.RocksDbSettings = rocksdb_options.RocksDbSettings()):
        self.store_id = store_id
        self.local_dir = local_dir
        self.rocksdb = rocksdb
        self.ttl = ttl
        self.ttl_ms = ttl.ttl_ms if ttl.enabled else 0
        self.layout = LAYOUT_TTL if self.ttl_ms else LAYOUT_PLAIN
        self.db_ttl = ttl.compaction_cleanup  # RocksDB's TTL database (the compaction filter)
        self.clock = clock or WallClock()
        self.version = 0
        self.num_keys = 0
        self.hist = TsHistogram()  # entries per TTL timestamp (TTL only)
        self.batch_ts = -1  # the TTL clock of the committed version's commit
        self.cursor = b""  # the incremental cleanup goes on after this key
        self.migrated = False  # the loaded files had another value layout or database kind
        self.ssts: dict[str, SstFile] = {}  # RocksDB file name -> its checkpoint name, if named
        self.txns: set[Txn] = set()
        self.writer: Txn | None = None  # the transaction writing into the database, if any
        self._txn_ids = itertools.count(1)
        self.dropped_seen = 0  # compaction-filter drops counted so far
        self.tuned: set[str] = set()  # what `_tune` set on the database (or failed to)
        self.dropped_unreported = 0
        self.last_compaction = self.clock.current_timestamp()
        self._dirs = itertools.count(1)
        shutil.rmtree(local_dir, ignore_errors=True)
        os.makedirs(local_dir, exist_ok=True)
        self.db_dir = ""
        self.db: Rdict | None = self._open(self._new_dir(), -1)

    def _new_dir(self) -> str:
        """A database directory RocksDB never had open (each load starts afresh)."""
        return os.path.join(self.local_dir, f"db-{next(self._dirs)}")

    @engine_errors
    def _open(self, path: str, batch_ts: int) -> Rdict:
        """Open (or create) the database at `path` as this store's kind; it becomes `db_dir`.

        With the TTL compaction filter, RocksDB's own TTL is ttl + safety margin + how far
        the batch about to run lags the wall clock.
        """
        self.db_dir = path
        self.dropped_seen = 0
        self.tuned = set()
        db_ttl_ms = None
        if self.db_ttl:
            now = self.clock.current_timestamp()
            lag = max(0, now - batch_ts) if batch_ts >= 0 else 0
            db_ttl_ms = min(MAX_TS, self.ttl_ms + self.ttl.compaction_margin_ms + lag)
        db, self.opts = open_database(path, self.rocksdb, db_ttl_ms)
        return db

    def _drop_db(self):
        """End the transactions, close the database and delete its directory."""
        self._end_txns()
        if self.db is not None:
            self.db.close()
            self.db = None
        shutil.rmtree(self.db_dir, ignore_errors=True)

    def __repr__(self):
        return f"Store({self.store_id}, v{self.version})"

    # -- versions ---------------------------------------------------------------------

    @engine_errors
    def load(self, version: int, batch_ts: int = -1, manifest_version: int = 0,
             manifest_path: str = "", ssts: dict[str, str] | None = None,
             changelogs: list[tuple[int, str]] = ()) -> int:
        """Rebuild the database as `version`: the snapshot of `manifest_version` (its
        manifest and its SST files, `ssts`: checkpoint name -> local path), or empty when
        `manifest_path` is "", then the changelogs (version, path) after it, in order.

        Files of another value layout or database kind (TTL or its compaction filter
        turned on or off since they were written) are migrated: values gaining a TTL get
        the restore time (`batch_ts`, else the clock), and `migrated` asks for a snapshot.
        On failure the store is left empty at no version (-1).
        """
        num_keys = restore.load(self, version, batch_ts, manifest_version, manifest_path, ssts or {}, changelogs)
        self.enable_memtable_bloom_when_large()
        return num_keys

    def begin(self, version: int, read_only: bool, batch_ts: int = -1, changelog: bool = True) -> "Txn":
        """A transaction on the committed `version`. A write transaction begun while no other
        is open writes straight into the database (and streams its changelog unless
        `changelog` is false); otherwise it keeps its writes in an overlay
        (docs/decisions/040-direct-write-transactions.md)."""
        if self.writer is not None:
            raise StoreBusyError(
                f"{self.store_id}: a transaction is writing version {self.version + 1}; commit or "
                "abort it first")
        if self.version < 0:  # a failed load: no version until a load succeeds (not even "-1")
            raise VersionMismatchError(
                f"{self.store_id}: store is at no version (its last load failed or a transaction "
                f"that wrote into it aborted), asked for {version}")
        if version != self.version:
            raise VersionMismatchError(
                f"{self.store_id}: store is at version {self.version}, asked for {version}")
        direct = not read_only and not self.txns
        writer = None
        if direct and changelog:
            writer = statefile.ChangelogWriter(os.path.join(self.local_dir, f"txn-{next(self._txn_ids)}.changelog.tmp"),
                                            FILE_CHANGELOG, version + 1, self.layout)
        txn = Txn(self, read_only, batch_ts, writer, direct)
        self.txns.add(txn)
        if direct:
            self.writer = txn
        if self.ttl_ms and self.ttl.event_time and not read_only:
            stamped = txn.stamp_unstamped()
            if stamped:
                log.info("%s: %d entries written before the watermark started now carry the "
                          "watermark %d", self.store_id, stamped, txn.now())
        return txn

    @engine_errors
    def commit(self, txn: "Txn", new_version: int, changelog_path: str) -> tuple[int, int]:
        """Apply `txn` as `new_version`, writing its changelog to `changelog_path` (none
        if it is ""). Returns (numKeys, changelog bytes)."""
        if txn.store_version != self.version:
            raise VersionMismatchError(
                f"{self.store_id}: transaction began at version {txn.store_version}, "
                f"store is at {self.version}")
        txn.finish_cleanup()
        now = txn.now()
        size = 0
        if txn.direct:  # the writes are in the database already, the changelog nearly written
            if new_version != txn.store_version + 1:
                raise VersionMismatchError(f"{self.store_id}: a transaction of version {txn.store_version} "
                                           f"cannot commit version {new_version}")
            if changelog_path and txn.changelog is None:
                raise TtlstateError(f"{self.store_id}: the transaction was begun without a changelog")
            if changelog_path:
                size = txn.changelog.finish(changelog_path, now, txn.cursor)
                txn.changelog = None
        else:
            overlay = txn.overlay
            for other in self.txns:
                if other is not txn:
                    other.preserve(overlay.keys())
            if changelog_path:
                size = statefile.write(changelog_path, FILE_CHANGELOG, new_version, overlay.items(),
                                       FileMeta(self.layout, now, txn.cursor))
            batch = WriteBatch(raw_mode=True)
            for key, value in overlay.items():
                if value is None:
                    batch.delete(key)
                else:
                    batch.put(key, value)
            self.db.write(batch)
        purged, purged_hist = txn.purged_written()
        self.num_keys += txn.key_delta + purged
        self.hist.merge(txn.hist_delta)
        self.hist.merge(purged_hist)
        self.version = new_version
        self.batch_ts, self.cursor = now, txn.cursor
        self.enable_memtable_bloom_when_large()
        ttl_cleanup.count_compaction_drops(self)
        txn.committed = True
        txn.end()
        return self.visible_keys(now), size

    def enable_memtable_bloom_when_large(self, key_delta: int = 0) -> None:
        """Give the database's next memtables a whole-key Bloom filter once the store holds
        (with `key_delta` of an open transaction) `MEMTABLE_BLOOM_MIN_KEYS` keys: most of its
        gets then miss the memtable (docs/decisions/077-memtable-bloom-and-sorted-writes.md)."""
        keys = self.num_keys + key_delta
        if keys >= rocksdb_options.MEMTABLE_BLOOM_MIN_KEYS and self._tune(_MEMTABLE_BLOOM,
                                                                           rocksdb_options.memtable_bloom()):
            log.info("%s: %d keys: its memtables get a whole-key Bloom filter", self.store_id, keys)

    def scanned_whole(self) -> None:
        """A scan of every entry reads this store: it compacts level 0 sooner from now on
        (`SCANNED_L0_COMPACTION_TRIGGER`, docs/decisions/092-scanned-stores-compact-after-4.md)."""
        if self._tune(_SCANNED_L0, rocksdb_options.scanned_store()):
            log.info("%s: scanned whole: level 0 compacts after %d files", self.store_id,
                     rocksdb_options.SCANNED_L0_COMPACTION_TRIGGER)

    def _tune(self, what: str, options: dict[str, str]) -> bool:
        """Set mutable database options, once per database (a reopened one starts without
        them); best effort: a failure is logged and the store works on without them."""
        if what in self.tuned or self.db is None:
            return False
        self.tuned.add(what)
        try:
            self.db.set_options(options)
        except Exception as e:  # rocksdict's plain Exception: an optimisation lost, nothing else
            log.warning("%s: could not set its %s (%s: %s); the store works on without", self.store_id, what,
                        type(e).__name__, e)
            return False
        return True

    def stored_from(self) -> int:
        """The earliest `expiresAt` of the committed version's entries, from the timestamp
        histogram (`MAX_TS` if it holds none): the JVM's view answers "not stored" for a key it
        knows expired before it (`COMMIT`'s `storedFrom`, docs/decisions/113-stored-from.md).
        `MIN_TS` (nothing known) without TTL or on the processing-time clock."""
        if not self.ttl_ms or self.ttl.time_characteristic is TimeCharacteristic.PROCESSING_TIME:
            return MIN_TS
        if not self.hist:
            return MAX_TS
        return expiration_ts(min(self.hist.counts), self.ttl_ms)

    def visible_keys(self, now: int, delta: TsHistogram | None = None, key_delta: int = 0) -> int:
        """numKeys as Spark sees it: without expired entries under NeverReturnExpired."""
        if self.ttl_ms and self.ttl.state_visibility is StateVisibility.NEVER_RETURN_EXPIRED:
            return self.hist.live_count(self.ttl_ms, now, delta)
        return self.num_keys + key_delta

    def take_metrics(self, txn: "Txn", final: bool) -> list[tuple[str, int]]:
        """The metrics of a transaction: the other transactions open on the store (none once
        a batch's stores are done: a leak otherwise) and, with TTL, the expirations;
        `final` (at commit) resets the store's drops."""
        others = [(METRIC_OPEN_TRANSACTIONS, len(self.txns) - (txn in self.txns))]
        if not self.ttl_ms:
            return others
        dropped = self.dropped_unreported
        if final:
            self.dropped_unreported = 0
        return others + [(METRIC_EXPIRED_ON_READ, txn.expired_on_read),
                (METRIC_EXPIRED_INCREMENTAL, txn.expired_incremental),
                (METRIC_EXPIRED_BY_COMPACTION, dropped),
                (METRIC_TTL_MS, self.ttl_ms),
                (METRIC_TTL_CLOCK_MS, max(txn.now(), 0)),
                (METRIC_TTL_EVENT_TIME, int(self.ttl.event_time))]

    @engine_errors
    def maintain(self) -> None:
        """Periodic compaction with the TTL filter, between transactions (`ttl_cleanup`)."""
        ttl_cleanup.periodic_compaction(self)

    # -- snapshots --------------------------------------------------------------------

    @engine_errors
    def snapshot(self, directory: str) -> tuple[int, int, str, list[tuple[str, str, int]]]:
        """Checkpoint the committed version into `directory` (created here; it must not
        exist): RocksDB's checkpoint (hard links) in `rocksdb/` and the version's manifest.

        Returns (version, numKeys, manifest path, [(sstName, local path, size)]) naming
        every SST of the version. With the full-snapshot cleanup, the entries expired at
        the version's clock are deleted first.
        """
        if self.version < 0:
            raise TtlstateError(f"{self.store_id}: no version to snapshot (the last load failed)")
        if self.writer is not None:
            raise StoreBusyError(f"{self.store_id}: no snapshot of version {self.version} while a "
                                 "transaction writes into the database (the next maintenance retries)")
        if self.ttl_ms and self.ttl.full_snapshot:
            ttl_cleanup.purge_expired(self)
        os.makedirs(directory)
        try:
            checkpoint = os.path.join(directory, "rocksdb")
            Checkpoint(self.db).create_checkpoint(checkpoint)  # flushes the memtable first
            ttl_cleanup.recount_after_compaction_drops(self)
            ssts, inline = self._checkpoint_files(checkpoint)
            m = Manifest(version=self.version, num_keys=self.num_keys, layout=self.layout,
                         db_ttl=self.db_ttl, batch_ts=self.batch_ts, cursor=self.cursor,
                         histogram=tuple(sorted(self.hist.counts.items())), ssts=tuple(ssts),
                         inline=inline)
            path = os.path.join(directory, f"{self.version}.manifest")
            manifest.write(path, m)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        self.migrated = False
        return (self.version, self.num_keys, path,
                [(f.name, os.path.join(checkpoint, f.local), f.size) for f in ssts])

    def _checkpoint_files(self, checkpoint: str) -> tuple[list[SstFile], dict[str, bytes]]:
        """The SSTs of a checkpoint, named, and the bytes of its other files.

        An SST keeps the name it got when it was loaded or first snapshotted; a new one gets
        a new unique name, and its size and CRC32 are computed once, then.
        """
        named: dict[str, SstFile] = {}
        inline: dict[str, bytes] = {}
        for name in sorted(os.listdir(checkpoint)):
            path = os.path.join(checkpoint, name)
            if not name.endswith(".sst"):
                with open(path, "rb") as f:
                    inline[name] = f.read()
                continue
            size = os.path.getsize(path)
            f = self.ssts.get(name)
            if f is None or f.size != size:
                f = SstFile(f"{name[:-4]}-{secrets.token_hex(8)}.sst", name, size, file_crc32(path))
            named[name] = f
        self.ssts = named
        return list(named.values()), inline

    @engine_errors
    def memory_used(self) -> int:
        """Memtables, table readers and the block cache of the database (a block cache shared
        by all stores of the worker, `rocksdb.boundedMemory`, is nobody's: left out), plus
        the overlays of open transactions."""
        total = memory_used(self.db, with_block_cache=not self.rocksdb.bounded_total_bytes)
        for txn in self.txns:
            total += txn.overlay_bytes
        return total

    def _end_txns(self):
        for txn in list(self.txns):
            txn.end()

    @engine_errors
    def close(self, delete_files: bool):
        self._end_txns()
        if self.db is not None:
            self.db.close()
            self.db = None
        if delete_files:
            shutil.rmtree(self.local_dir, ignore_errors=True)
