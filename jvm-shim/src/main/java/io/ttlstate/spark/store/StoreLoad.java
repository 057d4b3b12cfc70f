package io.ttlstate.spark.store;

import java.io.IOException;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.InvalidConfException;
import io.ttlstate.spark.WorkerException;
import io.ttlstate.spark.cache.CachedVersionView;
import io.ttlstate.spark.checkpoint.MissingCheckpointFileException;
import io.ttlstate.spark.checkpoint.StoreCheckpoint;
import io.ttlstate.spark.compat.LineApi;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.PythonService;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Brings a {@link RemoteStore}'s worker to a version: OPEN on the worker the store is pinned to
 * (the settings it resolved, checked against this JVM's memory), LOAD of a version from the
 * checkpoint and the view's warm-up after it, and the changelogs of Spark's change feed; what
 * cannot be read becomes Spark's error. The store keeps what the worker then holds.
 */
final class StoreLoad {
    private static final Logger LOG = LoggerFactory.getLogger(RemoteStore.class); // logs as its store
    private static final long RECONNECT_MILLIS = 15_000;
    static final String SKIP_NULLS_KEY = "spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled";

    private final RemoteStore store;
    private final StateStoreId stateStoreId;
    private final StateStoreConf storeConf;
    /** Every {@code spark.sql.streaming.stateStore.ttlstate.*} conf of the query (full keys). */
    private final Map<String, String> ttlstateConfs;
    private final String localDirName;
    private final StoreCheckpoint checkpoint;

    StoreLoad(RemoteStore store, StateStoreId stateStoreId, StateStoreConf storeConf, Map<String, String> ttlstateConfs,
              String localDirName, StoreCheckpoint checkpoint) {
        this.store = store;
        this.stateStoreId = stateStoreId;
        this.storeConf = storeConf;
        this.ttlstateConfs = ttlstateConfs;
        this.localDirName = localDirName;
        this.checkpoint = checkpoint;
    }

    /** The store OPEN on a new connection to its worker: the connection, the store's handle and directory, its settings. */
    static final class Opened {
        final WorkerConnection conn;
        final long storeHandle;
        final Path dir;
        final StoreSettings settings;

        Opened(WorkerConnection conn, long storeHandle, Path dir, StoreSettings settings) {
            this.conn = conn;
            this.storeHandle = storeHandle;
            this.dir = dir;
            this.settings = settings;
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

    /**
     * Connects to the store's worker and OPENs the store in a fresh local directory; the
     * connection is closed again if the worker refuses the store's settings or this JVM
     * cannot hold its value cache.
     */
    Opened open(StoreMetrics metrics) {
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
        return new Opened(c, handle, dir, resolvedSettings);
    }

    /**
     * Rebuilds the worker's database at {@code version} (checkpoint id {@code id}, null: any)
     * from the checkpoint; from the snapshot of {@code fromSnapshot} if it is not negative.
     */
    StoreCheckpoint.Loaded load(WorkerConnection conn, long storeHandle, long version, String id, long batchTimestampMs,
                                StoreMetrics metrics, long fromSnapshot) {
        try {
            return fromSnapshot >= 0
                    ? checkpoint.loadFromSnapshot(conn, storeHandle, fromSnapshot, version, id, batchTimestampMs, metrics)
                    : checkpoint.load(conn, storeHandle, version, id, batchTimestampMs, metrics);
        } catch (MissingCheckpointFileException e) {
            throw SparkErrors.sneaky(LineApi.missingStateFile(e.path(), e));
        } catch (IOException | WorkerException e) {
            throw SparkErrors.sneaky(LineApi.cannotLoadStore(e));
        }
    }

    /** Reads the loaded {@code version} ({@code numKeys} keys) into {@code view}'s key filter and value cache. */
    void warmUp(WorkerConnection conn, long storeHandle, long version, long batchTimestampMs, long numKeys,
                StoreSettings settings, CachedVersionView view, StoreMetrics metrics) {
        long start = System.nanoTime();
        long n = CacheWarmUp.fill(conn, storeHandle, version, batchTimestampMs, numKeys, settings, view, metrics);
        LOG.info("Read {} entries of version {} of {} into its key filter and value cache in {} ms", n, version,
                store, StoreMetrics.millisSince(start));
    }

    /** The changelogs of versions {@code from} to {@code (to, toId)}, copied into the local cache (Spark's change feed). */
    List<StoreCheckpoint.LocalChangelog> changelogs(WorkerConnection conn, long from, long to, String toId,
                                                    StoreMetrics metrics) {
        try {
            return checkpoint.changelogs(conn, from, to, toId, metrics);
        } catch (MissingCheckpointFileException e) {
            throw SparkErrors.sneaky(LineApi.missingStateFile(e.path(), e));
        } catch (IOException e) {
            throw SparkErrors.sneaky(LineApi.cannotLoadStore(e));
        }
    }
}
