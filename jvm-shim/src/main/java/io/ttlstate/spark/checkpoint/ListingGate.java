package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.List;
import java.util.function.Function;

import org.apache.hadoop.fs.FileStatus;

/**
 * Whether a cleanup has to list a store's directories to find something to delete
 * (docs/decisions/105-object-store-puts-and-listings.md). It keeps what the last listing pass left
 * plus the changelogs and manifests this store uploaded since, and asks a worker for the
 * retention plan of that: when the plan deletes nothing, a pass over the real listing would
 * delete nothing of the store's own either, so it does not list. It lists after a pass that was
 * not complete ({@link Retention#complete}: it left stale versions, or could not plan) and after
 * a failed write of the store's own (a temp file or an orphan SST it may have left); without a
 * worker to plan, a cleanup neither asks it nor lists. Files another process wrote (an earlier
 * run, a zombie task) are found by the next pass that lists: the first after a load always
 * does. An upload made while a pass lists and deletes is not in that pass's listing, so it is
 * added to what the pass left ({@link #listing}). Thread-safe.
 */
final class ListingGate {
    private CheckpointFiles.Listing known; // null: no complete pass yet
    private long failedWritesAtPass;
    private List<FileStatus> uploadedWhileListing; // null: no pass is listing

    /**
     * A pass is about to list: until it ends ({@link #listed}, or {@link #listingEnded} without a
     * result), this store's uploads are kept for it, since its listing may have been taken before
     * them.
     */
    synchronized void listing() {
        uploadedWhileListing = new ArrayList<>();
    }

    /**
     * A listing pass ended: what its listing showed minus what it deleted, plus what this store
     * uploaded meanwhile.
     */
    synchronized void listed(CheckpointFiles.Listing remaining, boolean complete, long failedWrites) {
        if (uploadedWhileListing != null) {
            uploadedWhileListing.forEach(remaining::put);
        }
        uploadedWhileListing = null;
        known = complete ? remaining : null;
        failedWritesAtPass = failedWrites;
    }

    /** A pass that began listing ended, after {@link #listed} or without a result (it failed to list or to plan). */
    synchronized void listingEnded() {
        uploadedWhileListing = null;
    }

    /** This store uploaded a changelog or manifest ({@code status}). */
    synchronized void uploaded(FileStatus status) {
        if (known != null) {
            known.put(status);
        }
        if (uploadedWhileListing != null) {
            uploadedWhileListing.add(status);
        }
    }

    /**
     * Whether a pass now has to list (it may find something to delete); {@code retention} plans
     * a listing without a limit on the versions deleted (a worker's PLAN).
     */
    boolean mustList(Function<CheckpointFiles.Listing, Retention> retention, long failedWrites) {
        CheckpointFiles.Listing k;
        synchronized (this) {
            if (known == null || failedWrites != failedWritesAtPass) {
                return true;
            }
            k = new CheckpointFiles.Listing();
            k.files.addAll(known.files);
        }
        Retention r = retention.apply(k);
        return !r.deletable.isEmpty() || !r.complete;
    }
}
