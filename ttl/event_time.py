"""The EventTime clock: the query's event-time watermark of the micro-batch.

The JVM reads `batchWatermarkMs` from the offset log (as it reads `batchTimestampMs` for
BatchTimestamp), so a replayed batch runs at the watermark of its first attempt. The TTL
rule (`ttlstate.ttl.expired`) is unchanged; only the clock that feeds it differs.

Spark's watermark is 0 until the query has seen data ("no watermark yet") and then jumps to
the data's time, decades later. An entry written at watermark 0 therefore carries no time
yet: it is stamped `UNSTAMPED` (MAX_TS), which the unchanged rule never expires, and the
store's first write transaction at a watermark W > 0 stamps every such entry with W (writing
them into its changelog, so a replay does the same). An entry written before the watermark
starts thus lives as if written at the first watermark (docs/decisions/061-event-time-ttl.md).
"""

from __future__ import annotations

from . import MAX_TS

UNSTAMPED = MAX_TS  # the stamp of an entry written while the watermark is 0


def clock(batch_watermark_ms: int, committed: int = -1) -> int:
    """The TTL clock of a transaction from the watermark the JVM sent. -1 (unknown: no offset
    log, e.g. a state reader, or one the JVM could not read) means the clock the store's
    committed version ran at (`committed`, `Store.batch_ts`; 0 if none): never an earlier
    clock, at which entries that version saw expired would come back (and be re-stamped). A
    watermark the JVM knows is taken as it is (Spark's watermark never goes back, so a
    replay's is that of its first attempt); it is not compared with `committed`, which may be
    a batch timestamp, of another time base (the store without TTL or on another clock)."""
    if batch_watermark_ms >= 0:
        return batch_watermark_ms
    return max(committed, 0)


def stamp(now: int) -> int:
    """The timestamp a write at clock `now` carries: `now`, or UNSTAMPED at watermark 0."""
    return now if now > 0 else UNSTAMPED


def needs_stamping(now: int, unstamped_entries: int) -> bool:
    """Whether a write transaction at `now` must stamp the store's UNSTAMPED entries first."""
    return now > 0 and unstamped_entries > 0
