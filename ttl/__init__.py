"""Flink-style state TTL semantics (pure; the store applies them), installed as `ttlstate.ttl`.

The folder sits beside `provider/` (the repository's fixed shape) but is part of the
`ttlstate` package (`pyproject.toml` maps it): it imports the package's errors and settings,
and the store imports it.

The TTL rule lives here for the Python side (the JVM's is `TtlRule.java`; both must pass
`tests/vectors/ttl.tsv`): an entry written at `ts` with time-to-live `ttl` expires at
`ts + ttl`, saturated at MAX_TS instead of overflowing, and is expired at every `now` at or
after that (inclusive), as Flink's `TtlUtils.expired`; under OnReadAndWrite a read refreshes a
live entry when that changes its expiry time (`refreshes`). Plus the clock abstraction.
"""

from __future__ import annotations

import time
from typing import Protocol

MAX_TS = (1 << 63) - 1  # Java Long.MAX_VALUE: timestamps are signed 64-bit milliseconds
MIN_TS = -(1 << 63)  # Java Long.MIN_VALUE


def expiration_ts(ts: int, ttl: int) -> int:
    """When an entry written at `ts` expires: `ts + ttl` saturated at MAX_TS; MAX_TS (never)
    when `ttl <= 0` (no TTL)."""
    if ttl <= 0:
        return MAX_TS
    return ts + min(MAX_TS - ts, ttl)


def written_at(expires_at: int, ttl: int) -> int | None:
    """The timestamp `ts` of an entry that expires at `expires_at` (`expiration_ts(ts, ttl)`),
    or None when that does not tell it: without TTL, or a saturated time (MAX_TS), which
    every `ts >= MAX_TS - ttl` gives. The worker takes a stored entry's timestamp from the
    expiry time a JVM presence hint carries (docs/PROTOCOL.md, PUT_OVER_LIVE)."""
    if ttl <= 0 or expires_at >= MAX_TS:
        return None
    return expires_at - ttl


def expired_at(expires_at: int, now: int) -> bool:
    """Whether an entry that expires at `expires_at` is expired at `now` (inclusive)."""
    return expires_at <= now


def refreshes(ts: int, ttl: int, now: int) -> bool:
    """Whether a read at `now` of a live entry written at `ts` gives it a new expiry time
    (OnReadAndWrite): only when the expiry it would get, `expiration_ts(now, ttl)`, differs from
    the one it has (never without TTL; not between two saturated times)."""
    return expiration_ts(now, ttl) != expiration_ts(ts, ttl)


def expired(ts: int, ttl: int, now: int) -> bool:
    """True iff an entry last written at `ts` with time-to-live `ttl` is expired at `now`.

    All values are milliseconds. `ts + min(MAX - ts, ttl) <= now`.
    """
    return expired_at(expiration_ts(ts, ttl), now)


def expired_through(ttl: int, now: int) -> int | None:
    """The latest timestamp an entry may carry and be expired at `now`: `expired(ts, ttl, now)`
    holds exactly for every `ts` at or below it (`expired` is monotone in `ts`), so a scan
    compares each timestamp with this one bound. None without TTL (nothing expires)."""
    if ttl <= 0:
        return None
    if now >= MAX_TS:
        return MAX_TS  # every expiry time is at most MAX_TS
    return now - ttl


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
