package io.ttlstate.spark;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A read-only store: a worker transaction (BEGIN read-only) on its version, so a write store
 * of the same provider may commit meanwhile. {@code abort} and {@code release} both end it,
 * idempotently.
 *
 * <p>When Spark upgrades it to the write store of its version (the aggregation's and session
 * window's restore step), its own transaction ends and its reads go through the write store's
 * transaction from then on, as with Spark's RocksDB provider, where the upgraded read store is
 * the write store: Spark never ends an upgraded read store, and a second transaction would
 * keep the writer from writing straight into the database (docs/DESIGN.md 35, 40).
 */
final class TtlReadStore extends AbstractTtlStore {
    private static final Logger LOG = LoggerFactory.getLogger(TtlReadStore.class);

    private boolean ended;
    /** The write store this store was upgraded to, or null. */
    private TtlWriteStore writer;

    TtlReadStore(TtlStateStoreProvider provider, long version, RemoteTxn txn, KeyCodec codec,
                 StoreMetrics metrics, int numValueFields) {
        super(provider, version, txn, codec, metrics, numValueFields);
    }

    /** Ends this store's own transaction before the write store of its version begins. */
    void endForUpgrade() {
        end();
    }

    /** From now on reads go through {@code w}'s transaction, and count in its metrics. */
    void upgradedTo(TtlWriteStore w) {
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
