package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;

import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.fs.FileStatus;

/**
 * One store's checkpoint files as this JVM knows them, shared by its loads
 * ({@link CheckpointLoader}), writes ({@link CheckpointWriter}) and cleanups
 * ({@link StoreCheckpoint#cleanup}): the location, the format, the local file cache, the listing
 * gate, the SSTs each manifest references and the uploaded set (the SSTs of the last manifest
 * this store loaded or wrote, which the checkpoint is known to hold).
 */
final class StoreFiles {
    final CheckpointFiles files;
    final boolean v2;
    /** Whether a cleanup has to list (docs/decisions/105-object-store-puts-and-listings.md). */
    final ListingGate listingGate;
    /** The SSTs each manifest references, by {@link LocalFileCache#key}, so each is asked for once. */
    final Map<String, List<CheckpointRequests.Sst>> manifestSsts = new ConcurrentHashMap<>();
    volatile LocalFileCache cache;
    /**
     * The format v1 manifests and changelogs of versions above the loaded one that the load's
     * plan found, by {@link CheckpointPlans#attemptKey}: an earlier attempt's, which a commit of
     * their version deletes (docs/decisions/105-object-store-puts-and-listings.md).
     */
    volatile Map<String, FileStatus> earlierAttempts = new ConcurrentHashMap<>();
    /** Guarded by the {@code RemoteStore}'s monitor. */
    Set<String> uploadedSsts = Set.of();

    StoreFiles(CheckpointFiles files, boolean v2) {
        this.files = files;
        this.v2 = v2;
        this.listingGate = new ListingGate();
    }

    LocalFileCache requireCache() {
        LocalFileCache c = cache;
        if (c == null) {
            throw new IllegalStateException("the local checkpoint cache of " + files.store() + " is not configured");
        }
        return c;
    }

    /** {@code remote} through the local cache {@code c} (downloaded unless it holds a copy). */
    LocalFileCache.Entry fetch(LocalFileCache c, FileStatus remote, StoreMetrics metrics) throws IOException {
        return counted(metrics, c.stateFile(remote, local -> files.download(remote.getPath(), remote.getLen(), local)));
    }

    static LocalFileCache.Entry counted(StoreMetrics metrics, LocalFileCache.Entry e) {
        metrics.downloadedBytes.addAndGet(e.downloadedBytes);
        return e;
    }

    /** The SSTs {@code manifest} references (MANIFEST_FILES on its local copy, asked once per file). */
    List<CheckpointRequests.Sst> ssts(WorkerConnection conn, StateFile manifest, java.nio.file.Path local) {
        String key = LocalFileCache.key(manifest.status);
        List<CheckpointRequests.Sst> ssts = manifestSsts.get(key);
        if (ssts == null) {
            ssts = CheckpointRequests.manifestFiles(conn, local, manifest.version);
            manifestSsts.put(key, ssts);
        }
        return ssts;
    }

    static Set<String> names(List<? extends CheckpointRequests.Sst> ssts) {
        return ssts.stream().map(s -> s.name).collect(Collectors.toUnmodifiableSet());
    }
}
