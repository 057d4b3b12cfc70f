"""The TTL cleanups of a store, each Flink's (docs/DESIGN.md, "TTL"): the incremental
cleanup a transaction runs as it is used, the full-snapshot cleanup before a snapshot, and
counting what RocksDB's TTL compaction filter dropped (with the periodic compaction that
makes it run). Cleanup on read lives with the reads, in `txn`.
"""

from __future__ import annotations

import logging

from rocksdict import BottommostLevelCompaction, CompactOptions

from .engine import compaction_drops, db_items, delete_keys, expired_after
from .ttl import codec, event_time, expired, expired_through
from .ttl.config import TimeCharacteristic

log = logging.getLogger("ttlstate.store")

INCREMENTAL_BATCH = 1024  # incremental-cleanup work is done in steps of this many entries
_HINT_REFRESH_MS = 1000  # ProcessingTime: recount expired entries at most once a second


class IncrementalCleanup:
    """A transaction's incremental cleanup: each state access owes `cleanupSize` entries,
    checked in steps after a cursor that goes on from transaction to transaction."""

    def __init__(self, txn, cursor: bytes, step: int):
        self.txn = txn
        self.cursor = cursor  # the cleanup goes on after this key
        self.step = step
        self.debt = 0  # entries the cleanup owes
        self.expired = 0  # entries it removed in this transaction
        self.scanned = 0  # entries it checked in this transaction (at most one pass)
        self._hint_now: int | None = None  # when the expired entries were last counted
        self._hint_expired = 0  # expired entries left to find, as last counted

    def accessed(self, n: int):
        """Count state accesses; the cleanup runs in steps to share one RocksDB iterator."""
        self.debt += n * self.step
        if self.debt >= INCREMENTAL_BATCH:
            self.run()

    def finish(self):
        """Pay what is owed (at commit)."""
        if self.debt:
            self.run()

    def run(self):
        """Check `debt` entries after the cursor (wrapping around) and remove expired ones.

        Skipped when the timestamp histogram shows no expired entry; at most one pass over
        the entries per transaction (a transaction writing into the database passes over
        its own entries too).
        """
        txn = self.txn
        store = txn.store
        stored = store.num_keys + (txn.key_delta if txn.direct else 0)  # entries in the database now
        budget = min(self.debt, stored - self.scanned)
        self.debt = 0
        if budget <= 0:
            return
        now = txn.now()
        if self._hint_now is None or now - self._hint_now >= _HINT_REFRESH_MS:
            self._hint_now = now  # the histogram pass costs O(timestamps): not per step
            self._hint_expired = store.hist.expired_count(txn.ttl_ms, now, txn.hist_delta)
        if self._hint_expired <= 0:
            return
        found = self.expired
        if not txn.overlay and not txn.shadow:  # the database alone: rocksdict's own iterator
            gone = self._walk(store.db, budget, expired_through(txn.ttl_ms, now))
        else:
            gone = self._walk_merged(budget, now)
        if gone:
            self.expired += txn.remove_expired(gone)
        self._hint_expired -= self.expired - found

    def _walk(self, db, budget: int, bound: int) -> dict[bytes, int]:
        """`budget` entries of the database after the cursor, wrapping around once
        (`engine.expired_after`): the expired ones with their timestamps; counts them as
        scanned and moves the cursor."""
        gone, checked, last = expired_after(db, self.cursor, budget, bound)
        if last is None and checked < budget and self.cursor:
            more, wrapped, last = expired_after(db, b"", budget - checked, bound)
            gone.update(more)
            checked += wrapped
        self.scanned += checked
        self.cursor = last or b""
        return gone

    def _walk_merged(self, budget: int, now: int) -> dict[bytes, int]:
        """`_walk` for a transaction with an overlay or pre-images: the database's entries as
        the transaction sees them (its own writes are not checked)."""
        txn = self.txn
        it = txn.store.db.iter()
        if self.cursor:
            it.seek(self.cursor)
            if it.valid() and it.key() == self.cursor:
                it.next()
        else:
            it.seek_to_first()
        overlay, shadow, ttl = txn.overlay, txn.shadow, txn.ttl_ms
        gone: dict[bytes, int] = {}  # expired key: its stored entry's timestamp
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
                if stored is not None:
                    ts = codec.timestamp(stored)
                    if expired(ts, ttl, now):
                        gone[key] = ts
            it.next()
        self.cursor = key if it.valid() else b""
        return gone


def purge_expired(store):
    """The full-snapshot cleanup: delete the entries expired at the version's clock
    and compact the range they were in, so the checkpoint's SSTs leave them out.

    Open transactions keep their view: they get the pre-images, as in `commit`.
    """
    now = store.batch_ts
    if store.ttl.event_time:
        now = event_time.clock(now)
    elif store.ttl.time_characteristic is TimeCharacteristic.PROCESSING_TIME or now < 0:
        now = store.clock.current_timestamp()
    ttl = store.ttl_ms
    if not store.hist.expired_count(ttl, now):
        return
    gone = []
    for key, value in db_items(store.db, b"", set()):
        ts = codec.timestamp(value)
        if expired(ts, ttl, now):
            gone.append(key)
            store.hist.add(ts, -1)
    if not gone:
        return
    for txn in store.txns:
        txn.preserve(gone, purged=True)
    delete_keys(store.db, gone)
    store.num_keys -= len(gone)
    opts = CompactOptions()  # rewrite even the bottom level, so no tombstone is left either
    opts.set_bottommost_level_compaction(BottommostLevelCompaction.force_optimized())
    store.db.compact_range(gone[0], gone[-1], opts)
    recount_after_compaction_drops(store)
    log.info("%s: full-snapshot cleanup deleted %d expired entries of version %d",
             store.store_id, len(gone), store.version)


def count_compaction_drops(store) -> int:
    """Entries RocksDB's TTL filter dropped since last asked (its statistics say so); they
    leave the store's key count and wait to be reported in the metrics."""
    if not store.db_ttl:
        return 0
    total = compaction_drops(store.opts)
    new = total - store.dropped_seen
    if new > 0:
        store.dropped_seen = total
        store.dropped_unreported += new
        store.num_keys -= new
    return max(new, 0)


def recount_after_compaction_drops(store):
    """After a compaction: if the TTL filter dropped entries, the key count and histogram are
    rebuilt by a scan (the counter alone does not say which timestamps went)."""
    if count_compaction_drops(store):
        recount(store)


def recount(store):
    """Rebuild the key count and the timestamp histogram by a scan (after the compaction
    filter removed entries behind the store's back)."""
    store.hist.clear()
    n = 0
    for _, value in db_items(store.db, b"", set()):
        store.hist.add(codec.timestamp(value))
        n += 1
    store.num_keys = n


def periodic_compaction(store) -> None:
    """Compact the whole database with the TTL filter every `periodicCompaction`, between
    transactions, then recount."""
    if not store.db_ttl or store.txns:
        return
    now = store.clock.current_timestamp()
    if now - store.last_compaction < store.ttl.periodic_compaction_ms:
        return
    store.last_compaction = now
    store.db.compact_range(None, None)
    recount_after_compaction_drops(store)
    log.info("%s: periodic compaction done, %d entries dropped by the TTL filter so far",
             store.store_id, store.dropped_seen)
