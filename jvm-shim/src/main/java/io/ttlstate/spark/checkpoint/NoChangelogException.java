package io.ttlstate.spark.checkpoint;

import io.ttlstate.spark.ConfKeys;

/**
 * A version of a store has a snapshot and no changelog: the query ran with
 * {@code checkpoint.mode=snapshot}, which writes none, so Spark's change feed cannot be read.
 */
public final class NoChangelogException extends UnsupportedOperationException {
    private static final long serialVersionUID = 1L;
    public static final String MODE_KEY = ConfKeys.PREFIX + ConfKeys.CHECKPOINT_MODE;

    /** {@code what}: what cannot be done ("read the change feed of ..."). */
    NoChangelogException(String what, long version) {
        super("Cannot " + what + ": version " + version + " has a snapshot and no changelog, because the query"
                + " ran with " + MODE_KEY + "=snapshot, which writes no changelogs. Run the query with " + MODE_KEY
                + "=changelog (the default) to read its change feed or replay it from an earlier snapshot;"
                + " batchId reads (and snapshotStartBatchId equal to batchId) work in either mode.");
    }
}
