package io.ttlstate.spark.checkpoint;

import java.util.List;

/**
 * The files that rebuild one version, as a worker's PLAN chose them from a listing
 * ({@link CheckpointPlans}; the rule is {@code ttlstate.layout}'s): a manifest (or none: start
 * from the empty version 0) and the changelogs after it, oldest first.
 */
final class LoadPlan {
    final long version;
    /** The version's checkpoint id (format v2; null in v1 and for version 0). */
    final String id;
    /** Null when the plan starts from the empty version 0. */
    final StateFile manifest;
    final List<StateFile> changelogs;

    LoadPlan(long version, String id, StateFile manifest, List<StateFile> changelogs) {
        this.version = version;
        this.id = id;
        this.manifest = manifest;
        this.changelogs = changelogs;
    }

    long manifestVersion() {
        return manifest == null ? 0 : manifest.version;
    }

    @Override
    public String toString() {
        return (manifest == null ? "version 0" : manifest.status.getPath().getName()) + " + " + changelogs.size()
                + " changelogs";
    }
}
