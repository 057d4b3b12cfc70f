package io.ttlstate.spark.store;

import java.util.ArrayList;
import java.util.List;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * Reads that fetch what a stream-stream join asks next. Spark's join keeps, per side, the
 * number of values of each key ({@code <side>-keyToNumValues}) and the values by (key, index)
 * ({@code <side>-keyWithIndexToValue}); its watermark eviction and full scans walk the counts
 * and then get every (key, 0..n-1) of the values store, one synchronous read each once the
 * values outgrow the JVM's cache. While a counts iterator is walked, each block of counts it
 * hands out is turned into the (key, index) keys the operator will read next, and the values
 * store fetches those its view cannot answer in one MULTI_GET into its cache. The MULTI_GET of
 * the next block is sent ahead, before the operator walks this one, so the worker reads it
 * meanwhile (with the counts iterator's own read-ahead of its next chunk,
 * docs/decisions/071-requests-sent-ahead.md).
 *
 * <p>Only for stores without TTL: a worker read under TTL may refresh or expire an entry, and
 * the operator may not read every value (eviction by key reads only the keys it removes).
 */
final class JoinPrefetch implements ChunkIterator.BlockListener {
    /** At most this many (key, index) reads per block (a key with many values is read as asked). */
    private static final int MAX_KEYS_PER_BLOCK = 8192;

    private final RemoteStore values;
    private final KeyCodec countsCodec;
    private final UnsafeRow countKey;
    private final JoinStores layout;
    /** The next block, its values asked for ahead (null: none). */
    private Ahead ahead;

    private JoinPrefetch(RemoteStore values, KeyCodec countsCodec, JoinStores layout) {
        this.values = values;
        this.countsCodec = countsCodec;
        this.countKey = countsCodec.newKeyRow();
        this.layout = layout;
    }

    /**
     * The prefetch for iterators of {@code counts} (a join's counts store whose worker reads do
     * nothing the operator's would not, {@link StoreSettings#readsLikeTheWorker}), or null.
     */
    static JoinPrefetch forCounts(RemoteStore counts, KeyCodec codec, StoreSettings settings) {
        StateStoreId id = counts.stateStoreId();
        String countsEnd = "-" + JoinStores.COUNTS_SUFFIX;
        if (!settings.readsLikeTheWorker(false) || id == null || codec.hasPrefix() || !id.storeName().endsWith(countsEnd)) {
            return null;
        }
        String side = id.storeName().substring(0, id.storeName().length() - countsEnd.length());
        StateStoreId valuesId = JoinStores.storeId(id.checkpointRootLocation(), id.operatorId(), id.partitionId(),
                side, JoinStores.VALUES_SUFFIX);
        RemoteStore values = LiveStores.get(valuesId);
        JoinStores layout = values == null ? null : JoinStores.forValues(values, counts.keySchema().length());
        // null: not the (key..., index) layout this prefetch knows
        return layout == null ? null : new JoinPrefetch(values, codec, layout);
    }

    @Override
    public int block(byte[][] keys, byte[][] counts, int from, int to, byte[][][] following) {
        RemoteTxn txn = values.openWriterTxn();
        if (txn == null) {
            return to;
        }
        // no more than the values store's cache can keep until the operator reads them: two
        // blocks are in flight (this one and the next), so each gets half of that
        int room = Math.min(MAX_KEYS_PER_BLOCK, txn.prefetchRoom()) / 2;
        int end;
        if (ahead != null && ahead.txn == txn && ahead.keys == keys && ahead.from == from) {
            txn.completeAhead(); // asked for while the operator walked the block before
            end = ahead.end;
        } else {
            List<byte[]> wanted = new ArrayList<>();
            end = wanted(keys, counts, from, to, room, wanted);
            if (!wanted.isEmpty()) {
                txn.prefetch(wanted.toArray(new byte[0][]));
            }
        }
        ahead = null;
        // the block after this one, asked for now: the worker reads it while the operator walks this one
        if (end < to) {
            sendAhead(txn, keys, counts, end, to, room);
        } else if (following != null && following[0].length > 0) {
            sendAhead(txn, following[0], following[1], 0, following[0].length, room);
        }
        return end;
    }

    /** Sends ahead the MULTI_GET of the block starting at counts {@code keys[from]}. */
    private void sendAhead(RemoteTxn txn, byte[][] keys, byte[][] counts, int from, int to, int room) {
        List<byte[]> next = new ArrayList<>();
        int end = wanted(keys, counts, from, to, room, next);
        txn.prefetchAhead(next.toArray(new byte[0][]));
        ahead = new Ahead(txn, keys, from, end);
    }

    /**
     * Adds to {@code wanted} the (key, index) keys of the counts {@code keys[from..)}, key by
     * key, up to {@code room} of them (at least the first key's); returns where it stopped.
     */
    private int wanted(byte[][] keys, byte[][] counts, int from, int to, int room, List<byte[]> wanted) {
        int i = from;
        for (; i < to; i++) {
            countsCodec.decodeKey(keys[i], countKey);
            long n = layout.count(counts[i]);
            if (i > from && wanted.size() + n > room) {
                break; // the next block starts with this key
            }
            layout.addValueKeys(countKey, n, wanted, MAX_KEYS_PER_BLOCK);
        }
        return i;
    }

    /** The block whose values were asked for ahead: counts {@code keys[from..end)} of {@code txn}. */
    private static final class Ahead {
        final RemoteTxn txn;
        final byte[][] keys;
        final int from;
        final int end;

        Ahead(RemoteTxn txn, byte[][] keys, int from, int end) {
            this.txn = txn;
            this.keys = keys;
            this.from = from;
            this.end = end;
        }
    }
}
