package io.ttlstate.spark.store;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;

/** Spark 3.5's read-store interface over a {@link StoreCore} (no column families). */
abstract class AbstractStore<C extends StoreCore> implements ReadStateStore {
    final C core;

    AbstractStore(C core) {
        this.core = core;
    }

    @Override
    public StateStoreId id() {
        return core.id();
    }

    @Override
    public long version() {
        return core.version;
    }

    @Override
    public UnsafeRow get(UnsafeRow key) {
        return core.get(key);
    }

    @Override
    public scala.collection.Iterator<UnsafeRowPair> iterator() {
        return core.iterate();
    }

    @Override
    public scala.collection.Iterator<UnsafeRowPair> prefixScan(UnsafeRow prefixKey) {
        if (!core.hasPrefix()) {
            throw new UnsupportedOperationException(SparkErrors.PROVIDER_NAME
                    + ": prefixScan on a store without key prefix columns (numColsPrefixKey 0)");
        }
        return core.prefixScan(prefixKey);
    }

    @Override
    public String toString() {
        return core.toString();
    }
}
