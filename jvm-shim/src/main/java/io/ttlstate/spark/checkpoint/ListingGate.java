package io.ttlstate.spark.checkpoint;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * Whether a cleanup has to list a store's directories to find something to delete
 * (docs/decisions/105-object-store-puts-and-listings.md). It keeps what the last listing pass left
 * plus the changelogs and manifests this store
 * uploaded since, and plans {@link Retention} on that: when the plan deletes nothing, a pass
 * over the real listing would delete nothing of the store's own either, so it does not list.
 * It lists after a pass that was not complete ({@link Retention#complete}: it left stale
 * versions, or could not plan), and after a failed write of the store's own (a temp file or
 * an orphan SST it may have left). Files another process wrote (an earlier run, a zombie
 * task) are found by the next pass that lists: the first after a load always does. Thread-safe.
 */
final class ListingGate {
    private final Path dir;
    private final boolean v2;
    private CheckpointFiles.Listing known; // null: no complete pass yet
    private long failedWritesAtPass;

    ListingGate(Path dir, boolean v2) {
        this.dir = dir;
        this.v2 = v2;
    }

    /** A listing pass ended: what its listing showed minus what it deleted. */
    synchronized void listed(CheckpointFiles.Listing remaining, boolean complete, long failedWrites) {
        known = complete ? remaining : null;
        failedWritesAtPass = failedWrites;
    }

    /** This store uploaded a changelog or manifest ({@code status}, named as StateFileName parses). */
    synchronized void uploaded(FileStatus status) {
        StateFileName f = StateFileName.parse(status);
        if (known != null && f != null) {
            known.files.removeIf(g -> g.fileName().equals(f.fileName())); // a re-run's file replaces its own
            known.add(f);
        }
    }

    /** Whether a pass now has to list (it may find something to delete). */
    synchronized boolean mustList(int minVersionsToRetain, long minVersionsToDelete, long failedWrites) {
        if (known == null || failedWrites != failedWritesAtPass) {
            return true;
        }
        Retention r = Retention.of(known, dir, v2, minVersionsToRetain, minVersionsToDelete, -1);
        return !r.deletable.isEmpty() || !r.complete;
    }
}
