package io.ttlstate.spark.store;

import java.util.function.Supplier;

import io.ttlstate.spark.metrics.StoreMetrics;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A read-only store: a worker transaction (BEGIN read-only) on its version, so a write store
 * of the same {@link RemoteStore} may commit meanwhile. {@code abort} and {@code release}
 * both end it, idempotently.
 *
 * <p>When Spark upgrades it to the write store of its version (the aggregation's and session
 * window's restore step), its own transaction ends and its reads go through the write store's
 * transaction from then on, as with Spark's RocksDB provider, where the upgraded read store is
 * the write store: Spark never ends an upgraded read store, and a second transaction would
 * keep the writer from writing straight into the database
 * (docs/decisions/035-write-store-ends-read-store.md, docs/decisions/040-direct-write-transactions.md).
 */
public final class ReadStore extends AbstractStore {
    private static final Logger LOG = LoggerFactory.getLogger(ReadStore.class);

    private boolean ended;
    /** The write store this store was upgraded to, or null. */
    private WriteStore writer;

    ReadStore(RemoteStore remote, long version, RemoteTxn txn, KeyCodec codec, StoreMetrics metrics,
              int numValueFields) {
        super(remote, version, txn, codec, metrics, numValueFields);
    }

    /**
     * Upgrades {@code readStore} to the write store of its version that {@code openWriteStore}
     * opens: the read store's own transaction ends first, and its reads go through the write
     * store's from then on (see above). Spark never ends a read store it upgraded.
     */
    public static StateStore upgrade(ReadStateStore readStore, Supplier<StateStore> openWriteStore) {
        ReadStore read = readStore instanceof ReadStore ? (ReadStore) readStore : null;
        if (read != null) {
            read.end();
        }
        WriteStore store = (WriteStore) openWriteStore.get();
        if (read != null) {
            read.upgradedTo(store);
        }
        return store;
    }

    /** From now on reads go through {@code w}'s transaction, and count in its metrics. */
    private void upgradedTo(WriteStore w) {
        writer = w;
        w.metrics.addReads(metrics);
    }

    @Override
    RemoteTxn readTxn() {
        return writer != null ? writer.txn : txn;
    }

    @Override
    StoreMetrics readMetrics() {
        return writer != null ? writer.metrics : metrics;
    }

    @Override
    public void abort() {
        end();
    }

    @Override
    public void release() {
        end();
    }

    private void end() {
        if (ended) {
            return;
        }
        ended = true;
        try {
            txn.abort();
        } catch (RuntimeException e) {
            LOG.warn("Ending read store {} failed (ignored)", this, e);
        }
    }
}
