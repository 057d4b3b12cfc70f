"""TTL on event time as the store applies it: real RocksDB and real state files.

Under `timeCharacteristic=EventTime` the clock of a transaction is the batch's event-time
watermark (what the JVM reads from the offset log's `batchWatermarkMs`, given here as the
transaction's `batch_ts`). Entries written at watermark 0 ("no watermark yet") are
UNSTAMPED until the store's first write transaction at a watermark past 0 stamps them with
it (docs/decisions/061-event-time-ttl.md). The rule itself is `ttlstate.ttl.expired`, unchanged.
"""

from __future__ import annotations

import time

import pytest

from ttlstate import statefile
from ttlstate.statefile import FILE_CHANGELOG
from ttlstate.store import METRIC_EXPIRED_BY_COMPACTION, Store
from ttlstate.ttl import MAX_TS, codec, event_time
from ttlstate.ttl.config import StateVisibility, TimeCharacteristic, TtlConfig, UpdateType

EVENT = TimeCharacteristic.EVENT_TIME
DAY = 86_400_000
W1 = 1_704_067_200_000  # 2024-01-01: the watermark once the data has been seen


def cfg(ttl_ms=DAY, **kw) -> TtlConfig:
    kw.setdefault("cleanup_in_background", False)
    return TtlConfig(ttl_ms=ttl_ms, time_characteristic=EVENT, **kw)


class Versions:
    """Commits transactions of one store and remembers its changelogs, for reloads."""

    def __init__(self, tmp_path, config: TtlConfig, name="s"):
        self.tmp = tmp_path
        self.config = config
        self.store = Store(name, str(tmp_path / name), config)
        self.files: list[tuple[int, str]] = []

    def txn(self, watermark: int, read_only=False):
        return self.store.begin(self.store.version, read_only, watermark)

    def commit(self, txn):
        v = self.store.version + 1
        path = str(self.tmp / f"{self.store.store_id}-{v}.changelog")
        self.store.commit(txn, v, path)
        self.files.append((v, path))

    def write(self, watermark: int, puts=()):
        t = self.txn(watermark)
        for k in puts:
            t.put(k, b"v-" + k)
        self.commit(t)

    def stamps(self) -> dict[bytes, int]:
        return {k: codec.timestamp(v) for k, v in self.store.db.items()}


@pytest.fixture
def mk(tmp_path):
    made = []

    def make(config, name="s"):
        v = Versions(tmp_path, config, name)
        made.append(v.store)
        return v
    yield make
    for s in made:
        s.close(delete_files=True)


def test_the_event_time_rule_is_the_shared_rule_on_the_watermark():
    assert event_time.clock(-1) == event_time.clock(0) == 0
    assert event_time.clock(W1) == W1
    assert event_time.stamp(0) == event_time.UNSTAMPED == MAX_TS
    assert event_time.stamp(W1) == W1


def test_an_unknown_watermark_runs_at_the_committed_versions_clock_not_0(mk):
    """-1 (the JVM could not read the watermark) must not take the store back to watermark 0:
    a write transaction there would return entries the committed version saw expired and,
    under OnReadAndWrite, re-stamp them UNSTAMPED, so the next batch stamps them with its
    own watermark and they live another TTL."""
    v = mk(cfg(update_type=UpdateType.ON_READ_AND_WRITE))
    v.write(W1, puts=[b"a", b"b"])
    v.write(W1 + DAY, puts=[b"c"])  # a and b expired at this version's watermark (unread)
    assert v.store.batch_ts == W1 + DAY
    r = v.txn(-1, read_only=True)
    assert r.now() == W1 + DAY and r.get(b"a") is None and r.num_keys == 1
    r.end()
    t = v.txn(-1)
    assert t.get(b"a") is None  # expired (and cleaned up on read), not returned
    t.put(b"d", b"v-d")
    v.commit(t)
    assert v.stamps() == {b"b": W1, b"c": W1 + DAY, b"d": W1 + DAY}
    assert v.store.batch_ts == W1 + DAY
    t = v.txn(W1 + DAY + 1)
    assert t.get(b"a") is None and t.get(b"b") is None and t.get(b"c") == b"v-c"
    assert event_time.clock(-1, W1) == W1 and event_time.clock(-1, -1) == 0


def test_a_known_watermark_is_not_raised_to_a_clock_of_another_time_base(mk):
    """A store without TTL recorded batch timestamps (wall clock); turned on under EventTime,
    its first batch runs at its watermark, behind them, not at the last batch timestamp."""
    plain = mk(TtlConfig(), name="plain")
    t = plain.store.begin(0, False, W1 + 300 * DAY)
    t.put(b"a", b"v-a")
    plain.store.commit(t, 1, str(plain.tmp / "plain-1.changelog"))
    on = mk(cfg(), name="on")
    on.store.load(1, W1, changelogs=[(1, str(plain.tmp / "plain-1.changelog"))])
    assert on.store.batch_ts == W1 + 300 * DAY
    on.write(W1 + 1, puts=[b"b"])
    assert on.stamps() == {b"a": W1, b"b": W1 + 1}


def test_an_entry_expires_when_the_watermark_reaches_its_watermark_plus_ttl(mk):
    v = mk(cfg())
    v.write(W1, puts=[b"a"])
    assert v.stamps() == {b"a": W1}
    assert v.txn(W1 + DAY - 1, read_only=True).get(b"a") == b"v-a"
    assert v.txn(W1 + DAY, read_only=True).get(b"a") is None
    # the wall clock plays no part: a watermark that stands still keeps the entry forever
    assert v.txn(W1, read_only=True).get(b"a") == b"v-a"


def test_entries_written_before_the_watermark_starts_live_from_the_first_watermark(mk):
    v = mk(cfg())
    v.write(0, puts=[b"early1", b"early2"])  # batch 0: no watermark yet
    v.write(-1, puts=[b"early3"])  # clock unknown: no watermark either (not the wall clock)
    assert set(v.stamps().values()) == {event_time.UNSTAMPED}
    # a read at a watermark decades later does not expire them (nor stamp them: read-only)
    r = v.txn(W1 + 10 * DAY, read_only=True)
    assert r.get(b"early1") == b"v-early1" and r.num_keys == 3
    r.end()
    assert set(v.stamps().values()) == {event_time.UNSTAMPED}
    # the first write transaction at a watermark past 0 stamps them with it, before any read
    t = v.txn(W1)
    assert t.get(b"early2") == b"v-early2"
    t.put(b"new", b"v-new")
    v.commit(t)
    assert v.stamps() == {b"early1": W1, b"early2": W1, b"early3": W1, b"new": W1}
    assert v.store.hist.counts == {W1: 4}
    # ... so they expire a TTL after the first watermark
    assert v.txn(W1 + DAY - 1, read_only=True).num_keys == 4
    assert v.txn(W1 + DAY, read_only=True).num_keys == 0


def test_the_stamping_is_in_the_changelog_so_a_reload_sees_it(mk):
    v = mk(cfg())
    v.write(0, puts=[b"a", b"b"])
    v.write(W1, puts=[b"c"])
    meta, records = statefile.read(v.files[-1][1], FILE_CHANGELOG, 2)
    written = {k: codec.timestamp(val) for k, val in records}
    assert meta.batch_ts == W1 and written == {b"a": W1, b"b": W1, b"c": W1}
    # a reload at a later watermark replays the stamps of the first attempt, not its own
    w = mk(cfg(), name="reload")
    assert w.store.load(2, W1 + 5, changelogs=v.files) == 3
    assert w.stamps() == v.stamps()
    # a replay of batch 1 (load version 1, same watermark) stamps exactly as the first attempt
    r = mk(cfg(), name="replay")
    r.store.load(1, W1, changelogs=v.files[:1])
    r.write(W1, puts=[b"c"])
    assert r.stamps() == v.stamps()


def test_a_read_refresh_at_watermark_0_keeps_the_entry_unstamped(mk):
    v = mk(cfg(update_type=UpdateType.ON_READ_AND_WRITE))
    v.write(0, puts=[b"a"])
    t = v.txn(0)
    assert t.get(b"a") == b"v-a"
    v.commit(t)
    assert v.stamps() == {b"a": event_time.UNSTAMPED}
    v.write(W1)
    t = v.txn(W1 + DAY // 2)  # a read refreshes to the watermark of the reading batch
    assert t.get(b"a") == b"v-a"
    v.commit(t)
    assert v.stamps() == {b"a": W1 + DAY // 2}
    assert v.txn(W1 + DAY, read_only=True).get(b"a") == b"v-a"


def test_return_expired_if_not_cleaned_up_on_the_watermark(mk):
    v = mk(cfg(state_visibility=StateVisibility.RETURN_EXPIRED_IF_NOT_CLEANED_UP))
    v.write(W1, puts=[b"a"])
    t = v.txn(W1 + DAY)
    assert t.get(b"a") == b"v-a"  # expired, returned once, cleaned up on read
    assert t.get(b"a") is None
    v.commit(t)
    assert v.stamps() == {}


def test_incremental_and_full_snapshot_cleanups_use_the_watermark(mk, tmp_path):
    v = mk(cfg(cleanup_in_background=True, incremental_size=1000, full_snapshot=True))
    v.write(W1, puts=[b"k%03d" % i for i in range(200)])
    v.write(W1 + DAY - 1, puts=[b"x"])  # nothing expired yet: the cleanup removes nothing
    assert len(v.stamps()) == 201
    v.write(W1 + DAY, puts=[b"y"])  # the incremental cleanup finds the 200 expired entries
    assert set(v.stamps()) == {b"x", b"y"}
    w = mk(cfg(full_snapshot=True), name="full")
    w.write(W1, puts=[b"a", b"b"])
    w.write(W1 + DAY, puts=[b"c"])
    version, count, _, _ = w.store.snapshot(str(tmp_path / "snap"))
    assert (version, count) == (2, 1)


def test_turning_ttl_on_at_watermark_0_leaves_the_values_unstamped(mk):
    plain = mk(TtlConfig(), name="plain")
    t = plain.store.begin(0, False, -1)
    t.put(b"a", b"v-a")
    plain.store.commit(t, 1, str(plain.tmp / "plain-1.changelog"))
    on = mk(cfg(), name="on")
    on.store.load(1, 0, changelogs=[(1, str(plain.tmp / "plain-1.changelog"))])
    assert on.stamps() == {b"a": event_time.UNSTAMPED}
    on2 = mk(cfg(), name="on2")
    on2.store.load(1, W1, changelogs=[(1, str(plain.tmp / "plain-1.changelog"))])
    assert on2.stamps() == {b"a": W1}


def test_the_compaction_filter_is_off_under_event_time(mk):
    """RocksDB's TTL filter ages entries by their wall-clock write time. Under EventTime it
    must not drop an entry the watermark still sees live: with the same settings that make
    it drop everything under BatchTimestamp (the control), it keeps every entry."""
    settings = dict(ttl_ms=1000, compaction_margin_ms=0, periodic_compaction_ms=1,
                    cleanup_in_background=True, compaction_filter=True)
    on_event = TtlConfig(time_characteristic=EVENT, **settings)
    on_batch = TtlConfig(**settings)
    assert on_batch.compaction_cleanup and not on_event.compaction_cleanup
    wall = int(time.time() * 1000)
    stores = {"event": mk(on_event, name="event"), "batch": mk(on_batch, name="batch")}
    stores["event"].write(W1, puts=[b"k%04d" % i for i in range(500)])
    stores["batch"].write(wall, puts=[b"k%04d" % i for i in range(500)])
    for v in stores.values():
        v.store.db.flush()
    time.sleep(2.2)  # past ttl + margin on the wall clock: RocksDB's TTL filter would drop
    for v in stores.values():
        v.store.maintain()
    assert stores["batch"].store.num_keys == 0  # the control: the filter ran and dropped all
    ev = stores["event"]
    assert not ev.store.db_ttl and ev.store.num_keys == 500 and len(ev.stamps()) == 500
    t = ev.txn(W1 + 999)  # the watermark moved less than the TTL: all live
    assert t.num_keys == 500
    assert dict(ev.store.take_metrics(t, final=True))[METRIC_EXPIRED_BY_COMPACTION] == 0
