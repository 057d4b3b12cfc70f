"""The EventTime clock: the query's event-time watermark of the micro-batch.

The JVM reads `batchWatermarkMs` from the offset log (as it reads `batchTimestampMs` for
BatchTimestamp), so a replayed batch runs at the watermark of its first attempt. The TTL
rule (`ttlstate.ttl.expired`) is unchanged; only the clock that feeds it differs.

Spark's watermark is 0 until the query has seen data ("no watermark yet") and then jumps to
the data's time, decades later. An entry written at watermark 0 therefore carries no time
yet: it is stamped `UNSTAMPED` (MAX_TS), which the unchanged rule never expires, and the
store's first write transaction at a watermark W > 0 stamps every such entry with W (writing
them into its changelog, so a replay does the same). An entry written before the watermark
starts thus lives as if written at the first watermark (docs/DESIGN.md, entry 61).
"""

from __future__ import annotations

from . import MAX_TS

UNSTAMPED = MAX_TS  # the stamp of an entry written while the watermark is 0


def clock(batch_watermark_ms: int) -> int:
    """The TTL clock of a transaction from the watermark the JVM sent (-1: unknown, which
    means no watermark yet, as 0 does)."""
    return batch_watermark_ms if batch_watermark_ms > 0 else 0


def stamp(now: int) -> int:
    """The timestamp a write at clock `now` carries: `now`, or UNSTAMPED at watermark 0."""
    return now if now > 0 else UNSTAMPED


def needs_stamping(now: int, unstamped_entries: int) -> bool:
    """Whether a write transaction at `now` must stamp the store's UNSTAMPED entries first."""
    return now > 0 and unstamped_entries > 0
