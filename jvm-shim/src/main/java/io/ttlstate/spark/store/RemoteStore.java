package io.ttlstate.spark.store;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;

import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.compat.SparkCompat;
import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.InvalidConfException;
import io.ttlstate.spark.WorkerException;
import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.checkpoint.ChangelogChunk;
import io.ttlstate.spark.checkpoint.MissingCheckpointFileException;
import io.ttlstate.spark.checkpoint.StoreCheckpoint;
import io.ttlstate.spark.checkpoint.TransferPool;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.LocalFiles;
import io.ttlstate.spark.service.PythonService;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.TaskContext;
import org.apache.spark.util.TaskCompletionListener;
import org.apache.spark.sql.errors.QueryExecutionErrors;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

/**
 * One store of a provider as its worker holds it: the connection to the worker the store is
 * pinned to, the OPEN store's handle, which committed version (and, in checkpoint format v2,
 * which checkpoint id) the worker's database holds, the JVM's {@link CachedVersionView} of
 * that version and the {@link StoreCheckpoint} that moves its checkpoint files. It opens the
 * read and write stores Spark asks the provider for, commits and snapshots them and runs the
 * provider's maintenance. Task threads and maintenance threads share it; its state is guarded
 * by its monitor.
 */
public final class RemoteStore {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteStore.class);
    private static final long RECONNECT_MILLIS = 15_000;
    private static final String TMP_DIR = "jvm-tmp";
    /** Suffixes of local directory and temp-file names; thread-safe, seeded once. */
    private static final SecureRandom RANDOM = new SecureRandom();
    static final String SKIP_NULLS_KEY = "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled";

    private final StateStoreId stateStoreId;
    private final StructType keySchema;
    private final StructType valueSchema;
    private final int numPrefixCols;
    private final StateStoreConf storeConf;
    private final Configuration hadoopConf;
    /** Every {@code spark.sql.streaming.stateStore.ttlstate.*} conf of the query (full keys). */
    private final Map<String, String> ttlstateConfs;
    private final String localDirName;
    /** Checkpoint format v2: unique checkpoint ids per version. */
    private final boolean checkpointIds;
    private final StoreCheckpoint checkpoint;

    // guarded by this
    private WorkerConnection conn;
    private long storeHandle;
    private Path localDir;
    private long loadedVersion = -1;
    /** The checkpoint id of the loaded version (format v2; null for version 0 and in v1). */
    private String loadedId;
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
    /** The store's settings as the worker resolved them at OPEN. */
    private StoreSettings settings;
    /** What the JVM knows of the loaded version (value cache, key filter); null until OPEN. */
    private CachedVersionView view;
    /** What a read store's load cost, reported by the next write store (read stores have no metrics). */
    private StoreMetrics pendingLoad;
    /** The last write store opened on this store (a writer writes straight into the worker's database). */
    private WriteStore writer;
    /** The transaction of the last read store opened on this store (for {@link #readAheadTxn}). */
    private RemoteTxn readerTxn;
    private boolean closed;
    /** The Spark task that opened the last transaction (null: none, or opened outside a task). */
    private TaskContext txnTask;
    /** Spark unloaded this store while {@link #txnTask} used it: it closes when that task ends. */
    private boolean closeDeferred;
    /** Iterators that may still need the worker; drained into memory before the store is closed. */
    private final java.util.Set<ChunkIterator> openIterators =
            java.util.Collections.newSetFromMap(new java.util.WeakHashMap<>());

    /** A store not yet open on any worker; {@link #start} starts the store service. */
    public RemoteStore(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema, int numPrefixCols,
                       StateStoreConf storeConf, Configuration hadoopConf) {
        this.stateStoreId = stateStoreId;
        this.keySchema = keySchema;
        this.valueSchema = valueSchema;
        this.numPrefixCols = numPrefixCols;
        this.storeConf = storeConf;
        this.hadoopConf = hadoopConf;
        this.ttlstateConfs = ttlstateConfs(storeConf);
        byte[] suffix = new byte[4];
        RANDOM.nextBytes(suffix);
        this.localDirName = LocalFiles.storeDirStem(stateStoreId) + "_" + HexFormat.of().formatHex(suffix);
        this.checkpointIds = storeConf.enableStateStoreCheckpointIds();
        this.checkpoint = StoreCheckpoint.of(stateStoreId, hadoopConf, checkpointIds);
    }

    /** Whether the query runs with checkpoint format v2 (a unique checkpoint id per version). */
    public boolean checkpointIds() {
        return checkpointIds;
    }

    /** Starts this JVM's store service if it is not running, and lets read-aheads find this store ({@link LiveStores}). */
    public void start() {
        PythonService.get(ttlstateConfs);
        LiveStores.add(this);
    }

    private static Map<String, String> ttlstateConfs(StateStoreConf conf) {
        Map<String, String> out = new TreeMap<>();
        scala.jdk.javaapi.CollectionConverters.asJava(conf.sqlConfs()).forEach((k, v) -> {
            if (k.startsWith(ConfKeys.PREFIX)) {
                out.put(k, v);
            }
        });
        return out;
    }

    StateStoreId stateStoreId() {
        return stateStoreId;
    }

    // ---- stores -------------------------------------------------------------------------

    /** The write store of {@code version} (checkpoint id {@code id}; null: any). */
    public StateStore writeStore(long version, String id, boolean forceSnapshotOnCommit) {
        StoreMetrics metrics = new StoreMetrics();
        Prepared p = prepare(version, id, false, batchTimes(version), metrics, -1);
        LOG.debug("Opened write store of version {} for {}", version, this);
        WriteStore store = new WriteStore(this, version, p.loadedId, p.txn, new KeyCodec(keySchema, numPrefixCols),
                metrics, valueSchema.length(), forceSnapshotOnCommit, checkpointIds);
        synchronized (this) {
            writer = store;
        }
        return store;
    }

    /** A read store of {@code version} (checkpoint id {@code id}; null: any). */
    public ReadStateStore readStore(long version, String id) {
        StoreMetrics metrics = new StoreMetrics();
        Prepared p = prepare(version, id, true, batchTimes(version), metrics, -1);
        synchronized (this) {
            readerTxn = p.txn;
        }
        return new ReadStore(this, version, p.txn, new KeyCodec(keySchema, numPrefixCols), metrics,
                valueSchema.length());
    }

    /**
     * A store of {@code version} (checkpoint id {@code id}; null: any) rebuilt from the snapshot
     * of {@code snapshotVersion} and the changelogs after it, whatever newer snapshots there
     * are (Spark's {@code snapshotStartBatchId}); {@code readOnly}: a read store.
     */
    public ReadStateStore replayStore(long snapshotVersion, long version, String id, boolean readOnly) {
        StoreMetrics metrics = new StoreMetrics();
        Prepared p = prepare(version, id, readOnly, batchTimes(version), metrics, snapshotVersion);
        KeyCodec codec = new KeyCodec(keySchema, numPrefixCols);
        if (readOnly) {
            return new ReadStore(this, version, p.txn, codec, metrics, valueSchema.length());
        }
        WriteStore store = new WriteStore(this, version, p.loadedId, p.txn, codec, metrics, valueSchema.length(),
                false, checkpointIds);
        synchronized (this) {
            writer = store;
        }
        return store;
    }

    /**
     * Spark's change feed of versions {@code from} to {@code (to, toId)}: the records of their
     * changelogs, read by the worker (READ_CHANGELOG) from the copies in the local cache.
     */
    public ChangeDataReader changeDataReader(long from, long to, String toId) {
        List<StoreCheckpoint.LocalChangelog> changelogs;
        synchronized (this) {
            StoreMetrics metrics = new StoreMetrics();
            ensureOpen(metrics);
            try {
                changelogs = checkpoint.changelogs(from, to, toId, metrics);
            } catch (MissingCheckpointFileException e) {
                throw SparkErrors.sneaky(QueryExecutionErrors.failedToReadStreamingStateFileError(e.path(), e));
            } catch (IOException e) {
                throw SparkErrors.sneaky(QueryExecutionErrors.cannotLoadStore(e));
            }
        }
        return new ChangeDataReader(this, changelogs, new KeyCodec(keySchema, numPrefixCols), valueSchema.length(),
                settings.iteratorChunkEntries);
    }

    /** READ_CHANGELOG on this store's connection. */
    synchronized ChangelogChunk readChangelog(StoreCheckpoint.LocalChangelog c, long fromRecord, int maxRecords) {
        ensureOpen(new StoreMetrics());
        return StoreCheckpoint.readChangelog(conn, c, fromRecord, maxRecords);
    }

    /** The TTL clocks of the batch that uses {@code version} (read outside the monitor). */
    private BatchClock.Times batchTimes(long version) {
        return BatchClock.batchTimes(stateStoreId.checkpointRootLocation(), version, hadoopConf);
    }

    /** A transaction on a version and that version's checkpoint id. */
    private static final class Prepared {
        final RemoteTxn txn;
        final String loadedId;

        Prepared(RemoteTxn txn, String loadedId) {
            this.txn = txn;
            this.loadedId = loadedId;
        }
    }

    /**
     * Connects and opens the store if needed, loads {@code version} (of checkpoint id
     * {@code id}, if given) unless it is loaded, and BEGINs; the store's TTL clock of the
     * batch (its watermark under EventTime, else its timestamp; known once the store is
     * open) goes with both. A read store's load cost is handed to the next write store's metrics.
     */
    private synchronized Prepared prepare(long version, String id, boolean readOnly, BatchClock.Times times,
                                          StoreMetrics metrics, long fromSnapshot) {
        closed = false;
        txnTask = TaskContext.get();
        if (!readOnly && writing()) {
            // a write store Spark left behind (its task died without aborting): end it, so the
            // new one can write; only one transaction at a time writes into the database
            LOG.warn("Aborting the unfinished write store of version {} of {} before opening another",
                    writer.version(), this);
            writer.abort();
        }
        for (int attempt = 0; ; attempt++) {
            try {
                ensureOpen(metrics);
                long batchTimestampMs = times.ttlClock(settings.ttlEventTime);
                if (fromSnapshot >= 0 || loadedVersion != version || (id != null && !id.equals(loadedId))) {
                    load(version, id, batchTimestampMs, metrics, fromSnapshot);
                    if (readOnly) {
                        pendingLoad = metrics;
                    }
                }
                if (!readOnly && pendingLoad != null) {
                    metrics.addLoad(pendingLoad);
                    pendingLoad = null;
                }
                if (settings.latencySampleInterval > 0) {
                    metrics.trackLatency(settings.latencySampleInterval);
                }
                RemoteTxn txn = RemoteTxn.begin(conn, storeHandle, version, readOnly, batchTimestampMs,
                        settings, view, metrics);
                txn.onIteratorCreated = this::trackIterator;
                return new Prepared(txn, loadedId);
            } catch (UncheckedIOException e) {
                if (attempt >= 1 || conn == null || !conn.isBroken()) {
                    throw e;
                }
                LOG.warn("Connection to the ttlstate worker of {} broke ({}); reconnecting", this, e.getMessage());
            }
        }
    }

    private void trackIterator(ChunkIterator it) {
        synchronized (openIterators) {
            openIterators.add(it);
        }
    }

    /**
     * The worker that serves a store: every store of one task (a query's partition: the four
     * stores of a join, the stores of operators in one stage) on one worker, and consecutive
     * partitions, which Spark runs side by side, on different workers
     * (docs/decisions/056-task-stores-share-a-worker.md).
     */
    static int workerFor(StateStoreId id, int workers) {
        return Math.floorMod(id.checkpointRootLocation().hashCode() + id.partitionId(), workers);
    }

    /** Makes sure there is a healthy connection with the store OPEN on it. */
    private void ensureOpen(StoreMetrics metrics) {
        if (connectionUsable()) {
            return;
        }
        dropConnection();
        PythonService service = PythonService.get(ttlstateConfs);
        int worker = workerFor(stateStoreId, service.workers());
        WorkerConnection c = WorkerConnection.open(service, worker, RECONNECT_MILLIS);
        Path dir = service.dir().resolve("stores").resolve(localDirName);
        Map<String, String> confs = new LinkedHashMap<>(ttlstateConfs);
        // the one Spark setting the service's conf rules need (TTL on join state, see conf.py)
        confs.put(SKIP_NULLS_KEY, String.valueOf(storeConf.skipNullsForStreamStreamJoins()));
        FrameWriter w = Requests.open(String.format("op=%d,part=%d,name=%s", stateStoreId.operatorId(),
                        stateStoreId.partitionId(), stateStoreId.storeName()),
                dir.toString(), stateStoreId.operatorId(), stateStoreId.storeName(), confs);
        FrameReader r;
        try {
            metrics.roundTrip();
            r = c.call(w);
        } catch (WorkerException e) {
            c.close();
            if (ErrorClasses.INVALID_CONF.equals(e.errorClass())) {
                throw new InvalidConfException(e.workerMessage());
            }
            throw e;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
        Reply.Opened opened = Replies.decode(() -> Reply.open(r));
        long handle = opened.storeHandle;
        StoreSettings resolvedSettings = new StoreSettings(opened.settings);
        long maxBudget = CachedVersionView.maxBudgetBytes();
        if (resolvedSettings.cacheMaxBytes > maxBudget) {
            c.close(); // the worker closes the stores of a dropped connection
            throw new InvalidConfException(ConfKeys.PREFIX + ConfKeys.CACHE_MAX_BYTES + ": "
                    + resolvedSettings.cacheMaxBytes + " bytes is more than this JVM's direct memory limit of "
                    + maxBudget + " bytes, which holds the value cache (-XX:MaxDirectMemorySize, by default the"
                    + " heap's -Xmx): lower it, or raise -XX:MaxDirectMemorySize in the executor's Java options"
                    + " (the driver's in local mode)");
        }
        conn = c;
        storeHandle = handle;
        localDir = dir;
        loadedVersion = -1;
        settings = resolvedSettings;
        c.timeoutMillis(settings.workerTimeoutMillis);
        TransferPool.ensureThreads(settings.transferThreads);
        try {
            checkpoint.useCacheDir(settings.localCacheDir, settings.localCacheMaxAgeMillis);
        } catch (IOException e) {
            throw new UncheckedIOException("Cannot set up the local checkpoint cache of " + this, e);
        }
        if (view == null) {
            view = new CachedVersionView(settings.cacheMaxBytes, settings.keyFilter, numPrefixCols > 0);
        } else {
            view.reset(-1, -1);
        }
        LOG.info("Opened {} on {} (writeBatchBytes={}, iteratorChunkEntries={}, checkpoint mode {}, "
                        + "{} transfer threads, local cache {}, value cache {} bytes per executor, key filter {})",
                this, c, settings.writeBatchBytes, settings.iteratorChunkEntries,
                settings.snapshotMode ? "snapshot" : "changelog", settings.transferThreads, checkpoint.localCacheDir(),
                settings.cacheMaxBytes, settings.keyFilter ? "on" : "off");
    }

    private void dropConnection() {
        if (conn != null) {
            conn.close();
            conn = null;
        }
        loadedVersion = -1;
        loadedId = null;
        if (view != null) {
            view.reset(-1, -1);
        }
    }

    /**
     * Rebuilds the worker's database at {@code version} (checkpoint id {@code id}, null: any)
     * from the checkpoint; from the snapshot of {@code fromSnapshot} if it is not negative.
     */
    private void load(long version, String id, long batchTimestampMs, StoreMetrics metrics, long fromSnapshot) {
        loadedVersion = -1;
        loadedId = null;
        view.reset(-1, -1);
        StoreCheckpoint.Loaded l;
        try {
            l = fromSnapshot >= 0
                    ? checkpoint.loadFromSnapshot(conn, storeHandle, fromSnapshot, version, id, batchTimestampMs, metrics)
                    : checkpoint.load(conn, storeHandle, version, id, batchTimestampMs, metrics);
        } catch (MissingCheckpointFileException e) {
            throw SparkErrors.sneaky(QueryExecutionErrors.failedToReadStreamingStateFileError(e.path(), e));
        } catch (IOException | WorkerException e) {
            throw SparkErrors.sneaky(QueryExecutionErrors.cannotLoadStore(e));
        }
        loadedVersion = version;
        loadedId = l.id();
        lastSnapshotVersion = l.manifestVersion();
        changelogBytesSinceSnapshot = l.changelogBytes();
        recordsSinceSnapshot = 0;
        snapshotDue = false;
        // as Spark's providers do at a load (RocksDB: version 0 or the snapshot it started from;
        // HDFS: loadMap), so a new query run's store is not lagging from its first batch
        reportSnapshotUploaded(lastSnapshotVersion);
        view.reset(version, l.numKeys);
        if (view.wantsWarmUp(version) && settings.viewUsable(batchTimestampMs)) {
            long start = System.nanoTime();
            long n = CacheWarmUp.fill(conn, storeHandle, version, batchTimestampMs, l.numKeys, settings, view, metrics);
            LOG.info("Read {} entries of version {} of {} into its key filter and value cache in {} ms", n, version,
                    this, StoreMetrics.millisSince(start));
        }
    }

    // ---- commit and snapshots -----------------------------------------------------------

    /**
     * Commits {@code store}'s transaction as {@code version + 1} (checkpoint id {@code newId}
     * in format v2): COMMIT on the worker, then in changelog mode upload the changelog; in
     * snapshot mode, or if {@code forceSnapshot} or the worker wants it, upload an incremental
     * snapshot; in format v1 snapshot mode first delete a changelog an earlier attempt at this
     * version left. On failure the local version is forgotten (the next getStore reloads) and
     * the format v2 files this commit started writing are deleted; a format v1 file stays, as
     * its path is every attempt's (a re-run overwrites it; see StoreCheckpoint.ownPath).
     */
    synchronized RemoteTxn.Committed commit(WriteStore store, String newId, boolean forceSnapshot)
            throws IOException {
        long newVersion = store.version() + 1;
        java.nio.file.Path changelog = settings.snapshotMode ? null : tmpFile(newVersion + ".changelog");
        List<org.apache.hadoop.fs.Path> written = new ArrayList<>();
        boolean durable = false;
        try {
            RemoteTxn.Committed r = store.txn().commit(newVersion, changelog == null ? "" : changelog.toString());
            loadedVersion = -1; // until the version is durable
            loadedId = null;
            if (changelog != null) {
                checkpoint.uploadChangelog(changelog, newVersion, newId, store.baseId(), store.metrics, written);
                changelogBytesSinceSnapshot += LocalFiles.sizeOrZero(changelog);
                recordsSinceSnapshot += store.txn().records();
            } else if (newId == null) {
                checkpoint.deleteEarlierChangelog(newVersion);
            }
            if (lastSnapshotVersion >= newVersion) {
                lastSnapshotVersion = 0; // unknown now; the next snapshot maintenance decides
            }
            loadedVersion = newVersion;
            loadedId = newId;
            RemoteTxn txn = store.txn();
            if (settings.viewUsable(txn.batchTimestampMs()) && txn.isDirect()) {
                view.advance(store.version(), newVersion, txn.batchTimestampMs()); // it followed the writes
            } else if (settings.viewUsable(txn.batchTimestampMs())) {
                if (txn.stampsUnstamped()) { // the stamps the worker made at BEGIN, in this version (docs/decisions/104-event-time-jvm-view.md)
                    view.stamped(store.version(), txn.batchTimestampMs(), settings.ttlMs);
                }
                view.committed(store.version(), newVersion, txn.written(), RemoteTxn.TOMBSTONE, txn.writeExpiry(),
                        txn.batchTimestampMs());
            } else {
                view.reset(newVersion, -1); // the JVM does not know the clock the worker stamped the writes with
            }
            if (changelog == null || forceSnapshot || r.snapshotWanted || snapshotDue) {
                snapshot(store.metrics, written);
            }
            durable = true;
            return r;
        } finally {
            if (changelog != null) {
                LocalFiles.deleteQuietly(changelog);
            }
            if (!durable) {
                loadedVersion = -1;
                loadedId = null;
                if (view != null) {
                    view.reset(-1, -1);
                }
                checkpoint.discard(written);
            }
        }
    }

    /**
     * {@code store} committed or aborted. An aborted transaction that wrote straight into the
     * worker's database left it at no version: the next store reloads it from the checkpoint.
     * One that kept its writes apart but read with refresh on read left the worker's refreshed
     * expiries in the view, for the committed version, as one under EventTime may have left
     * the stamped expiries (docs/decisions/104-event-time-jvm-view.md): its values are forgotten.
     */
    synchronized void writeEnded(WriteStore store, boolean committed) {
        if (writer == store) {
            writer = null;
        }
        if (committed) {
            return;
        }
        // the view is null once the provider is closed (Spark may unload it as a task fails)
        if (store.txn().isDirect()) {
            loadedVersion = -1;
            loadedId = null;
            if (view != null) {
                view.reset(-1, -1);
            }
        } else if ((settings.ttlRefreshOnRead || store.txn().stampsUnstamped()) && view != null) {
            view.forgetValues(store.version());
        }
    }

    /**
     * A read-only transaction on committed version {@code version}, for reads a write store
     * makes after its commit. Fails if the worker's database moved on to another version.
     */
    synchronized RemoteTxn beginCommittedRead(long version, long batchTimestampMs, StoreMetrics metrics) {
        if (conn == null || conn.isBroken() || loadedVersion != version) {
            throw new IllegalStateException("Version " + version + " of " + this
                    + " is no longer the loaded version; read it through getStore(" + version + ")");
        }
        RemoteTxn txn = RemoteTxn.begin(conn, storeHandle, version, true, batchTimestampMs, settings, view,
                metrics);
        txn.onIteratorCreated = this::trackIterator;
        return txn;
    }

    /** Reports a committed version to the coordinator when commit validation is on. */
    void reportCommit(long newVersion) {
        if (SparkCompat.atLeast(4, 1) && storeConf.commitValidationEnabled()) { // 4.1+
            StateStore.reportCommitToCoordinator(newVersion, stateStoreId, hadoopConf);
        }
    }

    /**
     * Uploads an incremental snapshot of the loaded version (named by its id in format v2).
     * Caller holds the monitor.
     */
    private void snapshot(StoreMetrics metrics, List<org.apache.hadoop.fs.Path> written) throws IOException {
        checkpoint.snapshot(conn, storeHandle, loadedVersion, loadedId, tmpPath("snapshot"), metrics, written);
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
        if (!SparkCompat.atLeast(4, 1) || !storeConf.reportSnapshotUploadLag()) { // 4.1+
            return;
        }
        try {
            Option<StateStoreCoordinatorRef> ref = StateStoreProvider$.MODULE$.coordinatorRef();
            if (ref.isDefined()) {
                UUID runId = UUID.fromString(StateStoreProvider$.MODULE$.getRunId(hadoopConf));
                ref.get().snapshotUploaded(new StateStoreProviderId(stateStoreId, runId), version,
                        System.currentTimeMillis());
            }
        } catch (RuntimeException e) {
            LOG.debug("Reporting the snapshot of version {} of {} to the coordinator failed", version, this, e);
        }
    }

    private Path tmpFile(String name) throws IOException {
        return tmpPath(name + ".tmp");
    }

    /** A fresh path (nothing there) in the store's JVM temp directory. */
    private Path tmpPath(String name) throws IOException {
        Path dir = localDir.resolve(TMP_DIR);
        Files.createDirectories(dir);
        byte[] r = new byte[4];
        RANDOM.nextBytes(r);
        return dir.resolve(HexFormat.of().formatHex(r) + "-" + name);
    }

    // ---- maintenance --------------------------------------------------------------------

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
    public synchronized void snapshotMaintenance() {
        if (closed || !connectionUsable() || loadedVersion <= 0) {
            return;
        }
        boolean byDeltas = loadedVersion - lastSnapshotVersion >= storeConf.minDeltasForSnapshot();
        boolean byVolume = loadedVersion > lastSnapshotVersion
                && (changelogBytesSinceSnapshot >= SNAPSHOT_AFTER_CHANGELOG_BYTES
                    || recordsSinceSnapshot > SNAPSHOT_AFTER_RECORDS);
        if (!byDeltas && !byVolume) {
            return;
        }
        if (writing()) {
            if (!snapshotDue) {
                LOG.debug("Snapshot of {} due while version {} is written: its commit snapshots", this,
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
            if (serviceStopped()) {
                LOG.info("Snapshot maintenance of {} skipped: the ttlstate store service has stopped", stateStoreId);
                return;
            }
            throw new IllegalStateException("Snapshot maintenance of version " + loadedVersion + " of " + this
                    + " failed", e);
        }
    }

    /**
     * MAINTAINs the loaded store on its worker (expired-entry compaction), then deletes
     * checkpoint files not needed to recover the last {@code minVersionsToRetain} versions and
     * prunes the local cache (SSTs only if the retained manifests' SSTs are known, or a
     * worker connection to a running service reads them).
     */
    public void cleanupMaintenance() {
        maintainStore();
        WorkerConnection c;
        synchronized (this) {
            c = closed || !connectionUsable() ? null : conn; // none to a stopped service (docs/decisions/087-stopped-session-cleanup.md)
        }
        try {
            int maxDelete = SparkCompat.atLeast(4, 1) ? storeConf.maxVersionsToDeletePerMaintenance() : -1; // 4.1+
            checkpoint.cleanup(storeConf.minVersionsToRetain(), storeConf.minVersionsToDelete(), maxDelete, c);
        } catch (IOException | RuntimeException e) {
            boolean loaded;
            synchronized (this) {
                loaded = loadedVersion >= 0;
            }
            if (loaded) {
                throw e instanceof IOException
                        ? new UncheckedIOException("Cleanup maintenance of " + this + " failed", (IOException) e)
                        : (RuntimeException) e;
            }
            LOG.warn("Cleanup maintenance of {} failed (nothing loaded; ignored)", this, e);
        }
    }

    /** Sends MAINTAIN if the store is open and loaded; a failure is logged, never thrown. */
    private synchronized void maintainStore() {
        if (closed || !connectionUsable() || loadedVersion < 0) {
            return;
        }
        try {
            FrameReader r = conn.call(Requests.maintain(storeHandle));
            Replies.decode(() -> {
                Reply.empty(r);
                return null;
            });
        } catch (RuntimeException e) {
            if (serviceStopped()) {  // SparkEnv stopping: the service went first
                LOG.info("Store maintenance (MAINTAIN) of {} skipped: the ttlstate store service has stopped",
                        stateStoreId);
            } else {
                LOG.warn("Store maintenance (MAINTAIN) of {} on its worker failed (ignored)", stateStoreId, e);
            }
        }
    }

    /** Whether there is a connection, not broken, to a store service that still runs. */
    private boolean connectionUsable() {
        WorkerConnection c = conn;
        return c != null && !c.isBroken() && c.service().isUsable();
    }

    /**
     * Whether the store service this store's connection belongs to is gone: stopped with
     * its SparkEnv (Spark's maintenance thread still holds the providers of a stopped session)
     * or exited. Then nothing is left to maintain or close on a worker.
     */
    private boolean serviceStopped() {
        WorkerConnection c = conn;
        return c != null && !c.service().isUsable();
    }

    /**
     * CLOSEs the store on its worker (deleting its local files) and the connection; idempotent.
     * Spark's maintenance unloads a provider it finds inactive, or whose maintenance failed,
     * whatever its tasks are doing; a task with a transaction open here keeps it: the store
     * closes when that task ends, as the close of Spark's RocksDB provider waits for the lock
     * its task holds (docs/decisions/089-unload-during-task.md).
     */
    public void close() {
        TaskContext task;
        synchronized (this) {
            task = inTransaction() ? txnTask : null;
        }
        if (task == null || task == TaskContext.get() || task.isCompleted()) {
            closeNow();
            return;
        }
        synchronized (this) {
            if (closeDeferred) {
                return;
            }
            closeDeferred = true;
        }
        LOG.info("{} is unloaded while task {} (stage {}, partition {}) uses it: close deferred until the task ends",
                this, task.taskAttemptId(), task.stageId(), task.partitionId());
        // runs at once if the task has completed meanwhile
        task.addTaskCompletionListener((TaskCompletionListener) ctx -> closeNow());
    }

    /** Whether a write store or read store has a transaction open on this store. */
    private boolean inTransaction() {
        return writing() || (readerTxn != null && !readerTxn.isEnded());
    }

    /** Whether a write store has its transaction open (neither committed nor aborted). */
    private boolean writing() {
        return writer != null && writer.isUpdating();
    }

    private synchronized void closeNow() {
        LiveStores.remove(this);
        closeDeferred = false;
        txnTask = null; // no reference to a finished task's context
        if (closed) {
            return;
        }
        closed = true;
        if (writing()) {
            writer.abort(); // its task ended without committing (Spark aborts it later: a no-op then)
        }
        if (readerTxn != null && !readerTxn.isEnded()) {
            try {
                readerTxn.abort(); // its task ended without releasing it
            } catch (RuntimeException e) {
                LOG.debug("Ending the open read transaction of {} failed (the store closes anyway)", this, e);
            }
        }
        List<ChunkIterator> iterators;
        synchronized (openIterators) {
            iterators = new ArrayList<>(openIterators);
            openIterators.clear();
        }
        for (ChunkIterator it : iterators) {
            try {
                it.drain();
            } catch (RuntimeException e) {
                LOG.debug("Draining an open iterator of {} failed", this, e);
            }
        }
        if (conn != null) {
            if (connectionUsable()) {  // a stopped service deleted its stores' files
                try {
                    conn.call(Requests.close(storeHandle, true));
                } catch (RuntimeException e) {
                    LOG.warn("Closing {} on its worker failed (ignored)", this, e);
                }
            }
            conn.close();
            conn = null;
        }
        loadedVersion = -1;
        loadedId = null;
        pendingLoad = null;
        if (view != null) {
            view.close();
            view = null;
        }
        LOG.info("Closed {}", this);
    }

    StructType keySchema() {
        return keySchema;
    }

    /** The transaction of the write store open on this store, or null (for {@link JoinPrefetch}). */
    synchronized RemoteTxn openWriterTxn() {
        return writer == null || writer.txn().isEnded() ? null : writer.txn();
    }

    /**
     * The transaction whose reads a {@link RestoreReadAhead} serves: the open write store's,
     * else the last read store's if still open; null if neither, or if stored keys are not the
     * key rows' bytes (a store with prefix columns).
     */
    synchronized RemoteTxn readAheadTxn() {
        if (numPrefixCols != 0) {
            return null;
        }
        RemoteTxn w = openWriterTxn();
        if (w != null) {
            return w;
        }
        return readerTxn == null || readerTxn.isEnded() ? null : readerTxn;
    }

    /** The read-ahead for iterators of this store if it is a join's counts store (else null). */
    JoinPrefetch joinPrefetch(KeyCodec codec) {
        StoreSettings s;
        synchronized (this) {
            s = settings;
        }
        return s == null ? null : JoinPrefetch.forCounts(this, codec, s);
    }

    /** Heap bytes of the view's value cache and key filter (0 while there is none). */
    synchronized long viewBytes() {
        return view == null ? 0 : view.bytes() + view.filterBytes();
    }

    /** The committed version the worker's database holds, or -1; for tests and logs. */
    public synchronized long loadedVersion() {
        return loadedVersion;
    }

    @Override
    public String toString() {
        return String.format("%s[op=%d,part=%d,name=%s,dir=%s]", SparkErrors.PROVIDER_NAME, stateStoreId.operatorId(),
                stateStoreId.partitionId(), stateStoreId.storeName(), stateStoreId.storeCheckpointLocation());
    }
}
