package io.ttlstate.spark.store;

import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.cache.KeyFilter;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;

/**
 * The cache warm-up: after a load from the checkpoint, reads every visible entry of the loaded
 * version once (one read transaction, ITER_OPEN with expiry times) to build the view's key
 * filter and to warm its value cache while the cache has room. A version that fits entirely
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
            FrameReader r = conn.call(FrameWriter.request(Op.ITER_OPEN, txn.handle()).bytes(new byte[0])
                    .u32(CHUNK_ENTRIES).u8(Op.ITER_PAIRS_WITH_EXPIRY));
            long iter = Replies.decode(r::u32);
            long read = 0;
            boolean rememberedAll = true;
            while (true) {
                Chunk c = readChunk(r, filter, view, version);
                read += c.entries;
                rememberedAll &= c.rememberedAll;
                if (c.last) {
                    break;
                }
                metrics.roundTrip();
                r = conn.call(FrameWriter.request(Op.ITER_NEXT, iter).u32(CHUNK_ENTRIES));
            }
            view.filterReady(version, filter, rememberedAll);
            return read;
        } finally {
            txn.abort();
        }
    }

    private static final class Chunk {
        final boolean last;
        final int entries;
        final boolean rememberedAll;

        Chunk(boolean last, int entries, boolean rememberedAll) {
            this.last = last;
            this.entries = entries;
            this.rememberedAll = rememberedAll;
        }
    }

    private static Chunk readChunk(FrameReader r, KeyFilter filter, CachedVersionView view, long version) {
        return Replies.decode(() -> {
            boolean last = r.bool();
            int n = r.count(16);
            boolean rememberedAll = true;
            for (int i = 0; i < n; i++) {
                byte[] key = r.bytes();
                byte[] value = r.bytes();
                long expiresAt = r.i64();
                filter.add(key);
                if (view.hasRoomFor(key.length + value.length + view.entryOverhead())) {
                    view.remember(key, value, expiresAt, version);
                } else {
                    rememberedAll = false;
                }
            }
            r.end();
            return new Chunk(last, n, rememberedAll);
        });
    }
}
