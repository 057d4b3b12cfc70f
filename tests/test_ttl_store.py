"""TTL as the store applies it: real RocksDB and real state files, time stepped by hand.

The batch clock is the `batch_ts` of each transaction (what the JVM reads from the offset
log); ProcessingTime cases use a `ManualClock`. No sleeping, except where RocksDB's own
wall-clock TTL filter is the subject.
"""

from __future__ import annotations

import os
import time

import pytest

from ttlstate import statefile
from ttlstate.statefile import FILE_CHANGELOG
from ttlstate.errors import CorruptFileError
from ttlstate.store import (METRIC_EXPIRED_BY_COMPACTION, METRIC_EXPIRED_INCREMENTAL,
                            METRIC_EXPIRED_ON_READ, METRIC_OPEN_TRANSACTIONS, METRIC_TTL_MS, Store)
from ttlstate.ttl import MAX_TS, MIN_TS, ManualClock
from ttlstate.ttl.config import TimeCharacteristic, TtlConfig

NO_BACKGROUND = dict(cleanup_in_background=False)


def ttl(ms=1000, **kw) -> TtlConfig:
    kw.setdefault("compaction_filter", False)
    return TtlConfig(ttl_ms=ms, **kw)


class Versions:
    """Commits transactions of one store and remembers its files, for reloads."""

    def __init__(self, tmp_path, config: TtlConfig, name="s", clock=None):
        self.tmp = tmp_path
        self.store = Store(name, str(tmp_path / name), config, clock)
        self.files: list[tuple[int, str]] = []  # changelogs (version, path)

    def txn(self, batch_ts: int, read_only=False):
        return self.store.begin(self.store.version, read_only, batch_ts)

    def commit(self, txn):
        v = self.store.version + 1
        path = str(self.tmp / f"{self.store.store_id}-{v}.changelog")
        n, _ = self.store.commit(txn, v, path)
        self.files.append((v, path))
        return n

    def write(self, batch_ts: int, puts=(), removes=()):
        t = self.txn(batch_ts)
        for k in puts:
            t.put(k, b"v-" + k)
        for k in removes:
            t.remove(k)
        return self.commit(t)


@pytest.fixture
def mk(tmp_path):
    made = []

    def make(config, name="s", clock=None):
        v = Versions(tmp_path, config, name, clock)
        made.append(v.store)
        return v
    yield make
    for s in made:
        s.close(delete_files=True)


def test_entry_expires_exactly_at_ts_plus_ttl(mk):
    v = mk(ttl(1000, **NO_BACKGROUND))
    v.write(10_000, puts=[b"a"])
    assert v.txn(10_999, read_only=True).get(b"a") == b"v-a"
    assert v.txn(11_000, read_only=True).get(b"a") is None


def test_never_return_expired_hides_from_get_iterate_and_num_keys(mk):
    v = mk(ttl(1000, **NO_BACKGROUND))
    v.write(0, puts=[b"a", b"b"])
    v.write(600, puts=[b"c"])
    t = v.txn(1500, read_only=True)
    assert t.get(b"a") is None and t.get(b"c") == b"v-c"
    assert list(t.iterate(b"")) == [(b"c", b"v-c")]
    assert t.num_keys == 1
    assert v.txn(500, read_only=True).num_keys == 3


def test_stored_entries_include_the_expired_ones_and_touch_nothing(mk):
    """ITER_STORED_WITH_EXPIRY (the JVM's warm-up of a TTL store,
    docs/decisions/102-ttl-batch-clock-fast-paths.md): every stored
    entry with its expiry time, expired ones too, even in a write transaction, which cleans up
    none of them."""
    v = mk(ttl(1000, **NO_BACKGROUND))
    v.write(0, puts=[b"a", b"b"])
    v.write(600, puts=[b"c"])
    t = v.txn(1500)
    assert list(t.iterate(b"", True, stored=True)) == [(b"a", b"v-a", 1000), (b"b", b"v-b", 1000),
                                                       (b"c", b"v-c", 1600)]
    assert t.expired_on_read == 0 and t.key_delta == 0 and t.num_keys == 1
    assert list(t.iterate(b"", True)) == [(b"c", b"v-c", 1600)]  # the visible ones clean up
    assert t.expired_on_read == 2


def test_return_expired_if_not_cleaned_up_returns_once_then_cleans(mk):
    v = mk(ttl(1000, state_visibility=_visibility("ReturnExpiredIfNotCleanedUp"), **NO_BACKGROUND))
    v.write(0, puts=[b"a", b"b"])
    reader = v.txn(5000, read_only=True)  # a read-only store cannot clean: keeps returning
    assert reader.get(b"a") == b"v-a" and reader.get(b"a") == b"v-a"
    assert reader.num_keys == 2
    t = v.txn(5000)
    assert t.get(b"a") == b"v-a"  # found expired: returned this once, and removed
    assert t.get(b"a") is None
    assert [k for k, _ in t.iterate(b"")] == [b"b"]  # b is returned by the scan and removed
    assert list(t.iterate(b"")) == []
    assert t.expired_on_read == 2
    assert v.commit(t) == 0


def test_cleanup_on_read_deletes_and_is_durable(mk):
    v = mk(ttl(1000, **NO_BACKGROUND))
    v.write(0, puts=[b"a", b"b"])
    t = v.txn(2000)
    assert t.get(b"a") is None
    assert dict(v.store.take_metrics(t, final=False))[METRIC_EXPIRED_ON_READ] == 1
    v.commit(t)
    assert v.store.num_keys == 1  # a is gone from RocksDB, b stays until someone looks
    w = mk(ttl(1000, **NO_BACKGROUND), name="reloaded")
    w.store.load(2, 2000, changelogs=v.files)
    assert w.store.num_keys == 1


def test_on_read_and_write_refreshes_on_read_only_keys(mk):
    cfg = TtlConfig(ttl_ms=1000, compaction_filter=False, cleanup_in_background=False,
                    update_type=_update("OnReadAndWrite"))
    v = mk(cfg)
    v.write(0, puts=[b"read", b"idle"])
    for now in (800, 1600, 2400):  # each read comes before the last access expires
        t = v.txn(now)
        assert t.get(b"read") == b"v-read"
        v.commit(t)
    t = v.txn(2400, read_only=True)
    assert t.get(b"read") == b"v-read" and t.get(b"idle") is None
    # OnCreateAndWrite: the same reads do not keep it alive
    w = mk(ttl(1000, **NO_BACKGROUND), name="create")
    w.write(0, puts=[b"read"])
    t = w.txn(800)
    assert t.get(b"read") == b"v-read"
    w.commit(t)
    assert w.txn(1600, read_only=True).get(b"read") is None


def test_update_type_disabled_means_no_ttl(mk):
    v = mk(TtlConfig(ttl_ms=1, update_type=_update("Disabled")))
    v.write(0, puts=[b"a"])
    assert v.txn(10**12, read_only=True).get(b"a") == b"v-a"
    # only the open transactions, no TTL metrics (the first read transaction is still open)
    assert v.store.take_metrics(v.txn(5, read_only=True), final=False) == [(METRIC_OPEN_TRANSACTIONS, 1)]


def test_processing_time_reads_the_clock_at_each_access(mk):
    clock = ManualClock(0)
    v = mk(TtlConfig(ttl_ms=1000, compaction_filter=False, cleanup_in_background=False,
                     time_characteristic=_time("ProcessingTime")), clock=clock)
    t = v.txn(-1)
    t.put(b"a", b"1")
    clock.advance(999)
    assert t.get(b"a") == b"1"
    clock.advance(1)
    assert t.get(b"a") is None  # same transaction, later access: expired


def test_incremental_cleanup_removes_expired_entries_nobody_reads(mk):
    v = mk(TtlConfig(ttl_ms=1000, compaction_filter=False, incremental_size=5))
    v.write(0, puts=[b"old%04d" % i for i in range(3000)])
    assert v.store.num_keys == 3000
    t = v.txn(5000)
    for i in range(300):  # 300 accesses x 5 entries: half of the expired entries
        t.put(b"new%04d" % i, b"x")
    v.commit(t)
    removed = dict(v.store.take_metrics(t, final=False))[METRIC_EXPIRED_INCREMENTAL]
    assert 1000 <= removed <= 1800
    assert v.store.num_keys == 3000 + 300 - removed
    # the cursor persists: the next transaction goes on where this one stopped
    t = v.txn(5000)
    for i in range(300, 600):
        t.put(b"new%04d" % i, b"x")
    v.commit(t)
    assert v.store.num_keys == 600 + 3000 - removed - t.expired_incremental
    assert t.expired_incremental > 1000 - 300


def test_stored_from_is_the_earliest_expiry_the_committed_version_stores(mk):
    """COMMIT's `storedFrom`: what the JVM's view takes "not stored" from (decision 113)."""
    v = mk(ttl(1000, **NO_BACKGROUND))
    assert v.store.stored_from() == MAX_TS  # nothing stored
    v.write(10_000, puts=[b"a", b"b"])
    v.write(10_500, puts=[b"c"])
    assert v.store.stored_from() == 11_000
    v.write(10_600, puts=[b"a"])  # b still expires at 11,000
    assert v.store.stored_from() == 11_000
    t = v.txn(11_200)
    assert t.get(b"b") is None  # cleaned up on read: c (11,500) is now the earliest
    v.commit(t)
    assert v.store.stored_from() == 11_500
    # without TTL, or on a clock the JVM's view does not use, nothing is known
    assert mk(TtlConfig(ttl_ms=0), name="plain").store.stored_from() == MIN_TS
    clocked = mk(ttl(1000, time_characteristic=TimeCharacteristic.PROCESSING_TIME), name="pt", clock=ManualClock(0))
    assert clocked.store.stored_from() == MIN_TS


def test_incremental_cleanup_skips_when_nothing_is_expired(mk):
    v = mk(TtlConfig(ttl_ms=10_000, compaction_filter=False))
    v.write(0, puts=[b"k%04d" % i for i in range(2000)])
    t = v.txn(1000)
    for i in range(1000):
        t.get(b"k%04d" % i)
    assert t.scanned == 0 and t.expired_incremental == 0


def test_every_record_counts_iterated_entries_as_accesses(mk):
    base = dict(ttl_ms=1000, compaction_filter=False, incremental_size=10)
    v = mk(TtlConfig(**base, incremental_every_record=True), name="every")
    w = mk(TtlConfig(**base), name="access")
    for s in (v, w):
        s.write(0, puts=[b"old%04d" % i for i in range(2000)])
        # 20 puts: 200 checked. The new keys sort after the old ones: the cleanup of a
        # transaction that writes into the database checks its own (live) entries too.
        s.write(1500, puts=[b"xnew%04d" % i for i in range(20)])
        t = s.txn(1500)
        assert len(list(t.iterate(b"xnew"))) == 20  # 20 records: 200 more with everyRecord
        s.commit(t)
    assert (v.store.num_keys, w.store.num_keys) == (2020 - 400, 2020 - 200)


def test_full_snapshot_leaves_expired_entries_out(mk, tmp_path):
    sizes = {}
    for full in (False, True):
        v = mk(TtlConfig(ttl_ms=1000, compaction_filter=False, cleanup_in_background=False,
                         full_snapshot=full), name=f"full-{full}")
        v.write(0, puts=[b"old%04d" % i for i in range(500)])
        v.write(2000, puts=[b"new%04d" % i for i in range(100)])
        version, count, path, ssts = v.store.snapshot(str(tmp_path / f"snap-{full}"))
        assert (version, count) == (2, 100 if full else 600)
        sizes[full] = sum(size for _, _, size in ssts)
        w = mk(TtlConfig(ttl_ms=1000, compaction_filter=False), name=f"reload-{full}")
        assert w.store.load(2, 2000, 2, path, {name: p for name, p, _ in ssts}) == count
        assert sum(1 for _ in w.store.db.keys()) == count  # what the SSTs hold, counted
        assert sum(f["num_entries"] for f in w.store.db.live_files()) == count  # no tombstones
        assert w.txn(2000, read_only=True).num_keys == 100
    assert sizes[True] < sizes[False] / 2


def test_turning_ttl_on_migrates_with_the_restore_time(mk):
    plain = mk(TtlConfig(), name="plain")
    plain.write(-1, puts=[b"a", b"b"])
    on = mk(ttl(1000, **NO_BACKGROUND), name="on")
    assert on.store.load(1, 50_000, changelogs=plain.files) == 2
    assert on.store.migrated
    t = on.txn(50_999, read_only=True)
    assert t.get(b"a") == b"v-a" and t.num_keys == 2
    assert on.txn(51_000, read_only=True).get(b"a") is None  # restore time + ttl
    # a commit after a migration asks for a snapshot, so no later load replays old files
    on.write(50_100, puts=[b"c"])
    assert on.store.migrated
    on.store.snapshot(str(on.tmp / "on-2.snapshot"))
    assert not on.store.migrated
    on.write(50_200, puts=[b"d"])
    assert not on.store.migrated


def test_turning_ttl_off_strips_timestamps(mk):
    with_ttl = mk(ttl(1000, **NO_BACKGROUND), name="ttl")
    with_ttl.write(0, puts=[b"a"])
    off = mk(TtlConfig(), name="off")
    off.store.load(1, 10**9, changelogs=with_ttl.files)
    assert off.txn(-1, read_only=True).get(b"a") == b"v-a"  # not 8 bytes of timestamp + value


def test_files_record_layout_clock_and_cursor(mk):
    v = mk(TtlConfig(ttl_ms=1000, compaction_filter=False, incremental_size=5))
    v.write(0, puts=[b"k%04d" % i for i in range(3000)])
    v.write(7000, puts=[b"x"])
    meta, records = statefile.read(v.files[-1][1], FILE_CHANGELOG, 2)
    list(records)
    assert meta.layout == statefile.LAYOUT_TTL and meta.batch_ts == 7000 and meta.cursor
    w = mk(TtlConfig(ttl_ms=1000, compaction_filter=False), name="reload")
    w.store.load(2, 7000, changelogs=v.files)
    assert (w.store.batch_ts, w.store.cursor) == (7000, meta.cursor)
    assert w.store.num_keys == v.store.num_keys


def test_a_full_dump_snapshot_file_is_refused(tmp_path):
    path = str(tmp_path / "3.snapshot")
    statefile.write(path, 1, 3, [(b"k", b"v")])  # kind 1: the snapshot of issue 2
    with pytest.raises(CorruptFileError, match="holds a full-dump snapshot .* of version 3"):
        list(statefile.read(path, FILE_CHANGELOG, 3)[1])


def test_compaction_filter_drops_expired_entries_in_maintenance(mk):
    cfg = TtlConfig(ttl_ms=1000, compaction_margin_ms=0, periodic_compaction_ms=1,
                    cleanup_in_background=True, incremental_size=1)
    v = mk(cfg, clock=None)
    now = int(time.time() * 1000)
    v.write(now, puts=[b"k%04d" % i for i in range(1000)])
    v.store.db.flush()
    sst_bytes = sum(f["size"] for f in v.store.db.live_files())
    assert sst_bytes > 10_000
    time.sleep(2.2)  # RocksDB's TTL filter works on its own wall-clock seconds
    v.store.maintain()
    assert v.store.num_keys == 0
    assert sum(f["size"] for f in v.store.db.live_files()) < sst_bytes // 10
    t = v.txn(now + 3000)
    metrics = dict(v.store.take_metrics(t, final=True))
    assert metrics[METRIC_EXPIRED_BY_COMPACTION] == 1000 and metrics[METRIC_TTL_MS] == 1000


def test_compaction_filter_keeps_entries_the_batch_clock_sees_live(mk):
    """Batch 2 replays long after batch 1's wall time: the margin extends RocksDB's TTL."""
    cfg = TtlConfig(ttl_ms=1000, compaction_margin_ms=0, periodic_compaction_ms=1)
    v = mk(cfg)
    old = int(time.time() * 1000) - 60_000  # the replayed batch is a minute old
    v.write(old, puts=[b"k%04d" % i for i in range(100)])
    w = mk(cfg, name="replay")
    w.store.load(1, old + 500, changelogs=v.files)  # RocksDB TTL = ttl + margin + 60 s of lag
    w.store.db.flush()
    time.sleep(1.5)
    w.store.maintain()
    assert w.txn(old + 500, read_only=True).num_keys == 100


@pytest.mark.parametrize("years", [12, 100])
def test_compaction_filter_keeps_entries_whose_ttl_reaches_past_2038(mk, years):
    """RocksDB's TTL filter adds a 32-bit write time (seconds) to the TTL, capped at 2**31 - 1:
    past about 11 years the sum no longer fits 32 bits. The rocksdict build in use must still
    keep live entries (a build whose sum wrapped would drop every entry at compaction); found by
    an audit, kept as a guard for later rocksdict releases."""
    year_ms = 365 * 24 * 3600 * 1000
    v = mk(TtlConfig(ttl_ms=years * year_ms, compaction_filter=True))
    v.write(int(time.time() * 1000), puts=[b"k%04d" % i for i in range(500)])
    assert v.store.db_ttl
    v.store.db.compact_range(None, None)
    assert sum(1 for _ in v.store.db.keys()) == 500


@pytest.mark.parametrize("beside", [False, True], ids=["direct", "overlay"])
@pytest.mark.parametrize("write", ["put", "remove"])
@pytest.mark.parametrize("case", ["refresh", "cleanup"])
def test_an_open_iterator_does_not_undo_a_later_write_of_its_transaction(mk, case, write, beside):
    """The worker produces an iterator's entries chunk by chunk (ITER_NEXT), so the
    transaction can write a key the iterator has pinned but not reached yet. Reaching it, the
    iterator must not refresh it (OnReadAndWrite: would write the pinned value back) nor
    clean it up on read (pinned entry expired: would delete the newer write); it may report
    the pinned entry. A transaction beside another keeps an overlay; alone it writes into
    the database: both."""
    update = "OnReadAndWrite" if case == "refresh" else "OnCreateAndWrite"
    v = mk(ttl(1000, update_type=_update(update), **NO_BACKGROUND))
    v.write(1000, puts=[b"c"])
    read_at = 1500 if case == "refresh" else 2000  # c: live (refreshed) / expired (cleaned)
    v.write(read_at - 200, puts=[b"a", b"b"])
    reader = v.txn(read_at, read_only=True) if beside else None
    t = v.txn(read_at)
    assert t.direct is not beside
    it = t.iterate(b"")
    assert next(it) == (b"a", b"v-a")  # the first chunk, of one entry
    if write == "put":
        t.put(b"c", b"new-c")
    else:
        t.remove(b"c")
    rest = list(it)  # the next chunks reach c
    want = b"new-c" if write == "put" else None
    assert t.get(b"c") == want
    assert rest == ([(b"b", b"v-b"), (b"c", b"v-c")] if case == "refresh" else [(b"b", b"v-b")])
    assert not t.written_since  # the iterator ended: nothing more is recorded for it
    v.commit(t)
    if reader:
        reader.end()
    assert v.txn(read_at, read_only=True).get(b"c") == want
    assert v.store.num_keys == (3 if write == "put" else 2)
    w = mk(ttl(1000, **NO_BACKGROUND), name="reloaded")  # the changelog agrees
    w.store.load(3, read_at, changelogs=v.files)
    assert w.txn(read_at, read_only=True).get(b"c") == want


def test_an_iterator_still_refreshes_and_cleans_keys_nobody_wrote(mk):
    """The rule spares only keys written after the iterator opened; a closed iterator
    stops recording writes."""
    v = mk(ttl(1000, update_type=_update("OnReadAndWrite"), **NO_BACKGROUND))
    v.write(0, puts=[b"gone"])
    v.write(900, puts=[b"a", b"b"])
    t = v.txn(1500)
    it = t.iterate(b"")
    assert next(it) == (b"a", b"v-a")
    t.put(b"x", b"v-x")  # another key: b is still refreshed, gone still cleaned up
    assert list(it) == [(b"b", b"v-b")]
    early = t.iterate(b"")
    assert next(early) == (b"a", b"v-a") and len(t.written_since) == 1
    early.close()
    assert not t.written_since
    v.commit(t)
    assert v.store.num_keys == 3  # gone was cleaned up on read
    assert v.txn(2400, read_only=True).get(b"b") == b"v-b"  # refreshed at 1500, not 900


def _visibility(name):
    from ttlstate.ttl.config import StateVisibility
    return StateVisibility(name)


def _update(name):
    from ttlstate.ttl.config import UpdateType
    return UpdateType(name)


def _time(name):
    from ttlstate.ttl.config import TimeCharacteristic
    return TimeCharacteristic(name)


def test_a_changelog_of_format_2_is_still_read():
    """tests/data/format2-7.changelog was written by the format-2 writer (the cursor in the header)."""
    path = os.path.join(os.path.dirname(__file__), "data", "format2-7.changelog")
    meta, records = statefile.read(path, FILE_CHANGELOG, 7)
    assert meta == statefile.FileMeta(1, 1700000000123, b"k0")
    assert list(records) == [(b"k1", b"\x00" * 8 + b"v1"), (b"k2", None), (b"k1", b"\x00" * 8 + b"v2")]
