package io.ttlstate.spark.store;

import java.util.HashSet;
import java.util.Set;

import io.ttlstate.spark.cache.KeyBytes;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.WorkerConnection;

/**
 * One {@link RemoteTxn}'s read-ahead: the values of keys the operator reads next, asked of the
 * worker in one MULTI_GET (now, or sent ahead and read when needed) and brought into the
 * store's view, for those keys its {@link JvmAnswers} cannot answer ({@link JoinPrefetch},
 * {@link RestoreReadAhead}, {@link JoinInputReadAhead}). Not thread-safe; one per transaction.
 */
final class TxnReadAhead {
    private final RemoteTxn txn;
    private final JvmAnswers jvm;
    private final WorkerConnection conn;
    private final StoreMetrics metrics;
    /** A read-ahead's MULTI_GET sent ahead ({@link #prefetchAhead}), its reply not read yet; or null. */
    private WorkerConnection.Pending ahead;
    private byte[][] aheadKeys;
    /** Keys written while {@link #ahead} was in flight: its answer for them is older than the write. */
    private Set<KeyBytes> writtenWhileAhead;

    TxnReadAhead(RemoteTxn txn, JvmAnswers jvm, WorkerConnection conn, StoreMetrics metrics) {
        this.txn = txn;
        this.jvm = jvm;
        this.conn = conn;
        this.metrics = metrics;
    }

    /**
     * Reads into the view, in one MULTI_GET, the values of those {@code keys} that neither
     * this transaction's writes nor the view can answer, for reads the operator makes next
     * ({@link JoinPrefetch}). Only where a worker read does nothing the operator's would not
     * ({@link StoreSettings#readsLikeTheWorker}: with TTL, it may clean up an expired entry,
     * which no read sees); counts nothing as a read. Returns the keys asked.
     */
    int prefetch(byte[][] keys) {
        complete();
        byte[][] ask = jvm.unknown(keys);
        if (ask.length == 0) {
            return 0;
        }
        txn.fromWorker(ask, ask.length);
        metrics.prefetched.addAndGet(ask.length);
        return ask.length;
    }

    /**
     * {@link #prefetch} sent ahead: the MULTI_GET goes now, its answer reaches the view when
     * {@link #complete} reads it (before any later read of the worker needs it). One at a
     * time: an earlier one is completed first. Returns the keys asked.
     */
    int prefetchAhead(byte[][] keys) {
        complete();
        byte[][] ask = jvm.unknown(keys);
        if (ask.length == 0) {
            return 0;
        }
        int end = RemoteTxn.requestEnd(ask, 0, ask.length); // keys past a request's bytes: the operator reads them
        if (end < ask.length) {
            ask = java.util.Arrays.copyOf(ask, end);
        }
        metrics.roundTrip();
        metrics.sentAhead.incrementAndGet();
        ahead = conn.callAhead(Requests.multiGet(txn.handle(), ask, 0, ask.length));
        aheadKeys = ask;
        writtenWhileAhead = new HashSet<>();
        return ask.length; // counted in prefetched once answered (complete)
    }

    /** Whether a MULTI_GET sent ahead has not been read yet. */
    boolean inFlight() {
        return ahead != null;
    }

    /**
     * Reads the answer of the MULTI_GET sent ahead into the view, except for keys written since
     * it was sent (the worker answered with what they held before); nothing if none is in flight.
     */
    void complete() {
        WorkerConnection.Pending p = ahead;
        if (p == null) {
            return;
        }
        byte[][] keys = aheadKeys;
        Set<KeyBytes> skip = writtenWhileAhead;
        drop();
        // a read-ahead: keys past the reply's first ones stay unread, the operator reads them
        int answered = txn.readAnswers(conn.await(p), keys, 0, keys.length, new byte[keys.length][], skip);
        int read = answered;
        for (int j = 0; j < answered && !skip.isEmpty(); j++) {
            if (skip.contains(new KeyBytes(keys[j]))) {
                read--; // written meanwhile: not brought into the view
            }
        }
        metrics.prefetched.addAndGet(read);
    }

    /** The transaction wrote {@code key}: an answer in flight for it is older than the write. */
    void written(KeyBytes key) {
        if (writtenWhileAhead != null) {
            writtenWhileAhead.add(key);
        }
    }

    /** Forgets a read-ahead in flight (the connection reads its answer before the next one). */
    void drop() {
        ahead = null;
        aheadKeys = null;
        writtenWhileAhead = null;
    }
}
