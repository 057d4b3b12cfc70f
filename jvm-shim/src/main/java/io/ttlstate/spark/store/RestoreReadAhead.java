package io.ttlstate.spark.store;

import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * What a streaming aggregation's restore reads next: the state of each key of its input, one
 * {@code get} each (docs/decisions/068-aggregation-read-ahead.md; {@code StateReadAheadExec} runs
 * it under Spark's
 * {@code StateStoreRestoreExec}). A block's keys are read into the store's cache in one
 * MULTI_GET, in key order. A store whose cache answers every key itself (a complete view)
 * needs none; nor can a store whose worker reads do more than the operator's would (with TTL:
 * under OnReadAndWrite or ReturnExpiredIfNotCleanedUp, {@link StoreSettings#readsLikeTheWorker}).
 */
final class RestoreReadAhead implements ReadAheadBlocks.Reader {
    private final StateStoreId id;
    private RemoteTxn txn;

    RestoreReadAhead(String checkpointLocation, long operatorId, int partition) {
        this.id = new StateStoreId(checkpointLocation, operatorId, partition, StateStoreId.DEFAULT_STORE_NAME());
    }

    @Override
    public int room() {
        RemoteStore store = LiveStores.get(id);
        txn = store == null ? null : store.readAheadTxn();
        return txn == null ? 0 : txn.readAheadRoom();
    }

    /**
     * The block's keys go sorted (RocksDB's order): the worker reads them in slices whose keys
     * share data blocks (docs/decisions/086-sorted-read-ahead-blocks.md).
     */
    @Override
    public void readAhead(byte[][] keys, int n) {
        txn.prefetch(BytewiseSort.sorted(keys, n));
    }
}
