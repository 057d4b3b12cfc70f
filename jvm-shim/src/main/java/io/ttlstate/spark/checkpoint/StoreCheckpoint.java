package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.WorkerException;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One store's checkpoint traffic between the worker, the local cache and the checkpoint
 * location: loads ({@link CheckpointLoader}: plan, files fetched through the
 * {@link LocalFileCache} on the {@link TransferPool}, LOAD), changelog uploads and incremental
 * snapshots ({@link CheckpointWriter}: new SSTs, then the manifest) and retention, here
 * (docs/decisions/018-sst-snapshots.md to docs/decisions/025-transfer-pool.md). What they share,
 * the uploaded set among it, is its {@link StoreFiles}.
 *
 * <p>Loads, commits and snapshots run under the monitor of the store's {@code RemoteStore};
 * {@link #cleanup} may run at the same time on a maintenance thread and touches only
 * thread-safe state.
 */
public final class StoreCheckpoint {
    private static final Logger LOG = LoggerFactory.getLogger(StoreCheckpoint.class);

    private final CheckpointFiles files;
    private final StateStoreId storeId;
    private final StoreFiles store;
    private final CheckpointLoader loader;
    private final CheckpointWriter writer;
    /** {@code checkpoint.localCacheMaxAge} (0: keep every store directory). */
    private volatile long cacheMaxAgeMillis;

    private StoreCheckpoint(CheckpointFiles files, StateStoreId storeId, boolean v2) {
        this.files = files;
        this.storeId = storeId;
        this.store = new StoreFiles(files, v2);
        this.loader = new CheckpointLoader(store);
        this.writer = new CheckpointWriter(store);
    }

    /** The checkpoint of store {@code storeId}; {@code v2}: checkpoint format v2. */
    public static StoreCheckpoint of(StateStoreId storeId, Configuration hadoopConf, boolean v2) {
        String store = String.format("store op=%d,part=%d,name=%s", storeId.operatorId(),
                storeId.partitionId(), storeId.storeName());
        return new StoreCheckpoint(new CheckpointFiles(storeId.storeCheckpointLocation(), hadoopConf, store),
                storeId, v2);
    }

    /**
     * Uses the local cache under {@code localCacheDir} (the store's resolved setting; null:
     * {@link LocalFileCache#defaultRoot}), marking the store's directory used; cleanups sweep
     * the root of directories unused for {@code maxAgeMillis} (0: never).
     */
    public void useCacheDir(String localCacheDir, long maxAgeMillis) throws IOException {
        java.nio.file.Path cacheRoot = localCacheDir == null ? LocalFileCache.defaultRoot()
                : java.nio.file.Path.of(localCacheDir);
        LocalFileCache c = store.cache;
        LocalFileCache wanted = LocalFileCache.forStore(cacheRoot, storeId, files.qualifiedLocation());
        if (c == null || !c.dir().equals(wanted.dir())) {
            store.cache = c = wanted;
            LOG.debug("Local checkpoint cache of {}: {}", files.store(), wanted);
        }
        cacheMaxAgeMillis = maxAgeMillis;
        c.markUsed();
    }

    /** The local cache's directory, for logs. */
    public String localCacheDir() {
        return String.valueOf(store.cache);
    }

    // ---- load ---------------------------------------------------------------------------

    /** What a load did. */
    public static final class Loaded {
        private final LoadPlan plan;
        /** The loaded version's number of keys. */
        public final long numKeys;

        Loaded(LoadPlan plan, long numKeys) {
            this.plan = plan;
            this.numKeys = numKeys;
        }

        /** The loaded version's checkpoint id (format v2; null in v1 and for version 0). */
        public String id() {
            return plan.id;
        }

        /** The version of the manifest the load started from (0: the empty version 0). */
        public long manifestVersion() {
            return plan.manifestVersion();
        }

        /** Bytes of the changelogs the load replayed after its manifest. */
        public long changelogBytes() {
            return plan.changelogs.stream().mapToLong(f -> f.status.getLen()).sum();
        }
    }

    /** Rebuilds the worker's database at {@code (version, id)} ({@link CheckpointLoader#load}). */
    public Loaded load(WorkerConnection conn, long storeHandle, long version, String id, long batchTimestampMs,
                       StoreMetrics metrics) throws IOException {
        return loader.load(conn, storeHandle, version, id, batchTimestampMs, metrics);
    }

    /**
     * As {@link #load}, from the manifest of {@code snapshotVersion} whatever newer manifests
     * there are ({@link CheckpointLoader#loadFromSnapshot}).
     */
    public Loaded loadFromSnapshot(WorkerConnection conn, long storeHandle, long snapshotVersion, long version,
                                   String id, long batchTimestampMs, StoreMetrics metrics) throws IOException {
        return loader.loadFromSnapshot(conn, storeHandle, snapshotVersion, version, id, batchTimestampMs, metrics);
    }

    /** A changelog file the JVM holds locally (in the local cache). */
    public static final class LocalChangelog {
        public final long version;
        public final java.nio.file.Path path;

        LocalChangelog(long version, java.nio.file.Path path) {
            this.version = version;
            this.path = path;
        }
    }

    /**
     * The changelogs of versions {@code from} to {@code (to, id)}, local, oldest first (Spark's
     * change feed; {@link CheckpointLoader#changelogs}).
     */
    public List<LocalChangelog> changelogs(WorkerConnection conn, long from, long to, String id, StoreMetrics metrics)
            throws IOException {
        return loader.changelogs(conn, from, to, id, metrics);
    }

    /** READ_CHANGELOG: records {@code fromRecord} on of the local changelog {@code c}. */
    public static ChangelogChunk readChangelog(WorkerConnection conn, LocalChangelog c, long fromRecord,
                                               int maxRecords) {
        return CheckpointRequests.readChangelog(conn, c.path, c.version, fromRecord, maxRecords);
    }

    // ---- commit -------------------------------------------------------------------------

    /** Uploads the changelog of {@code version} as {@code name} ({@link CheckpointWriter#uploadChangelog}). */
    public void uploadChangelog(java.nio.file.Path local, String name, long version, boolean v2, StoreMetrics metrics,
                                List<Path> written) throws IOException {
        writer.uploadChangelog(local, name, version, v2, metrics, written);
    }

    /**
     * Format v1 in snapshot mode: deletes a changelog of {@code version} that an earlier attempt
     * left ({@link CheckpointWriter#deleteEarlierChangelog}).
     */
    public void deleteEarlierChangelog(long version) throws IOException {
        writer.deleteEarlierChangelog(version);
    }

    /**
     * Takes an incremental snapshot of the worker's committed version {@code version}
     * ({@link CheckpointWriter#snapshot}).
     */
    public void snapshot(WorkerConnection conn, long storeHandle, long version, String id, java.nio.file.Path dir,
                         StoreMetrics metrics, List<Path> written) throws IOException {
        writer.snapshot(conn, storeHandle, version, id, dir, metrics, written);
    }

    /** Deletes the checkpoint files a failed commit or snapshot started writing. */
    public void discard(List<Path> written) {
        writer.discard(written);
    }

    // ---- retention ----------------------------------------------------------------------

    /**
     * Deletes what recovering the last {@code minVersionsToRetain} versions does not need (a
     * worker's retention plan, {@link Retention}, within Spark's {@code minVersionsToDelete} and
     * {@code maxVersionsToDelete} per pass), then prunes the local cache. Without a worker
     * connection ({@code conn} null), or when the worker fails to plan (logged), nothing is
     * deleted this pass. SSTs are only deleted when the SSTs of every retained manifest are
     * known (read before or now); returns the files deleted.
     */
    public int cleanup(int minVersionsToRetain, long minVersionsToDelete, int maxVersionsToDelete,
                       WorkerConnection conn) throws IOException {
        long failedWrites = files.failedWrites();
        LocalFileCache c = store.cache;
        boolean mustList;
        try {
            mustList = conn != null && store.listingGate.mustList(l -> CheckpointPlans.retention(conn, l, store.v2,
                    minVersionsToRetain, minVersionsToDelete, -1), failedWrites);
        } catch (RuntimeException e) {
            mustList = false;
            unplanned(e);
        }
        if (!mustList) {
            // no listing (on an object store billed requests): nothing can be stale yet
            // (docs/decisions/105-object-store-puts-and-listings.md), or no worker to plan
            if (c != null) {
                c.markUsed();
                c.sweepUnused(cacheMaxAgeMillis);
            }
            if (conn == null) {
                LOG.debug("Cleanup of {} deletes nothing: no worker to plan it", files.store());
            }
            return 0;
        }
        store.listingGate.listing();
        try {
            return listAndDelete(minVersionsToRetain, minVersionsToDelete, maxVersionsToDelete, conn, failedWrites);
        } finally {
            store.listingGate.listingEnded();
        }
    }

    /**
     * The listing part of {@link #cleanup}: lists, plans, deletes and tells the gate what is
     * left (nothing when the worker fails to plan); returns the files deleted.
     */
    private int listAndDelete(int minVersionsToRetain, long minVersionsToDelete, int maxVersionsToDelete,
                              WorkerConnection conn, long failedWrites) throws IOException {
        LocalFileCache c = store.cache;
        long listedAt = System.currentTimeMillis();
        CheckpointFiles.Listing listing = files.list();
        CheckpointFiles.SstListing sstListing = files.listSsts();
        Retention r;
        try {
            r = CheckpointPlans.retention(conn, listing, store.v2, minVersionsToRetain, minVersionsToDelete,
                    maxVersionsToDelete);
        } catch (RuntimeException e) {
            unplanned(e);
            return 0;
        }
        Set<String> referenced = referencedSsts(conn, r.retainedManifests);
        List<FileStatus> delete = new ArrayList<>(r.deletable);
        delete.addAll(r.deletableTemps(listing.temps));
        delete.addAll(r.deletableTemps(sstListing.temps));
        if (referenced != null) {
            delete.addAll(r.deletableSsts(sstListing, referenced));
        }
        Set<Path> deleted = new HashSet<>();
        for (FileStatus st : delete) {
            files.delete(st.getPath());
            deleted.add(st.getPath());
        }
        Set<String> retainedKeys = r.retainedManifests.stream().map(m -> LocalFileCache.key(m.status))
                .collect(Collectors.toSet());
        store.manifestSsts.keySet().retainAll(retainedKeys);
        CheckpointFiles.Listing remaining = listing.without(deleted);
        int pruned = 0;
        if (c != null) {
            Set<String> liveKeys = remaining.files.stream().map(LocalFileCache::key).collect(Collectors.toSet());
            Set<String> liveSsts = sstListing.ssts.values().stream().filter(st -> !deleted.contains(st.getPath()))
                    .map(st -> st.getPath().getName()).collect(Collectors.toSet());
            pruned = c.prune(liveKeys, liveSsts, listedAt);
            c.markUsed();
            c.sweepUnused(cacheMaxAgeMillis);
        }
        // complete: every stale file found was deleted (an SST whose manifest could not be read
        // is not known to be stale, so that pass is not)
        store.listingGate.listed(remaining, r.complete && (referenced != null || r.retainedManifests.isEmpty()),
                failedWrites);
        if (!deleted.isEmpty() || pruned > 0) {
            String ssts = referenced != null ? "" : " (no SSTs)";
            LOG.info("Cleanup of {} (keeping versions from {}): deleted {} checkpoint files{}, {} local cache entries",
                    files.store(), r.keepFrom, deleted.size(), ssts, pruned);
        }
        return deleted.size();
    }

    /**
     * A worker failed to plan a cleanup pass (a stopped or restarting service, a timeout): the
     * pass deletes nothing, as one that could not read a manifest deletes no SST; the next
     * pass plans again (the gate keeps what it knew).
     */
    private void unplanned(RuntimeException e) {
        LOG.warn("Cleanup of {} deletes nothing this pass: the worker could not plan it ({})", files.store(),
                e.toString());
    }

    /**
     * The SSTs the retained manifests reference, or null if one of them cannot be read (logged).
     */
    private Set<String> referencedSsts(WorkerConnection conn, List<StateFile> manifests) {
        LocalFileCache c = store.cache;
        if (c == null) {
            return null;
        }
        Set<String> out = new HashSet<>();
        for (StateFile m : manifests) {
            List<CheckpointRequests.Sst> known = store.manifestSsts.get(LocalFileCache.key(m.status));
            if (known != null) {
                known.forEach(s -> out.add(s.name));
                continue;
            }
            LocalFileCache.Entry local = null;
            try {
                local = c.stateFile(m.status, l -> files.download(m.status.getPath(), m.status.getLen(), l));
                store.ssts(conn, m, local.path).forEach(s -> out.add(s.name));
            } catch (IOException | RuntimeException e) {
                if (local != null && e instanceof WorkerException
                        && ErrorClasses.CORRUPT_FILE.equals(((WorkerException) e).errorClass())) {
                    c.evict(local.path);
                }
                LOG.warn("Cleanup of {} deletes no SST: cannot read manifest {}", files.store(), m.status.getPath(), e);
                return null;
            }
        }
        return out;
    }
}
