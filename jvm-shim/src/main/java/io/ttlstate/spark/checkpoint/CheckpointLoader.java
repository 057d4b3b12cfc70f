package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;

import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.WorkerException;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.service.WorkerConnection;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One store's loads and change-feed reads from its checkpoint: plans over a listing of the
 * store's directory ({@link LoadPlan}), the manifest, its SSTs and the changelogs fetched
 * through the {@link LocalFileCache} on the {@link TransferPool}, and LOAD with their local
 * paths. Runs under the monitor of the store's {@code RemoteStore}.
 */
final class CheckpointLoader {
    /** StoreCheckpoint's logger: the log lines keep their name. */
    private static final Logger LOG = LoggerFactory.getLogger(StoreCheckpoint.class);

    /** Pauses before listing again a directory whose listing lacked a file a plan needs. */
    static final long[] LISTING_LAG_PAUSES_MS = {500, 1_000, 2_000};

    private final StoreFiles store;
    private final CheckpointFiles files;

    CheckpointLoader(StoreFiles store) {
        this.store = store;
        this.files = store.files;
    }

    /**
     * Rebuilds the worker's database at {@code (version, id)}: plans it, fetches the manifest,
     * asks which SSTs it needs, fetches those and the changelogs in parallel, and LOADs. If the
     * worker finds a file damaged while cached copies were used, they are dropped and the load
     * runs once more with fresh downloads.
     */
    StoreCheckpoint.Loaded load(WorkerConnection conn, long storeHandle, long version, String id, long batchTimestampMs,
                                StoreMetrics metrics) throws IOException {
        long start = System.nanoTime();
        CheckpointPlans.Planned p = planned(metrics,
                l -> CheckpointPlans.load(conn, l, files.dir(), version, id, store.v2 || id != null));
        store.earlierAttempts = p.laterV1;
        return load(conn, storeHandle, p.plan, batchTimestampMs, metrics, start);
    }

    /**
     * As {@link #load}, from the manifest of {@code snapshotVersion} whatever newer manifests
     * there are (Spark's {@code snapshotStartBatchId}); fails naming the version if it has none.
     * A checkpoint id means format v2 whatever the reader's conf says (Spark's state reader
     * passes the ids of the commit log but not the query's format version).
     */
    StoreCheckpoint.Loaded loadFromSnapshot(WorkerConnection conn, long storeHandle, long snapshotVersion, long version,
                                            String id, long batchTimestampMs, StoreMetrics metrics) throws IOException {
        long start = System.nanoTime();
        String what = "replay version " + version + " of " + files.store() + " from the snapshot of version "
                + snapshotVersion;
        CheckpointPlans.Planned p = planned(metrics, l -> CheckpointPlans.fromSnapshot(conn, l, files.dir(),
                snapshotVersion, version, id, store.v2 || id != null, what));
        store.earlierAttempts = p.laterV1;
        return load(conn, storeHandle, p.plan, batchTimestampMs, metrics, start);
    }

    /** Makes a plan from a listing; fails with {@link MissingCheckpointFileException} if a file it needs is not listed. */
    @FunctionalInterface
    private interface Planner<T> {
        T plan(CheckpointFiles.Listing listing) throws MissingCheckpointFileException;
    }

    /**
     * {@code planner}'s plan (a worker's PLAN) from a listing of the store's directory. Outside
     * the local file system a listing that lacks a file the plan needs is taken again after a
     * pause, up to {@link #LISTING_LAG_PAUSES_MS} times: an object store's listing can lag a
     * write that another host made (docs/decisions/105-object-store-puts-and-listings.md). A
     * file still missing then fails the plan, naming it.
     */
    private <T> T planned(StoreMetrics metrics, Planner<T> planner) throws IOException {
        CheckpointFiles.Listing listing = files.list();
        for (int attempt = 0; ; attempt++) {
            try {
                metrics.roundTrip();
                return planner.plan(listing);
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

    private StoreCheckpoint.Loaded load(WorkerConnection conn, long storeHandle, LoadPlan plan, long batchTimestampMs,
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
                        files.store(), plan, store.uploadedSsts.size(), used.size(), hits,
                        used.stream().mapToLong(e -> e.downloadedBytes).sum(), numKeys, ms);
                return new StoreCheckpoint.Loaded(plan, numKeys);
            } catch (WorkerException e) {
                List<LocalFileCache.Entry> hits = used.stream().filter(x -> x.hit).collect(Collectors.toList());
                if (attempt > 0 || !ErrorClasses.CORRUPT_FILE.equals(e.errorClass()) || hits.isEmpty()) {
                    throw namingCheckpointFile(e, remotes);
                }
                LOG.warn("Loading version {} of {} found a damaged file ({}); dropping {} cached files "
                        + "and downloading them again", version, files.store(), e.getMessage(), hits.size());
                hits.forEach(h -> store.cache.evict(h.path));
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

    /**
     * The changelogs of versions {@code from} to {@code (to, id)} (id null: any; format v2
     * their lineage), fetched through the local cache, oldest first (Spark's change feed).
     * A version that has a manifest and no changelog was written in snapshot mode:
     * {@link NoChangelogException}.
     */
    List<StoreCheckpoint.LocalChangelog> changelogs(WorkerConnection conn, long from, long to, String id,
                                                    StoreMetrics metrics) throws IOException {
        String what = "read the change feed of " + files.store();
        LoadPlan range = planned(metrics,
                l -> CheckpointPlans.changelogs(conn, l, files.dir(), from, to, id, store.v2 || id != null, what));
        LocalFileCache c = store.requireCache();
        List<TransferPool.Transfer<LocalFileCache.Entry>> transfers = new ArrayList<>();
        for (StateFile f : range.changelogs) {
            transfers.add(() -> store.fetch(c, f.status, metrics));
        }
        List<LocalFileCache.Entry> got = TransferPool.runAll(transfers);
        List<StoreCheckpoint.LocalChangelog> out = new ArrayList<>(got.size());
        for (int i = 0; i < got.size(); i++) {
            out.add(new StoreCheckpoint.LocalChangelog(range.changelogs.get(i).version, got.get(i).path));
        }
        return out;
    }

    private long loadOnce(WorkerConnection conn, long storeHandle, LoadPlan plan, long batchTimestampMs,
                          StoreMetrics metrics, List<LocalFileCache.Entry> used,
                          Map<java.nio.file.Path, org.apache.hadoop.fs.Path> remotes) throws IOException {
        LocalFileCache c = store.requireCache();
        java.nio.file.Path manifest = null;
        List<CheckpointRequests.Sst> ssts = List.of();
        if (plan.manifest != null) {
            LocalFileCache.Entry m = store.fetch(c, plan.manifest.status, metrics);
            used.add(m);
            remotes.put(m.path, plan.manifest.status.getPath());
            manifest = m.path;
            ssts = store.ssts(conn, plan.manifest, m.path);
        }
        List<TransferPool.Transfer<LocalFileCache.Entry>> transfers = new ArrayList<>();
        for (CheckpointRequests.Sst sst : ssts) {
            transfers.add(() -> {
                try {
                    return StoreFiles.counted(metrics, c.sst(sst.name, sst.size,
                            local -> files.download(files.sstPath(sst.name), sst.size, local)));
                } catch (IOException e) {
                    throw neededBy(e, plan);
                }
            });
        }
        for (StateFile f : plan.changelogs) {
            transfers.add(() -> store.fetch(c, f.status, metrics));
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
        store.uploadedSsts = StoreFiles.names(ssts);
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
}
