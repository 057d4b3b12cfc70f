package io.ttlstate.spark.ttl;

/**
 * The TTL rule on the JVM side, in one place (Python's is {@code ttlstate.ttl}; both pass
 * {@code tests/vectors/ttl.tsv}). Flink's {@code TtlUtils}: an entry written at {@code ts} with
 * a time-to-live of {@code ttlMs} expires at {@code ts + ttlMs}, saturated instead of
 * overflowing, and is expired at every {@code now} at or after that (inclusive); a read at
 * {@code now} refreshes a live entry (OnReadAndWrite) when that changes its expiry time.
 */
public final class TtlRule {
    /** Expiry time of an entry without TTL. */
    public static final long NEVER = Long.MAX_VALUE;

    private TtlRule() {
    }

    /** When an entry written at {@code ts} expires under {@code ttlMs} ({@code <= 0}: no TTL, {@link #NEVER}). */
    public static long expiresAt(long ts, long ttlMs) {
        if (ttlMs <= 0) {
            return NEVER;
        }
        return ts > NEVER - ttlMs ? NEVER : ts + ttlMs;
    }

    /**
     * Whether a read at {@code now} of a live entry that expires at {@code expiresAt} gives it a
     * new expiry time under OnReadAndWrite: only when {@code expiresAt(now, ttlMs)} differs
     * (never without TTL; not between two saturated times). {@code ttlstate.ttl.refreshes}.
     */
    public static boolean refreshes(long expiresAt, long now, long ttlMs) {
        return expiresAt(now, ttlMs) != expiresAt;
    }

    /**
     * EventTime (the clock is the batch's watermark, docs/decisions/061-event-time-ttl.md): the
     * expiry time of a write at
     * {@code clock}. At watermark 0 ("no watermark yet", and below) the worker stamps the write
     * UNSTAMPED ({@code Long.MAX_VALUE}), which never expires: {@link #NEVER}, not
     * {@code expiresAt(0, ttlMs)}. {@code ttlstate.ttl.event_time.stamp}.
     */
    public static long eventTimeWriteExpiresAt(long clock, long ttlMs) {
        return clock > 0 ? expiresAt(clock, ttlMs) : NEVER;
    }

    /**
     * EventTime: the expiry time, after a write transaction at {@code clock} began, of an entry
     * that expired at {@code expiresAt} before it. The worker stamps every UNSTAMPED entry with
     * the first write transaction's watermark past 0 ({@code Txn.stamp_unstamped}), so an entry
     * that never expired gets {@code expiresAt(clock, ttlMs)}; any other keeps its time. The
     * JVM cannot tell UNSTAMPED from a time saturated by {@code ts + ttlMs}, but such an entry
     * was written at a watermark {@code ts >= NEVER - ttlMs}, and the watermark never goes back
     * ({@code clock >= ts}), so {@code expiresAt(clock, ttlMs)} is {@link #NEVER} for it too
     * (docs/decisions/104-event-time-jvm-view.md).
     */
    public static long eventTimeStamped(long expiresAt, long clock, long ttlMs) {
        return expiresAt == NEVER && clock > 0 ? expiresAt(clock, ttlMs) : expiresAt;
    }

    /**
     * EventTime: whether a read at watermark {@code clock} of a live entry that expires at
     * {@code expiresAt} (after any stamping) gives it a new expiry time under OnReadAndWrite:
     * when the expiry of a write at {@code clock} differs (so never at watermark 0 for an
     * UNSTAMPED entry: the worker's refresh would stamp it UNSTAMPED again).
     * {@code ttlstate.ttl.refreshes} at {@code event_time.stamp(clock)}.
     */
    public static boolean eventTimeRefreshes(long expiresAt, long clock, long ttlMs) {
        return eventTimeWriteExpiresAt(clock, ttlMs) != expiresAt;
    }

    /** Whether an entry that expires at {@code expiresAt} is expired at {@code now}. */
    public static boolean expired(long expiresAt, long now) {
        return expiresAt <= now;
    }
}
