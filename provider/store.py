"""One state store: a rocksdict database at one committed version, plus transactions.

A transaction is an overlay (key -> value, or None for a remove) over the committed
version. Reads see the overlay, then the committed version; `commit` applies the overlay
in one WriteBatch and writes it as the version's changelog; `abort` drops it. Nothing is
ever rolled back inside RocksDB (DESIGN.md 4.1).

A snapshot is a RocksDB checkpoint described by a manifest (`ttlstate.manifest`); a load
builds a fresh database directory from a manifest's SSTs (hard links) and replays the
changelogs after it (docs/DESIGN.md 18-26).

With TTL (docs/DESIGN.md, "State TTL") every stored value carries Flink's 8-byte
timestamp; the transaction hides, cleans and refreshes entries by its clock, and the
store keeps a histogram of timestamps so live counts need no scan.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import os
import re
import secrets
import shutil
import zlib
from typing import Iterator

from rocksdict import AccessType, BottommostLevelCompaction, Checkpoint, CompactOptions, Options, Rdict, WriteBatch

from . import manifest, rocksdb_options, statefile
from .errors import CorruptFileError, StorageError, StoreBusyError, TtlStateError, VersionMismatchError
from .manifest import Manifest, SstFile
from .protocol import (FILE_CHANGELOG, RECORD_ACCESS, RECORD_PUT, RECORD_PUT_NEW, RECORD_PUT_OVER, RECORD_REMOVE,
                       RECORD_REMOVE_PRESENT)
from .statefile import LAYOUT_PLAIN, LAYOUT_TTL, FileMeta
from .ttl import MAX_TS, TtlTimeProvider, WallClock, expiration_ts, expired
from .ttl import codec
from .ttl.config import StateVisibility, TimeCharacteristic, TtlConfig, UpdateType
from .ttl.histogram import TsHistogram

log = logging.getLogger("ttlstate.store")

_MEMORY_PROPERTIES = ("rocksdb.cur-size-all-mem-tables", "rocksdb.estimate-table-readers-mem")
_BLOCK_CACHE_USAGE = "rocksdb.block-cache-usage"


def engine_errors(fn):
    """Decorator: the one place that turns rocksdict/OS errors into `StorageError`."""
    def wrapped(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except TtlStateError:
            raise
        except Exception as e:  # OSError, and rocksdict's plain Exception subclasses
            where = getattr(args[0], "local_dir", None) if args else None
            at = f" (store {args[0].store_id}, local dir {where})" if where else ""
            raise StorageError(f"{fn.__qualname__}{at}: {type(e).__name__}: {e}") from e
    wrapped.__name__ = fn.__name__
    wrapped.__qualname__ = fn.__qualname__
    wrapped.__doc__ = fn.__doc__
    return wrapped


_DROPPED_BY_FILTER = re.compile(r"rocksdb\.compaction\.key\.drop\.user COUNT : (\d+)")
_INCREMENTAL_BATCH = 1024  # incremental-cleanup work is done in steps of this many entries
_HINT_REFRESH_MS = 1000  # ProcessingTime: recount expired entries at most once a second
_REWRITE_BATCH = 10_000  # entries per WriteBatch when a load migrates a checkpoint
_CRC_CHUNK = 1 << 20
_DB_TTL_SUFFIX = 4  # RocksDB's TTL database appends a 4-byte write time to every value
METRIC_EXPIRED_ON_READ = "ttlstateExpiredOnRead"
METRIC_EXPIRED_INCREMENTAL = "ttlstateExpiredIncremental"
METRIC_EXPIRED_BY_COMPACTION = "ttlstateExpiredByCompaction"
METRIC_TTL_MS = "ttlstateTtlMs"
METRIC_OPEN_TRANSACTIONS = "ttlstateOpenTransactions"


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
        if not self.db_ttl:
            self.opts = rocksdb_options.options(self.rocksdb, statistics=False)
            db = Rdict(path, self.opts)
        else:
            now = self.clock.current_timestamp()
            lag = max(0, now - batch_ts) if batch_ts >= 0 else 0
            secs = math.ceil(min(MAX_TS, self.ttl_ms + self.ttl.compaction_margin_ms + lag) / 1000)
            self.opts = rocksdb_options.options(self.rocksdb, statistics=True)
            db = Rdict(path, self.opts, access_type=AccessType.with_ttl(min(max(secs, 1), 2**31 - 1)))
        db.set_write_options(rocksdb_options.write_options())
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
        self._drop_db()
        self.version = -1
        self.num_keys = 0
        self.hist.clear()
        self.migrated = False
        self.batch_ts, self.cursor = -1, b""
        self.ssts = {}
        restore_ts = batch_ts if batch_ts >= 0 else self.clock.current_timestamp()
        try:
            if manifest_path:
                m = manifest.read(manifest_path, manifest_version)
                self._restore(m, ssts or {}, batch_ts, restore_ts)
            elif manifest_version != 0:
                raise TtlStateError(f"{self.store_id}: no manifest path for manifest version "
                                    f"{manifest_version} (an empty path means version 0)")
            else:
                self.db = self._open(self._new_dir(), batch_ts)
            last = manifest_version
            for file_version, path in changelogs:
                if file_version != last + 1:
                    raise StorageError(
                        f"changelog {path} is version {file_version}, expected {last + 1}")
                self._replay(path, file_version, restore_ts)
                last = file_version
            if last != version:
                raise StorageError(f"files end at version {last}, asked to load {version}")
        except BaseException:
            self._drop_db()
            self.num_keys, self.ssts, self.migrated = 0, {}, False
            self.hist.clear()
            self.db = self._open(self._new_dir(), -1)
            raise
        self.version = version
        if self.migrated:
            log.info("%s: migrated version %d to the %s value layout%s (restore time %d)",
                     self.store_id, version, statefile.LAYOUT_NAMES[self.layout],
                     " in a TTL database" if self.db_ttl else "", restore_ts)
        return self.num_keys

    def _restore(self, m: Manifest, ssts: dict[str, str], batch_ts: int, restore_ts: int):
        """Build a database directory from a manifest: its SSTs, checked and hard-linked
        under their RocksDB names, and its inline files; then open it (or migrate it)."""
        path = self.db_dir = self._new_dir()
        os.makedirs(path)
        for f in m.ssts:
            given = ssts.get(f.name)
            if given is None:
                raise CorruptFileError(f"sst/{f.name}", m.version, "not given to LOAD (the manifest lists it)")
            _link_checked(f, given, os.path.join(path, f.local), m.version)
        for name, data in m.inline.items():
            with open(os.path.join(path, name), "wb") as out:
                out.write(data)
        self.batch_ts, self.cursor = m.batch_ts, m.cursor
        if m.layout != self.layout or m.db_ttl != self.db_ttl:
            self._migrate(path, m, batch_ts, restore_ts)
            return
        self.db = self._open(path, batch_ts)
        self.num_keys = m.num_keys
        for ts, n in m.histogram:
            self.hist.add(ts, n)
        self.ssts = {f.local: f for f in m.ssts}

    def _migrate(self, path: str, m: Manifest, batch_ts: int, restore_ts: int):
        """Rewrite the entries of a restored checkpoint of another layout or database kind
        into a new database of this store's kind (its SSTs all get new names)."""
        to_ttl = bool(self.ttl_ms)
        relayout = m.layout != self.layout
        old = Rdict(path, Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            self.db = self._open(self._new_dir(), batch_ts)
            n = 0
            batch = WriteBatch(raw_mode=True)
            for key, value in _db_items(old, b"", set()):
                if m.db_ttl:  # a plain database shows RocksDB's TTL write time after the value
                    value = _without_write_time(key, value)
                if relayout:
                    value = codec.migrate(value, to_ttl, restore_ts)
                batch.put(key, value)
                if to_ttl:
                    self.hist.add(codec.timestamp(value))
                n += 1
                if n % _REWRITE_BATCH == 0:
                    self.db.write(batch)
                    batch = WriteBatch(raw_mode=True)
            self.db.write(batch)
        finally:
            old.close()
            shutil.rmtree(path, ignore_errors=True)
        self.num_keys = n
        self.migrated = True

    def _replay(self, path: str, version: int, restore_ts: int):
        """Apply the changelog of `version` (migrating its values if it has another layout)."""
        meta, records = statefile.read(path, FILE_CHANGELOG, version)
        ttl = bool(self.ttl_ms)
        if meta.layout != self.layout:
            self.migrated = True
            records = _migrated(records, ttl, restore_ts)
        pending: dict[bytes, bytes | None] = dict(records)
        batch = WriteBatch(raw_mode=True)
        delta = 0
        hist = self.hist
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

    def begin(self, version: int, read_only: bool, batch_ts: int = -1, changelog: bool = True) -> "Txn":
        """A transaction on the committed `version`. A write transaction begun while no other
        is open writes straight into the database (and streams its changelog unless
        `changelog` is false); otherwise it keeps its writes in an overlay (DESIGN 40)."""
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
        log = None
        if direct and changelog:
            log = statefile.ChangelogWriter(os.path.join(self.local_dir, f"txn-{next(self._txn_ids)}.changelog.tmp"),
                                            FILE_CHANGELOG, version + 1, self.layout)
        txn = Txn(self, read_only, batch_ts, log, direct)
        self.txns.add(txn)
        if direct:
            self.writer = txn
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
                raise TtlStateError(f"{self.store_id}: the transaction was begun without a changelog")
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
        self._count_compaction_drops()
        txn.committed = True
        txn.end()
        return self.visible_keys(now), size

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
                (METRIC_TTL_MS, self.ttl_ms)]

    def _count_compaction_drops(self):
        """Entries RocksDB's TTL filter dropped since last asked (its statistics say so)."""
        if not self.db_ttl:
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
        if not self.db_ttl or self.txns:
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
            raise TtlStateError(f"{self.store_id}: no version to snapshot (the last load failed)")
        if self.writer is not None:
            raise StoreBusyError(f"{self.store_id}: no snapshot of version {self.version} while a "
                                 "transaction writes into the database (the next maintenance retries)")
        if self.ttl_ms and self.ttl.full_snapshot:
            self._purge_expired()
        os.makedirs(directory)
        try:
            checkpoint = os.path.join(directory, "rocksdb")
            Checkpoint(self.db).create_checkpoint(checkpoint)  # flushes the memtable first
            if self._count_compaction_drops():
                self._recount()
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
                f = SstFile(f"{name[:-4]}-{secrets.token_hex(8)}.sst", name, size, _file_crc32(path))
            named[name] = f
        self.ssts = named
        return list(named.values()), inline

    def _purge_expired(self):
        """The full-snapshot cleanup: delete the entries expired at the version's clock
        and compact the range they were in, so the checkpoint's SSTs leave them out.

        Open transactions keep their view: they get the pre-images, as in `commit`.
        """
        now = self.batch_ts
        if self.ttl.time_characteristic is TimeCharacteristic.PROCESSING_TIME or now < 0:
            now = self.clock.current_timestamp()
        ttl = self.ttl_ms
        if not self.hist.expired_count(ttl, now):
            return
        gone = []
        for key, value in _db_items(self.db, b"", set()):
            ts = codec.timestamp(value)
            if expired(ts, ttl, now):
                gone.append(key)
                self.hist.add(ts, -1)
        if not gone:
            return
        for txn in self.txns:
            txn.preserve(gone, purged=True)
        batch = WriteBatch(raw_mode=True)
        for key in gone:
            batch.delete(key)
        self.db.write(batch)
        self.num_keys -= len(gone)
        opts = CompactOptions()  # rewrite even the bottom level, so no tombstone is left either
        opts.set_bottommost_level_compaction(BottommostLevelCompaction.force_optimized())
        self.db.compact_range(gone[0], gone[-1], opts)
        if self._count_compaction_drops():
            self._recount()
        log.info("%s: full-snapshot cleanup deleted %d expired entries of version %d",
                 self.store_id, len(gone), self.version)

    @engine_errors
    def memory_used(self) -> int:
        """Memtables, table readers and the block cache of the database (a block cache shared
        by all stores of the worker, `rocksdb.boundedMemory`, is nobody's: left out), plus
        the overlays of open transactions."""
        total = 0
        props = _MEMORY_PROPERTIES if self.rocksdb.bounded_total_bytes else _MEMORY_PROPERTIES + (_BLOCK_CACHE_USAGE,)
        for prop in props:
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
        if self.db is not None:
            self.db.close()
            self.db = None
        if delete_files:
            shutil.rmtree(self.local_dir, ignore_errors=True)


def _file_crc32(path: str) -> int:
    crc = 0
    with open(path, "rb") as f:
        while chunk := f.read(_CRC_CHUNK):
            crc = zlib.crc32(chunk, crc)
    return crc


def _link_checked(f: SstFile, given: str, dest: str, version: int):
    """Hard-link (else copy) the SST `given` to `dest`, checking its size and CRC32
    against the manifest; a mismatch names the SST's checkpoint name and the path."""
    def bad(reason: str):
        return CorruptFileError(given, version, f"SST {f.name}: {reason}")

    try:
        size = os.path.getsize(given)
    except OSError:
        raise bad("file does not exist") from None
    if size != f.size:
        raise bad(f"{size} bytes, the manifest says {f.size}")
    try:
        os.link(given, dest)
    except OSError:  # another file system (EXDEV), or links not allowed
        shutil.copyfile(given, dest)
    crc = _file_crc32(dest)
    if crc != f.crc32:
        os.unlink(dest)
        raise bad(f"CRC32 {crc:08x}, the manifest says {f.crc32:08x}")


def _without_write_time(key: bytes, value: bytes) -> bytes:
    """A value of RocksDB's TTL database without the 4-byte write time it appends."""
    if len(value) < _DB_TTL_SUFFIX:
        raise StorageError(f"value of key {key.hex()} is too short to hold RocksDB's TTL write time")
    return value[:-_DB_TTL_SUFFIX]


def _write_keyed_records(db: Rdict, records) -> int:
    """Write keyed records into `db` in one WriteBatch; returns the change in the key count.
    A record without a presence hint (the JVM did not know) looks the key up: in the
    records before it, else in the database."""
    delta = 0
    batch = WriteBatch(raw_mode=True)
    written: dict[bytes, bool] = {}  # key: present after the records so far
    for kind, key, value in records:
        if kind == RECORD_PUT_NEW:
            delta += 1
            batch.put(key, value)
            written[key] = True
        elif kind == RECORD_PUT_OVER:
            batch.put(key, value)
            written[key] = True
        elif kind == RECORD_REMOVE_PRESENT:
            delta -= 1
            batch.delete(key)
            written[key] = False
        else:  # RECORD_PUT or RECORD_REMOVE: is the key there?
            present = written.get(key)
            if present is None:
                present = db.get(key) is not None
            if kind == RECORD_PUT:
                delta += not present
                batch.put(key, value)
                written[key] = True
            elif present:
                delta -= 1
                batch.delete(key)
                written[key] = False
    db.write(batch)
    return delta


class Txn:
    """An uncommitted version over the committed version it began at.

    A *direct* transaction (a write transaction begun while no other was open) writes
    straight into the database and streams its changelog as it goes; commit only ends the
    changelog, and an abort leaves the store at no version (the JVM reloads it). Other
    write transactions keep an overlay, applied at commit.

    rocksdict 0.3.29 snapshots honour `get` but not iteration, so versions are kept apart
    by hand: when another transaction of the store commits, this one receives the
    pre-images of the keys that commit changes (`shadow`), and reads consult
    overlay -> shadow -> database.

    Values in the overlay and the database are stored bytes (with the TTL timestamp when
    the store has a TTL); `get`, `put` and `iterate` speak the caller's values.
    """

    def __init__(self, store: Store, read_only: bool, batch_ts: int = -1,
                 changelog: statefile.ChangelogWriter | None = None, direct: bool = False):
        self.store = store
        self.store_version = store.version
        self.read_only = read_only
        self.direct = direct
        self.changelog = changelog  # direct: the changelog being written (None: none wanted)
        self.committed = False
        self.overlay: dict[bytes, bytes | None] = {}
        self.shadow: dict[bytes, bytes | None] = {}
        self.purged: set[bytes] = set()  # shadow keys the full-snapshot cleanup deleted
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
            store = self.store
            store.txns.discard(self)
            self.overlay = {}
            self.shadow = {}
            self.purged = set()
            if self.direct:
                store.writer = None
                if self.changelog is not None:
                    self.changelog.discard()
                    self.changelog = None
                if not self.committed:  # its writes are in the database: no version until a LOAD
                    store.version = -1

    def preserve(self, keys, purged: bool = False):
        """Record the current values of `keys` before another transaction overwrites them
        (or, `purged`, the full-snapshot cleanup deletes them)."""
        db_get = self.store.db.get
        shadow = self.shadow
        for key in keys:
            if key not in shadow:
                shadow[key] = db_get(key)
        if purged and not self.read_only:
            self.purged.update(keys)

    def purged_written(self) -> tuple[int, TsHistogram]:
        """Entries the full-snapshot cleanup deleted under this transaction that it then
        wrote: its deltas count them as present, the store no longer does, so they go
        back into the store's count and histogram (their pre-images) at commit."""
        hist = TsHistogram()
        if not self.purged:
            return 0, hist
        keys = [k for k in self.purged if k in self.overlay]
        for key in keys:
            hist.add(codec.timestamp(self.shadow[key]))
        return len(keys), hist

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
        return self.lookup(key)[0]

    def lookup(self, key: bytes) -> tuple[bytes | None, int]:
        """(value, expiresAt): the value as `get` sees it, and when it expires (the first
        `now` at which it is expired; MAX_TS without TTL). The JVM caches values by it."""
        stored = self._stored(key)
        if not self.ttl_ms or stored is None:
            return stored, MAX_TS
        found = self._visible(key, stored)
        if self.cleans:
            self._accessed(1)
        return found

    def _visible(self, key: bytes, stored: bytes) -> tuple[bytes | None, int]:
        """(value, expiresAt) of a stored entry at `now` for the caller, cleaning or
        refreshing it."""
        now = self.now()
        ts, value = codec.decode(stored)
        expires_at = expiration_ts(ts, self.ttl_ms)
        if expires_at <= now:  # expired(ts, ttl, now)
            if not self.read_only:  # cleanup on read
                self._remove_stored(key)
                self.expired_on_read += 1
            return (value if self.return_expired else None), expires_at
        if self.refresh_on_read and ts != now:
            self._put_stored(key, codec.encode(now, value))
            expires_at = expiration_ts(now, self.ttl_ms)
        return value, expires_at

    def apply(self, records, encoded: bytes | None = None):
        """Apply a WRITE_BATCH's records (`protocol.read_records`); `encoded` is their bytes
        when they are all keyed records (`protocol.encoded_records`). A transaction without
        TTL that writes into the database copies those bytes into its changelog as they are
        (its stored values are the callers' values)."""
        if self.direct and not self.ttl_ms and encoded is not None:
            self.key_delta += _write_keyed_records(self.store.db, records)
            if self.changelog is not None:
                self.changelog.add_encoded(encoded, len(records))
            return
        for kind, key, value in records:
            if kind == RECORD_PUT:
                self.put(key, value)
            elif kind == RECORD_REMOVE:
                self.remove(key)
            elif kind == RECORD_ACCESS:
                self.accessed(value)
            elif kind == RECORD_REMOVE_PRESENT:
                self.remove(key, present=True)
            else:
                self.put(key, value, present=kind == RECORD_PUT_OVER)

    def put(self, key: bytes, value: bytes, present: bool | None = None):
        """Write `value`; `present` (stores without TTL only) says whether the key is in the
        committed version, when the JVM knows it, so the key count needs no lookup."""
        if not self.ttl_ms:
            if present is None:
                self._put_stored(key, value)
            elif self.direct:
                self.key_delta += not present
                self.store.db[key] = value
                if self.changelog is not None:
                    self.changelog.add(key, value)
            elif key in self.overlay:
                self._put_stored(key, value)
            else:
                self.overlay_bytes += len(key) + len(value)
                self.key_delta += not present
                self.overlay[key] = value
            return
        self._put_stored(key, codec.encode(self.now(), value))
        if self.cleans:
            self._accessed(1)

    def _put_stored(self, key: bytes, stored: bytes):
        if self.direct:
            db = self.store.db
            old = db.get(key)
            if old is None:
                self.key_delta += 1
            elif self.ttl_ms:
                self.hist_delta.add(codec.timestamp(old), -1)
            if self.ttl_ms:
                self.hist_delta.add(codec.timestamp(stored))
            db[key] = stored
            if self.changelog is not None:
                self.changelog.add(key, stored)
            return
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

    def remove(self, key: bytes, present: bool = False):
        """Remove `key`; `present` (stores without TTL only): the JVM knows it is in the
        committed version."""
        if present and not self.ttl_ms and self.direct:
            self.key_delta -= 1
            del self.store.db[key]
            if self.changelog is not None:
                self.changelog.add(key, None)
            return
        if present and not self.ttl_ms and key not in self.overlay:
            self.overlay_bytes += len(key)
            self.key_delta -= 1
            self.overlay[key] = None
            return
        self._remove_stored(key)
        if self.cleans:
            self._accessed(1)

    def _remove_stored(self, key: bytes):
        if self.direct:
            db = self.store.db
            old = db.get(key)
            if old is None:
                return  # removing a missing key is a no-op
            if self.ttl_ms:
                self.hist_delta.add(codec.timestamp(old), -1)
            self.key_delta -= 1
            del db[key]
            if self.changelog is not None:
                self.changelog.add(key, None)
            return
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
        purged, purged_hist = self.purged_written()
        if purged:
            purged_hist.merge(self.hist_delta)
            return self.store.visible_keys(self.now(), purged_hist, self.key_delta + purged)
        return self.store.visible_keys(self.now(), self.hist_delta, self.key_delta)

    def iterate(self, prefix: bytes, with_expiry: bool = False) -> Iterator[tuple]:
        """Entries `(key, value)` whose key starts with `prefix`, as of now, in key order;
        `(key, value, expiresAt)` with `with_expiry`.

        The overlay and shadow are copied and the RocksDB iterator pins the database as
        of this call, so later writes (this transaction's or a concurrent commit) do not
        disturb the iteration (the RocksDB provider's behaviour).
        """
        base = _sorted_prefixed(self.shadow, prefix)
        staged = _sorted_prefixed(self.overlay, prefix)
        merged = _db_items(self.store.db, prefix, {k for k, _ in base})
        if not base and not staged and not self.ttl_ms:
            # the database alone, its values are the stored bytes: no Python step per entry
            return ((k, v, MAX_TS) for k, v in merged) if with_expiry else merged
        if base or staged:  # merge in what the transaction holds besides the database
            staged_keys = {k for k, _ in staged}
            committed = heapq.merge(merged, base, key=_first)
            merged = heapq.merge((kv for kv in committed if kv[0] not in staged_keys), staged, key=_first)
        return self._visible_entries(merged, with_expiry)

    def _visible_entries(self, merged, with_expiry: bool) -> Iterator[tuple]:
        """The entries of `iterate` from merged (key, stored or None) pairs."""
        if not self.ttl_ms:
            for key, value in merged:
                if value is not None:
                    yield (key, value, MAX_TS) if with_expiry else (key, value)
            return
        for key, stored in merged:
            if stored is None:
                continue
            if self.cleans and self.every_record:
                self._accessed(1)
            value, expires_at = self._visible(key, stored)
            if value is not None:
                yield (key, value, expires_at) if with_expiry else (key, value)

    # -- incremental cleanup --------------------------------------------------------------

    def accessed(self, n: int):
        """`n` state accesses the JVM answered without asking (they count for the cleanup)."""
        if self.cleans and n > 0:
            self._accessed(n)

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
        the entries per transaction (a transaction writing into the database passes over
        its own entries too).
        """
        store = self.store
        stored = store.num_keys + (self.key_delta if self.direct else 0)  # entries in the database now
        budget = min(self.debt, stored - self.scanned)
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
    """The database's (key, value) pairs under `prefix`, without the keys in `skip`; the
    RocksDB iterator is created at the call."""
    if not prefix and not skip:  # rocksdict's own iterator: no Python step per entry
        return db.items()
    it = db.iter()
    return _db_items_of(it, prefix, skip)


def _db_items_of(it, prefix: bytes, skip: set[bytes]) -> Iterator[tuple[bytes, bytes]]:
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
