package io.ttlstate.spark.store;

import java.util.ArrayList;
import java.util.List;

import io.ttlstate.spark.metrics.LatencyTracker;
import io.ttlstate.spark.metrics.StoreMetrics;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * What read and write stores share, whatever Spark line's store interface fronts them: one
 * worker transaction at {@link #version}, and the reads (get, multiGet, iterate, prefix scan)
 * in Spark's rows. The fronts ({@code ReadStore}, {@code WriteStore}, one pair per Spark
 * generation) add the interface's signatures and refusals. Used by one task thread.
 */
class StoreCore {
    /** The empty key prefix: a scan of every entry. */
    static final byte[] EMPTY = new byte[0];

    final RemoteStore remote;
    final long version;
    final RemoteTxn txn;
    final KeyCodec codec;
    final StoreMetrics metrics;
    final int numValueFields;

    StoreCore(RemoteStore remote, long version, RemoteTxn txn, KeyCodec codec, StoreMetrics metrics,
              int numValueFields) {
        this.remote = remote;
        this.version = version;
        this.txn = txn;
        this.codec = codec;
        this.metrics = metrics;
        this.numValueFields = numValueFields;
    }

    StateStoreId id() {
        return remote.stateStoreId();
    }

    /** The transaction reads go through (a read store upgraded to a write store reads through the writer's). */
    RemoteTxn readTxn() {
        return txn;
    }

    /** The metrics reads count in (the writer's, for an upgraded read store). */
    StoreMetrics readMetrics() {
        return metrics;
    }

    UnsafeRow get(UnsafeRow key) {
        RemoteTxn reads = readTxn();
        LatencyTracker latency = readMetrics().gets;
        if (latency == null || !latency.sample()) {
            return toValueRow(reads.get(codec.encodeKey(key)));
        }
        long start = System.nanoTime();
        UnsafeRow value = toValueRow(reads.get(codec.encodeKey(key)));
        latency.record(System.nanoTime() - start);
        return value;
    }

    List<UnsafeRow> multiGet(UnsafeRow[] keys) {
        byte[][] encoded = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) {
            encoded[i] = codec.encodeKey(keys[i]);
        }
        byte[][] values = readTxn().multiGet(encoded);
        List<UnsafeRow> out = new ArrayList<>(keys.length);
        for (byte[] v : values) {
            out.add(toValueRow(v));
        }
        return out;
    }

    /** Every entry, in key order; a join's stores read their values ahead block by block. */
    ChunkIterator iterate() {
        ChunkIterator it = readTxn().iterate(EMPTY, codec, numValueFields);
        JoinPrefetch prefetch = remote.joinPrefetch(codec);
        if (prefetch != null) {
            it.onBlock(prefetch);
        }
        return it;
    }

    /** Whether the key has prefix columns to scan by. */
    boolean hasPrefix() {
        return codec.hasPrefix();
    }

    /** The entries whose key starts with {@code prefixKey}'s columns (only if {@link #hasPrefix}). */
    ChunkIterator prefixScan(UnsafeRow prefixKey) {
        return readTxn().iterate(codec.encodePrefix(prefixKey), codec, numValueFields);
    }

    final UnsafeRow toValueRow(byte[] v) {
        if (v == null) {
            return null;
        }
        UnsafeRow row = new UnsafeRow(numValueFields);
        row.pointTo(v, v.length);
        return row;
    }

    @Override
    public String toString() {
        StateStoreId id = id();
        return String.format("TtlStateStore[id=(op=%d,part=%d),dir=%s]",
                id.operatorId(), id.partitionId(), id.storeCheckpointLocation());
    }
}
