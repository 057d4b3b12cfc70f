package io.ttlstate.spark.checkpoint;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

import org.apache.hadoop.fs.Path;

/**
 * The files that rebuild one version: a manifest (or none: start from the empty version 0)
 * and the changelogs after it, oldest first. Format v1 takes the newest manifest at or below
 * the version; format v2 walks the changelog names back ({@code baseId}) from
 * {@code (version, id)} to a manifest of that lineage or to version 0 (PROTOCOL.md).
 */
final class LoadPlan {
    final long version;
    /** The version's checkpoint id (format v2; null in v1 and for version 0). */
    final String id;
    /** Null when the plan starts from the empty version 0. */
    final StateFileName manifest;
    final List<StateFileName> changelogs;

    private LoadPlan(long version, String id, StateFileName manifest, List<StateFileName> changelogs) {
        this.version = version;
        this.id = id;
        this.manifest = manifest;
        this.changelogs = changelogs;
    }

    long manifestVersion() {
        return manifest == null ? 0 : manifest.version;
    }

    /** The manifest (if any) and the changelogs. */
    List<StateFileName> files() {
        List<StateFileName> all = new ArrayList<>(changelogs.size() + 1);
        if (manifest != null) {
            all.add(manifest);
        }
        all.addAll(changelogs);
        return all;
    }

    private static MissingCheckpointFileException missing(Path path, long fileVersion, long version) {
        return new MissingCheckpointFileException(path, "State file " + path + " of version " + fileVersion
                + " does not exist (needed to load version " + version + ")");
    }

    /**
     * Plans version {@code version} from {@code listing} of the directory {@code dir}; {@code v2}
     * selects the format. In v2 a null {@code id} of a version above 0 means the most recently
     * written file of that version.
     */
    static LoadPlan of(CheckpointFiles.Listing listing, Path dir, long version, String id, boolean v2)
            throws MissingCheckpointFileException {
        if (version == 0) {
            return new LoadPlan(0, null, null, List.of());
        }
        return v2 ? lineage(listing, dir, version, id) : newestManifest(listing, dir, version);
    }

    private static LoadPlan newestManifest(CheckpointFiles.Listing listing, Path dir, long version)
            throws MissingCheckpointFileException {
        StateFileName manifest = listing.floorManifest(version);
        List<StateFileName> changelogs = new ArrayList<>();
        for (long v = manifest == null ? 1 : manifest.version + 1; v <= version; v++) {
            StateFileName c = listing.get(StateFileName.Kind.CHANGELOG, v, null);
            if (c == null) {
                throw missing(
                        new Path(dir, StateFileName.name(v, StateFileName.Kind.CHANGELOG, null, null)), v, version);
            }
            changelogs.add(c);
        }
        return new LoadPlan(version, null, manifest, changelogs);
    }

    /** The id of the newest v2 file of {@code version}; missing when there is none. */
    private static String newestId(CheckpointFiles.Listing listing, Path dir, long version)
            throws MissingCheckpointFileException {
        StateFileName newest = listing.newestV2(version);
        if (newest == null) {
            throw missing(new Path(dir, version + "_*"), version, version);
        }
        return newest.id;
    }

    private static LoadPlan lineage(CheckpointFiles.Listing listing, Path dir, long version, String id)
            throws MissingCheckpointFileException {
        if (id == null) {
            id = newestId(listing, dir, version);
        }
        Deque<StateFileName> changelogs = new ArrayDeque<>();
        StateFileName manifest = null;
        long v = version;
        String vid = id;
        while (v > 0) {
            manifest = listing.get(StateFileName.Kind.MANIFEST, v, vid);
            if (manifest != null) {
                break;
            }
            StateFileName c = listing.get(StateFileName.Kind.CHANGELOG, v, vid);
            if (c == null) {
                throw missing(new Path(dir, v + "_" + vid + "_*.changelog"), v, version);
            }
            changelogs.addFirst(c);
            vid = c.baseId;
            v--;
        }
        return new LoadPlan(version, id, manifest, new ArrayList<>(changelogs));
    }

    /**
     * Plans {@code (version, id)} from the manifest of {@code snapshotVersion}, whatever newer
     * manifests there are (Spark's {@code snapshotStartBatchId}): that manifest (format v2: the
     * one of the lineage of {@code (version, id)}) and the changelogs after it. Version 0 is
     * the empty version; without that manifest it fails naming the version.
     */
    static LoadPlan fromSnapshot(CheckpointFiles.Listing listing, Path dir, long snapshotVersion, long version,
                                 String id, boolean v2) throws MissingCheckpointFileException {
        if (snapshotVersion < 0 || snapshotVersion > version) {
            throw new IllegalArgumentException("cannot replay version " + version + " from the snapshot of version "
                    + snapshotVersion);
        }
        Changelogs range = changelogs(listing, dir, snapshotVersion + 1, version, id, v2);
        if (snapshotVersion == 0) {
            return new LoadPlan(version, range.id, null, range.files);
        }
        StateFileName manifest = listing.get(StateFileName.Kind.MANIFEST, snapshotVersion, v2 ? range.baseId : null);
        if (manifest == null) {
            Path path = new Path(dir, StateFileName.name(snapshotVersion, StateFileName.Kind.MANIFEST,
                    v2 ? range.baseId : null, null));
            throw new MissingCheckpointFileException(path, "There is no snapshot of version " + snapshotVersion
                    + " (" + path + " does not exist; needed to replay version " + version + " from it): snapshots"
                    + " of this store are at versions " + listing.manifestVersions());
        }
        return new LoadPlan(version, range.id, manifest, range.files);
    }

    /** The changelogs of a range of versions, and the ids at its ends (format v2). */
    static final class Changelogs {
        /** Oldest first. */
        final List<StateFileName> files;
        /** The checkpoint id of the last version (v2; null in v1). */
        final String id;
        /** The checkpoint id of the version before the first (v2; null in v1). */
        final String baseId;

        private Changelogs(List<StateFileName> files, String id, String baseId) {
            this.files = files;
            this.id = id;
            this.baseId = baseId;
        }
    }

    /**
     * The changelogs of versions {@code from} to {@code (to, id)}: format v1 the changelog of
     * each version, format v2 those of the lineage of {@code (to, id)} (null id: the most
     * recently written file of {@code to}). Fails naming the first changelog that is missing.
     */
    static Changelogs changelogs(CheckpointFiles.Listing listing, Path dir, long from, long to, String id,
                                 boolean v2) throws MissingCheckpointFileException {
        if (!v2) {
            List<StateFileName> out = new ArrayList<>();
            for (long v = Math.max(from, 1); v <= to; v++) {
                StateFileName c = listing.get(StateFileName.Kind.CHANGELOG, v, null);
                if (c == null) {
                    throw missing(new Path(dir, StateFileName.name(v, StateFileName.Kind.CHANGELOG, null, null)), v, to);
                }
                out.add(c);
            }
            return new Changelogs(out, null, null);
        }
        if (id == null && to > 0) {
            id = newestId(listing, dir, to);
        }
        Deque<StateFileName> out = new ArrayDeque<>();
        String vid = id;
        for (long v = to; v >= Math.max(from, 1); v--) {
            StateFileName c = listing.get(StateFileName.Kind.CHANGELOG, v, vid);
            if (c == null) {
                throw missing(new Path(dir, v + "_" + vid + "_*.changelog"), v, to);
            }
            out.addFirst(c);
            vid = c.baseId;
        }
        return new Changelogs(new ArrayList<>(out), id, vid);
    }

    @Override
    public String toString() {
        return (manifest == null ? "version 0" : manifest.fileName()) + " + " + changelogs.size() + " changelogs";
    }
}
