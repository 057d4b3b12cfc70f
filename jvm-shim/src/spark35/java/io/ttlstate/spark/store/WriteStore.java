package io.ttlstate.spark.store;

import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;

/** Spark 3.5's writable store over a {@link WriteCore}. */
final class WriteStore extends AbstractStore<WriteCore> implements StateStore {
    WriteStore(WriteCore core) {
        super(core);
    }

    @Override
    public void put(UnsafeRow key, UnsafeRow value) {
        core.put(key, value);
    }

    @Override
    public void remove(UnsafeRow key) {
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

    @Override
    public boolean hasCommitted() {
        return core.hasCommitted();
    }
}
