"""Unit tests of the pure TTL rule (ttlstate.ttl)."""

import itertools

from ttlstate.ttl import MAX_TS, ManualClock, expiration_ts, expired, expired_through


def test_expiry_is_inclusive():
    assert not expired(ts=1000, ttl=500, now=1499)
    assert expired(ts=1000, ttl=500, now=1500)


def test_expiry_saturates_instead_of_overflowing():
    assert expiration_ts(MAX_TS - 10, 1000) == MAX_TS
    assert not expired(MAX_TS - 10, 1000, MAX_TS - 1)
    assert expired(MAX_TS - 10, 1000, MAX_TS)
    assert not expired(0, MAX_TS, MAX_TS - 1)


def test_expired_through_bounds_exactly_the_expired_timestamps():
    """`expired_through(ttl, now)`: `expired(ts, ttl, now)` holds exactly for `ts` at or below it."""
    min_ts = -MAX_TS - 1
    edges = [min_ts, min_ts + 1, -1000, -1, 0, 1, 999, 1000, 1001, MAX_TS - 1000, MAX_TS - 1, MAX_TS]
    for ttl, now in itertools.product([1, 1000, MAX_TS], edges):
        bound = expired_through(ttl, now)
        for ts in edges + [now - ttl - 1, now - ttl, now - ttl + 1]:
            if min_ts <= ts <= MAX_TS:
                assert expired(ts, ttl, now) == (ts <= bound), (ts, ttl, now)
    assert expired_through(0, 5) is None


def test_manual_clock_steps():
    clock = ManualClock(100)
    clock.advance(50)
    assert clock.current_timestamp() == 150
    assert expired(100, 50, clock.current_timestamp())
