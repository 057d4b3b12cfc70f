package io.ttlstate.spark.store;

import java.util.function.Function;
import java.util.function.Supplier;

import io.ttlstate.spark.metrics.StoreMetrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A read-only store: a worker transaction (BEGIN read-only) on its version, so a write store
 * of the same {@link RemoteStore} may commit meanwhile. {@link #end} ends it, idempotently.
 *
 * <p>When Spark upgrades it to the write store of its version (the aggregation's and session
 * window's restore step), its own transaction ends and its reads go through the write store's
 * transaction from then on, as with Spark's RocksDB provider, where the upgraded read store is
 * the write store: Spark never ends an upgraded read store, and a second transaction would
 * keep the writer from writing straight into the database
 * (docs/decisions/035-write-store-ends-read-store.md, docs/decisions/040-direct-write-transactions.md).
 */
final class ReadCore extends StoreCore {
    /** Logs as the read store its front is. */
    private static final Logger LOG = LoggerFactory.getLogger(ReadCore.class.getPackageName() + ".ReadStore");

    private boolean ended;
    /** The write store this store was upgraded to, or null. */
    private WriteCore writer;

    ReadCore(RemoteStore remote, long version, RemoteTxn txn, KeyCodec codec, StoreMetrics metrics,
             int numValueFields) {
        super(remote, version, txn, codec, metrics, numValueFields);
    }

    /**
     * Upgrades {@code read} (null: a store of another provider) to the write store of its
     * version that {@code openWriteStore} opens: the read store's own transaction ends first,
     * and its reads go through the write store's from then on (see above).
     */
    static <W> W upgrade(ReadCore read, Supplier<W> openWriteStore, Function<W, WriteCore> coreOf) {
        if (read != null) {
            read.end();
        }
        W store = openWriteStore.get();
        if (read != null) {
            WriteCore w = coreOf.apply(store);
            read.writer = w;
            w.metrics.addReads(read.metrics);
        }
        return store;
    }

    @Override
    RemoteTxn readTxn() {
        return writer != null ? writer.txn : txn;
    }

    @Override
    StoreMetrics readMetrics() {
        return writer != null ? writer.metrics : metrics;
    }

    void end() {
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
