package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.stream.Collectors;

import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.service.LocalFiles;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One store's writes to its checkpoint: changelog uploads, incremental snapshots (new SSTs,
 * then the manifest; docs/decisions/018-sst-snapshots.md), the files of an earlier attempt at a
 * version deleted, and what a failed commit or snapshot wrote discarded. Runs under the monitor
 * of the store's {@code RemoteStore}.
 */
final class CheckpointWriter {
    /** StoreCheckpoint's logger: the log lines keep their name. */
    private static final Logger LOG = LoggerFactory.getLogger(StoreCheckpoint.class);

    private final StoreFiles store;
    private final CheckpointFiles files;

    CheckpointWriter(StoreFiles store) {
        this.store = store;
        this.files = store.files;
    }

    /**
     * Uploads the changelog of {@code version} as {@code name} (the worker's, from COMMIT); in
     * format v1 then deletes a manifest an earlier attempt at this version left, so no load
     * mixes two attempts. A format v2 path, this attempt's own, is added to {@code written}
     * before the upload starts ({@link #ownPath}).
     */
    void uploadChangelog(java.nio.file.Path local, String name, long version, boolean v2, StoreMetrics metrics,
                         List<Path> written) throws IOException {
        Path target = files.stateFilePath(workerNamed(name, version));
        ownPath(target, v2, written);
        FileStatus st = files.upload(local, target, version);
        store.listingGate.uploaded(st);
        metrics.uploaded(st.getLen());
        store.requireCache().addStateFile(local, st);
        if (!v2) {
            deleteEarlierAttempt(version, true);
        }
    }

    /**
     * Format v1 in snapshot mode: deletes a changelog of {@code version} that an earlier
     * attempt, in changelog mode, left, before this attempt's manifest, so no replay from an
     * older snapshot mixes two attempts (the counterpart of {@link #uploadChangelog}'s). Such
     * an attempt was never committed: Spark re-runs only a batch it did not commit.
     */
    void deleteEarlierChangelog(long version) throws IOException {
        deleteEarlierAttempt(version, false);
    }

    private void deleteEarlierAttempt(long version, boolean manifest) throws IOException {
        FileStatus earlier = store.earlierAttempts.remove(CheckpointPlans.attemptKey(version, manifest));
        if (earlier == null) {
            return; // the load's listing had no such file (on an object store a delete probes: a HEAD and a LIST)
        }
        Path stale = earlier.getPath();
        try {
            files.delete(stale);
        } catch (IOException e) {
            throw new CheckpointWriteException(stale, version, files.store(), "cannot delete the "
                    + (manifest ? "manifest" : "changelog") + " of an earlier attempt at this version: " + e, e);
        }
    }

    /** {@code name}, a state file's name the worker gave, checked to be a plain file name. */
    private String workerNamed(String name, long version) throws IOException {
        if (name == null || name.isEmpty() || name.indexOf('/') >= 0 || name.startsWith(".")) {
            throw new CheckpointWriteException(files.stateFilePath("?"), version, files.store(),
                    "the worker named the file '" + name + "', not a plain file name", null);
        }
        return name;
    }

    /**
     * Adds {@code target} to what a failed commit deletes ({@link #discard}) when it is this
     * attempt's own: a format v2 path, named by the attempt's id. A format v1 path is shared
     * by every attempt at the version and stays, as the files of Spark's HDFS-backed provider
     * do (a re-run overwrites it): a failed speculative or zombie attempt deleted the file of
     * the attempt Spark committed, and a later load of that version failed.
     */
    private static void ownPath(Path target, boolean v2, List<Path> written) {
        if (v2) {
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
    void snapshot(WorkerConnection conn, long storeHandle, long version, String id, java.nio.file.Path dir,
                  StoreMetrics metrics, List<Path> written) throws IOException {
        long start = System.nanoTime();
        LocalFileCache c = store.requireCache();
        try {
            metrics.roundTrip();
            CheckpointRequests.Snapshot s = CheckpointRequests.snapshot(conn, storeHandle, dir, id);
            if (s.version != version) {
                throw new IOException("the worker snapshotted version " + s.version + " of " + files.store()
                        + ", expected " + version);
            }
            Set<String> held = store.uploadedSsts;
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
            Path target = files.stateFilePath(workerNamed(s.manifestName, version));
            ownPath(target, id != null, written);
            FileStatus manifest = files.upload(s.manifest, target, version);
            store.listingGate.uploaded(manifest);
            metrics.uploaded(manifest.getLen());
            store.uploadedSsts = StoreFiles.names(s.ssts);
            store.manifestSsts.put(LocalFileCache.key(manifest),
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
    void discard(List<Path> written) {
        files.noteFailedWrite();
        files.deleteQuietly(written);
    }
}
