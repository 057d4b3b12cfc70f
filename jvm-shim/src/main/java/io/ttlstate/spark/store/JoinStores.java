package io.ttlstate.spark.store;

import java.util.List;

import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.types.StructType;

/**
 * The layout of a stream-stream join's state as its read-aheads need it: per side, the number
 * of values of each key ({@code <side>-keyToNumValues}) and the values by (key, index)
 * ({@code <side>-keyWithIndexToValue}), keyed by the join key row's bytes and by the
 * (key..., index) row's bytes. Not thread-safe: one per read-ahead.
 */
final class JoinStores {
    static final String COUNTS_SUFFIX = "keyToNumValues";
    static final String VALUES_SUFFIX = "keyWithIndexToValue";

    private final UnsafeRow count = new UnsafeRow(1);
    private final UnsafeProjection keyWithIndex;
    private final GenericInternalRow index = new GenericInternalRow(1);
    private final JoinedRow joined = new JoinedRow();

    private JoinStores(StructType valuesKeySchema) {
        this.keyWithIndex = UnsafeProjection.create(valuesKeySchema);
    }

    /** The id of the join's store {@code <side>-<suffix>} on that operator and partition. */
    static StateStoreId storeId(String checkpointLocation, long operatorId, int partition, String side, String suffix) {
        return new StateStoreId(checkpointLocation, operatorId, partition, side + "-" + suffix);
    }

    /**
     * The value keys of a join whose values store is {@code values} and whose key rows have
     * {@code keyFields} fields; null if that store's keys are not (key..., index).
     */
    static JoinStores forValues(RemoteStore values, int keyFields) {
        StructType schema = values.keySchema();
        if (schema == null || schema.length() != keyFields + 1) {
            return null;
        }
        return new JoinStores(schema);
    }

    /** The number a counts store holds for a key (0 if none). */
    long count(byte[] stored) {
        if (stored == null) {
            return 0;
        }
        count.pointTo(stored, stored.length);
        return count.isNullAt(0) ? 0 : count.getLong(0);
    }

    /** Adds to {@code out} the value keys (key, 0..n-1), while {@code out} holds fewer than {@code max}. */
    void addValueKeys(UnsafeRow key, long n, List<byte[]> out, int max) {
        for (long j = 0; j < n && out.size() < max; j++) {
            index.setLong(0, j);
            // copy(): the projection reuses one row, whose getBytes() is its buffer itself
            out.add(keyWithIndex.apply(joined.apply(key, index)).copy().getBytes());
        }
    }
}
