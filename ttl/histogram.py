"""How many entries carry each TTL timestamp: exact live/expired counts without a scan.

With the batch clock, all entries written in one micro-batch share its timestamp, so a
store holds few distinct timestamps and counting the live entries at `now` costs a pass
over those, not over the entries. `numKeys` under `NeverReturnExpired` and the "is there
anything to clean?" test of the incremental cleanup both come from here.
"""

from __future__ import annotations

from . import expired


class TsHistogram:
    """Entries per timestamp (milliseconds). Counts may go negative in a delta."""

    __slots__ = ("counts",)

    def __init__(self):
        self.counts: dict[int, int] = {}

    def add(self, ts: int, n: int = 1) -> None:
        counts = self.counts
        v = counts.get(ts, 0) + n
        if v:
            counts[ts] = v
        else:
            counts.pop(ts, None)

    def merge(self, delta: "TsHistogram") -> None:
        for ts, n in delta.counts.items():
            self.add(ts, n)

    def clear(self) -> None:
        self.counts.clear()

    def expired_count(self, ttl: int, now: int, delta: "TsHistogram | None" = None) -> int:
        """Entries expired at `now` (of this histogram plus an optional delta)."""
        return sum(n for ts, n in self._merged(delta) if expired(ts, ttl, now))

    def live_count(self, ttl: int, now: int, delta: "TsHistogram | None" = None) -> int:
        """Entries not expired at `now` (of this histogram plus an optional delta)."""
        return sum(n for ts, n in self._merged(delta) if not expired(ts, ttl, now))

    def _merged(self, delta):
        if not delta or not delta.counts:
            return self.counts.items()
        merged = dict(self.counts)
        for ts, n in delta.counts.items():
            merged[ts] = merged.get(ts, 0) + n
        return merged.items()

    def __len__(self) -> int:
        return len(self.counts)

    def __bool__(self) -> bool:
        return bool(self.counts)
