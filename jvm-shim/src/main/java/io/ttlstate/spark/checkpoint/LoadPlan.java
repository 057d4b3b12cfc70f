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

    private static LoadPlan lineage(CheckpointFiles.Listing listing, Path dir, long version, String id)
            throws MissingCheckpointFileException {
        if (id == null) {
            StateFileName newest = listing.newestV2(version);
            if (newest == null) {
                throw missing(new Path(dir, version + "_*"), version, version);
            }
            id = newest.id;
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

    @Override
    public String toString() {
        return (manifest == null ? "version 0" : manifest.fileName()) + " + " + changelogs.size() + " changelogs";
    }
}
