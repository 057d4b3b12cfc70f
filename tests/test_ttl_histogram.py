"""The timestamp histogram (live/expired counts) and the layout migration: pure logic."""

from hypothesis import given, strategies as st

from ttlstate.ttl import MAX_TS, codec, expired
from ttlstate.ttl.histogram import TsHistogram

timestamps = st.integers(min_value=0, max_value=MAX_TS)


@given(st.lists(timestamps, max_size=50), st.lists(timestamps, max_size=20),
       st.integers(min_value=1, max_value=MAX_TS), st.integers(min_value=0, max_value=MAX_TS))
def test_counts_match_a_direct_count(entries, removed, ttl, now):
    base, delta = TsHistogram(), TsHistogram()
    for ts in entries:
        base.add(ts)
    kept = list(entries)
    for ts in removed:  # a delta removes some entries (only ones that exist) and adds others
        if ts in kept:
            kept.remove(ts)
            delta.add(ts, -1)
        else:
            kept.append(ts)
            delta.add(ts)
    live = sum(not expired(ts, ttl, now) for ts in kept)
    assert base.live_count(ttl, now, delta) == live
    assert base.expired_count(ttl, now, delta) == len(kept) - live
    base.merge(delta)
    assert base.live_count(ttl, now) == live


def test_zero_buckets_disappear():
    h = TsHistogram()
    h.add(5)
    h.add(5, -1)
    assert not h and len(h) == 0


def test_migration_adds_and_strips_the_timestamp():
    assert codec.migrate(b"v", True, 42) == codec.encode(42, b"v")
    assert codec.migrate(codec.encode(42, b"v"), False, 0) == b"v"
