package io.ttlstate.spark.store;

import java.util.HashMap;
import java.util.Map;

import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.cache.KeyBytes;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.ttl.TtlRule;

/**
 * What one {@link RemoteTxn} is answered in the JVM, without a round trip: reads from its own
 * writes and from the store's {@link CachedVersionView} (a live cached value, or the Bloom
 * filter's "absent"), the presence hints of its writes (from the view, or the worker's answer
 * to an earlier read), the view following a direct transaction's writes, and resident scans
 * (a full or prefix scan served from a view that holds the whole version). The transaction
 * asks it first and forwards to the worker only what it cannot answer. Not thread-safe; one
 * per transaction.
 */
final class JvmAnswers {
    private final RemoteTxn txn;
    /** The store's view of {@code version}, or null if this transaction may not use it. */
    private final CachedVersionView view;
    private final long version;
    private final boolean readOnly;
    private final long batchTimestampMs;
    private final StoreSettings settings;
    private final StoreMetrics metrics;
    /**
     * What the worker stored for each key it answered a read of and the view could not keep
     * (write transactions that may give presence hints): {@link CachedVersionView#NOT_STORED},
     * or the entry's {@code expiresAt} ({@code Long.MAX_VALUE} without TTL; with TTL only a
     * live entry's); the presence hint of the key's first write in a state larger than the
     * cache. Only those keys, so a read-ahead the view holds (a join's) fills no map. Bounded
     * by {@link #MAX_ANSWERED}.
     */
    private Map<KeyBytes, Long> answered;
    static final int MAX_ANSWERED = 1 << 18;

    /** For {@code txn} (its version, clock and write expiry set), which may use {@code view} only at a clock the JVM knows. */
    JvmAnswers(RemoteTxn txn, CachedVersionView view, boolean readOnly, StoreSettings settings, StoreMetrics metrics) {
        this.txn = txn;
        this.version = txn.version();
        this.readOnly = readOnly;
        this.batchTimestampMs = txn.batchTimestampMs();
        this.settings = settings;
        this.metrics = metrics;
        this.view = view != null && settings.viewUsable(batchTimestampMs) ? view : null;
    }

    /**
     * After BEGIN: a direct transaction that stamps ({@link RemoteTxn#stampsUnstamped}) had
     * the worker write the stamps into its database, which the view follows at once (a
     * transaction with an overlay has them applied at its commit, RemoteStore.commit).
     */
    void begun() {
        if (txn.stampsUnstamped() && txn.isDirect() && view != null) {
            view.stamped(version, batchTimestampMs, settings.ttlMs);
        }
    }

    /**
     * The expiry time in this transaction of a committed entry the view holds as expiring at
     * {@code expiresAt}: the stamped one if this transaction stamps (the view of a transaction
     * with an overlay follows its stamps only at its commit).
     */
    private long expiresHere(long expiresAt) {
        return txn.stampsUnstamped() ? TtlRule.eventTimeStamped(expiresAt, batchTimestampMs, settings.ttlMs)
                : expiresAt;
    }

    /** Whether this transaction's read of a cached value that expires at {@code expiresAt} refreshes it (OnReadAndWrite). */
    private boolean refreshes(long expiresAt) {
        return settings.ttlEventTime ? TtlRule.eventTimeRefreshes(expiresHere(expiresAt), batchTimestampMs, settings.ttlMs)
                : TtlRule.refreshes(expiresAt, batchTimestampMs, settings.ttlMs);
    }

    /**
     * What the worker will find stored for {@code key} when it applies this write, if the view
     * (or the worker's answer to a read of it, {@link #answered}) knows and it matters:
     * {@link CachedVersionView#NOT_STORED}, {@link CachedVersionView#STORED_UNKNOWN}, or the
     * stored entry's {@code expiresAt} ({@link CachedVersionView#stored}). With TTL (a
     * transaction whose clock the JVM knows: the view's,
     * docs/decisions/102-ttl-batch-clock-fast-paths.md) only a live entry's, as
     * the worker deletes expired ones on its own (cleanup on read, incremental cleanup,
     * compaction filter) but never a live one, and "not stored" only from the key filter,
     * which holds every stored key, or from the earliest expiry the version stores
     * (docs/decisions/113-stored-from.md); the worker takes the old entry's timestamp for its
     * histogram from {@code expiresAt}. A transaction writing into the database changes the
     * view as it writes (sent or not: the worker applies a key's records in order), so the
     * view answers for any write; for one with an overlay the view is the committed version,
     * so only a key's first write may ask it. The worker's answer tells what was stored before
     * the key was written: its first write takes it out of {@code answered}. The view follows
     * this transaction alone: the worker begins no other transaction on the store while a
     * direct one is open, and a reload or a lost connection resets the view to no version,
     * where it answers STORED_UNKNOWN.
     */
    long stored(KeyBytes k) {
        if (readOnly || !hints()) {
            return CachedVersionView.STORED_UNKNOWN;
        }
        Long found = answered == null ? null : answered.remove(k);
        if (!txn.isDirect() && txn.written().containsKey(k)) {
            return CachedVersionView.STORED_UNKNOWN;
        }
        long s = view == null ? CachedVersionView.STORED_UNKNOWN
                : view.stored(k, version, batchTimestampMs, settings.ttlMs != 0);
        if (s == CachedVersionView.STORED_UNKNOWN && found != null) {
            return found;
        }
        return s;
    }

    /** Whether this transaction's writes may carry presence hints: without TTL, or with the view's (batch) clock. */
    private boolean hints() {
        return settings.ttlMs == 0 || view != null;
    }

    /** A direct transaction's write of {@code k} ({@code value} null: a removal): the view follows it. */
    void wrote(KeyBytes k, byte[] value) {
        if (txn.isDirect() && view != null) {
            view.written(k, value, txn.writeExpiry(), version);
        }
    }

    /**
     * Answers a read of {@code key} into {@code out[i]} from this transaction's writes or the
     * view (a live cached value, or the filter's "absent"); false if the worker must answer.
     */
    boolean answer(byte[] key, byte[][] out, int i) {
        return answer(key, out, i, true);
    }

    /** {@link #answer}; without {@code count}, a miss is not counted (the caller asks again). */
    boolean answer(byte[] key, byte[][] out, int i, boolean count) {
        byte[] v = ownWrite(key);
        if (v != null) {
            txn.answeredHere();
            out[i] = v == RemoteTxn.TOMBSTONE ? null : v;
            return true;
        }
        if (view == null) {
            return false;
        }
        CachedVersionView.Cached c = view.lookup(key, version, batchTimestampMs);
        if (askWorker(c)) { // an EXPIRED value here goes to the worker, whose read cleans it up
            if (count) {
                metrics.cacheMisses.incrementAndGet();
            }
            return false;
        }
        if (c == CachedVersionView.EXPIRED
                || (c == CachedVersionView.NO_LIVE_VALUE && txn.listsExpiredReads())) {
            // no value served: the worker cleans an expired entry up before the frame's writes
            txn.readExpired(key);
            if (hints()) {
                answered(new KeyBytes(key), null, 0); // not stored once cleaned up
            }
            out[i] = null;
            return true;
        }
        if (c == CachedVersionView.GONE) { // not stored (docs/decisions/113-stored-from.md): nothing to clean up
            metrics.filterSkips.incrementAndGet();
            txn.answeredHere();
            if (hints()) {
                answered(new KeyBytes(key), null, 0);
            }
            out[i] = null;
            return true;
        }
        if (c == CachedVersionView.ABSENT || c == CachedVersionView.NO_LIVE_VALUE) {
            metrics.filterSkips.incrementAndGet();
            txn.answeredHere();
            out[i] = null;
            return true;
        }
        metrics.cacheHits.incrementAndGet();
        if (settings.ttlRefreshOnRead && !readOnly && refreshes(c.expiresAt)) {
            txn.put(key, c.value); // the refresh the worker's read would have made (an access too)
        } else {
            txn.answeredHere();
        }
        out[i] = c.value;
        return true;
    }

    /**
     * {@link #answer} without its side effects (metrics, accesses, refresh on read, forgetting
     * an expired value: the operator's own read of it follows).
     */
    boolean known(byte[] key, byte[][] out, int i) {
        byte[] v = ownWrite(key);
        if (v != null) {
            out[i] = v == RemoteTxn.TOMBSTONE ? null : v;
            return true;
        }
        CachedVersionView.Cached c = view.lookup(key, version, batchTimestampMs, true);
        if (askWorker(c)) {
            return false;
        }
        out[i] = CachedVersionView.isValue(c) ? c.value : null;
        return true;
    }

    /**
     * Whether the worker must answer a read the view answered {@code c}: it knows nothing, or it
     * held the value expired and this transaction cannot list the key for the worker's cleanup
     * on read ({@link RemoteTxn#listsExpiredReads}).
     */
    private boolean askWorker(CachedVersionView.Cached c) {
        return c == null || (c == CachedVersionView.EXPIRED && !txn.listsExpiredReads());
    }

    /** This transaction's write of {@code key} ({@link RemoteTxn#TOMBSTONE} for a removal), or null. */
    private byte[] ownWrite(byte[] key) {
        Map<KeyBytes, byte[]> written = txn.written();
        return written.isEmpty() ? null : written.get(new KeyBytes(key));
    }

    /** The worker's answer to a read of {@code key} (GET, MULTI_GET), remembered in the view; its value. */
    byte[] takeAnswer(byte[] key, Reply.Answer answer) {
        byte[] value = answer.value;
        long expiresAt = answer.expiresAt;
        if (value != null && view != null) {
            view.remember(key, value, expiresAt, version);
        }
        if (!readOnly && hints()) {
            KeyBytes k = new KeyBytes(key);
            if (view == null || view.stored(k, version, batchTimestampMs, settings.ttlMs != 0)
                    == CachedVersionView.STORED_UNKNOWN) {
                answered(k, value, expiresAt);
            }
        }
        return value;
    }

    /**
     * Remembers what the worker answered for {@code k} as {@link #answered}: a write
     * transaction's read of an expired entry deleted it (cleanup on read), so an absent answer
     * means not stored; with TTL a value counts only if live at this transaction's clock (an
     * expired one returned under {@code ReturnExpiredIfNotCleanedUp} was deleted by the read).
     */
    private void answered(KeyBytes k, byte[] value, long expiresAt) {
        long s;
        if (value == null) {
            s = CachedVersionView.NOT_STORED;
        } else if (settings.ttlMs == 0) {
            s = Long.MAX_VALUE;
        } else if (!TtlRule.expired(expiresAt, batchTimestampMs) && expiresAt != Long.MAX_VALUE) {
            s = expiresAt;
        } else {
            return;
        }
        if (answered == null) {
            answered = new HashMap<>();
        }
        if (answered.size() < MAX_ANSWERED) {
            answered.put(k, s);
        }
    }

    /**
     * Those of {@code keys} neither this transaction's writes nor the view can answer (none
     * without a view, or where a worker read does more than the operator's would).
     */
    byte[][] unknown(byte[][] keys) {
        if (view == null || txn.isEnded() || !settings.readsLikeTheWorker(false)) {
            return new byte[0][];
        }
        Map<KeyBytes, byte[]> written = txn.written();
        byte[][] ask = new byte[keys.length][];
        int n = 0;
        for (byte[] key : keys) {
            if (!written.containsKey(new KeyBytes(key)) && askWorker(view.lookup(key, version, batchTimestampMs, true))) {
                ask[n++] = key;
            }
        }
        return n == ask.length ? ask : java.util.Arrays.copyOf(ask, n);
    }

    /**
     * How many values a read-ahead may bring into the view at once (0: none; see
     * {@link CachedVersionView#prefetchRoom}).
     */
    int prefetchRoom() {
        return view == null || txn.isEnded() || !settings.readsLikeTheWorker(false) ? 0 : view.prefetchRoom();
    }

    /**
     * How many keys a read-ahead of the operator's next reads may ask for at once: {@link #prefetchRoom},
     * or 0 when the view holds every entry (nothing to spare).
     */
    int readAheadRoom() {
        int room = prefetchRoom();
        return room == 0 || view.isComplete() ? 0 : room;
    }

    /**
     * Every entry this transaction sees whose key starts with {@code prefix} (all if empty),
     * served from the JVM when the view holds the whole version and a worker iterator would do
     * nothing the operator could see ({@link StoreSettings#readsLikeTheWorker}: with TTL the
     * view holds every live entry, and the scan leaves out those expired at the transaction's
     * clock, as the worker's iterator does; it cleans up none, which no read sees); else null. A direct
     * transaction's view already shows its writes; any other's writes (of the prefix) overlay
     * the view's snapshot. All entries: chunks of at most {@code chunkEntries} {keys, values},
     * copied out as walked ({@link CachedVersionView#entriesIfComplete}); a prefix's: one chunk
     * copied now ({@link CachedVersionView#withPrefixIfComplete}), in the cache's order: Spark
     * requires no order of a prefix scan (HDFSBackedStateStoreProvider's is a hash set's), and
     * sorting a group of 100 keys cost more than finding and copying it
     * (docs/decisions/074-prefix-scans-from-complete-view.md).
     */
    java.util.Iterator<byte[][][]> residentEntries(byte[] prefix) {
        if (view == null || !settings.readsLikeTheWorker(true) || txn.isEnded()) {
            return null;
        }
        long now = settings.ttlMs == 0 ? Long.MIN_VALUE : batchTimestampMs; // MIN_VALUE: nothing expires
        java.util.Iterator<byte[][][]> entries;
        if (prefix.length == 0) {
            entries = view.entriesIfComplete(version, settings.iteratorChunkEntries, now);
        } else {
            byte[][][] held = view.withPrefixIfComplete(version, prefix, now);
            entries = held == null ? null : java.util.Collections.singletonList(held).iterator();
        }
        if (entries == null) {
            return null;
        }
        metrics.residentScans.incrementAndGet();
        Map<KeyBytes, byte[]> written = txn.written();
        if (txn.isDirect() || written.isEmpty()) {
            return entries;
        }
        // the overlay: this transaction's writes, taken now (as the worker's iterator would)
        java.util.List<byte[]> ownKeys = new java.util.ArrayList<>();
        java.util.List<byte[]> ownValues = new java.util.ArrayList<>();
        java.util.Set<KeyBytes> own = new java.util.HashSet<>(written.keySet());
        for (Map.Entry<KeyBytes, byte[]> w : written.entrySet()) {
            if (w.getValue() != RemoteTxn.TOMBSTONE && startsWith(w.getKey().bytes, prefix)) {
                ownKeys.add(w.getKey().bytes);
                ownValues.add(w.getValue());
            }
        }
        return new java.util.Iterator<byte[][][]>() {
            private boolean ownDone;

            @Override
            public boolean hasNext() {
                return entries.hasNext() || !ownDone;
            }

            @Override
            public byte[][][] next() {
                if (!entries.hasNext()) {
                    ownDone = true;
                    return new byte[][][] {ownKeys.toArray(new byte[0][]), ownValues.toArray(new byte[0][])};
                }
                byte[][][] chunk = entries.next();
                int n = 0;
                for (int i = 0; i < chunk[0].length; i++) {
                    if (!own.contains(new KeyBytes(chunk[0][i]))) { // this transaction's own write follows
                        chunk[0][n] = chunk[0][i];
                        chunk[1][n++] = chunk[1][i];
                    }
                }
                return n == chunk[0].length ? chunk
                        : new byte[][][] {java.util.Arrays.copyOf(chunk[0], n), java.util.Arrays.copyOf(chunk[1], n)};
            }
        };
    }

    private static boolean startsWith(byte[] key, byte[] prefix) {
        return key.length >= prefix.length && java.util.Arrays.equals(key, 0, prefix.length, prefix, 0, prefix.length);
    }
}
