package io.ttlstate.spark.store;

import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.cache.KeyFilter;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import io.ttlstate.spark.ttl.TtlRule;

/**
 * The cache warm-up: after a load from the checkpoint, reads every entry of the loaded
 * version once (one read transaction, ITER_OPEN with expiry times; with TTL the expired
 * entries too, for the filter only) to build the view's key filter and to warm its value
 * cache with the visible entries while the cache has room. A version that fits entirely
 * leaves the view complete, so its reads and iterators need no worker
 * ({@link CachedVersionView#entriesIfComplete}).
 */
final class CacheWarmUp {
    private static final int CHUNK_ENTRIES = 8192;

    private CacheWarmUp() {}

    /** Fills {@code view} for {@code version}; returns the entries read. */
    static long fill(WorkerConnection conn, long storeHandle, long version, long batchTimestampMs, long numKeys,
                     StoreSettings settings, CachedVersionView view, StoreMetrics metrics) {
        RemoteTxn txn = RemoteTxn.begin(conn, storeHandle, version, true, batchTimestampMs, settings, null, metrics);
        try {
            KeyFilter filter = new KeyFilter(numKeys);
            metrics.roundTrip();
            // with TTL every stored entry, the expired ones too: the filter must hold every stored
            // key, as it tells presence hints "not stored" (JvmAnswers.stored)
            boolean ttl = settings.ttlMs != 0;
            FrameReader opened = conn.call(Requests.iterOpen(txn.handle(), new byte[0], CHUNK_ENTRIES,
                    ttl ? Op.ITER_STORED_WITH_EXPIRY : Op.ITER_PAIRS_WITH_EXPIRY));
            // an expired entry goes into the filter only, unless reads may return it (as they did
            // when the warm-up read the visible entries)
            long hideExpiredAt = ttl && !settings.ttlReturnExpired ? batchTimestampMs : Long.MIN_VALUE;
            long iter = Replies.decode(() -> Reply.iterHandle(opened));
            FrameReader r = opened;
            long read = 0;
            boolean rememberedAll = true;
            long leftOutThrough = Long.MIN_VALUE;
            while (true) {
                Chunk c = readChunk(r, filter, view, version, hideExpiredAt);
                read += c.entries;
                rememberedAll &= c.rememberedAll;
                leftOutThrough = Math.max(leftOutThrough, c.leftOutThrough);
                if (c.last) {
                    break;
                }
                metrics.roundTrip();
                r = conn.call(Requests.iterNext(iter, CHUNK_ENTRIES));
            }
            view.filterReady(version, filter, rememberedAll, leftOutThrough);
            return read;
        } finally {
            txn.abort();
        }
    }

    private static final class Chunk {
        final boolean last;
        final int entries;
        final boolean rememberedAll;
        /** The latest expiry time of the expired entries left out ({@code Long.MIN_VALUE}: none). */
        final long leftOutThrough;

        Chunk(boolean last, int entries, boolean rememberedAll, long leftOutThrough) {
            this.last = last;
            this.entries = entries;
            this.rememberedAll = rememberedAll;
            this.leftOutThrough = leftOutThrough;
        }
    }

    private static Chunk readChunk(FrameReader r, KeyFilter filter, CachedVersionView view, long version,
                                   long hideExpiredAt) {
        Reply.Chunk c = Replies.decode(() -> Reply.chunk(r, true));
        int n = c.keys.length;
        boolean rememberedAll = true;
        long leftOutThrough = Long.MIN_VALUE;
        for (int i = 0; i < n; i++) {
            byte[] key = c.keys[i];
            byte[] value = c.values[i];
            long expiresAt = c.expiresAt[i];
            filter.add(key);
            if (TtlRule.expired(expiresAt, hideExpiredAt)) {
                leftOutThrough = Math.max(leftOutThrough, expiresAt);
                continue; // stored, not visible: the view holds the visible entries
            }
            if (view.hasRoomFor(key.length + value.length + view.entryOverhead())) {
                view.remember(key, value, expiresAt, version);
            } else {
                rememberedAll = false;
            }
        }
        return new Chunk(c.last, n, rememberedAll, leftOutThrough);
    }
}
