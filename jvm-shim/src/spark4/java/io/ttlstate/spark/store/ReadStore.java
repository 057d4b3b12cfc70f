package io.ttlstate.spark.store;

import java.util.function.Supplier;

import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;

/**
 * Spark 4's read-only store over a {@link ReadCore}: {@code abort} and {@code release} both
 * end its transaction, idempotently; see {@link ReadCore} for the upgrade to a write store.
 */
public final class ReadStore extends AbstractStore<ReadCore> {
    ReadStore(ReadCore core) {
        super(core);
    }

    /**
     * Upgrades {@code readStore} to the write store of its version that {@code openWriteStore}
     * opens ({@link ReadCore#upgrade}). Spark never ends a read store it upgraded.
     */
    public static StateStore upgrade(ReadStateStore readStore, Supplier<StateStore> openWriteStore) {
        ReadCore read = readStore instanceof ReadStore ? ((ReadStore) readStore).core : null;
        return ReadCore.upgrade(read, openWriteStore, s -> ((WriteStore) s).core);
    }

    @Override
    public void abort() {
        core.end();
    }

    @Override
    public void release() {
        core.end();
    }
}
