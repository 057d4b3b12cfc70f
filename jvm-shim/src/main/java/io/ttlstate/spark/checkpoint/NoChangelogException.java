package io.ttlstate.spark.checkpoint;

/**
 * A version of a store has a snapshot and no changelog: the query ran with
 * {@code checkpoint.mode=snapshot}, which writes none, so Spark's change feed cannot be read.
 */
public final class NoChangelogException extends UnsupportedOperationException {
    private static final long serialVersionUID = 1L;
    public static final String MODE_KEY = "spark.sql.streaming.stateStore.ttlstate.checkpoint.mode";

    NoChangelogException(long version, String store) {
        super("Cannot read the change feed of " + store + ": version " + version + " has a snapshot and no"
                + " changelog, because the query ran with " + MODE_KEY + "=snapshot, which writes no changelogs."
                + " Run the query with " + MODE_KEY + "=changelog (the default) to read its change feed;"
                + " snapshotStartBatchId and batchId reads work in either mode.");
    }
}
