package io.ttlstate.spark.cache;

import java.util.Iterator;
import java.util.Map;

import io.ttlstate.spark.ttl.TtlRule;

/**
 * The JVM's cached view of the committed version the worker's database holds, so that reads
 * need no round trip: a bounded cache of values it read or wrote ({@link SlabCache}: no Java
 * object per value, least recently used values go first), and a Bloom filter of the keys that
 * version may hold ({@link KeyFilter}).
 *
 * <p>Valid for exactly one version: a transaction consults it only at that version, a commit
 * through its store moves it to the new version (with the transaction's writes), and a
 * load or a failed commit resets it. The worker itself deletes only expired entries (cleanup
 * on read, incremental cleanup, compaction filter, full-snapshot purge), and every cached
 * value carries its expiry time, so a cached value is never served after it expired.
 *
 * <p>All views of the JVM with the same budget ({@code cache.maxBytes}) share it: the view
 * counts the memory its cache takes in its {@link CacheBudget} and asks it whether to grow, to
 * evict its own oldest values or to have a view above its share give back. Thread-safe.
 */
public final class CachedVersionView {
    /** The answer "the filter says this version does not hold the key". */
    public static final Cached ABSENT = new Cached(new byte[0], 0);
    /** {@link #lookup}: the view held the key's value, expired at the time asked (the worker cleans it up on read). */
    public static final Cached EXPIRED = new Cached(new byte[0], 0);
    /**
     * {@link #lookup}: the view is complete and holds no value of the key, but the filter says it
     * may be stored: with TTL, an expired entry the worker has not cleaned up yet may be.
     */
    public static final Cached NO_LIVE_VALUE = new Cached(new byte[0], 0);
    /**
     * {@link #lookup}: the version stores no entry of the key: the view held its value, expired
     * before every entry the version stores does ({@link #storedFrom}), or the view is complete
     * and every expired value it forgot did (docs/decisions/113-stored-from.md).
     */
    public static final Cached GONE = new Cached(new byte[0], 0);

    private final CacheBudget budget;
    private final boolean useFilter;
    private final SlabCache values;
    private long version = -1;
    /**
     * What this view counts in its budget: the memory its cache takes ({@link #settle}).
     * Volatile: the budget reads it without this view's lock ({@link #budgeted}) to find a view above its share.
     */
    private volatile long bytes;
    /** Keys the version may hold; null while unknown (after a load, until {@link #filterReady}). */
    private KeyFilter filter;
    /**
     * Whether {@code values} holds every entry of the version (an empty version, or a warm-up
     * that read them all, and no eviction since): reads and iterators need no worker then.
     */
    private boolean complete;
    /** A value was evicted since the last {@link #reset}, so a warm-up cannot make the view complete. */
    private boolean evictedSinceReset;
    private boolean closed;
    /** A value that never expires was cached since the last {@link #stamped} or reset (EventTime: maybe UNSTAMPED). */
    private boolean mayHoldNever;
    /**
     * An expired value the view forgets may still be read through the worker (a TTL store under
     * {@code ReturnExpiredIfNotCleanedUp}, or one whose reads refresh), so forgetting one ends
     * completeness. Otherwise a complete view holds every live entry, and forgetting expired ones
     * keeps it complete (docs/decisions/111-pre-stamped-ttl-writes.md).
     */
    private final boolean expiredMayShow;
    /**
     * The earliest expiry time of the entries the version stores, as the worker reported at the
     * commit that made it ({@code Long.MIN_VALUE}: not known, after a load). Only with
     * {@code !expiredMayShow}: there the version's entries change only by the writes the view
     * follows and by the worker's deletions of expired ones, so a key whose value expired
     * before it is not stored.
     */
    private long storedFrom = Long.MIN_VALUE;
    /**
     * The latest expiry time of the expired values this view forgot, or its warm-up left out,
     * since the last {@link #reset}: a complete view's keys in the filter that it holds no value
     * of are stored with at most this expiry, if at all.
     */
    private long forgotExpiredThrough = Long.MIN_VALUE;

    /** The largest cache budget this JVM can hold ({@link CacheBudget#maxBudgetBytes}). */
    public static long maxBudgetBytes() {
        return CacheBudget.maxBudgetBytes();
    }

    /** A view with {@code budgetBytes} for the whole JVM (0: no cache) and, if asked, a filter. */
    public CachedVersionView(long budgetBytes, boolean useFilter) {
        this(budgetBytes, useFilter, false);
    }

    /**
     * {@code prefixedKeys}: the store's keys are {@link PrefixedKey}s, and a complete view serves
     * prefix scans ({@link #withPrefixIfComplete}).
     */
    public CachedVersionView(long budgetBytes, boolean useFilter, boolean prefixedKeys) {
        this(budgetBytes, useFilter, prefixedKeys, true);
    }

    /** {@code expiredMayShow}: see {@link #expiredMayShow}. */
    public CachedVersionView(long budgetBytes, boolean useFilter, boolean prefixedKeys, boolean expiredMayShow) {
        this.expiredMayShow = expiredMayShow;
        this.values = new SlabCache(prefixedKeys);
        this.budget = CacheBudget.of(budgetBytes);
        this.budget.join(this);
        this.useFilter = useFilter;
    }

    /** A cached value (a copy: the caller owns it) with its expiry time. */
    public static final class Cached {
        public final byte[] value;
        public final long expiresAt;

        Cached(byte[] value, long expiresAt) {
            this.value = value;
            this.expiresAt = expiresAt;
        }
    }

    /**
     * What the view knows of {@code key} at {@code version} and time {@code now}: a live cached
     * value, {@link #EXPIRED} if it held the value and that expired at {@code now} (forgotten
     * then, unless {@code peek}), {@link #ABSENT} if the filter rules the key out,
     * {@link #NO_LIVE_VALUE} if the view is complete and only the filter holds the key, or null
     * (ask the worker).
     */
    public Cached lookup(byte[] key, long atVersion, long now) {
        return lookup(key, atVersion, now, false);
    }

    /** {@link #lookup}; with {@code peek}, an expired value is kept (a read-ahead's look, which the operator's read follows). */
    public synchronized Cached lookup(byte[] key, long atVersion, long now, boolean peek) {
        if (atVersion != version || closed) {
            return null;
        }
        long h64 = KeyBytes.hash64(key); // one hash for the index and the filter
        if (values.size() > 0) {
            int hash = SlabCache.indexHash(h64);
            int slot = values.find(key, hash);
            if (slot >= 0) {
                long expiresAt = values.expiresAt(slot);
                if (!TtlRule.expired(expiresAt, now)) {
                    values.touch(slot);
                    return new Cached(values.value(slot), expiresAt);
                }
                if (notStoredOnceExpired(expiresAt)) {
                    if (!peek) {
                        values.remove(key, hash);
                        forgotExpired(expiresAt);
                    }
                    return GONE;
                }
                if (!peek && expiredMayShow) {
                    values.remove(key, hash); // expired: the worker cleans it up
                    complete = false; // the worker may still show it (ReturnExpiredIfNotCleanedUp)
                }
                // otherwise kept until a version's storedFrom passes it: the worker may still store it
                return EXPIRED;
            }
        }
        if (complete) {
            if (filter == null || !filter.mightContainHash(h64)) {
                return ABSENT;
            }
            return notStoredOnceExpired(forgotExpiredThrough) ? GONE : NO_LIVE_VALUE;
        }
        return filter != null && !filter.mightContainHash(h64) ? ABSENT : null;
    }

    /** Whether {@code c}, a {@link #lookup} answer, carries a value (not null nor one of the answers without). */
    public static boolean isValue(Cached c) {
        return c != null && c != ABSENT && c != EXPIRED && c != NO_LIVE_VALUE && c != GONE;
    }

    /** What the view knows of whether a key is stored. */
    public enum Presence { PRESENT, ABSENT, UNKNOWN }

    /** Whether {@code key} is stored at {@code version} (expired or not), as far as the view knows. */
    public Presence presence(byte[] key, long atVersion) {
        return presence(new KeyBytes(key), atVersion);
    }

    /** {@link #presence(byte[], long)} of a key already hashed. */
    public synchronized Presence presence(KeyBytes key, long atVersion) {
        if (atVersion != version || closed) {
            return Presence.UNKNOWN;
        }
        if (values.size() > 0 && values.find(key.bytes, key.hashCode()) >= 0) {
            return Presence.PRESENT;
        }
        if (complete || (filter != null && !filter.mightContainHash(key.hash64()))) {
            return Presence.ABSENT;
        }
        return Presence.UNKNOWN;
    }

    /** {@link #stored}: the view does not know whether the key is stored. */
    public static final long STORED_UNKNOWN = Long.MIN_VALUE;
    /** {@link #stored}: the key is not stored at all (neither live nor expired). */
    public static final long NOT_STORED = Long.MIN_VALUE + 1;

    /**
     * What the view knows of the entry stored for {@code key} at {@code version}:
     * {@link #NOT_STORED}, {@link #STORED_UNKNOWN}, or the stored entry's {@code expiresAt}.
     * Without TTL ({@code ttl} false) as {@link #presence}, a present key giving
     * {@code Long.MAX_VALUE}. With TTL, where an expired entry the view does not hold may still
     * be stored and a stored expired entry may be cleaned up at any time: a held value live at
     * {@code now} gives its {@code expiresAt} (if below {@code Long.MAX_VALUE}: a saturated time
     * does not tell when it was written), and "not stored" comes from the key filter, which
     * holds every stored key (a TTL store's warm-up reads the expired ones too), or from
     * {@link #storedFrom}: a held value that expired before it, or in a complete view (which
     * holds only the live entries) a key it holds no value of while every expired value it
     * forgot expired before it.
     */
    public synchronized long stored(KeyBytes key, long atVersion, long now, boolean ttl) {
        if (atVersion != version || closed) {
            return STORED_UNKNOWN;
        }
        if (values.size() > 0) {
            int slot = values.find(key.bytes, key.hashCode());
            if (slot >= 0) {
                if (!ttl) {
                    return Long.MAX_VALUE;
                }
                long expiresAt = values.expiresAt(slot);
                if (TtlRule.expired(expiresAt, now)) {
                    return notStoredOnceExpired(expiresAt) ? NOT_STORED : STORED_UNKNOWN;
                }
                return expiresAt == Long.MAX_VALUE ? STORED_UNKNOWN : expiresAt;
            }
        }
        if ((complete && (!ttl || notStoredOnceExpired(forgotExpiredThrough)))
                || (filter != null && !filter.mightContainHash(key.hash64()))) {
            return NOT_STORED;
        }
        return STORED_UNKNOWN;
    }

    /**
     * Every entry of {@code atVersion} as it is now, if the view holds them all (see
     * {@link #complete}), else null. A snapshot: writes made while the caller walks it do not
     * disturb it, as a worker iterator sees its transaction as it was when opened.
     * Order is the cache's (Spark's contract leaves iteration order unspecified for every key
     * encoding ttlstate serves, and HDFSBackedStateStoreProvider's is a hash map's). Chunks of
     * at most {@code chunkEntries} {keys, values}.
     */
    public synchronized Iterator<byte[][][]> entriesIfComplete(long atVersion, int chunkEntries) {
        return entriesIfComplete(atVersion, chunkEntries, Long.MIN_VALUE);
    }

    /**
     * {@link #entriesIfComplete(long, int)} without the values expired at {@code now} (a TTL
     * store under {@code NeverReturnExpired}: the view holds every live entry, not always the
     * expired ones the worker still stores).
     */
    public synchronized Iterator<byte[][][]> entriesIfComplete(long atVersion, int chunkEntries, long now) {
        if (!complete || atVersion != version || closed) {
            return null;
        }
        return values.snapshot(now).chunkEntries(chunkEntries);
    }

    /**
     * The entries of {@code atVersion} whose key starts with {@code prefix} (a whole prefix of
     * a {@link PrefixedKey}), {keys, values} copied now in no particular order, if the view holds
     * the whole version and its keys are prefixed, and that prefix's keys all lie in its probe
     * run (a prefix of more than {@link SlabIndex#MAX_PREFIX_KEYS} keys does not); else null.
     */
    public synchronized byte[][][] withPrefixIfComplete(long atVersion, byte[] prefix) {
        return withPrefixIfComplete(atVersion, prefix, Long.MIN_VALUE);
    }

    /** {@link #withPrefixIfComplete(long, byte[])} without the values expired at {@code now}. */
    public synchronized byte[][][] withPrefixIfComplete(long atVersion, byte[] prefix, long now) {
        if (!complete || atVersion != version || closed || !values.byPrefix()) {
            return null;
        }
        return values.withPrefix(prefix, now);
    }

    /** Bytes one cached entry takes besides its key and value bytes (header and index slot). */
    public int entryOverhead() {
        return values.entryOverhead();
    }

    public synchronized boolean isComplete() {
        return complete && !closed;
    }

    /** Remembers a value the worker returned for a read at {@code version}. */
    public void remember(byte[] key, byte[] value, long expiresAt, long atVersion) {
        synchronized (this) {
            if (atVersion == version && !closed) {
                insert(key, SlabCache.hashOf(key), value, expiresAt);
            }
        }
        budget.reclaimShare(this);
    }

    /**
     * The version moved from {@code fromVersion} to {@code newVersion} by a commit of
     * {@code writes} (key to value; {@code removed} marks a removed key) made at expiry time
     * {@code expiresAt} at time {@code now}, its entries expiring at {@code storedFrom} or later
     * ({@link #storedFrom}); any other starting point forgets everything.
     */
    public void committed(long fromVersion, long newVersion, Map<KeyBytes, byte[]> writes,
                          byte[] removed, long expiresAt, long now, long storedFrom) {
        synchronized (this) {
            if (fromVersion != version || closed) {
                reset(-1, -1);
                return;
            }
            this.storedFrom = storedFrom;
            for (Map.Entry<KeyBytes, byte[]> w : writes.entrySet()) {
                byte[] key = w.getKey().bytes;
                if (w.getValue() == removed) {
                    values.remove(key, w.getKey().hashCode());
                } else {
                    insert(key, w.getKey().hashCode(), w.getValue(), expiresAt);
                    if (filter != null) {
                        filter.addHash(w.getKey().hash64());
                    }
                }
            }
            version = newVersion;
            tidyAfterCommit(now);
        }
        budget.reclaimShare(this);
    }

    /**
     * A write of the one transaction that writes straight into the worker's database (no other
     * transaction may read {@code version} meanwhile): the view follows the database at once,
     * and the transaction's commit only moves it to the next version ({@link #advance}).
     * {@code value} null: a removal.
     */
    public void written(KeyBytes key, byte[] value, long expiresAt, long atVersion) {
        synchronized (this) {
            if (atVersion != version || closed) {
                return;
            }
            int hash = key.hashCode();
            if (value == null) {
                values.remove(key.bytes, hash);
                return;
            }
            insert(key.bytes, hash, value, expiresAt);
            if (filter != null) {
                filter.addHash(key.hash64());
            }
        }
        budget.reclaimShare(this);
    }

    /**
     * EventTime (docs/decisions/104-event-time-jvm-view.md): the worker stamped {@code
     * atVersion}'s entries written before the
     * watermark started (UNSTAMPED) with {@code clock}, as a write transaction at a watermark
     * past 0 does at its BEGIN ({@code Txn.stamp_unstamped}): every held value that never
     * expires gets {@link TtlRule#eventTimeStamped}'s time. Keys do not change, so neither do
     * the filter and completeness. Returns how many values changed.
     */
    public synchronized int stamped(long atVersion, long clock, long ttlMs) {
        if (atVersion != version || closed || !mayHoldNever || clock <= 0) {
            return 0;
        }
        mayHoldNever = false;
        long to = TtlRule.eventTimeStamped(TtlRule.NEVER, clock, ttlMs);
        return to == TtlRule.NEVER ? 0 : values.restamp(TtlRule.NEVER, to);
    }

    /**
     * The transaction that wrote into the database committed {@code newVersion} at time
     * {@code now}, its entries expiring at {@code storedFrom} or later; see {@link #written}.
     */
    public synchronized void advance(long fromVersion, long newVersion, long now, long storedFrom) {
        if (fromVersion != version || closed) {
            reset(-1, -1);
        } else {
            version = newVersion;
            this.storedFrom = storedFrom;
            tidyAfterCommit(now);
        }
    }

    /**
     * After a commit: frees the oldest slabs while every value in them is expired at {@code now}
     * (with TTL, keys that are never read or written again would otherwise stay until the budget
     * pushes them out; they are never served: an expired value always goes to the worker), then
     * compacts slabs that hold more dead bytes than live ones ({@link SlabCache#compactIfMostlyDead}).
     */
    private void tidyAfterCommit(long now) {
        long expiry;
        while (values.slabCount() > 0 && TtlRule.expired(expiry = values.oldestSlabExpiry(), now)) {
            if (values.dropOldest(false) > 0) {
                forgotExpired(expiry);
                complete &= !expiredMayShow; // the worker may still show them (ReturnExpiredIfNotCleanedUp)
            }
        }
        if (values.compactIfMostlyDead(now) > 0) {
            forgotExpired(now); // each expired at now
            complete &= !expiredMayShow; // expired values it forgot: the worker may still show them
        }
        settle();
    }

    /**
     * The worker's database now holds {@code newVersion} with {@code numKeys} entries (-1 for
     * any failure): values are forgotten; the filter is empty and valid for an empty version,
     * else unknown until {@link #filterReady}.
     */
    public synchronized void reset(long newVersion, long numKeys) {
        clearValues();
        version = newVersion;
        storedFrom = Long.MIN_VALUE;
        forgotExpiredThrough = Long.MIN_VALUE;
        filter = useFilter && newVersion >= 0 && numKeys == 0 ? new KeyFilter(0) : null;
        complete = budget.maxBytes > 0 && newVersion >= 0 && numKeys == 0 && !closed;
        evictedSinceReset = false;
    }

    /**
     * Forgets every value of {@code atVersion} but keeps its key filter, which stays right: for
     * an aborted transaction that read through the worker with refresh on read, whose answers
     * (their refreshed, never committed expiry) were remembered for the committed version.
     */
    public synchronized void forgetValues(long atVersion) {
        if (atVersion == version && !closed) {
            clearValues();
            complete = false;
        }
    }

    /** Whether {@link #reset} left the filter unknown, so the store should warm the view up (a key scan). */
    public synchronized boolean wantsWarmUp(long atVersion) {
        return useFilter && !closed && atVersion == version && filter == null;
    }

    /**
     * A filter of every key of {@code version} (from a scan that also warmed the cache);
     * {@code rememberedAll}: the scan put every entry it read into the cache, so unless one was
     * evicted meanwhile the view is complete; {@code leftOutExpiredThrough}: the latest expiry
     * time of the expired entries it read and left out ({@code Long.MIN_VALUE}: none).
     */
    public synchronized void filterReady(long atVersion, KeyFilter scanned, boolean rememberedAll,
                                         long leftOutExpiredThrough) {
        if (atVersion == version && !closed) {
            filter = scanned;
            forgotExpired(leftOutExpiredThrough);
            complete = rememberedAll && budget.maxBytes > 0 && !evictedSinceReset;
        }
    }

    /**
     * Whether a key whose entry expired at {@code expiresAt} (or, for a key only the filter
     * holds in a complete view, at {@link #forgotExpiredThrough} at the latest) is no longer
     * stored: it expired before every entry the version stores ({@link #storedFrom}).
     */
    private boolean notStoredOnceExpired(long expiresAt) {
        return !expiredMayShow && expiresAt < storedFrom;
    }

    /** Notes an expired value forgotten (or left out) with expiry time {@code expiresAt}. */
    private void forgotExpired(long expiresAt) {
        forgotExpiredThrough = Math.max(forgotExpiredThrough, expiresAt);
    }

    /** Whether a scan may still add values without evicting any (warm-up stops there). */
    public synchronized boolean hasRoomFor(long entryBytes) {
        return budget.hasRoomFor(bytes, entryBytes);
    }

    /**
     * How many values a read-ahead may add at once so that they are still cached when read:
     * a quarter of what this view holds for sure (its bytes, or its share if that is more: views
     * above theirs give way to it; the budget's free part is not counted, another task may take
     * it meanwhile), at most an eighth of the budget, over the view's mean entry size (256 bytes
     * while it is empty). A quarter, not a half: a dropped slab is a quarter of the view, and the
     * values read earlier in the batch move ahead of the unread ones (second chance), so with
     * half the view read ahead the oldest slab dropped could hold unread values (measured at a
     * 128 KiB budget, docs/decisions/069-view-takes-back-its-share.md: 15% of the values read
     * ahead were lost at a half, 1-6% at a quarter).
     */
    public synchronized int prefetchRoom() {
        long mean = values.size() == 0 ? 256 : Math.max(1, bytes / values.size());
        long room = Math.min(budget.maxBytes / 8, Math.max(bytes, budget.share()) / 4);
        return (int) Math.min(Integer.MAX_VALUE, Math.max(1, room / mean));
    }

    public synchronized void close() {
        clearValues();
        filter = null;
        version = -1;
        complete = false;
        if (!closed) {
            budget.leave(this);
        }
        closed = true;
    }

    public synchronized long bytes() {
        return bytes;
    }

    public synchronized long filterBytes() {
        return filter == null ? 0 : filter.bytes();
    }

    /**
     * Caches {@code value}; while the caches of the budget hold more than it, frees this
     * cache's oldest slab ({@link #dropOldestSlab}), unless this cache is within its share and
     * another is above its own: then that one gives way ({@link CacheBudget#reclaimShare}, once
     * this view's lock is released).
     */
    private void insert(byte[] key, int hash, byte[] value, long expiresAt) {
        if (budget.maxBytes == 0) {
            return;
        }
        values.put(key, hash, value, expiresAt);
        mayHoldNever |= expiresAt == TtlRule.NEVER;
        settle();
        while (values.slabCount() > 0 && budget.evictsOwn(this)) {
            dropOldestSlab();
        }
    }

    /** Frees this cache's oldest slab (values read since written move on; the last slab goes whole). */
    private void dropOldestSlab() {
        if (values.dropOldest(values.slabCount() > 1) > 0) {
            complete = false;
            evictedSinceReset = true;
        }
        settle();
    }

    /**
     * What this view counts in its budget, read without its lock (the budget looks for a view
     * above its share).
     */
    long budgeted() {
        return bytes;
    }

    /** Frees this view's oldest slabs while the budget is exceeded and it is above its share; whether it freed any. */
    synchronized boolean giveBackAboveShare() {
        boolean freed = false;
        while (budget.aboveShare(bytes) && values.slabCount() > 0) {
            dropOldestSlab();
            freed = true;
        }
        return freed;
    }

    private void clearValues() {
        values.clear();
        mayHoldNever = false;
        settle();
    }

    /** Brings this view's count, and its budget's, to the memory its cache takes now. */
    private void settle() {
        long now = values.memoryBytes();
        budget.add(now - bytes);
        bytes = now;
    }
}
