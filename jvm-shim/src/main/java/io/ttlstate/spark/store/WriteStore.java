package io.ttlstate.spark.store;

import java.util.UUID;

import io.ttlstate.spark.compat.ScalaColls;
import io.ttlstate.spark.compat.SparkCompat;
import io.ttlstate.spark.metrics.LatencyTracker;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.Reply;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.errors.QueryExecutionErrors;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreCheckpointInfo;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A writable store at {@code version}: writes go to the transaction's write-behind buffer;
 * {@code commit} makes {@code version + 1} durable through the remote. In checkpoint format
 * v2 each commit gets a new random checkpoint id, built on the id of {@code version}.
 */
final class WriteStore extends AbstractStore implements StateStore {
    private static final Logger LOG = LoggerFactory.getLogger(WriteStore.class);

    private enum State { UPDATING, COMMITTED, ABORTED }

    private final boolean forceSnapshotOnCommit;
    private final boolean checkpointIds;
    /** The checkpoint id of {@code version} (format v2; null for version 0). */
    private final String baseId;
    private String committedId;
    private State state = State.UPDATING;
    private long committedNumKeys;
    private long committedMemoryBytes;

    WriteStore(RemoteStore remote, long version, String baseId, RemoteTxn txn, KeyCodec codec,
               StoreMetrics metrics, int numValueFields, boolean forceSnapshotOnCommit, boolean checkpointIds) {
        super(remote, version, txn, codec, metrics, numValueFields);
        this.baseId = baseId;
        this.forceSnapshotOnCommit = forceSnapshotOnCommit;
        this.checkpointIds = checkpointIds;
        SparkCompat.initStore(this);
    }

    private void verifyUpdating(String message) {
        if (state != State.UPDATING) {
            throw new IllegalStateException(message);
        }
    }

    @Override
    public void put(UnsafeRow key, UnsafeRow value, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
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

    @Override
    public void remove(UnsafeRow key, String colFamilyName) {
        checkDefaultColFamily(colFamilyName);
        verifyUpdating("Cannot remove after already committed or aborted");
        txn.remove(codec.encodeKey(key));
    }

    @Override
    public long commit() {
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
            throw SparkErrors.sneaky(QueryExecutionErrors.failedToCommitStateFileError(what, e));
        }
        state = State.COMMITTED;
        remote.writeEnded(this, true);
        committedId = newId;
        metrics.commitMs.addAndGet(StoreMetrics.millisSince(start));
        remote.reportCommit(newVersion);
        LOG.info("Committed version {}{} for {}", newVersion, newId == null ? "" : " (" + newId + ")", this);
        return newVersion;
    }

    @Override
    public void abort() {
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

    /**
     * Reads after commit (the HDFS-forgiving side of the contract) go through a short-lived
     * read-only transaction on the committed version, ended right after the read.
     */
    @Override
    public UnsafeRow get(UnsafeRow key, String colFamilyName) {
        if (state != State.COMMITTED) {
            return super.get(key, colFamilyName);
        }
        checkDefaultColFamily(colFamilyName);
        RemoteTxn read = remote.beginCommittedRead(version + 1, txn.batchTimestampMs(), metrics);
        try {
            return toValueRow(read.get(codec.encodeKey(key)));
        } finally {
            read.abort();
        }
    }

    @Override
    public scala.collection.Iterator<UnsafeRow> multiGet(UnsafeRow[] keys, String colFamilyName) {
        if (state != State.COMMITTED) {
            return super.multiGet(keys, colFamilyName);
        }
        java.util.List<UnsafeRow> out = new java.util.ArrayList<>(keys.length);
        for (UnsafeRow k : keys) {
            out.add(get(k, colFamilyName));
        }
        return ScalaColls.scalaIterator(out.iterator());
    }

    @Override
    public StateStoreIterator<UnsafeRowPair> iterator(String colFamilyName) {
        if (state != State.COMMITTED) {
            return super.iterator(colFamilyName);
        }
        checkDefaultColFamily(colFamilyName);
        RemoteTxn read = remote.beginCommittedRead(version + 1, txn.batchTimestampMs(), metrics);
        ChunkIterator it;
        try {
            it = read.iterate(new byte[0], codec, numValueFields);
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
        return wrap(it);
    }

    @Override
    public StateStoreMetrics metrics() {
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

    /**
     * Format v1: {@code (partition, version + 1, None, None)}, also before commit (as HDFS).
     * Format v2: the committed version's id and the id it was built on, only after commit.
     */
    @Override
    public StateStoreCheckpointInfo getStateStoreCheckpointInfo() {
        if (checkpointIds && state != State.COMMITTED) {
            throw SparkErrors.sneaky(StateStoreErrors.stateStoreOperationOutOfOrder(
                    "Cannot get checkpointInfo without committing the store"));
        }
        return new StateStoreCheckpointInfo(id().partitionId(), version + 1,
                scala.Option.apply(committedId), scala.Option.apply(baseId));
    }

    @Override
    public boolean hasCommitted() {
        return state == State.COMMITTED;
    }

    @Override
    public boolean removeColFamilyIfExists(String colFamilyName) {
        throw SparkErrors.sneaky(StateStoreErrors.removingColumnFamiliesNotSupported(
                SparkErrors.PROVIDER_NAME));
    }

    @Override
    public void createColFamilyIfAbsent(String colFamilyName, StructType keySchema, StructType valueSchema,
                                        KeyStateEncoderSpec keyStateEncoderSpec,
                                        boolean useMultipleValuesPerKey, boolean isInternal) {
        throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(
                SparkErrors.PROVIDER_NAME));
    }

    @Override
    public void putList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
        throw unsupported("putList");
    }

    @Override
    public void merge(UnsafeRow key, UnsafeRow value, String colFamilyName) {
        throw unsupported("merge");
    }

    @Override
    public void mergeList(UnsafeRow key, UnsafeRow[] values, String colFamilyName) {
        throw unsupported("mergeList");
    }

    boolean isUpdating() {
        return state == State.UPDATING;
    }

    /** The transaction, for {@link RemoteStore#commit}. */
    RemoteTxn txn() {
        return txn;
    }

    /** The checkpoint id of the version this store was loaded at (format v2), or null. */
    String baseId() {
        return baseId;
    }
}
