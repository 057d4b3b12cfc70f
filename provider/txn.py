"""A transaction: an uncommitted version over the committed version of a `Store`.

Reads see the transaction's own writes, then (for a transaction beside another that
committed) the pre-images it was given, then the database. With TTL every stored value
carries Flink's 8-byte timestamp: reads hide, clean up and refresh entries by the
transaction's clock (`ttl.expired` decides), and each access pays the incremental cleanup
(`ttl_cleanup`).
"""

from __future__ import annotations

import collections
import heapq
from typing import Iterator

from . import statefile
from .engine import db_items, delete_keys, multi_get, put_all, write_keyed_records, write_prestamped_records
from .errors import ProtocolError, TtlstateError
from .protocol import (RECORD_ACCESS, RECORD_PUT, RECORD_PUT_OVER, RECORD_PUT_OVER_LIVE, RECORD_REMOVE,
                       RECORD_REMOVE_LIVE, RECORD_REMOVE_PRESENT)
from .ttl import MAX_TS, codec, event_time, expiration_ts, expired, expired_at, refreshes, written_at
from .ttl.config import StateVisibility, TimeCharacteristic, UpdateType
from .ttl.histogram import TsHistogram
from .ttl_cleanup import IncrementalCleanup

_ABSENT = object()  # "not in the overlay", as opposed to None: "removed"


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

    def __init__(self, store, read_only: bool, batch_ts: int = -1,
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
        self.deferred_error: TtlstateError | None = None
        self.open = True
        ttl = store.ttl
        self.ttl_ms = store.ttl_ms
        self.hist_delta = TsHistogram()
        self.expired_on_read = 0
        # per open TTL iterator, the keys `put`/`remove` wrote since it opened (`iterate`)
        self.written_since: dict[int, set[bytes]] = {}
        # one `now` and one write timestamp for the whole transaction, except ProcessingTime
        self.fixed_clock = ttl.time_characteristic is not TimeCharacteristic.PROCESSING_TIME
        if not self.fixed_clock:
            self.now = store.clock.current_timestamp
        else:  # the clock at BEGIN when the JVM does not know the batch's timestamp
            fixed = transaction_clock(ttl, batch_ts, store.batch_ts)
            if fixed is None:
                fixed = store.clock.current_timestamp()
            self.now = lambda: fixed
        # the timestamp a write carries: the clock, except UNSTAMPED at watermark 0
        self.stamp = (lambda: event_time.stamp(fixed)) if ttl.event_time else self.now
        self.return_expired = ttl.state_visibility is StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP
        self.refresh_on_read = ttl.update_type is UpdateType.ON_READ_AND_WRITE and not read_only
        self.cleans = bool(self.ttl_ms) and ttl.incremental_cleanup and not read_only
        self.every_record = ttl.incremental_every_record
        self.cleanup = IncrementalCleanup(self, store.cursor, ttl.incremental_size)

    @property
    def cursor(self) -> bytes:
        """Where the incremental cleanup goes on (the store keeps it at commit)."""
        return self.cleanup.cursor

    @property
    def expired_incremental(self) -> int:
        return self.cleanup.expired

    @property
    def scanned(self) -> int:
        return self.cleanup.scanned

    def end(self):
        if self.open:
            self.open = False
            store = self.store
            store.txns.discard(self)
            self.overlay = {}
            self.shadow = {}
            self.purged = set()
            self.written_since = {}
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

    def plain_values(self, keys: list[bytes]) -> list[bytes | None] | None:
        """The values of `keys` in one batched database read, when this transaction reads
        the database alone (no TTL, no writes of its own in an overlay, no pre-images);
        None when `lookup` must answer key by key."""
        if self.ttl_ms or self.overlay or self.shadow:
            return None
        return multi_get(self.store.db, keys)

    def stored_many(self, keys: list[bytes]) -> list[bytes | None] | None:
        """What `_stored` returns for each of `keys`, from one batched database read; None
        when a key repeats (looking a key up may refresh or remove it, and the repeat must
        see that), so `lookup` reads key by key."""
        if len(set(keys)) != len(keys):
            return None
        stored = multi_get(self.store.db, keys)
        overlay, shadow = self.overlay, self.shadow
        if overlay or shadow:
            for i, key in enumerate(keys):
                if key in overlay:
                    stored[i] = overlay[key]
                elif key in shadow:
                    stored[i] = shadow[key]
        return stored

    def lookup(self, key: bytes, stored=_ABSENT) -> tuple[bytes | None, int]:
        """(value, expiresAt): the value as `get` sees it, and when it expires (the first
        `now` at which it is expired; MAX_TS without TTL). The JVM caches values by it.

        `stored`: the key's entry as `stored_many` read it earlier in the same request. Only
        the incremental cleanup of the lookups between then and now can have changed it, by
        removing it if expired: an expired entry is read again."""
        if stored is _ABSENT:
            stored = self._stored(key)
        elif stored is not None and self.cleans and self._expired(stored):
            stored = self._stored(key)
        if not self.ttl_ms or stored is None:
            return stored, MAX_TS
        found = self._visible(key, stored)
        if self.cleans:
            self.cleanup.accessed(1)
        return found

    def _visible(self, key: bytes, stored: bytes, touch: bool = True) -> tuple[bytes | None, int]:
        """(value, expiresAt) of a stored entry at `now` for the caller, cleaning or
        refreshing it unless `touch` is false."""
        now = self.now()
        ts, value = codec.decode(stored)
        expires_at = expiration_ts(ts, self.ttl_ms)
        if expired_at(expires_at, now):
            if touch and not self.read_only:  # cleanup on read
                self.remove_stored(key)
                self.expired_on_read += 1
            return (value if self.return_expired else None), expires_at
        if touch and self.refresh_on_read:
            stamp = self.stamp()
            if refreshes(ts, self.ttl_ms, stamp):
                self._put_stored(key, codec.encode(stamp, value))
                expires_at = expiration_ts(stamp, self.ttl_ms)
        return value, expires_at

    def apply(self, records, encoded: bytes | None = None):
        """Apply a WRITE_BATCH's records (`protocol.read_records`); `encoded` is their bytes
        when they are all keyed records (`protocol.encoded_records`). A transaction without
        TTL that writes into the database copies those bytes into its changelog as they are
        (its stored values are the callers' values)."""
        if self.direct and not self.ttl_ms and encoded is not None and statefile.WIRE_RECORDS_ARE_FILE_RECORDS:
            self.key_delta += write_keyed_records(self.store.db, records)
            if self.changelog is not None:
                self.changelog.add_encoded(encoded, len(records))
            self.store.enable_memtable_bloom_when_large(self.key_delta)
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
            elif kind == RECORD_PUT_OVER_LIVE:  # a TTL store's hint: here the key is looked up
                self.put(key, value[0])
            elif kind == RECORD_REMOVE_LIVE:
                self.remove(key)
            else:
                self.put(key, value, present=kind == RECORD_PUT_OVER)

    def write_stamp(self) -> int | None:
        """The timestamp this transaction's writes carry if the JVM may send them stamped
        (WRITE_STAMPED: a direct write transaction of a TTL store with a fixed clock), else None.
        docs/decisions/111-pre-stamped-ttl-writes.md."""
        if self.direct and self.ttl_ms and self.fixed_clock and not self.read_only:
            return self.stamp()
        return None

    def apply_prestamped(self, stamp: int, records, encoded: bytes, accesses: int,
                         replaced: list[tuple[int, int]], expired_reads: list[bytes] = ()):
        """Apply a WRITE_STAMPED frame (`protocol.read_write_stamped`): its puts' values are
        stored entries stamped with `stamp`, `replaced` the (expiresAt, count) of the live
        entries its kinds 5 and 6 replace, `expired_reads` the keys of reads the JVM answered because
        it found their values expired, cleaned up first (`clean_up_read`). At once, as a store
        without TTL writes a frame: the records into one WriteBatch, their bytes into the
        changelog as they are; the histogram from `replaced` and the few keys the JVM could not
        hint. One by one (`put`, `remove`) while an open iterator must be told of the writes."""
        if stamp != self.write_stamp():
            raise ProtocolError(f"WRITE_STAMPED with stamp {stamp}, where this transaction stamps "
                                f"{self.write_stamp()}")
        if expired_reads:
            self.clean_up_read(expired_reads)
        if self.written_since:
            for kind, key, value in records:
                if value is None:
                    self.remove(key)
                else:
                    self.put(key, value[codec.TS_BYTES:])
            self.accessed(accesses)
            return
        live = sum(n for _, n in replaced)
        delta, puts, hinted, unhinted = write_prestamped_records(self.store.db, records, stamp)
        if hinted != live:
            raise ProtocolError(f"WRITE_STAMPED names {live} live entries in its tail and has {hinted} "
                                "records of kinds 5 and 6")
        self.key_delta += delta
        hist = self.hist_delta
        for expires_at, n in replaced:
            old_ts = written_at(expires_at, self.ttl_ms)
            if old_ts is None:
                raise ProtocolError(f"WRITE_STAMPED names a live entry expiring at {expires_at}, "
                                    "which tells no timestamp")
            hist.add(old_ts, -n)
        for old_ts, n in collections.Counter(unhinted).items():
            hist.add(old_ts, -n)
        if puts:
            hist.add(stamp, puts)
        if self.changelog is not None:
            self.changelog.add_encoded(encoded, len(records))
        self.store.enable_memtable_bloom_when_large(self.key_delta)
        if self.cleans:  # each write owes a step, as in `put` and `remove`; the JVM's reads theirs
            self.cleanup.accessed(len(records) + accesses)

    def clean_up_read(self, keys: list[bytes]):
        """The cleanup on read of reads the JVM answered itself (docs/decisions/112-expired-reads-
        in-the-frame-tail.md): of `keys`, remove those whose stored entry is expired at this
        transaction's clock, as `lookup` would have at the read, counted as expired on read. A
        key no longer stored (the incremental cleanup came first) or written live since is kept."""
        if self.written_since:
            removed = 0
            for key in keys:
                stored = self._stored(key)
                if stored is not None and self._expired(stored):
                    removed += self.remove_stored(key)
        else:
            found = self.stored_many(keys)
            if found is None:  # a key repeats
                found = [self._stored(k) for k in keys]
            gone = {key: codec.timestamp(stored) for key, stored in zip(keys, found)
                    if stored is not None and self._expired(stored)}
            removed = self.remove_expired(gone)
        self.expired_on_read += removed

    def _expired(self, stored: bytes) -> bool:
        """Whether a stored entry is expired at this transaction's clock."""
        return expired(codec.timestamp(stored), self.ttl_ms, self.now())

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
        if self.written_since:
            self._written(key)
        self._put_stored(key, codec.encode(self.stamp(), value))
        if self.cleans:
            self.cleanup.accessed(1)

    def stamp_unstamped(self) -> int:
        """EventTime: give the entries written at watermark 0 (UNSTAMPED) this
        transaction's watermark, as writes (changelog, histogram); returns how many. Run by
        a write transaction at BEGIN, before any read, when the clock is past 0."""
        now = self.now()
        if self.read_only or not event_time.needs_stamping(now, self.store.hist.counts.get(event_time.UNSTAMPED, 0)):
            return 0
        unstamped = codec.encode(event_time.UNSTAMPED, b"")  # the stored entry's first 8 bytes
        stamp = codec.encode(now, b"")
        found = [(key, stamp + stored[codec.TS_BYTES:]) for key, stored in db_items(self.store.db, b"", set())
                 if stored.startswith(unstamped)]
        if not self.direct:
            for key, stored in found:
                self._put_stored(key, stored)
            return len(found)
        # straight into the database: the keys stay, each entry's timestamp moves from UNSTAMPED to now
        put_all(self.store.db, found)
        self.hist_delta.add(event_time.UNSTAMPED, -len(found))
        self.hist_delta.add(now, len(found))
        if self.changelog is not None:
            for key, stored in found:
                self.changelog.add(key, stored)
        return len(found)

    def _put_stored(self, key: bytes, stored: bytes):
        if self.direct:
            db = self.store.db
            self._count_write(db.get(key), stored)
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
        self._count_write(old, stored)
        self.overlay_bytes += len(stored)
        self.overlay[key] = stored

    def _count_write(self, old: bytes | None, stored: bytes):
        """The key count and timestamp histogram after a key's `old` stored value (None:
        absent) became `stored`."""
        if old is None:
            self.key_delta += 1
        elif self.ttl_ms:
            self.hist_delta.add(codec.timestamp(old), -1)
        if self.ttl_ms:
            self.hist_delta.add(codec.timestamp(stored))

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
        if self.written_since:
            self._written(key)
        self.remove_stored(key)
        if self.cleans:
            self.cleanup.accessed(1)

    def _written(self, key: bytes):
        """Tell the open iterators that `key` was written after they opened."""
        for written in self.written_since.values():
            written.add(key)

    def remove_stored(self, key: bytes) -> int:
        """Remove `key`'s stored entry; 1 if there was one, else 0."""
        if self.direct:
            db = self.store.db
            old = db.get(key)
            if old is None:
                return 0  # removing a missing key is a no-op
            if self.ttl_ms:
                self.hist_delta.add(codec.timestamp(old), -1)
            self.key_delta -= 1
            del db[key]
            if self.changelog is not None:
                self.changelog.add(key, None)
            return 1
        old = self.overlay.get(key, _ABSENT)
        if old is _ABSENT:
            old = self._base_get(key)
            if old is None:
                return 0  # removing a missing key is a no-op
            self.overlay_bytes += len(key)
        elif old is None:
            return 0  # already removed in this transaction
        else:
            self.overlay_bytes -= len(old)
        if self.ttl_ms:
            self.hist_delta.add(codec.timestamp(old), -1)
        self.key_delta -= 1
        self.overlay[key] = None
        return 1

    def remove_expired(self, entries: dict[bytes, int]) -> int:
        """Remove the entries the incremental cleanup found expired (key: its stored entry's
        timestamp, as read just now); returns how many. A direct transaction removes them in one
        WriteBatch, their histogram counts at once."""
        if not self.direct:
            removed = 0
            for key in entries:
                removed += self.remove_stored(key)
            return removed
        delete_keys(self.store.db, entries)
        self.key_delta -= len(entries)
        for ts, n in collections.Counter(entries.values()).items():
            self.hist_delta.add(ts, -n)
        if self.changelog is not None:
            self.changelog.add_removals(entries)
        return len(entries)

    @property
    def num_keys(self) -> int:
        purged, purged_hist = self.purged_written()
        if purged:
            purged_hist.merge(self.hist_delta)
            return self.store.visible_keys(self.now(), purged_hist, self.key_delta + purged)
        return self.store.visible_keys(self.now(), self.hist_delta, self.key_delta)

    def iterate(self, prefix: bytes, with_expiry: bool = False, stored: bool = False) -> Iterator[tuple]:
        """Entries `(key, value)` whose key starts with `prefix`, as of now, in key order;
        `(key, value, expiresAt)` with `with_expiry`. `stored` (with `with_expiry`): every
        stored entry, those expired at now too, touching none (no cleanup on read, refresh or
        access counted): what the JVM's key filter must hold (`ITER_STORED_WITH_EXPIRY`).

        The overlay and shadow are copied and the RocksDB iterator pins the database as
        of this call, so later writes (this transaction's or a concurrent commit) do not
        disturb the iteration (the RocksDB provider's behaviour). With TTL the iterator
        refreshes and cleans up by what it pinned, so it must not act on a key this
        transaction wrote after this call: see `_visible_entries`.
        """
        if not prefix:
            self.store.scanned_whole()
        base = _sorted_prefixed(self.shadow, prefix)
        staged = _sorted_prefixed(self.overlay, prefix)
        merged = db_items(self.store.db, prefix, {k for k, _ in base})
        if not base and not staged and not self.ttl_ms:
            # the database alone, its values are the stored bytes: no Python step per entry
            return ((k, v, MAX_TS) for k, v in merged) if with_expiry else merged
        if base or staged:  # merge in what the transaction holds besides the database
            staged_keys = {k for k, _ in staged}
            committed = heapq.merge(merged, base, key=_first)
            merged = heapq.merge((kv for kv in committed if kv[0] not in staged_keys), staged, key=_first)
        if not self.ttl_ms:
            return _plain_entries(merged, with_expiry)
        if stored:
            return self._stored_entries(merged)
        written: set[bytes] = set()
        if not self.read_only:  # only a write transaction's iterator refreshes or cleans up
            # until the iterator is exhausted or closed (one never started: until the txn ends)
            self.written_since[id(written)] = written
        return self._visible_entries(merged, with_expiry, written)

    def _visible_entries(self, merged, with_expiry: bool, written: set[bytes]) -> Iterator[tuple]:
        """The entries of `iterate` from merged (key, stored or None) pairs, with TTL.

        The rule: an iterator refreshes or cleans up only keys this transaction has not
        written (`put`/`remove`) since the iterator opened (`written`): the pinned entry of
        such a key is stale, and refreshing it (OnReadAndWrite) or deleting it as expired
        (cleanup on read) would undo the newer write. The iterator still reports the pinned
        entry, by its own timestamp (as it pinned it), and writes nothing for it.
        """
        try:
            for key, stored in merged:
                if stored is None:
                    continue
                if self.cleans and self.every_record:
                    self.cleanup.accessed(1)
                # a key written since the open is stale here: report what was pinned, touch nothing
                value, expires_at = self._visible(key, stored, touch=not (written and key in written))
                if value is None:
                    continue
                yield (key, value, expires_at) if with_expiry else (key, value)
        finally:
            self.written_since.pop(id(written), None)

    def _stored_entries(self, merged) -> Iterator[tuple]:
        """`(key, value, expiresAt)` of every stored entry of merged (key, stored or None)
        pairs, with TTL, expired or not; nothing is touched."""
        ttl = self.ttl_ms
        for key, stored in merged:
            if stored is not None:
                ts, value = codec.decode(stored)
                yield key, value, expiration_ts(ts, ttl)

    # -- incremental cleanup --------------------------------------------------------------

    def accessed(self, n: int):
        """`n` state accesses the JVM answered without asking (they count for the cleanup)."""
        if self.cleans and n > 0:
            self.cleanup.accessed(n)

    def finish_cleanup(self):
        if self.cleans:
            self.cleanup.finish()



def transaction_clock(ttl, batch_ts: int, committed: int) -> int | None:
    """The clock a transaction of a store with TTL settings `ttl` runs at, from the one the JVM
    sent at BEGIN (`batch_ts`: the batch's timestamp, under EventTime its watermark; -1 unknown)
    and the committed version's (`committed`, `Store.batch_ts`): under EventTime
    `event_time.clock`, else the batch's timestamp; None when it is the worker's wall clock
    (ProcessingTime, or a batch timestamp the JVM does not know). The JVM's view relies on it
    being what it sent whenever it sent one (tests/vectors/ttl_clock.tsv)."""
    if ttl.time_characteristic is TimeCharacteristic.PROCESSING_TIME:
        return None
    if ttl.event_time:  # the batch's watermark; unknown: the committed version's
        return event_time.clock(batch_ts, committed)
    return batch_ts if batch_ts >= 0 else None


def _plain_entries(merged, with_expiry: bool) -> Iterator[tuple]:
    """The entries of `iterate` from merged (key, value or None) pairs, without TTL."""
    for key, value in merged:
        if value is not None:
            yield (key, value, MAX_TS) if with_expiry else (key, value)


def _first(kv):
    return kv[0]


def _sorted_prefixed(d: dict, prefix: bytes) -> list:
    if not d:
        return []
    if prefix:
        return sorted((k, v) for k, v in d.items() if k.startswith(prefix))
    return sorted(d.items())
