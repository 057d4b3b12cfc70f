package io.ttlstate.spark.checkpoint;

/**
 * The names of the manifests and changelogs the JVM writes, as docs/PROTOCOL.md ("Checkpoint
 * layout of a store") says: format v1 {@code <v>.changelog}, {@code <v>.manifest}; format v2
 * {@code <v>_<id>_<baseId>.changelog}, {@code <v>_<id>.manifest}. Reading names (listings, load
 * plans, retention) is the worker's ({@code ttlstate.layout}, {@link CheckpointPlans}); both
 * pass tests/vectors/layout_names.tsv.
 */
final class StateFileName {
    private StateFileName() {}

    enum Kind {
        CHANGELOG("changelog"), MANIFEST("manifest");

        final String suffix;

        Kind(String suffix) {
            this.suffix = suffix;
        }
    }

    /** {@code baseId} of a v2 changelog whose base is the empty version 0. */
    static final String EMPTY_BASE_ID = "0";
    /** A store's SSTs: {@code <store dir>/sst/<number>-<16 hex>.sst}, shared by its manifests. */
    static final String SST_DIR = "sst";

    /**
     * The file name of a state file; {@code id} null means format v1. A v2 changelog's
     * {@code baseId} is the id of {@code version - 1} ({@link #EMPTY_BASE_ID} for version 0).
     */
    static String name(long version, Kind kind, String id, String baseId) {
        if (id == null) {
            return version + "." + kind.suffix;
        }
        if (kind == Kind.MANIFEST) {
            return version + "_" + id + "." + kind.suffix;
        }
        return version + "_" + id + "_" + (baseId == null ? EMPTY_BASE_ID : baseId) + "." + kind.suffix;
    }
}
