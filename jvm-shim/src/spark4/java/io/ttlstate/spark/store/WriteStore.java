package io.ttlstate.spark.store;

import io.ttlstate.spark.compat.SparkCompat;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreCheckpointInfo;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.types.StructType;

/**
 * Spark 4's writable store over a {@link WriteCore}: puts and removes in the default column
 * family, commit, abort, metrics and the checkpoint info of format v2.
 */
final class WriteStore extends AbstractStore<WriteCore> implements StateStore {
    WriteStore(WriteCore core) {
        super(core);
        SparkCompat.initStore(this);
    }

    @Override
    public void put(UnsafeRow key, UnsafeRow value, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        core.put(key, value);
    }

    @Override
    public void remove(UnsafeRow key, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        core.remove(key);
    }

    @Override
    public long commit() {
        return core.commit();
    }

    @Override
    public void abort() {
        core.abort();
    }

    @Override
    public StateStoreMetrics metrics() {
        return core.storeMetrics();
    }

    /**
     * Format v1: {@code (partition, version + 1, None, None)}, also before commit (as HDFS).
     * Format v2: the committed version's id and the id it was built on, only after commit.
     */
    @Override
    public StateStoreCheckpointInfo getStateStoreCheckpointInfo() {
        if (core.checkpointIds && !core.hasCommitted()) {
            throw SparkErrors.sneaky(StateStoreErrors.stateStoreOperationOutOfOrder(
                    "Cannot get checkpointInfo without committing the store"));
        }
        return new StateStoreCheckpointInfo(id().partitionId(), core.version + 1,
                scala.Option.apply(core.committedId()), scala.Option.apply(core.baseId));
    }

    @Override
    public boolean hasCommitted() {
        return core.hasCommitted();
    }

    @Override
    public boolean removeColFamilyIfExists(String colFamilyName) {
        throw SparkErrors.sneaky(StateStoreErrors.removingColumnFamiliesNotSupported(
                SparkErrors.PROVIDER_NAME));
    }

    @Override
    public void createColFamilyIfAbsent(String colFamilyName, StructType keySchema, StructType valueSchema,
                                        KeyStateEncoderSpec keyStateEncoderSpec,
                                        boolean useMultipleValuesPerKey, boolean isInternal) {
        throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(
                SparkErrors.PROVIDER_NAME));
    }

    @Override
    public void putList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
        throw unsupported("putList");
    }

    @Override
    public void merge(UnsafeRow key, UnsafeRow value, String colFamilyName) {
        throw unsupported("merge");
    }

    @Override
    public void mergeList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
        throw unsupported("mergeList");
    }
}
