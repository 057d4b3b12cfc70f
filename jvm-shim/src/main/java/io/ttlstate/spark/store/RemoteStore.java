package io.ttlstate.spark.store;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.compat.ScalaColls;
import io.ttlstate.spark.compat.LineApi;
import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.checkpoint.ChangelogChunk;
import io.ttlstate.spark.checkpoint.StoreCheckpoint;
import io.ttlstate.spark.checkpoint.TransferPool;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.LocalFiles;
import io.ttlstate.spark.service.PythonService;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One store of a provider as its worker holds it: the connection to the worker the store is
 * pinned to, the OPEN store's handle, which committed version (and, in checkpoint format v2,
 * which checkpoint id) the worker's database holds, the JVM's {@link CachedVersionView} of
 * that version and the {@link StoreCheckpoint} that moves its checkpoint files. It opens the
 * read and write stores Spark asks the provider for and commits them; {@link StoreLoad} opens
 * and loads the store on its worker, {@link StoreMaintenance} snapshots it and runs the
 * provider's maintenance, {@link StoreUsers} tracks what uses it until it closes. Task threads
 * and maintenance threads share it; its state is guarded by its monitor.
 */
public final class RemoteStore {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteStore.class);
    private static final String TMP_DIR = "jvm-tmp";
    /** Suffixes of local directory and temp-file names; thread-safe, seeded once. */
    private static final SecureRandom RANDOM = new SecureRandom();

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
    private final StoreLoad loads;
    private final StoreMaintenance maintenance;
    /** The stores, transactions, task and iterators using this store; guarded by this. */
    private final StoreUsers users = new StoreUsers(this);

    // guarded by this
    private WorkerConnection conn;
    private long storeHandle;
    private Path localDir;
    private long loadedVersion = -1;
    /** The checkpoint id of the loaded version (format v2; null for version 0 and in v1). */
    private String loadedId;
    /** The store's settings as the worker resolved them at OPEN. */
    private StoreSettings settings;
    /** What the JVM knows of the loaded version (value cache, key filter); null until OPEN. */
    private CachedVersionView view;
    /** What a read store's load cost, reported by the next write store (read stores have no metrics). */
    private StoreMetrics pendingLoad;
    private boolean closed;

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
        this.checkpointIds = LineApi.checkpointIds(storeConf);
        this.checkpoint = StoreCheckpoint.of(stateStoreId, hadoopConf, checkpointIds);
        this.loads = new StoreLoad(this, stateStoreId, storeConf, ttlstateConfs, localDirName, checkpoint);
        this.maintenance = new StoreMaintenance(this, stateStoreId, storeConf, hadoopConf, checkpoint);
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
        ScalaColls.javaMap(conf.sqlConfs()).forEach((k, v) -> {
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
        return writeStoreOf(version, p, metrics, forceSnapshotOnCommit);
    }

    /** A read store of {@code version} (checkpoint id {@code id}; null: any). */
    public ReadStateStore readStore(long version, String id) {
        StoreMetrics metrics = new StoreMetrics();
        Prepared p = prepare(version, id, true, batchTimes(version), metrics, -1);
        synchronized (this) {
            users.readOpened(p.txn);
        }
        return readStoreOf(version, p, metrics);
    }

    /**
     * A store of {@code version} (checkpoint id {@code id}; null: any) rebuilt from the snapshot
     * of {@code snapshotVersion} and the changelogs after it, whatever newer snapshots there
     * are (Spark's {@code snapshotStartBatchId}); {@code readOnly}: a read store.
     */
    public ReadStateStore replayStore(long snapshotVersion, long version, String id, boolean readOnly) {
        StoreMetrics metrics = new StoreMetrics();
        Prepared p = prepare(version, id, readOnly, batchTimes(version), metrics, snapshotVersion);
        return readOnly ? readStoreOf(version, p, metrics) : writeStoreOf(version, p, metrics, false);
    }

    /** The write store of {@code p}'s transaction at {@code version}, registered as this store's writer. */
    private StateStore writeStoreOf(long version, Prepared p, StoreMetrics metrics, boolean forceSnapshotOnCommit) {
        WriteCore core = new WriteCore(this, version, p.loadedId, p.txn, keyCodec(), metrics, numValueFields(),
                forceSnapshotOnCommit, checkpointIds);
        synchronized (this) {
            users.writeOpened(core);
        }
        return new WriteStore(core);
    }

    /** The read store of {@code p}'s transaction at {@code version}. */
    private ReadStateStore readStoreOf(long version, Prepared p, StoreMetrics metrics) {
        return new ReadStore(new ReadCore(this, version, p.txn, keyCodec(), metrics, numValueFields()));
    }

    /**
     * The changelogs of versions {@code from} to {@code (to, toId)} in the local cache, in
     * order: what Spark's change feed reads (READ_CHANGELOG, {@link #readChangelog}).
     */
    public synchronized List<StoreCheckpoint.LocalChangelog> changelogs(long from, long to, String toId) {
        StoreMetrics metrics = new StoreMetrics();
        ensureOpen(metrics);
        return loads.changelogs(conn, from, to, toId, metrics);
    }

    /** A codec of this store's keys. */
    KeyCodec keyCodec() {
        return new KeyCodec(keySchema, numPrefixCols);
    }

    /** Fields of this store's values. */
    int numValueFields() {
        return valueSchema.length();
    }

    /** Entries or records one chunk of a scan or changelog read asks the worker for. */
    synchronized int chunkEntries() {
        return settings.iteratorChunkEntries;
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
        users.beginning(readOnly);
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
                txn.onIteratorCreated = users::track;
                return new Prepared(txn, loadedId);
            } catch (UncheckedIOException e) {
                if (attempt >= 1 || conn == null || !conn.isBroken()) {
                    throw e;
                }
                LOG.warn("Connection to the ttlstate worker of {} broke ({}); reconnecting", this, e.getMessage());
            }
        }
    }

    /** Makes sure there is a healthy connection with the store OPEN on it. */
    private void ensureOpen(StoreMetrics metrics) {
        if (connectionUsable()) {
            return;
        }
        dropConnection();
        StoreLoad.Opened opened = loads.open(metrics);
        WorkerConnection c = opened.conn;
        conn = c;
        storeHandle = opened.storeHandle;
        localDir = opened.dir;
        loadedVersion = -1;
        settings = opened.settings;
        c.timeoutMillis(settings.workerTimeoutMillis);
        TransferPool.ensureThreads(settings.transferThreads);
        try {
            checkpoint.useCacheDir(settings.localCacheDir, settings.localCacheMaxAgeMillis);
        } catch (IOException e) {
            throw new UncheckedIOException("Cannot set up the local checkpoint cache of " + this, e);
        }
        if (view == null) {
            view = new CachedVersionView(settings.cacheMaxBytes, settings.keyFilter, numPrefixCols > 0,
                    !settings.readsLikeTheWorker(false));
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
        StoreCheckpoint.Loaded l = loads.load(conn, storeHandle, version, id, batchTimestampMs, metrics, fromSnapshot);
        loadedVersion = version;
        loadedId = l.id();
        maintenance.loaded(l.manifestVersion(), l.changelogBytes());
        view.reset(version, l.numKeys);
        if (view.wantsWarmUp(version) && settings.viewUsable(batchTimestampMs)) {
            loads.warmUp(conn, storeHandle, version, batchTimestampMs, l.numKeys, settings, view, metrics);
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
     * its path is every attempt's (a re-run overwrites it; see CheckpointWriter.ownPath).
     */
    synchronized Reply.Committed commit(WriteCore store, String newId, boolean forceSnapshot)
            throws IOException {
        long newVersion = store.version + 1;
        java.nio.file.Path changelog = settings.snapshotMode ? null : tmpFile(newVersion + ".changelog");
        List<org.apache.hadoop.fs.Path> written = new ArrayList<>();
        boolean durable = false;
        try {
            Reply.Committed r = store.txn.commit(newVersion, changelog == null ? "" : changelog.toString(), newId,
                    store.baseId);
            loadedVersion = -1; // until the version is durable
            loadedId = null;
            if (changelog != null) {
                checkpoint.uploadChangelog(changelog, r.changelogName, newVersion, newId != null, store.metrics, written);
                maintenance.changelogUploaded(LocalFiles.sizeOrZero(changelog), store.txn.records());
            } else if (newId == null) {
                checkpoint.deleteEarlierChangelog(newVersion);
            }
            maintenance.committed(newVersion);
            loadedVersion = newVersion;
            loadedId = newId;
            RemoteTxn txn = store.txn;
            if (settings.viewUsable(txn.batchTimestampMs()) && txn.isDirect()) {
                view.advance(store.version, newVersion, txn.batchTimestampMs(), r.storedFrom); // it followed the writes
            } else if (settings.viewUsable(txn.batchTimestampMs())) {
                if (txn.stampsUnstamped()) { // the stamps the worker made at BEGIN, in this version (docs/decisions/104-event-time-jvm-view.md)
                    view.stamped(store.version, txn.batchTimestampMs(), settings.ttlMs);
                }
                view.committed(store.version, newVersion, txn.written(), RemoteTxn.TOMBSTONE, txn.writeExpiry(),
                        txn.batchTimestampMs(), r.storedFrom);
            } else {
                view.reset(newVersion, -1); // the JVM does not know the clock the worker stamped the writes with
            }
            if (changelog == null || forceSnapshot || r.snapshotWanted || maintenance.snapshotDue()) {
                maintenance.snapshot(store.metrics, written);
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
    synchronized void writeEnded(WriteCore store, boolean committed) {
        users.writeEnded(store);
        if (committed) {
            return;
        }
        // the view is null once the provider is closed (Spark may unload it as a task fails)
        if (store.txn.isDirect()) {
            loadedVersion = -1;
            loadedId = null;
            if (view != null) {
                view.reset(-1, -1);
            }
        } else if ((settings.ttlRefreshOnRead || store.txn.stampsUnstamped()) && view != null) {
            view.forgetValues(store.version);
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
        txn.onIteratorCreated = users::track;
        return txn;
    }

    /** Reports a committed version to the coordinator when commit validation is on. */
    void reportCommit(long newVersion) {
        LineApi.reportCommit(storeConf, newVersion, stateStoreId, hadoopConf);
    }

    private Path tmpFile(String name) throws IOException {
        return tmpPath(name + ".tmp");
    }

    /** A fresh path (nothing there) in the store's JVM temp directory. Caller holds the monitor. */
    Path tmpPath(String name) throws IOException {
        Path dir = localDir.resolve(TMP_DIR);
        Files.createDirectories(dir);
        byte[] r = new byte[4];
        RANDOM.nextBytes(r);
        return dir.resolve(HexFormat.of().formatHex(r) + "-" + name);
    }

    // ---- maintenance --------------------------------------------------------------------

    /** Snapshots the loaded version if one is due ({@link StoreMaintenance#snapshotMaintenance}). */
    public void snapshotMaintenance() {
        maintenance.snapshotMaintenance();
    }

    /**
     * MAINTAIN on the worker, then deletes the checkpoint files recovery no longer needs
     * ({@link StoreMaintenance#cleanupMaintenance}).
     */
    public void cleanupMaintenance() {
        maintenance.cleanupMaintenance();
    }

    /** Whether there is a connection, not broken, to a store service that still runs. */
    boolean connectionUsable() {
        WorkerConnection c = conn;
        return c != null && !c.isBroken() && c.service().isUsable();
    }

    /**
     * Whether the store service this store's connection belongs to is gone: stopped with
     * its SparkEnv (Spark's maintenance thread still holds the providers of a stopped session)
     * or exited. Then nothing is left to maintain or close on a worker.
     */
    boolean serviceStopped() {
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
        users.closeWhenUnused(this::closeNow);
    }

    /** Whether a write store has its transaction open (neither committed nor aborted). Caller holds the monitor. */
    boolean writing() {
        return users.writing();
    }

    private synchronized void closeNow() {
        LiveStores.remove(this);
        users.closing();
        if (closed) {
            return;
        }
        closed = true;
        users.endAll();
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
        return users.writerTxn();
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
        RemoteTxn w = users.writerTxn();
        return w != null ? w : users.readerTxn();
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

    // for StoreMaintenance; callers hold the monitor

    /** The connection to the store's worker, or null. */
    WorkerConnection conn() {
        return conn;
    }

    /** The OPEN store's handle on its worker. */
    long storeHandle() {
        return storeHandle;
    }

    /** The checkpoint id of the loaded version (format v2; null for version 0 and in v1). */
    String loadedId() {
        return loadedId;
    }

    /** Whether the store was closed (until a store is opened on it again). */
    boolean isClosed() {
        return closed;
    }

    @Override
    public String toString() {
        return String.format("%s[op=%d,part=%d,name=%s,dir=%s]", SparkErrors.PROVIDER_NAME, stateStoreId.operatorId(),
                stateStoreId.partitionId(), stateStoreId.storeName(), stateStoreId.storeCheckpointLocation());
    }
}
