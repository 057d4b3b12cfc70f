package io.ttlstate.spark.checkpoint;

import java.util.List;

import org.apache.hadoop.fs.FileStatus;

/**
 * The files that rebuild one version, as a worker's PLAN chose them from a listing
 * ({@link CheckpointPlans}; the rule is {@code ttlstate.layout}'s): a manifest (or none: start
 * from the empty version 0) and the changelogs after it, oldest first.
 */
final class LoadPlan {
    /** A changelog of the plan: its version and file. */
    static final class Changelog {
        final long version;
        final FileStatus status;

        Changelog(long version, FileStatus status) {
            this.version = version;
            this.status = status;
        }
    }

    final long version;
    /** The version's checkpoint id (format v2; null in v1 and for version 0). */
    final String id;
    /** Null when the plan starts from the empty version 0. */
    final FileStatus manifest;
    final long manifestVersion;
    final List<Changelog> changelogs;

    LoadPlan(long version, String id, FileStatus manifest, long manifestVersion, List<Changelog> changelogs) {
        this.version = version;
        this.id = id;
        this.manifest = manifest;
        this.manifestVersion = manifest == null ? 0 : manifestVersion;
        this.changelogs = changelogs;
    }

    long manifestVersion() {
        return manifestVersion;
    }

    @Override
    public String toString() {
        return (manifest == null ? "version 0" : manifest.getPath().getName()) + " + " + changelogs.size()
                + " changelogs";
    }
}
