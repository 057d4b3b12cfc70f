package io.ttlstate.spark.store;

import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import io.ttlstate.spark.compat.LineApi;
import io.ttlstate.spark.compat.SparkCompat;
import io.ttlstate.spark.metrics.LatencyTracker;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.Reply;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A writable store at {@code version}: writes go to the transaction's write-behind buffer;
 * {@link #commit} makes {@code version + 1} durable through the remote. In checkpoint format
 * v2 each commit gets a new random checkpoint id, built on the id of {@code version}. Reads
 * after commit (the HDFS-forgiving side of Spark's contract) go through a short-lived read-only
 * transaction on the committed version.
 */
final class WriteCore extends StoreCore {
    /** Logs as the write store its front is. */
    private static final Logger LOG = LoggerFactory.getLogger(WriteCore.class.getPackageName() + ".WriteStore");

    private enum State { UPDATING, COMMITTED, ABORTED }

    private final boolean forceSnapshotOnCommit;
    final boolean checkpointIds;
    /** The checkpoint id of {@code version} (format v2; null for version 0). */
    final String baseId;
    private String committedId;
    private State state = State.UPDATING;
    private long committedNumKeys;
    private long committedMemoryBytes;

    WriteCore(RemoteStore remote, long version, String baseId, RemoteTxn txn, KeyCodec codec, StoreMetrics metrics,
              int numValueFields, boolean forceSnapshotOnCommit, boolean checkpointIds) {
        super(remote, version, txn, codec, metrics, numValueFields);
        this.baseId = baseId;
        this.forceSnapshotOnCommit = forceSnapshotOnCommit;
        this.checkpointIds = checkpointIds;
    }

    private void verifyUpdating(String message) {
        if (state != State.UPDATING) {
            throw new IllegalStateException(message);
        }
    }

    void put(UnsafeRow key, UnsafeRow value) {
        if (value == null) {
            throw new IllegalArgumentException("requirement failed: Cannot put a null value");
        }
        verifyUpdating("Cannot put after already committed or aborted");
        LatencyTracker latency = metrics.puts;
        if (latency == null || !latency.sample()) {
            txn.put(codec.encodeKey(key), KeyCodec.bytesOf(value));
            return;
        }
        long start = System.nanoTime();
        txn.put(codec.encodeKey(key), KeyCodec.bytesOf(value));
        latency.record(System.nanoTime() - start);
    }

    void remove(UnsafeRow key) {
        verifyUpdating("Cannot remove after already committed or aborted");
        txn.remove(codec.encodeKey(key));
    }

    long commit() {
        verifyUpdating("Cannot commit after already committed or aborted");
        long start = System.nanoTime();
        long newVersion;
        String newId = checkpointIds ? UUID.randomUUID().toString() : null;
        try {
            Reply.Committed r = remote.commit(this, newId, forceSnapshotOnCommit);
            committedNumKeys = r.numKeys;
            committedMemoryBytes = r.memoryUsedBytes;
            newVersion = version + 1;
        } catch (Throwable e) {
            state = State.ABORTED;
            try {
                txn.abort();
            } catch (RuntimeException ignored) {
                // the worker may have ended the transaction already
            }
            remote.writeEnded(this, false);
            // the cause's message in Spark's text, so the top-level error names file and version
            String what = e.getMessage() == null ? toString() : toString() + " (" + e.getMessage() + ")";
            throw SparkErrors.sneaky(LineApi.failedToCommit(what, e));
        }
        state = State.COMMITTED;
        remote.writeEnded(this, true);
        committedId = newId;
        metrics.commitMs.addAndGet(StoreMetrics.millisSince(start));
        remote.reportCommit(newVersion);
        LOG.info("Committed version {}{} for {}", newVersion, newId == null ? "" : " (" + newId + ")", this);
        return newVersion;
    }

    void abort() {
        if (state != State.UPDATING) {
            return;
        }
        state = State.ABORTED;
        try {
            txn.abort();
        } catch (RuntimeException e) {
            LOG.warn("Aborting {} failed (ignored)", this, e);
        }
        remote.writeEnded(this, false);
        LOG.info("Aborted version {} for {}", version + 1, this);
    }

    @Override
    UnsafeRow get(UnsafeRow key) {
        if (state != State.COMMITTED) {
            return super.get(key);
        }
        RemoteTxn read = remote.beginCommittedRead(version + 1, txn.batchTimestampMs(), metrics);
        try {
            return toValueRow(read.get(codec.encodeKey(key)));
        } finally {
            read.abort();
        }
    }

    @Override
    List<UnsafeRow> multiGet(UnsafeRow[] keys) {
        if (state != State.COMMITTED) {
            return super.multiGet(keys);
        }
        List<UnsafeRow> out = new ArrayList<>(keys.length);
        for (UnsafeRow k : keys) {
            out.add(get(k));
        }
        return out;
    }

    @Override
    ChunkIterator iterate() {
        if (state != State.COMMITTED) {
            return super.iterate();
        }
        RemoteTxn read = remote.beginCommittedRead(version + 1, txn.batchTimestampMs(), metrics);
        ChunkIterator it;
        try {
            it = read.iterate(EMPTY, codec, numValueFields);
            it.hasNext(); // open now, so the read transaction cannot outlive an unread iterator
        } catch (RuntimeException e) {
            read.abort();
            throw e;
        }
        it.onEnd(() -> {
            try {
                read.abort();
            } catch (RuntimeException e) {
                LOG.debug("Ending a post-commit read of {} failed", this, e);
            }
        });
        return it;
    }

    /** Spark's metrics of the store: the transaction's while it is open, the commit's after. */
    StateStoreMetrics storeMetrics() {
        long numKeys = committedNumKeys;
        long memory = committedMemoryBytes;
        if (state == State.UPDATING && !txn.isEnded()) {
            long[] s = txn.stats();
            numKeys = s[0];
            memory = s[1];
        }
        metrics.cacheBytes.set(remote.viewBytes());
        return SparkCompat.storeMetrics(numKeys, memory, metrics.toScala());
    }

    boolean hasCommitted() {
        return state == State.COMMITTED;
    }

    boolean isUpdating() {
        return state == State.UPDATING;
    }

    /** The checkpoint id the commit gave {@code version + 1} (format v2), or null. */
    String committedId() {
        return committedId;
    }
}
