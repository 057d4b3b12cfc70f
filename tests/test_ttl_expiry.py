"""Unit tests of the pure TTL rule (ttlstate.ttl)."""

from ttlstate.ttl import MAX_TS, ManualClock, expiration_ts, expired


def test_expiry_is_inclusive():
    assert not expired(ts=1000, ttl=500, now=1499)
    assert expired(ts=1000, ttl=500, now=1500)


def test_expiry_saturates_instead_of_overflowing():
    assert expiration_ts(MAX_TS - 10, 1000) == MAX_TS
    assert not expired(MAX_TS - 10, 1000, MAX_TS - 1)
    assert expired(MAX_TS - 10, 1000, MAX_TS)
    assert not expired(0, MAX_TS, MAX_TS - 1)


def test_manual_clock_steps():
    clock = ManualClock(100)
    clock.advance(50)
    assert clock.current_timestamp() == 150
    assert expired(100, 50, clock.current_timestamp())
