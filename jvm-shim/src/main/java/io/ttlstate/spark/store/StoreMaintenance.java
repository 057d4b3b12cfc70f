package io.ttlstate.spark.store;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;

import io.ttlstate.spark.checkpoint.StoreCheckpoint;
import io.ttlstate.spark.compat.LineApi;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.PythonService;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A {@link RemoteStore}'s snapshots and maintenance: what followed the last snapshot, the
 * snapshot upload (at a commit or by snapshot maintenance) and its report to Spark's state
 * store coordinator, MAINTAIN on the worker and the cleanup of checkpoint files. Its state is
 * guarded by the store's monitor, which every method holds or takes.
 */
final class StoreMaintenance {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteStore.class);

    /** How long a stopped session's store's cleanup waits for a worker of the running service. */
    private static final long PLANNER_CONNECT_MILLIS = 2_000;

    private final RemoteStore store;
    private final StateStoreId stateStoreId;
    private final StateStoreConf storeConf;
    private final Configuration hadoopConf;
    private final StoreCheckpoint checkpoint;

    // guarded by store
    private long lastSnapshotVersion;
    /** Bytes of the changelogs after the last snapshot: what a load of the loaded version would replay. */
    private long changelogBytesSinceSnapshot;
    /** Write records committed since the last snapshot (this provider's commits; a load counts none). */
    private long recordsSinceSnapshot;
    /**
     * A snapshot maintenance round found a snapshot due while a write store was writing: the
     * next commit snapshots (docs/decisions/100-snapshot-at-commit-when-due.md).
     */
    private boolean snapshotDue;

    StoreMaintenance(RemoteStore store, StateStoreId stateStoreId, StateStoreConf storeConf, Configuration hadoopConf,
                     StoreCheckpoint checkpoint) {
        this.store = store;
        this.stateStoreId = stateStoreId;
        this.storeConf = storeConf;
        this.hadoopConf = hadoopConf;
        this.checkpoint = checkpoint;
    }

    /**
     * A load started from the snapshot of {@code manifestVersion} and replayed
     * {@code changelogBytes} of changelogs after it. Caller holds the store's monitor.
     */
    void loaded(long manifestVersion, long changelogBytes) {
        lastSnapshotVersion = manifestVersion;
        changelogBytesSinceSnapshot = changelogBytes;
        recordsSinceSnapshot = 0;
        snapshotDue = false;
        // as Spark's providers do at a load (RocksDB: version 0 or the snapshot it started from;
        // HDFS: loadMap), so a new query run's store is not lagging from its first batch
        reportSnapshotUploaded(lastSnapshotVersion);
    }

    /** A commit uploaded a changelog of {@code bytes} holding {@code records} write records. Caller holds the monitor. */
    void changelogUploaded(long bytes, long records) {
        changelogBytesSinceSnapshot += bytes;
        recordsSinceSnapshot += records;
    }

    /** {@code newVersion} was committed (not durable yet). Caller holds the monitor. */
    void committed(long newVersion) {
        if (lastSnapshotVersion >= newVersion) {
            lastSnapshotVersion = 0; // unknown now; the next snapshot maintenance decides
        }
    }

    /** Whether a snapshot maintenance round left the next commit to snapshot. Caller holds the monitor. */
    boolean snapshotDue() {
        return snapshotDue;
    }

    /**
     * Uploads an incremental snapshot of the loaded version (named by its id in format v2).
     * Caller holds the monitor.
     */
    void snapshot(StoreMetrics metrics, List<org.apache.hadoop.fs.Path> written) throws IOException {
        long loadedVersion = store.loadedVersion();
        checkpoint.snapshot(store.conn(), store.storeHandle(), loadedVersion, store.loadedId(),
                store.tmpPath("snapshot"), metrics, written);
        lastSnapshotVersion = loadedVersion;
        changelogBytesSinceSnapshot = 0;
        recordsSinceSnapshot = 0;
        snapshotDue = false;
        reportSnapshotUploaded(loadedVersion);
    }

    /**
     * Tells Spark's state store coordinator that {@code version} has a snapshot (one uploaded,
     * or the one a load started from, 0 for the empty state), as Spark's own providers do.
     * Without it the coordinator counts the store as lagging once enough versions passed and
     * forces a snapshot at every commit ({@code forceSnapshotOnCommit}); without the report at
     * a load, a store of a new query run has no upload time, so it lags as soon as its version
     * is far enough from 0, whatever the time lag rule says
     * (docs/decisions/036-snapshot-reports-to-coordinator.md).
     */
    private void reportSnapshotUploaded(long version) {
        try {
            LineApi.reportSnapshotUploaded(storeConf, hadoopConf, stateStoreId, version);
        } catch (RuntimeException e) {
            LOG.debug("Reporting the snapshot of version {} of {} to the coordinator failed", version, store, e);
        }
    }

    /**
     * Changelog bytes, or write records, after the last snapshot from which maintenance
     * snapshots whatever {@code minDeltasForSnapshot} says
     * (docs/decisions/103-large-changelog-snapshots.md): as Spark's RocksDB
     * provider snapshots a version whose changelog holds over 10,000 entries, so a restart
     * replays little. Bytes catch what a load replayed (its record count is unknown here);
     * records catch well-compressed changelogs (small keys and values: about 1.3 bytes a record).
     */
    static final long SNAPSHOT_AFTER_CHANGELOG_BYTES = 1L << 20;
    static final long SNAPSHOT_AFTER_RECORDS = 10_000;

    /**
     * Snapshots the loaded version once {@code minDeltasForSnapshot} changelogs, or
     * {@link #SNAPSHOT_AFTER_CHANGELOG_BYTES} or {@link #SNAPSHOT_AFTER_RECORDS} of them, followed the last snapshot; while a write
     * store writes, its commit does (docs/decisions/100-snapshot-at-commit-when-due.md).
     */
    void snapshotMaintenance() {
        synchronized (store) {
            long loadedVersion = store.loadedVersion();
            if (store.isClosed() || !store.connectionUsable() || loadedVersion <= 0) {
                return;
            }
            boolean byDeltas = loadedVersion - lastSnapshotVersion >= storeConf.minDeltasForSnapshot();
            boolean byVolume = loadedVersion > lastSnapshotVersion
                    && (changelogBytesSinceSnapshot >= SNAPSHOT_AFTER_CHANGELOG_BYTES
                        || recordsSinceSnapshot > SNAPSHOT_AFTER_RECORDS);
            if (!byDeltas && !byVolume) {
                return;
            }
            if (store.writing()) {
                if (!snapshotDue) {
                    LOG.debug("Snapshot of {} due while version {} is written: its commit snapshots", store,
                            loadedVersion + 1);
                }
                snapshotDue = true;
                return;
            }
            List<org.apache.hadoop.fs.Path> written = new ArrayList<>();
            try {
                snapshot(new StoreMetrics(), written);
            } catch (IOException | RuntimeException e) {
                checkpoint.discard(written);
                if (store.serviceStopped()) {
                    LOG.info("Snapshot maintenance of {} skipped: the ttlstate store service has stopped",
                            stateStoreId);
                    return;
                }
                throw new IllegalStateException("Snapshot maintenance of version " + store.loadedVersion() + " of "
                        + store + " failed", e);
            }
        }
    }

    /**
     * A connection to a worker of this JVM's running service, for a store whose own connection
     * is gone (a stopped session's store, maintained under a later session): a cleanup's plans
     * are a worker's and need no store; null if no service runs.
     */
    private WorkerConnection plannerConnection() {
        // a short wait: the maintenance thread serves every store of the executor
        PythonService service = PythonService.currentOrNull();
        if (service == null || !service.isUsable()) {
            return null;
        }
        try {
            return WorkerConnection.open(service, StoreLoad.workerFor(stateStoreId, service.workers()),
                    PLANNER_CONNECT_MILLIS);
        } catch (RuntimeException e) {
            LOG.debug("No worker to plan the cleanup of {}", stateStoreId, e);
            return null;
        }
    }

    /**
     * MAINTAINs the loaded store on its worker (expired-entry compaction), then deletes
     * checkpoint files not needed to recover the last {@code minVersionsToRetain} versions and
     * prunes the local cache; the store's worker plans it, or, when the store's connection is
     * gone, a worker of the running service ({@link #plannerConnection}).
     */
    void cleanupMaintenance() {
        maintainStore();
        WorkerConnection c;
        synchronized (store) {
            // none to a stopped service (docs/decisions/087-stopped-session-cleanup.md)
            c = store.isClosed() || !store.connectionUsable() ? null : store.conn();
        }
        WorkerConnection own = c == null ? plannerConnection() : null;
        try {
            int maxDelete = LineApi.maxVersionsToDeletePerMaintenance(storeConf);
            checkpoint.cleanup(storeConf.minVersionsToRetain(), LineApi.minVersionsToDelete(storeConf), maxDelete,
                    c != null ? c : own);
        } catch (IOException | RuntimeException e) {
            boolean loaded;
            synchronized (store) {
                loaded = store.loadedVersion() >= 0;
            }
            if (loaded) {
                throw e instanceof IOException
                        ? new UncheckedIOException("Cleanup maintenance of " + store + " failed", (IOException) e)
                        : (RuntimeException) e;
            }
            LOG.warn("Cleanup maintenance of {} failed (nothing loaded; ignored)", store, e);
        } finally {
            if (own != null) {
                own.close();
            }
        }
    }

    /** Sends MAINTAIN if the store is open and loaded; a failure is logged, never thrown. */
    private void maintainStore() {
        synchronized (store) {
            if (store.isClosed() || !store.connectionUsable() || store.loadedVersion() < 0) {
                return;
            }
            try {
                FrameReader r = store.conn().call(Requests.maintain(store.storeHandle()));
                Replies.decode(() -> {
                    Reply.empty(r);
                    return null;
                });
            } catch (RuntimeException e) {
                if (store.serviceStopped()) {  // SparkEnv stopping: the service went first
                    LOG.info("Store maintenance (MAINTAIN) of {} skipped: the ttlstate store service has stopped",
                            stateStoreId);
                } else {
                    LOG.warn("Store maintenance (MAINTAIN) of {} on its worker failed (ignored)", stateStoreId, e);
                }
            }
        }
    }
}
