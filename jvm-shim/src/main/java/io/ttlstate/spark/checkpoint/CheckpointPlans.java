package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.List;

import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * Plans over a listing of a store's directory, made by a worker (PLAN): the worker owns the
 * checkpoint layout (file names, load plans, retention: {@code ttlstate.layout},
 * {@code ttlstate.retention}) and answers with the listed files' indices; the JVM executes
 * the plan (docs/decisions/110-worker-plans-checkpoint-files.md).
 */
final class CheckpointPlans {
    private CheckpointPlans() {}

    /** A load plan and the format v1 files of later versions its listing showed. */
    static final class Planned {
        final LoadPlan plan;
        /** An earlier attempt's v1 files, by {@link #attemptKey}. */
        final java.util.Map<String, FileStatus> laterV1;

        Planned(LoadPlan plan, java.util.Map<String, FileStatus> laterV1) {
            this.plan = plan;
            this.laterV1 = laterV1;
        }
    }

    /** The key of a format v1 file of {@code version} in {@link Planned#laterV1}. */
    static String attemptKey(long version, boolean manifest) {
        return version + (manifest ? "m" : "c");
    }

    /** Plans {@code (version, id)} (id null: none) over {@code listing}. */
    static Planned load(WorkerConnection conn, CheckpointFiles.Listing listing, Path dir, long version, String id,
                        boolean v2) throws MissingCheckpointFileException {
        return planned(conn, listing, dir, Op.PLAN_LOAD, v2, version, id, 0, null);
    }

    /** Plans {@code (version, id)} from the manifest of {@code snapshotVersion}; {@code what} names it in errors. */
    static Planned fromSnapshot(WorkerConnection conn, CheckpointFiles.Listing listing, Path dir, long snapshotVersion,
                                long version, String id, boolean v2, String what)
            throws MissingCheckpointFileException {
        if (snapshotVersion < 0 || snapshotVersion > version) {
            throw new IllegalArgumentException("cannot replay version " + version + " from the snapshot of version "
                    + snapshotVersion);
        }
        return planned(conn, listing, dir, Op.PLAN_FROM_SNAPSHOT, v2, version, id, snapshotVersion, what);
    }

    /** The changelogs of versions {@code from} to {@code (to, id)}, as a plan without manifest. */
    static LoadPlan changelogs(WorkerConnection conn, CheckpointFiles.Listing listing, Path dir, long from, long to,
                               String id, boolean v2, String what) throws MissingCheckpointFileException {
        return planned(conn, listing, dir, Op.PLAN_CHANGELOGS, v2, to, id, from, what).plan;
    }

    /** What a cleanup pass deletes over {@code listing} (maxVersionsToDelete -1 or 0: no limit). */
    static Retention retention(WorkerConnection conn, CheckpointFiles.Listing listing, boolean v2,
                               int minVersionsToRetain, long minVersionsToDelete, int maxVersionsToDelete) {
        FrameReader r = conn.call(request(Op.PLAN_RETENTION, v2, 0, null, 0, minVersionsToRetain, minVersionsToDelete,
                maxVersionsToDelete, listing));
        Reply.Retention p = Replies.decode(() -> Reply.retention(r));
        List<FileStatus> deletable = new ArrayList<>(p.deletable.length);
        for (int i : p.deletable) {
            deletable.add(listed(listing, i));
        }
        List<StateFile> manifests = new ArrayList<>(p.retainedManifests.length);
        for (int i = 0; i < p.retainedManifests.length; i++) {
            manifests.add(new StateFile(listed(listing, p.retainedManifests[i]), p.retainedManifestVersions[i]));
        }
        return new Retention(p.keepFrom, deletable, manifests, p.oldestRetainedMs, p.complete);
    }

    private static Planned planned(WorkerConnection conn, CheckpointFiles.Listing listing, Path dir, int purpose,
                                   boolean v2, long version, String id, long from, String what)
            throws MissingCheckpointFileException {
        FrameReader r = conn.call(request(purpose, v2, version, id, from, 0, 0, 0, listing));
        Reply.Plan p = Replies.decode(() -> Reply.plan(r));
        if (p.outcome == Op.PLAN_MISSING) {
            Path path = new Path(dir, p.missingPattern);
            throw new MissingCheckpointFileException(path, p.missingMessage.replace("{path}", path.toString()));
        }
        if (p.outcome == Op.PLAN_NO_CHANGELOG) {
            throw new NoChangelogException(what, p.noChangelogVersion);
        }
        List<StateFile> changelogs = new ArrayList<>(p.changelogs.length);
        for (int i = 0; i < p.changelogs.length; i++) {
            changelogs.add(new StateFile(listed(listing, p.changelogs[i]), p.changelogVersions[i]));
        }
        java.util.Map<String, FileStatus> later = new java.util.concurrent.ConcurrentHashMap<>();
        for (int i = 0; i < p.later.length; i++) {
            later.put(attemptKey(p.laterVersions[i], p.laterManifests[i]), listed(listing, p.later[i]));
        }
        StateFile manifest = p.manifest < 0 ? null : new StateFile(listed(listing, p.manifest), p.manifestVersion);
        return new Planned(new LoadPlan(version, p.id, manifest, changelogs), later);
    }

    private static FrameWriter request(int purpose, boolean v2, long version, String id, long from,
                                       int minVersionsToRetain, long minVersionsToDelete, int maxVersionsToDelete,
                                       CheckpointFiles.Listing listing) {
        List<String> names = new ArrayList<>(listing.files.size());
        long[] mtimes = new long[listing.files.size()];
        for (int i = 0; i < mtimes.length; i++) {
            FileStatus st = listing.files.get(i);
            names.add(st.getPath().getName());
            mtimes[i] = st.getModificationTime();
        }
        return Requests.plan(purpose, v2, version, id, from, minVersionsToRetain, minVersionsToDelete,
                maxVersionsToDelete, names, mtimes);
    }

    private static FileStatus listed(CheckpointFiles.Listing listing, int index) {
        if (index < 0 || index >= listing.files.size()) {
            throw new IllegalStateException("a PLAN reply named file " + index + " of a listing of "
                    + listing.files.size());
        }
        return listing.files.get(index);
    }
}
