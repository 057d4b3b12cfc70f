package io.ttlstate.spark.store;

import java.util.function.Supplier;

import org.apache.spark.sql.execution.streaming.state.StateStore;

/**
 * Spark 3.5's read-only store over a {@link ReadCore}: {@code abort} ends its transaction,
 * idempotently. 3.5 has no upgrade call: the provider upgrades a task's read store when the
 * same task asks for the write store of its version ({@link #upgrade}).
 */
public final class ReadStore extends AbstractStore<ReadCore> {
    ReadStore(ReadCore core) {
        super(core);
    }

    /**
     * Upgrades {@code readStore} (null: none) to the write store of its version that
     * {@code openWriteStore} opens ({@link ReadCore#upgrade}).
     */
    public static StateStore upgrade(ReadStore readStore, Supplier<StateStore> openWriteStore) {
        return ReadCore.upgrade(readStore == null ? null : readStore.core, openWriteStore, s -> ((WriteStore) s).core);
    }

    @Override
    public void abort() {
        core.end();
    }
}
