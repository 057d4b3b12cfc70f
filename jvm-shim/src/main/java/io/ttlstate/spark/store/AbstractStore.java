package io.ttlstate.spark.store;

import io.ttlstate.spark.compat.ScalaColls;
import io.ttlstate.spark.compat.SparkCompat;
import io.ttlstate.spark.metrics.LatencyTracker;
import io.ttlstate.spark.metrics.StoreMetrics;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import scala.runtime.BoxedUnit;

/**
 * What read and write stores share: one worker transaction at {@link #version()}, reads
 * (get, iterator, prefixScan) and the column-family refusals of HDFSBackedStateStoreProvider.
 * A store object is used by one task thread.
 */
abstract class AbstractStore implements ReadStateStore {
    /**
     * Spark's default column family, spelled out: {@code StateStore.DEFAULT_COL_FAMILY_NAME}
     * exists from 4.0 only, and the stores are shared with the 3.5 line (AbstractStoreTest pins it).
     */
    static final String DEFAULT_CF = "default";
    private static final byte[] EMPTY = new byte[0];

    final RemoteStore remote;
    final long version;
    final RemoteTxn txn;
    final KeyCodec codec;
    final StoreMetrics metrics;
    final int numValueFields;

    AbstractStore(RemoteStore remote, long version, RemoteTxn txn, KeyCodec codec,
                  StoreMetrics metrics, int numValueFields) {
        this.remote = remote;
        this.version = version;
        this.txn = txn;
        this.codec = codec;
        this.metrics = metrics;
        this.numValueFields = numValueFields;
        SparkCompat.initReadStore(this);
    }

    @Override
    public StateStoreId id() {
        return remote.stateStoreId();
    }

    @Override
    public long version() {
        return version;
    }

    /** The transaction reads go through (a read store upgraded to a write store reads through the writer's). */
    RemoteTxn readTxn() {
        return txn;
    }

    /** The metrics reads count in (the writer's, for an upgraded read store). */
    StoreMetrics readMetrics() {
        return metrics;
    }

    final void checkDefaultColFamily(String colFamilyName) {
        if (!DEFAULT_CF.equals(colFamilyName)) {
            throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(
                    SparkErrors.PROVIDER_NAME));
        }
    }

    final RuntimeException unsupported(String operation) {
        return SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException(
                operation, SparkErrors.PROVIDER_NAME));
    }

    @Override
    public UnsafeRow get(UnsafeRow key, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
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

    final UnsafeRow toValueRow(byte[] v) {
        if (v == null) {
            return null;
        }
        UnsafeRow row = new UnsafeRow(numValueFields);
        row.pointTo(v, v.length);
        return row;
    }

    @Override
    public scala.collection.Iterator<UnsafeRow> multiGet(UnsafeRow[] keys, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        byte[][] encoded = new byte[keys.length][];
        for (int i = 0; i < keys.length; i++) {
            encoded[i] = codec.encodeKey(keys[i]);
        }
        byte[][] values = readTxn().multiGet(encoded);
        java.util.List<UnsafeRow> out = new java.util.ArrayList<>(keys.length);
        for (byte[] v : values) {
            out.add(toValueRow(v));
        }
        return ScalaColls.scalaIterator(out.iterator());
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> iterator(String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        ChunkIterator it = readTxn().iterate(EMPTY, codec, numValueFields);
        JoinPrefetch prefetch = remote.joinPrefetch(codec);
        if (prefetch != null) {
            it.onBlock(prefetch);
        }
        return wrap(it);
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        if (!codec.hasPrefix()) {
            throw unsupported("prefixScan without PrefixKeyScanStateEncoderSpec");
        }
        return wrap(readTxn().iterate(codec.encodePrefix(prefixKey), codec, numValueFields));
    }

    static StateStoreIterator<UnsafeRowPair> wrap(ChunkIterator it) {
        return new StateStoreIterator<>(it, () -> {
            it.close();
            return BoxedUnit.UNIT;
        });
    }

    @Override
    public scala.collection.Iterator<UnsafeRow> valuesIterator(UnsafeRow key, String colFamilyName) {
        throw unsupported("multipleValuesPerKey");
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> prefixScanWithMultiValues(UnsafeRow prefixKey, String colFamilyName) {
        throw unsupported("prefixScanWithMultiValues");
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> iteratorWithMultiValues(String colFamilyName) {
        throw unsupported("iteratorWithMultiValues");
    }

    @Override
    public scala.collection.immutable.Set<String> allColumnFamilyNames() {
        scala.collection.immutable.Set<String> empty = scala.collection.immutable.Set$.MODULE$.empty();
        return (scala.collection.immutable.Set<String>) empty.$plus(DEFAULT_CF); // `incl` is 2.13 only
    }

    @Override
    public String toString() {
        StateStoreId id = id();
        return String.format("TtlStateStore[id=(op=%d,part=%d),dir=%s]",
                id.operatorId(), id.partitionId(), id.storeCheckpointLocation());
    }
}
