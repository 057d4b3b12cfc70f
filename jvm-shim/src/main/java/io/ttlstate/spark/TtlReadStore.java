package io.ttlstate.spark;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A read-only store: a worker transaction (BEGIN readOnly) on a snapshot of its version, so a
 * write store of the same provider may commit meanwhile. {@code abort} and {@code release}
 * both end it, idempotently.
 */
final class TtlReadStore extends AbstractTtlStore {
    private static final Logger LOG = LoggerFactory.getLogger(TtlReadStore.class);

    private boolean ended;

    TtlReadStore(TtlStateStoreProvider provider, long version, RemoteTxn txn, KeyCodec codec,
                 StoreMetrics metrics, int numValueFields) {
        super(provider, version, txn, codec, metrics, numValueFields);
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
