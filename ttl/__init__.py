"""Flink-style state TTL semantics (pure; the store applies them).

This module starts small: the expiry rule and the clock abstraction that the TTL issue
builds on. `expired` mirrors Flink's `TtlUtils.expired`: overflow-safe and inclusive.
"""

from __future__ import annotations

import time
from typing import Protocol

MAX_TS = (1 << 63) - 1  # Java Long.MAX_VALUE: timestamps are signed 64-bit milliseconds


def expiration_ts(ts: int, ttl: int) -> int:
    """`ts + ttl`, saturated at MAX_TS instead of overflowing."""
    return ts + min(MAX_TS - ts, ttl)


def expired(ts: int, ttl: int, now: int) -> bool:
    """True iff an entry last written at `ts` with time-to-live `ttl` is expired at `now`.

    All values are milliseconds. `ts + min(MAX - ts, ttl) <= now`.
    """
    return expiration_ts(ts, ttl) <= now


class TtlTimeProvider(Protocol):
    """Where TTL reads the current time (milliseconds). Injectable so tests step time."""

    def current_timestamp(self) -> int: ...


class WallClock:
    def current_timestamp(self) -> int:
        return time.time_ns() // 1_000_000


class ManualClock:
    """A clock that only moves when told: for tests."""

    def __init__(self, now: int = 0):
        self.now = now

    def current_timestamp(self) -> int:
        return self.now

    def advance(self, millis: int) -> None:
        self.now += millis
