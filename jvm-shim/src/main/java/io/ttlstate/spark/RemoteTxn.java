package io.ttlstate.spark;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;

import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.ProtocolException;

/**
 * One transaction on a worker (a BEGIN handle) with the JVM's write-behind buffer.
 *
 * <p>Puts and removes are appended to a WRITE_BATCH frame and to a pending map that answers
 * reads of those keys without a round trip. The frame is sent (no response) when it reaches
 * {@code writeBatchBytes}, and before any request that needs the worker to know the writes
 * (ITER_OPEN, STATS, COMMIT). A GET of a key not in the pending map goes without a flush: the
 * worker's view differs from ours only in the pending keys. Not thread-safe; one per store.
 */
final class RemoteTxn {
    /** Marks a removed key in the pending map (compared by identity). */
    private static final byte[] TOMBSTONE = new byte[0];
    private static final int BATCH_COUNT_OFFSET = 5; // op u8 + handle u32

    private final WorkerConnection conn;
    private final long handle;
    private final long batchTimestampMs;
    private final int writeBatchBytes;
    private final int chunkEntries;
    private final StoreMetrics metrics;
    private final Map<ByteBuffer, byte[]> pending = new HashMap<>();
    private FrameWriter batch;
    private int batchCount;
    private boolean ended;
    /** Told about every iterator (the provider drains those still needing the worker on close). */
    java.util.function.Consumer<ChunkIterator> onIteratorCreated;

    private RemoteTxn(WorkerConnection conn, long handle, long batchTimestampMs, int writeBatchBytes,
                      int chunkEntries, StoreMetrics metrics) {
        this.conn = conn;
        this.handle = handle;
        this.batchTimestampMs = batchTimestampMs;
        this.writeBatchBytes = writeBatchBytes;
        this.chunkEntries = chunkEntries;
        this.metrics = metrics;
    }

    /** BEGIN a transaction on {@code storeHandle} at {@code version}, TTL time {@code batchTimestampMs}. */
    static RemoteTxn begin(WorkerConnection conn, long storeHandle, long version, boolean readOnly,
                           long batchTimestampMs, int writeBatchBytes, int chunkEntries,
                           StoreMetrics metrics) {
        FrameReader r = conn.call(FrameWriter.request(Op.BEGIN, storeHandle)
                .i64(version).bool(readOnly).i64(batchTimestampMs));
        metrics.roundTrip();
        long txn = checked(() -> {
            long h = r.u32();
            r.end();
            return h;
        });
        return new RemoteTxn(conn, txn, batchTimestampMs, writeBatchBytes, chunkEntries, metrics);
    }

    long handle() {
        return handle;
    }

    /** The batch timestamp the transaction was begun with (-1 if unknown). */
    long batchTimestampMs() {
        return batchTimestampMs;
    }

    boolean isEnded() {
        return ended;
    }

    void put(byte[] key, byte[] value) {
        batch().u8(Op.RECORD_PUT).bytes(key).bytes(value);
        buffered(key, value);
    }

    void remove(byte[] key) {
        batch().u8(Op.RECORD_REMOVE).bytes(key);
        buffered(key, TOMBSTONE);
    }

    /** Records a write just appended to the batch; sends the batch once it is big enough. */
    private void buffered(byte[] key, byte[] pendingValue) {
        batchCount++;
        pending.put(ByteBuffer.wrap(key), pendingValue);
        if (batch.size() >= writeBatchBytes) {
            flush();
        }
    }

    /** The value of {@code key} as this transaction sees it, or null. */
    byte[] get(byte[] key) {
        byte[] v = pending.get(ByteBuffer.wrap(key));
        if (v != null) {
            return v == TOMBSTONE ? null : v;
        }
        FrameReader r = call(FrameWriter.request(Op.GET, handle).bytes(key));
        return checked(() -> {
            byte[] value = r.optbytes();
            r.end();
            return value;
        });
    }

    /** Sends the buffered writes, if any, as one WRITE_BATCH. */
    void flush() {
        if (batchCount == 0) {
            return;
        }
        FrameWriter b = batch;
        b.patchU32(BATCH_COUNT_OFFSET, batchCount);
        batch = null;
        batchCount = 0;
        pending.clear();
        conn.send(b);
    }

    /**
     * An iterator over the keys starting with {@code prefix} (all keys if empty), opened on the
     * worker (after a flush) when first used; see {@link ChunkIterator}.
     */
    ChunkIterator iterate(byte[] prefix, KeyCodec codec, int numValueFields) {
        ChunkIterator it = new ChunkIterator(conn, () -> {
            flush();
            return call(FrameWriter.request(Op.ITER_OPEN, handle).bytes(prefix).u32(chunkEntries));
        }, chunkEntries, codec, numValueFields, metrics);
        if (onIteratorCreated != null) {
            onIteratorCreated.accept(it);
        }
        return it;
    }

    /** STATS after a flush: {numKeys, memoryUsedBytes}; the worker's metrics go to {@link StoreMetrics}. */
    long[] stats() {
        flush();
        FrameReader r = call(FrameWriter.request(Op.STATS, handle));
        return checked(() -> {
            long[] out = {r.i64(), r.i64()};
            metrics.readWorkerMetrics(r);
            r.end();
            return out;
        });
    }

    /** What a COMMIT reply says besides the metrics (which go to the store's metrics). */
    static final class Committed {
        final long numKeys;
        final long fileBytes;
        final long memoryUsedBytes;
        final boolean snapshotWanted;

        Committed(long numKeys, long fileBytes, long memoryUsedBytes, boolean snapshotWanted) {
            this.numKeys = numKeys;
            this.fileBytes = fileBytes;
            this.memoryUsedBytes = memoryUsedBytes;
            this.snapshotWanted = snapshotWanted;
        }
    }

    /** COMMIT as {@code newVersion}, writing the changelog to {@code changelogPath} (empty: no changelog). */
    Committed commit(long newVersion, String changelogPath) {
        flush();
        FrameReader r;
        try {
            r = call(FrameWriter.request(Op.COMMIT, handle).i64(newVersion).str(changelogPath));
        } finally {
            ended = true; // COMMIT ends the transaction, and a failed one leaves it unusable
        }
        return checked(() -> {
            Committed c = new Committed(r.i64(), r.i64(), r.i64(), r.bool());
            metrics.readWorkerMetrics(r);
            r.end();
            return c;
        });
    }

    /** ABORT, dropping unsent writes; idempotent. */
    void abort() {
        batch = null;
        batchCount = 0;
        pending.clear();
        if (ended) {
            return;
        }
        try {
            if (!conn.isBroken()) {
                FrameReader r = call(FrameWriter.request(Op.ABORT, handle));
                checked(() -> {
                    r.end();
                    return null;
                });
            }
        } finally {
            ended = true; // even if ABORT failed: the transaction is not to be used again
        }
    }

    private FrameReader call(FrameWriter w) {
        if (ended) {
            throw new IllegalStateException("ttlstate transaction " + handle + " has ended");
        }
        metrics.roundTrip();
        return conn.call(w);
    }

    private FrameWriter batch() {
        if (ended) {
            throw new IllegalStateException("ttlstate transaction " + handle + " has ended");
        }
        if (batch == null) {
            batch = FrameWriter.request(Op.WRITE_BATCH, handle).u32(0);
        }
        return batch;
    }

    /** A decoding step that may find a malformed response. */
    interface Decode<T> {
        T run() throws ProtocolException;
    }

    static <T> T checked(Decode<T> d) {
        try {
            return d.run();
        } catch (ProtocolException e) {
            throw new java.io.UncheckedIOException("malformed response from ttlstate worker", e);
        }
    }
}
