package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.WorkerException;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.service.LocalFiles;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One store's checkpoint traffic between the worker, the local cache and the checkpoint
 * location: loads (plan, files fetched through the {@link LocalFileCache} on the
 * {@link TransferPool}, LOAD), changelog uploads, incremental snapshots (new SSTs, then the
 * manifest) and retention (docs/decisions/018-sst-snapshots.md to
 * docs/decisions/025-transfer-pool.md). It keeps the uploaded set: the SSTs of the last
 * manifest this store loaded or wrote, which the checkpoint is known to hold.
 *
 * <p>Loads, commits and snapshots run under the monitor of the store's {@code RemoteStore};
 * {@link #cleanup} may run at the same time on a maintenance thread and touches only
 * thread-safe state.
 */
public final class StoreCheckpoint {
    private static final Logger LOG = LoggerFactory.getLogger(StoreCheckpoint.class);

    private final CheckpointFiles files;
    private final StateStoreId storeId;
    private final boolean v2;
    /** The SSTs each manifest references, by {@link LocalFileCache#key}, so each is asked for once. */
    private final Map<String, List<CheckpointRequests.Sst>> manifestSsts = new ConcurrentHashMap<>();
    private volatile LocalFileCache cache;
    /** Whether a cleanup has to list (docs/decisions/105-object-store-puts-and-listings.md). */
    private final ListingGate listingGate;
    /**
     * The format v1 manifests and changelogs of versions above the loaded one that the load's
     * listing found: an earlier attempt's, which a commit of their version deletes
     * (docs/decisions/105-object-store-puts-and-listings.md).
     */
    private volatile Set<String> earlierAttempts = ConcurrentHashMap.newKeySet();
    /** {@code checkpoint.localCacheMaxAge} (0: keep every store directory). */
    private volatile long cacheMaxAgeMillis;
    /** Guarded by the {@code RemoteStore}'s monitor. */
    private Set<String> uploadedSsts = Set.of();

    private StoreCheckpoint(CheckpointFiles files, StateStoreId storeId, boolean v2) {
        this.files = files;
        this.storeId = storeId;
        this.v2 = v2;
        this.listingGate = new ListingGate(files.dir(), v2);
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
        LocalFileCache c = cache;
        LocalFileCache wanted = LocalFileCache.forStore(cacheRoot, storeId, files.qualifiedLocation());
        if (c == null || !c.dir().equals(wanted.dir())) {
            cache = c = wanted;
            LOG.debug("Local checkpoint cache of {}: {}", files.store(), wanted);
        }
        cacheMaxAgeMillis = maxAgeMillis;
        c.markUsed();
    }

    /** The local cache's directory, for logs. */
    public String localCacheDir() {
        return String.valueOf(cache);
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
            return plan.changelogs.stream().mapToLong(f -> f.status == null ? 0 : f.status.getLen()).sum();
        }
    }

    /**
     * Rebuilds the worker's database at {@code (version, id)}: plans it, fetches the manifest,
     * asks which SSTs it needs, fetches those and the changelogs in parallel, and LOADs. If the
     * worker finds a file damaged while cached copies were used, they are dropped and the load
     * runs once more with fresh downloads.
     */
    public Loaded load(WorkerConnection conn, long storeHandle, long version, String id, long batchTimestampMs,
                       StoreMetrics metrics) throws IOException {
        long start = System.nanoTime();
        Planned<LoadPlan> p = planned(l -> LoadPlan.of(l, files.dir(), version, id, v2 || id != null));
        earlierAttempts = laterV1Files(p.listing, version);
        return load(conn, storeHandle, p.plan, batchTimestampMs, metrics, start);
    }

    /**
     * As {@link #load}, from the manifest of {@code snapshotVersion} whatever newer manifests
     * there are (Spark's {@code snapshotStartBatchId}); fails naming the version if it has none.
     * A checkpoint id means format v2 whatever the reader's conf says (Spark's state reader
     * passes the ids of the commit log but not the query's format version).
     */
    public Loaded loadFromSnapshot(WorkerConnection conn, long storeHandle, long snapshotVersion, long version,
                                   String id, long batchTimestampMs, StoreMetrics metrics) throws IOException {
        long start = System.nanoTime();
        Planned<LoadPlan> p = planned(l -> {
            NoChangelogException.check(l, snapshotVersion + 1, version, "replay version " + version + " of "
                    + files.store() + " from the snapshot of version " + snapshotVersion);
            return LoadPlan.fromSnapshot(l, files.dir(), snapshotVersion, version, id, v2 || id != null);
        });
        earlierAttempts = laterV1Files(p.listing, version);
        return load(conn, storeHandle, p.plan, batchTimestampMs, metrics, start);
    }

    /** A plan made from a listing of the store's directory, and that listing. */
    private static final class Planned<T> {
        final CheckpointFiles.Listing listing;
        final T plan;

        Planned(CheckpointFiles.Listing listing, T plan) {
            this.listing = listing;
            this.plan = plan;
        }
    }

    /** Makes a plan from a listing; fails with {@link MissingCheckpointFileException} if a file it needs is not listed. */
    @FunctionalInterface
    private interface Planner<T> {
        T plan(CheckpointFiles.Listing listing) throws MissingCheckpointFileException;
    }

    /** Pauses before listing again a directory whose listing lacked a file a plan needs. */
    static final long[] LISTING_LAG_PAUSES_MS = {500, 1_000, 2_000};

    /**
     * {@code planner}'s plan from a listing of the store's directory. Outside the local file
     * system a listing that lacks a file the plan needs is taken again after a pause, up to
     * {@link #LISTING_LAG_PAUSES_MS} times: an object store's listing can lag a write that
     * another host made (docs/decisions/105-object-store-puts-and-listings.md). A file still
     * missing then fails the plan, naming it.
     */
    private <T> Planned<T> planned(Planner<T> planner) throws IOException {
        CheckpointFiles.Listing listing = files.list();
        for (int attempt = 0; ; attempt++) {
            try {
                return new Planned<>(listing, planner.plan(listing));
            } catch (MissingCheckpointFileException e) {
                if (attempt >= LISTING_LAG_PAUSES_MS.length || files.isLocal()) {
                    throw e;
                }
                long pause = LISTING_LAG_PAUSES_MS[attempt];
                LOG.warn("The listing of {} lacks {}: listing it again in {} ms (a listing can lag a write)",
                        files.dir(), e.path(), pause);
                try {
                    Thread.sleep(pause);
                } catch (InterruptedException ie) {
                    Thread.currentThread().interrupt();
                    throw new java.io.InterruptedIOException("interrupted while waiting to list " + files.dir());
                }
                listing = files.list();
            }
        }
    }

    /** The format v1 files of versions above {@code version} (an earlier run's attempts at them). */
    private static Set<String> laterV1Files(CheckpointFiles.Listing listing, long version) {
        Set<String> out = ConcurrentHashMap.newKeySet();
        for (StateFileName f : listing.files) {
            if (f.id == null && f.version > version) {
                out.add(f.fileName());
            }
        }
        return out;
    }

    private Loaded load(WorkerConnection conn, long storeHandle, LoadPlan plan, long batchTimestampMs,
                        StoreMetrics metrics, long start) throws IOException {
        long version = plan.version;
        for (int attempt = 0; ; attempt++) {
            List<LocalFileCache.Entry> used = new ArrayList<>();
            Map<java.nio.file.Path, org.apache.hadoop.fs.Path> remotes = new HashMap<>();
            try {
                long numKeys = loadOnce(conn, storeHandle, plan, batchTimestampMs, metrics, used, remotes);
                long ms = StoreMetrics.millisSince(start);
                metrics.loadMs.addAndGet(ms);
                metrics.checkpointLoads.incrementAndGet();
                long hits = used.stream().filter(e -> e.hit).count();
                metrics.reusedFiles.addAndGet(hits);
                LOG.info("Loaded version {}{} of {} from {} ({} SSTs): {} files, {} from the local cache, "
                                + "{} bytes downloaded, {} keys, {} ms", version, plan.id == null ? "" : " (" + plan.id + ")",
                        files.store(), plan, uploadedSsts.size(), used.size(), hits,
                        used.stream().mapToLong(e -> e.downloadedBytes).sum(), numKeys, ms);
                return new Loaded(plan, numKeys);
            } catch (WorkerException e) {
                List<LocalFileCache.Entry> hits = used.stream().filter(x -> x.hit).collect(Collectors.toList());
                if (attempt > 0 || !ErrorClasses.CORRUPT_FILE.equals(e.errorClass()) || hits.isEmpty()) {
                    throw namingCheckpointFile(e, remotes);
                }
                LOG.warn("Loading version {} of {} found a damaged file ({}); dropping {} cached files "
                        + "and downloading them again", version, files.store(), e.getMessage(), hits.size());
                hits.forEach(h -> cache.evict(h.path));
            }
        }
    }

    /**
     * {@code e} with each local copy it names replaced by the checkpoint file it is a copy of
     * (the copy's path kept in parentheses): the worker reads the local cache, the user looks
     * for the checkpoint's file.
     */
    static WorkerException namingCheckpointFile(WorkerException e, Map<java.nio.file.Path, org.apache.hadoop.fs.Path> remotes) {
        String message = e.workerMessage();
        for (Map.Entry<java.nio.file.Path, org.apache.hadoop.fs.Path> r : remotes.entrySet()) {
            String local = r.getKey().toString();
            if (message.contains(local)) {
                message = message.replace(local, r.getValue() + " (local copy " + local + ")");
            }
        }
        if (message.equals(e.workerMessage())) {
            return e;
        }
        WorkerException named = new WorkerException(e.errorClass(), message);
        named.initCause(e);
        return named;
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
     * The changelogs of versions {@code from} to {@code (to, id)} (id null: any; format v2
     * their lineage), fetched through the local cache, oldest first (Spark's change feed).
     * A version that has a manifest and no changelog was written in snapshot mode:
     * {@link NoChangelogException}.
     */
    public List<LocalChangelog> changelogs(long from, long to, String id, StoreMetrics metrics) throws IOException {
        LoadPlan.Changelogs range = planned(l -> {
            NoChangelogException.check(l, from, to, "read the change feed of " + files.store());
            return LoadPlan.changelogs(l, files.dir(), from, to, id, v2 || id != null);
        }).plan;
        LocalFileCache c = requireCache();
        List<TransferPool.Transfer<LocalFileCache.Entry>> transfers = new ArrayList<>();
        for (StateFileName f : range.files) {
            transfers.add(() -> fetch(c, f.status, metrics));
        }
        List<LocalFileCache.Entry> got = TransferPool.runAll(transfers);
        List<LocalChangelog> out = new ArrayList<>(got.size());
        for (int i = 0; i < got.size(); i++) {
            out.add(new LocalChangelog(range.files.get(i).version, got.get(i).path));
        }
        return out;
    }

    /** READ_CHANGELOG: records {@code fromRecord} on of the local changelog {@code c}. */
    public static ChangelogChunk readChangelog(WorkerConnection conn, LocalChangelog c, long fromRecord,
                                               int maxRecords) {
        return CheckpointRequests.readChangelog(conn, c.path, c.version, fromRecord, maxRecords);
    }

    private long loadOnce(WorkerConnection conn, long storeHandle, LoadPlan plan, long batchTimestampMs,
                          StoreMetrics metrics, List<LocalFileCache.Entry> used,
                          Map<java.nio.file.Path, org.apache.hadoop.fs.Path> remotes) throws IOException {
        LocalFileCache c = requireCache();
        java.nio.file.Path manifest = null;
        List<CheckpointRequests.Sst> ssts = List.of();
        if (plan.manifest != null) {
            LocalFileCache.Entry m = fetch(c, plan.manifest.status, metrics);
            used.add(m);
            remotes.put(m.path, plan.manifest.status.getPath());
            manifest = m.path;
            ssts = ssts(conn, plan.manifest, m.path);
        }
        List<TransferPool.Transfer<LocalFileCache.Entry>> transfers = new ArrayList<>();
        for (CheckpointRequests.Sst sst : ssts) {
            transfers.add(() -> {
                try {
                    return counted(metrics, c.sst(sst.name, sst.size,
                            local -> files.download(files.sstPath(sst.name), sst.size, local)));
                } catch (IOException e) {
                    throw neededBy(e, plan);
                }
            });
        }
        for (StateFileName f : plan.changelogs) {
            transfers.add(() -> fetch(c, f.status, metrics));
        }
        List<LocalFileCache.Entry> got = TransferPool.runAll(transfers);
        used.addAll(got);
        Map<String, java.nio.file.Path> sstPaths = new LinkedHashMap<>();
        for (int i = 0; i < ssts.size(); i++) {
            sstPaths.put(ssts.get(i).name, got.get(i).path);
            remotes.put(got.get(i).path, files.sstPath(ssts.get(i).name));
        }
        Map<Long, java.nio.file.Path> changelogPaths = new LinkedHashMap<>();
        for (int i = 0; i < plan.changelogs.size(); i++) {
            changelogPaths.put(plan.changelogs.get(i).version, got.get(ssts.size() + i).path);
            remotes.put(got.get(ssts.size() + i).path, plan.changelogs.get(i).status.getPath());
        }
        metrics.roundTrip();
        long numKeys = CheckpointRequests.load(conn, storeHandle, plan.version, batchTimestampMs, plan.manifestVersion(),
                manifest, sstPaths, changelogPaths);
        uploadedSsts = names(ssts);
        return numKeys;
    }

    /** {@code e} (an SST download failure) with the versions that need the SST in its message. */
    private static IOException neededBy(IOException e, LoadPlan plan) {
        String why = String.format("%s (an SST listed by the manifest of version %d, needed to load version %d)",
                e.getMessage(), plan.manifestVersion(), plan.version);
        if (e instanceof MissingCheckpointFileException) {
            MissingCheckpointFileException m = new MissingCheckpointFileException(
                    ((MissingCheckpointFileException) e).path, why);
            m.initCause(e);
            return m;
        }
        return new IOException(why, e);
    }

    private LocalFileCache.Entry fetch(LocalFileCache c, FileStatus remote, StoreMetrics metrics) throws IOException {
        return counted(metrics, c.stateFile(remote, local -> files.download(remote.getPath(), remote.getLen(), local)));
    }

    private static LocalFileCache.Entry counted(StoreMetrics metrics, LocalFileCache.Entry e) {
        metrics.downloadedBytes.addAndGet(e.downloadedBytes);
        return e;
    }

    /** The SSTs {@code manifest} references (MANIFEST_FILES on its local copy, asked once per file). */
    private List<CheckpointRequests.Sst> ssts(WorkerConnection conn, StateFileName manifest, java.nio.file.Path local) {
        String key = LocalFileCache.key(manifest.status);
        List<CheckpointRequests.Sst> ssts = manifestSsts.get(key);
        if (ssts == null) {
            ssts = CheckpointRequests.manifestFiles(conn, local, manifest.version);
            manifestSsts.put(key, ssts);
        }
        return ssts;
    }

    private LocalFileCache requireCache() {
        LocalFileCache c = cache;
        if (c == null) {
            throw new IllegalStateException("the local checkpoint cache of " + files.store() + " is not configured");
        }
        return c;
    }

    private static Set<String> names(List<? extends CheckpointRequests.Sst> ssts) {
        return ssts.stream().map(s -> s.name).collect(Collectors.toUnmodifiableSet());
    }

    // ---- commit -------------------------------------------------------------------------

    /**
     * Uploads the changelog of {@code version} (format v2: named by {@code id} and
     * {@code baseId}); in format v1 then deletes a manifest an earlier attempt at this version
     * left, so no load mixes two attempts. A format v2 path, this attempt's own, is added to
     * {@code written} before the upload starts ({@link #ownPath}).
     */
    public void uploadChangelog(java.nio.file.Path local, long version, String id, String baseId, StoreMetrics metrics,
                                List<Path> written) throws IOException {
        Path target = files.stateFilePath(StateFileName.name(version, StateFileName.Kind.CHANGELOG, id, baseId));
        ownPath(target, id, written);
        FileStatus st = files.upload(local, target, version);
        listingGate.uploaded(st);
        metrics.uploaded(st.getLen());
        requireCache().addStateFile(local, st);
        if (id == null) {
            deleteEarlierAttempt(version, StateFileName.Kind.MANIFEST);
        }
    }

    /**
     * Format v1 in snapshot mode: deletes a changelog of {@code version} that an earlier
     * attempt, in changelog mode, left, before this attempt's manifest, so no replay from an
     * older snapshot mixes two attempts (the counterpart of {@link #uploadChangelog}'s). Such
     * an attempt was never committed: Spark re-runs only a batch it did not commit.
     */
    public void deleteEarlierChangelog(long version) throws IOException {
        deleteEarlierAttempt(version, StateFileName.Kind.CHANGELOG);
    }

    private void deleteEarlierAttempt(long version, StateFileName.Kind kind) throws IOException {
        String name = StateFileName.name(version, kind, null, null);
        if (!earlierAttempts.remove(name)) {
            return; // the load's listing had no such file (on an object store a delete probes: a HEAD and a LIST)
        }
        Path stale = files.stateFilePath(name);
        try {
            files.delete(stale);
        } catch (IOException e) {
            throw new CheckpointWriteException(stale, version, files.store(), "cannot delete the "
                    + kind.name().toLowerCase(java.util.Locale.ROOT) + " of an earlier attempt at this version: " + e, e);
        }
    }

    /**
     * Adds {@code target} to what a failed commit deletes ({@link #discard}) when it is this
     * attempt's own: a format v2 path, named by the attempt's id. A format v1 path is shared
     * by every attempt at the version and stays, as the files of Spark's HDFS-backed provider
     * do (a re-run overwrites it): a failed speculative or zombie attempt deleted the file of
     * the attempt Spark committed, and a later load of that version failed.
     */
    private static void ownPath(Path target, String id, List<Path> written) {
        if (id != null) {
            written.add(target);
        }
    }

    /**
     * Takes an incremental snapshot of the worker's committed version {@code version} (format
     * v2 id {@code id}) in {@code dir}: uploads, in parallel, the SSTs the uploaded set does not
     * hold, then the manifest; the uploaded set becomes the manifest's SSTs. A format v2
     * manifest's path is added to {@code written} before it is written ({@link #ownPath});
     * {@code dir} is deleted.
     */
    public void snapshot(WorkerConnection conn, long storeHandle, long version, String id, java.nio.file.Path dir,
                         StoreMetrics metrics, List<Path> written) throws IOException {
        long start = System.nanoTime();
        LocalFileCache c = requireCache();
        try {
            metrics.roundTrip();
            CheckpointRequests.Snapshot s = CheckpointRequests.snapshot(conn, storeHandle, dir);
            if (s.version != version) {
                throw new IOException("the worker snapshotted version " + s.version + " of " + files.store()
                        + ", expected " + version);
            }
            Set<String> held = uploadedSsts;
            List<TransferPool.Transfer<FileStatus>> uploads = new ArrayList<>();
            for (CheckpointRequests.LocalSst sst : s.ssts) {
                if (!held.contains(sst.name)) {
                    uploads.add(() -> files.upload(sst.path, files.sstPath(sst.name), version));
                }
            }
            long bytes = 0;
            for (FileStatus st : TransferPool.runAll(uploads)) {
                metrics.uploaded(st.getLen());
                bytes += st.getLen();
            }
            Path target = files.stateFilePath(StateFileName.name(version, StateFileName.Kind.MANIFEST, id, null));
            ownPath(target, id, written);
            FileStatus manifest = files.upload(s.manifest, target, version);
            listingGate.uploaded(manifest);
            metrics.uploaded(manifest.getLen());
            uploadedSsts = names(s.ssts);
            manifestSsts.put(LocalFileCache.key(manifest),
                    s.ssts.stream().map(x -> new CheckpointRequests.Sst(x.name, x.size)).collect(Collectors.toList()));
            int reused = s.ssts.size() - uploads.size();
            metrics.reusedFiles.addAndGet(reused);
            for (CheckpointRequests.LocalSst sst : s.ssts) {
                c.addSst(sst.path, sst.name, sst.size);
            }
            c.addStateFile(s.manifest, manifest);
            long ms = StoreMetrics.millisSince(start);
            metrics.snapshotMs.addAndGet(ms);
            LOG.info("Snapshot of version {}{} of {}: uploaded {} files ({} new SSTs, {} bytes), reused {} SSTs, "
                            + "{} keys, {} ms", version, id == null ? "" : " (" + id + ")", files.store(),
                    uploads.size() + 1, uploads.size(), bytes + manifest.getLen(), reused, s.numKeys, ms);
        } finally {
            LocalFiles.deleteQuietly(dir);
        }
    }

    /** Deletes the checkpoint files a failed commit or snapshot started writing. */
    public void discard(List<Path> written) {
        files.noteFailedWrite();
        files.deleteQuietly(written);
    }

    // ---- retention ----------------------------------------------------------------------

    /**
     * Deletes what recovering the last {@code minVersionsToRetain} versions does not need
     * ({@link Retention}, within Spark's {@code minVersionsToDelete} and
     * {@code maxVersionsToDelete} per pass), then prunes the local cache. SSTs are only deleted
     * when the SSTs of every retained manifest are known: read before, or read now through a
     * worker connection ({@code conn}, null if there is none); returns the files deleted.
     */
    public int cleanup(int minVersionsToRetain, long minVersionsToDelete, int maxVersionsToDelete,
                       WorkerConnection conn) throws IOException {
        long failedWrites = files.failedWrites();
        LocalFileCache c = cache;
        if (!listingGate.mustList(minVersionsToRetain, minVersionsToDelete, failedWrites)) {
            // no listing (on an object store billed requests): nothing can be stale yet
            // (docs/decisions/105-object-store-puts-and-listings.md)
            if (c != null) {
                c.markUsed();
                c.sweepUnused(cacheMaxAgeMillis);
            }
            return 0;
        }
        long listedAt = System.currentTimeMillis();
        CheckpointFiles.Listing listing = files.list();
        CheckpointFiles.SstListing sstListing = files.listSsts();
        Retention r = Retention.of(listing, files.dir(), v2, minVersionsToRetain, minVersionsToDelete,
                maxVersionsToDelete);
        List<StateFileName> retainedManifests = r.retainedManifests();
        Set<String> referenced = referencedSsts(conn, retainedManifests);
        List<FileStatus> delete = new ArrayList<>();
        r.deletable.forEach(f -> delete.add(f.status));
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
        Set<String> retainedKeys = r.retained.stream().map(f -> LocalFileCache.key(f.status)).collect(Collectors.toSet());
        manifestSsts.keySet().retainAll(retainedKeys);
        int pruned = 0;
        if (c != null) {
            Set<String> liveKeys = listing.files.stream().filter(f -> !deleted.contains(f.status.getPath()))
                    .map(f -> LocalFileCache.key(f.status)).collect(Collectors.toSet());
            Set<String> liveSsts = sstListing.ssts.values().stream().filter(st -> !deleted.contains(st.getPath()))
                    .map(st -> st.getPath().getName()).collect(Collectors.toSet());
            pruned = c.prune(liveKeys, liveSsts, listedAt);
            c.markUsed();
            c.sweepUnused(cacheMaxAgeMillis);
        }
        // complete: every stale file found was deleted (an SST whose manifest could not be read
        // is not known to be stale, so that pass is not)
        CheckpointFiles.Listing remaining = new CheckpointFiles.Listing();
        listing.files.stream().filter(f -> !deleted.contains(f.status.getPath())).forEach(remaining::add);
        listingGate.listed(remaining, r.complete && (referenced != null || retainedManifests.isEmpty()), failedWrites);
        if (!deleted.isEmpty() || pruned > 0) {
            String ssts = referenced != null ? "" : conn == null ? " (no SSTs: no worker)" : " (no SSTs)";
            LOG.info("Cleanup of {} (keeping versions from {}): deleted {} checkpoint files{}, {} local cache entries",
                    files.store(), r.keepFrom, deleted.size(), ssts, pruned);
        }
        return deleted.size();
    }

    /**
     * The SSTs the retained manifests reference, or null if one of them cannot be read: it
     * failed (logged), or it was never read here and there is no worker ({@code conn} null) to
     * read it. Without a worker those read before still count (a stopped session's store whose
     * service is gone, maintained by a later session: docs/decisions/087-stopped-session-cleanup.md).
     */
    private Set<String> referencedSsts(WorkerConnection conn, List<StateFileName> manifests) {
        LocalFileCache c = cache;
        if (c == null) {
            return null;
        }
        Set<String> out = new HashSet<>();
        for (StateFileName m : manifests) {
            List<CheckpointRequests.Sst> known = manifestSsts.get(LocalFileCache.key(m.status));
            if (known != null) {
                known.forEach(s -> out.add(s.name));
                continue;
            }
            if (conn == null) {
                return null;
            }
            LocalFileCache.Entry local = null;
            try {
                local = c.stateFile(m.status, l -> files.download(m.status.getPath(), m.status.getLen(), l));
                ssts(conn, m, local.path).forEach(s -> out.add(s.name));
            } catch (IOException | RuntimeException e) {
                if (local != null && e instanceof WorkerException
                        && ErrorClasses.CORRUPT_FILE.equals(((WorkerException) e).errorClass())) {
                    c.evict(local.path);
                }
                LOG.warn("Cleanup of {} deletes no SST: cannot read manifest {}", files.store(), m, e);
                return null;
            }
        }
        return out;
    }
}
