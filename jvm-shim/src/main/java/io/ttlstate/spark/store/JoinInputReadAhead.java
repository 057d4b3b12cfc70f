package io.ttlstate.spark.store;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import io.ttlstate.spark.StateReadAheadExec;
import io.ttlstate.spark.cache.KeyBytes;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * What a stream-stream join reads for the rows of one side's input
 * (docs/decisions/072-join-input-read-ahead.md): for
 * each row Spark reads the other side's count of the row's key and then each of its values
 * (to join), and this side's count (to append the row). For a block of rows this reads the
 * other side's counts of the block's keys, then the values they name, then this side's counts,
 * into the stores' caches in one MULTI_GET each. Stores whose cache answers every key (a
 * complete view) or whose worker reads do more than the operator's (with TTL under
 * OnReadAndWrite or ReturnExpiredIfNotCleanedUp) are left out; with none left the rows pass
 * through.
 */
final class JoinInputReadAhead implements ReadAheadBlocks.Reader {
    /** Rows per block: larger blocks of sorted keys ran the large join 3% slower
     * (docs/decisions/086-sorted-read-ahead-blocks.md). */
    static final int MAX_ROWS_PER_BLOCK = 8192;

    private final StateStoreId thisCountsId;
    private final StateStoreId otherCountsId;
    private final StateStoreId otherValuesId;
    /** This block's transactions, null for a store that needs no read-ahead. */
    private RemoteTxn thisCounts;
    private RemoteTxn otherCounts;
    private RemoteTxn otherValues;
    private int valuesRoom;
    /** The other side's value keys (null until its stores are found). */
    private JoinStores otherLayout;
    private UnsafeRow key;

    /** The read-ahead for the input of {@code side}: "left" or "right", as Spark names its stores' sides. */
    JoinInputReadAhead(String checkpointLocation, long operatorId, int partition, String side) {
        String other;
        if (StateReadAheadExec.JoinLeft().equals(side)) {
            other = StateReadAheadExec.JoinRight();
        } else if (StateReadAheadExec.JoinRight().equals(side)) {
            other = StateReadAheadExec.JoinLeft();
        } else {
            throw new IllegalArgumentException("a join side is 'left' or 'right', not '" + side + "'");
        }
        thisCountsId = JoinStores.storeId(checkpointLocation, operatorId, partition, side, JoinStores.COUNTS_SUFFIX);
        otherCountsId = JoinStores.storeId(checkpointLocation, operatorId, partition, other, JoinStores.COUNTS_SUFFIX);
        otherValuesId = JoinStores.storeId(checkpointLocation, operatorId, partition, other, JoinStores.VALUES_SUFFIX);
    }

    @Override
    public int room() {
        RemoteStore otherCountsStore = LiveStores.get(otherCountsId);
        RemoteStore otherValuesStore = LiveStores.get(otherValuesId);
        thisCounts = txnOf(LiveStores.get(thisCountsId));
        otherCounts = txnOf(otherCountsStore);
        otherValues = txnOf(otherValuesStore);
        int thisRoom = roomOf(thisCounts);
        int countsRoom = roomOf(otherCounts);
        valuesRoom = roomOf(otherValues);
        if (valuesRoom > 0 && otherLayout == null && otherCountsStore != null) {
            int keyFields = otherCountsStore.keySchema().length();
            otherLayout = JoinStores.forValues(otherValuesStore, keyFields);
            key = new UnsafeRow(keyFields);
        }
        // the values to read are named by the other side's counts, read into its view (none where its worker reads do more than the operator's)
        if (otherCounts == null || otherCounts.prefetchRoom() == 0 || otherLayout == null) {
            valuesRoom = 0;
        }
        thisCounts = thisRoom == 0 ? null : thisCounts;
        otherValues = valuesRoom == 0 ? null : otherValues;
        otherCounts = countsRoom == 0 && otherValues == null ? null : otherCounts;
        // a block of rows is no larger than what any store read into may keep
        int room = Integer.MAX_VALUE;
        for (int r : new int[] {thisRoom, countsRoom, valuesRoom}) {
            if (r > 0) {
                room = Math.min(room, r);
            }
        }
        return room == Integer.MAX_VALUE ? 0 : Math.min(room, MAX_ROWS_PER_BLOCK);
    }

    @Override
    public void readAhead(byte[][] rowKeys, int n) {
        byte[][] keys = distinct(rowKeys, n);
        if (otherCounts != null) {
            byte[][] counts = otherCounts.readAhead(keys);
            if (otherValues != null) {
                List<byte[]> wanted = new ArrayList<>();
                for (int i = 0; i < keys.length && wanted.size() < valuesRoom; i++) {
                    long c = otherLayout.count(counts[i]);
                    if (c > 0) {
                        key.pointTo(keys[i], keys[i].length);
                        otherLayout.addValueKeys(key, c, wanted, valuesRoom);
                    }
                }
                if (!wanted.isEmpty()) {
                    otherValues.prefetch(wanted.toArray(new byte[0][]));
                }
            }
        }
        if (thisCounts != null) {
            thisCounts.prefetch(keys);
        }
    }

    /** {@code keys[0..n)} without repeats, in their first order. */
    private static byte[][] distinct(byte[][] keys, int n) {
        Set<KeyBytes> seen = new HashSet<>(n * 2);
        List<byte[]> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            if (seen.add(new KeyBytes(keys[i]))) {
                out.add(keys[i]);
            }
        }
        return out.toArray(new byte[0][]);
    }

    /** The transaction a read-ahead of {@code store} serves, or null. */
    private static RemoteTxn txnOf(RemoteStore store) {
        return store == null ? null : store.readAheadTxn();
    }

    /** How many keys a read-ahead may ask of {@code txn} (0: none, or its cache answers every key). */
    private static int roomOf(RemoteTxn txn) {
        return txn == null ? 0 : txn.readAheadRoom();
    }
}
