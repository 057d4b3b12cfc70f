package io.ttlstate.spark;

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
import java.util.concurrent.locks.ReentrantReadWriteLock;

import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.errors.QueryExecutionErrors;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.RangeKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateSchemaProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.TimestampAsPostfixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.TimestampAsPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

/**
 * Spark state-store provider whose data lives in the ttlstate Python service (RocksDB).
 *
 * <p>One instance serves one {@link StateStoreId}. It holds one connection to the worker its
 * store is pinned to, knows which committed version the worker's local database holds, and
 * moves checkpoint files ({@code <v>.changelog}, {@code <v>.snapshot}) between the checkpoint
 * location and the worker's local directory. Task threads and maintenance threads share it;
 * its state is guarded by its monitor.
 */
public class TtlStateStoreProvider implements StateStoreProvider {
    private static final Logger LOG = LoggerFactory.getLogger(TtlStateStoreProvider.class);
    static final String PROVIDER_NAME = "TtlStateStoreProvider";
    private static final long RECONNECT_MILLIS = 15_000;
    private static final String DOWNLOAD_DIR = "jvm-download";
    private static final String TMP_DIR = "jvm-tmp";
    /** Suffixes of local directory and temp-file names; thread-safe, seeded once. */
    private static final SecureRandom RANDOM = new SecureRandom();

    private volatile boolean unloaded;
    private ReentrantReadWriteLock maintenanceLock;

    private volatile StateStoreId stateStoreId;
    private StructType keySchema;
    private StructType valueSchema;
    private int numPrefixCols;
    private StateStoreConf storeConf;
    static final String SKIP_NULLS_KEY = "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled";
    private Configuration hadoopConf;
    private Map<String, String> ttlConfs;
    private String storeKey;
    private String localDirName;
    private CheckpointFiles files;

    // guarded by this
    private WorkerConnection conn;
    private long storeHandle;
    private Path localDir;
    private long loadedVersion = -1;
    private long lastSnapshotVersion;
    private int writeBatchBytes = 256 * 1024;
    private int iteratorChunkEntries = 1024;
    private boolean closed;
    /** Iterators that may still need the worker; drained into memory before the store is closed. */
    private final java.util.Set<ChunkIterator> openIterators =
            java.util.Collections.newSetFromMap(new java.util.WeakHashMap<>());

    /** Cheap and side-effect free: Spark also creates instances just to read the metric list. */
    public TtlStateStoreProvider() {
        StateStoreProvider.$init$(this);
    }

    // ---- trait state -------------------------------------------------------------------

    @Override
    public boolean unloaded() {
        return unloaded;
    }

    @Override
    public void unloaded_$eq(boolean b) {
        unloaded = b;
    }

    @Override
    public ReentrantReadWriteLock maintenanceLock() {
        return maintenanceLock;
    }

    @Override
    public void org$apache$spark$sql$execution$streaming$state$StateStoreProvider$_setter_$maintenanceLock_$eq(
            ReentrantReadWriteLock lock) {
        maintenanceLock = lock;
    }

    // ---- init ---------------------------------------------------------------------------

    @Override
    public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema,
                     KeyStateEncoderSpec keyStateEncoderSpec, boolean useColumnFamilies,
                     StateStoreConf storeConfs, Configuration hadoopConf, boolean useMultipleValuesPerKey,
                     Option<StateSchemaProvider> stateSchemaProvider) {
        if (storeConfs.enableStateStoreCheckpointIds()) {
            throw SparkErrors.sneaky(StateStoreErrors.stateStoreCheckpointIdsNotSupported(
                    PROVIDER_NAME + " does not support checkpointFormatVersion > 1"));
        }
        if (useColumnFamilies) {
            throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(PROVIDER_NAME));
        }
        if (useMultipleValuesPerKey) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException("multipleValuesPerKey", PROVIDER_NAME));
        }
        if (keyStateEncoderSpec instanceof RangeKeyScanStateEncoderSpec) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException("Range scan", PROVIDER_NAME));
        }
        if (keyStateEncoderSpec instanceof TimestampAsPrefixKeyStateEncoderSpec
                || keyStateEncoderSpec instanceof TimestampAsPostfixKeyStateEncoderSpec) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException(
                    "Timestamp key scan (" + keyStateEncoderSpec.getClass().getSimpleName() + ")", PROVIDER_NAME));
        }
        this.numPrefixCols = keyStateEncoderSpec instanceof PrefixKeyScanStateEncoderSpec
                ? ((PrefixKeyScanStateEncoderSpec) keyStateEncoderSpec).numColsPrefixKey() : 0;
        this.stateStoreId = stateStoreId;
        this.keySchema = keySchema;
        this.valueSchema = valueSchema;
        this.storeConf = storeConfs;
        this.hadoopConf = hadoopConf;
        this.ttlConfs = ttlConfs(storeConfs);
        this.storeKey = stateStoreId.checkpointRootLocation() + "|" + stateStoreId.operatorId() + "|"
                + stateStoreId.partitionId() + "|" + stateStoreId.storeName();
        byte[] suffix = new byte[4];
        RANDOM.nextBytes(suffix);
        this.localDirName = stateStoreId.operatorId() + "_" + stateStoreId.partitionId() + "_"
                + sanitize(stateStoreId.storeName()) + "_" + HexFormat.of().formatHex(suffix);
        this.files = new CheckpointFiles(stateStoreId.storeCheckpointLocation(), hadoopConf);
        PythonService.get(ttlConfs);
        LOG.info("Initialised {} (key prefix columns: {})", this, numPrefixCols);
    }

    private static Map<String, String> ttlConfs(StateStoreConf conf) {
        Map<String, String> out = new TreeMap<>();
        scala.jdk.javaapi.CollectionConverters.asJava(conf.sqlConfs()).forEach((k, v) -> {
            if (k.startsWith(PythonService.CONF_PREFIX)) {
                out.put(k, v);
            }
        });
        return out;
    }

    private static String sanitize(String name) {
        return name.replaceAll("[^A-Za-z0-9._-]", "_");
    }

    @Override
    public StateStoreId stateStoreId() {
        return stateStoreId;
    }

    // ---- stores -------------------------------------------------------------------------

    private void checkGetStore(long version, Option<String> uniqueId) {
        if (version < 0) {
            throw SparkErrors.sneaky(QueryExecutionErrors.unexpectedStateStoreVersion(version));
        }
        if (uniqueId.isDefined()) {
            throw SparkErrors.sneaky(StateStoreErrors.stateStoreCheckpointIdsNotSupported(PROVIDER_NAME
                    + " does not support checkpointFormatVersion > 1 but a state store checkpointID is passed in"));
        }
    }

    @Override
    public StateStore getStore(long version, Option<String> uniqueId, boolean forceSnapshotOnCommit,
                               boolean loadEmpty) {
        checkGetStore(version, uniqueId);
        if (loadEmpty) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException(
                    "getStore", "Internal Error: " + PROVIDER_NAME + " doesn't support loadEmpty"));
        }
        StoreMetrics metrics = new StoreMetrics();
        RemoteTxn txn = prepare(version, false, batchTimestampMs(version), metrics);
        LOG.debug("Opened write store of version {} for {}", version, this);
        return new TtlWriteStore(this, version, txn, new KeyCodec(keySchema, numPrefixCols), metrics,
                valueSchema.length(), forceSnapshotOnCommit);
    }

    @Override
    public ReadStateStore getReadStore(long version, Option<String> uniqueId) {
        checkGetStore(version, uniqueId);
        StoreMetrics metrics = new StoreMetrics();
        RemoteTxn txn = prepare(version, true, batchTimestampMs(version), metrics);
        return new TtlReadStore(this, version, txn, new KeyCodec(keySchema, numPrefixCols), metrics,
                valueSchema.length());
    }

    /** The TTL clock of the batch that uses {@code version} (read outside the provider's monitor). */
    private long batchTimestampMs(long version) {
        if (stateStoreId == null) {
            throw new IllegalStateException(PROVIDER_NAME + " was not initialised");
        }
        return BatchClock.batchTimestampMs(stateStoreId.checkpointRootLocation(), version, hadoopConf);
    }

    /**
     * Connects and opens the store if needed, loads {@code version} unless it is loaded, and
     * BEGINs; {@code batchTimestampMs} goes with both.
     */
    private synchronized RemoteTxn prepare(long version, boolean readOnly, long batchTimestampMs,
                                           StoreMetrics metrics) {
        closed = false;
        for (int attempt = 0; ; attempt++) {
            try {
                ensureOpen(metrics);
                if (loadedVersion != version) {
                    load(version, batchTimestampMs, metrics);
                }
                RemoteTxn txn = RemoteTxn.begin(conn, storeHandle, version, readOnly, batchTimestampMs,
                        writeBatchBytes, iteratorChunkEntries, metrics);
                txn.onIteratorCreated = this::trackIterator;
                return txn;
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

    /** Makes sure there is a healthy connection with the store OPEN on it. */
    private void ensureOpen(StoreMetrics metrics) {
        if (conn != null && !conn.isBroken() && conn.service().isUsable()) {
            return;
        }
        dropConnection();
        PythonService service = PythonService.get(ttlConfs);
        int worker = Math.floorMod(storeKey.hashCode(), service.workers());
        WorkerConnection c = WorkerConnection.open(service, worker, RECONNECT_MILLIS);
        Path dir = service.dir().resolve("stores").resolve(localDirName);
        FrameWriter w = FrameWriter.request(Op.OPEN, 0)
                .str(String.format("op=%d,part=%d,name=%s", stateStoreId.operatorId(),
                        stateStoreId.partitionId(), stateStoreId.storeName()))
                .str(dir.toString())
                .i64(stateStoreId.operatorId())
                .str(stateStoreId.storeName())
                .u32(ttlConfs.size() + 1);
        ttlConfs.forEach((k, v) -> w.str(k).str(v));
        // the one Spark setting the service's conf rules need (TTL on join state, see conf.py)
        w.str(SKIP_NULLS_KEY).str(String.valueOf(storeConf.skipNullsForStreamStreamJoins()));
        FrameReader r;
        try {
            metrics.roundTrip();
            r = c.call(w);
        } catch (WorkerException e) {
            c.close();
            if ("TTLSTATE_INVALID_CONF".equals(e.errorClass())) {
                throw new InvalidConfException(e.workerMessage());
            }
            throw e;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
        Map<String, String> resolved = new TreeMap<>();
        long handle = RemoteTxn.checked(() -> {
            long h = r.u32();
            for (int i = 0, n = r.count(8); i < n; i++) {
                resolved.put(r.str(), r.str());
            }
            r.end();
            return h;
        });
        conn = c;
        storeHandle = handle;
        localDir = dir;
        loadedVersion = -1;
        writeBatchBytes = intSetting(resolved, "writeBatchBytes", writeBatchBytes);
        iteratorChunkEntries = intSetting(resolved, "iteratorChunkEntries", iteratorChunkEntries);
        LOG.info("Opened {} on {} (writeBatchBytes={}, iteratorChunkEntries={})",
                this, c, writeBatchBytes, iteratorChunkEntries);
    }

    private static int intSetting(Map<String, String> resolved, String name, int dflt) {
        String v = resolved.get(name);
        if (v == null) {
            v = resolved.get(PythonService.CONF_PREFIX + name);
        }
        if (v == null) {
            return dflt;
        }
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            LOG.warn("Ignoring malformed resolved setting {}={}", name, v);
            return dflt;
        }
    }

    private void dropConnection() {
        if (conn != null) {
            conn.close();
            conn = null;
        }
        loadedVersion = -1;
    }

    /** Rebuilds the worker's database at {@code version} from the checkpoint. */
    private void load(long version, long batchTimestampMs, StoreMetrics metrics) {
        long start = System.nanoTime();
        loadedVersion = -1;
        CheckpointFiles.LoadPlan plan;
        try {
            plan = files.plan(version);
        } catch (IOException e) {
            throw SparkErrors.sneaky(QueryExecutionErrors.cannotLoadStore(e));
        }
        Path downloads = localDir.resolve(DOWNLOAD_DIR);
        List<Path> local = new ArrayList<>();
        try {
            FrameWriter w = FrameWriter.request(Op.LOAD, storeHandle)
                    .i64(version).i64(batchTimestampMs).u32(plan.files.size());
            for (int i = 0; i < plan.files.size(); i++) {
                boolean snapshot = plan.isSnapshot.get(i);
                Path dst = downloads.resolve(plan.files.get(i).getPath().getName());
                metrics.downloadedBytes.addAndGet(files.download(plan.files.get(i).getPath(), dst));
                local.add(dst);
                w.u8(snapshot ? Op.FILE_SNAPSHOT : Op.FILE_CHANGELOG).i64(plan.fileVersions.get(i)).str(dst.toString());
            }
            metrics.roundTrip();
            FrameReader r = conn.call(w);
            long numKeys = RemoteTxn.checked(() -> {
                long n = r.i64();
                r.end();
                return n;
            });
            loadedVersion = version;
            lastSnapshotVersion = plan.snapshotVersion;
            long ms = (System.nanoTime() - start) / 1_000_000;
            metrics.loadMs.addAndGet(ms);
            LOG.info("Loaded version {} of {} ({} files, {} keys) in {} ms",
                    version, this, plan.files.size(), numKeys, ms);
        } catch (IOException e) {
            throw SparkErrors.sneaky(QueryExecutionErrors.cannotLoadStore(e));
        } catch (WorkerException e) {
            throw SparkErrors.sneaky(QueryExecutionErrors.cannotLoadStore(e));
        } finally {
            local.forEach(TtlStateStoreProvider::deleteQuietly);
        }
    }

    // ---- commit and snapshots -----------------------------------------------------------

    /**
     * Commits {@code store}'s transaction as {@code version + 1}: COMMIT to a local changelog,
     * upload it, drop a stale snapshot of that version, and snapshot it at once if
     * {@code forceSnapshot} or the worker wants it. On failure the local version is forgotten,
     * so the next getStore reloads from the checkpoint.
     */
    synchronized RemoteTxn.Committed commitStore(TtlWriteStore store, boolean forceSnapshot)
            throws IOException {
        long newVersion = store.version() + 1;
        Path changelog = tmpFile(newVersion + ".changelog");
        try {
            long t0 = System.nanoTime();
            RemoteTxn.Committed r = store.txn().commit(newVersion, changelog.toString());
            loadedVersion = -1; // until the upload succeeded
            long t1 = System.nanoTime();
            store.metrics.uploaded(files.upload(changelog, newVersion, CheckpointFiles.CHANGELOG));
            long t2 = System.nanoTime();
            files.deleteIfExists(newVersion, CheckpointFiles.SNAPSHOT);
            LOG.debug("Commit of version {} for {}: worker {} ms, upload {} ms, stale-snapshot check {} ms",
                    newVersion, this, (t1 - t0) / 1_000_000, (t2 - t1) / 1_000_000,
                    (System.nanoTime() - t2) / 1_000_000);
            if (lastSnapshotVersion >= newVersion) {
                lastSnapshotVersion = 0; // unknown now; the next snapshot maintenance decides
            }
            loadedVersion = newVersion;
            if (forceSnapshot || r.snapshotWanted) {
                long start = System.nanoTime();
                writeSnapshot(store.metrics);
                store.metrics.snapshotMs.addAndGet((System.nanoTime() - start) / 1_000_000);
            }
            return r;
        } catch (IOException | RuntimeException e) {
            loadedVersion = -1;
            throw e;
        } finally {
            deleteQuietly(changelog);
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
        RemoteTxn txn = RemoteTxn.begin(conn, storeHandle, version, true, batchTimestampMs,
                writeBatchBytes, iteratorChunkEntries, metrics);
        txn.onIteratorCreated = this::trackIterator;
        return txn;
    }

    /** Reports a committed version to the coordinator when commit validation is on. */
    void reportCommit(long newVersion) {
        if (storeConf.commitValidationEnabled()) {
            StateStore.reportCommitToCoordinator(newVersion, stateStoreId, hadoopConf);
        }
    }

    /** SNAPSHOTs the committed version and uploads it as {@code <v>.snapshot}. Caller holds the monitor. */
    private void writeSnapshot(StoreMetrics metrics) throws IOException {
        Path tmp = tmpFile("snapshot");
        try {
            if (metrics != null) {
                metrics.roundTrip();
            }
            FrameReader r = conn.call(FrameWriter.request(Op.SNAPSHOT, storeHandle).str(tmp.toString()));
            long[] s = RemoteTxn.checked(() -> {
                long[] out = {r.i64(), r.i64(), r.i64()};
                r.end();
                return out;
            });
            long size = files.upload(tmp, s[0], CheckpointFiles.SNAPSHOT);
            if (metrics != null) {
                metrics.uploaded(size);
            }
            lastSnapshotVersion = s[0];
            LOG.info("Uploaded snapshot of version {} ({} keys, {} bytes) for {}", s[0], s[2], size, this);
        } finally {
            deleteQuietly(tmp);
        }
    }

    private Path tmpFile(String name) throws IOException {
        Path dir = localDir.resolve(TMP_DIR);
        Files.createDirectories(dir);
        byte[] r = new byte[4];
        RANDOM.nextBytes(r);
        return dir.resolve(name + "." + HexFormat.of().formatHex(r) + ".tmp");
    }

    private static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            LOG.debug("cannot delete {}", p, e);
        }
    }

    // ---- maintenance --------------------------------------------------------------------

    @Override
    public void doMaintenance() {
        doSnapshotMaintenance();
        doCleanupMaintenance();
    }

    /** Snapshots the loaded version once {@code minDeltasForSnapshot} changelogs followed the last snapshot. */
    @Override
    public synchronized void doSnapshotMaintenance() {
        if (stateStoreId == null || conn == null || conn.isBroken() || loadedVersion <= 0) {
            return;
        }
        if (loadedVersion - lastSnapshotVersion < storeConf.minDeltasForSnapshot()) {
            return;
        }
        try {
            writeSnapshot(null);
        } catch (IOException e) {
            throw new UncheckedIOException("Snapshot maintenance of " + this + " failed", e);
        }
    }

    /**
     * MAINTAINs the loaded store on its worker (expired-entry compaction), then deletes
     * checkpoint files not needed to recover the last {@code minVersionsToRetain} versions.
     * MAINTAIN is here, not only in {@link #doMaintenance}, because Spark 4.3's periodic
     * maintenance calls the split methods; doMaintenance runs only with unloadOnCommit.
     */
    @Override
    public void doCleanupMaintenance() {
        if (stateStoreId == null) {
            return;
        }
        maintainStore();
        try {
            files.cleanup(storeConf.minVersionsToRetain());
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
        if (closed || conn == null || conn.isBroken() || loadedVersion < 0) {
            return;
        }
        try {
            FrameReader r = conn.call(FrameWriter.request(Op.MAINTAIN, storeHandle));
            RemoteTxn.checked(() -> {
                r.end();
                return null;
            });
        } catch (RuntimeException e) {
            LOG.warn("Store maintenance (MAINTAIN) of {} on its worker failed (ignored)", stateStoreId, e);
        }
    }

    /** CLOSEs the store on its worker (deleting its local files) and the connection; idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
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
            if (!conn.isBroken()) {
                try {
                    conn.call(FrameWriter.request(Op.CLOSE, storeHandle).bool(true));
                } catch (RuntimeException e) {
                    LOG.warn("Closing {} on its worker failed (ignored)", this, e);
                }
            }
            conn.close();
            conn = null;
        }
        loadedVersion = -1;
        LOG.info("Closed {}", this);
    }

    // ---- metrics ------------------------------------------------------------------------

    @Override
    public scala.collection.immutable.Seq<StateStoreCustomMetric> supportedCustomMetrics() {
        return StoreMetrics.supported();
    }

    /** The committed version the worker's database holds, or -1; for tests and logs. */
    public synchronized long loadedVersion() {
        return loadedVersion;
    }

    @Override
    public String toString() {
        StateStoreId id = stateStoreId;
        return id == null ? PROVIDER_NAME + "[uninitialised]"
                : String.format("%s[op=%d,part=%d,name=%s,dir=%s]", PROVIDER_NAME, id.operatorId(),
                        id.partitionId(), id.storeName(), id.storeCheckpointLocation());
    }
}
