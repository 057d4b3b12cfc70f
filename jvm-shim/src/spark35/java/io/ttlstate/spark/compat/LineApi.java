package io.ttlstate.spark.compat;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

/**
 * Spark 3.5's side of the calls the shared code makes where Spark 4.x has API that 3.5 lacks
 * (the spark4 overlay's class of this name has the same static methods): 3.5 has no
 * checkpoint ids, no commit validation, no snapshot-lag reports and no deletion limits, and
 * its errors for these cases are plain exceptions with Spark's wording
 * (docs/decisions/108-spark-35-plan.md, section 2).
 */
public final class LineApi {
    private LineApi() {
    }

    /** A checkpoint id passed to a store: 3.5 passes none, so this is never reached by Spark. */
    public static RuntimeException checkpointIdsNotSupported(String message) {
        return new IllegalStateException(message);
    }

    /** Spark 3.5 writes checkpoint format v1 only. */
    public static boolean checkpointIds(StateStoreConf storeConf) {
        return false;
    }

    public static Throwable missingStateFile(Path path, Throwable cause) {
        return new IllegalStateException("Error reading streaming state file " + path + ": " + cause.getMessage(), cause);
    }

    public static Throwable cannotLoadStore(Throwable cause) {
        return new IllegalStateException("An error occurred during loading state: " + cause.getMessage(), cause);
    }

    public static Throwable failedToCommit(String what, Throwable cause) {
        return new IllegalStateException("Error committing version into " + what, cause);
    }

    /** As 3.5's HDFS-backed provider words it (a failed {@code require}). */
    public static Throwable unexpectedStateStoreVersion(long version) {
        return new IllegalArgumentException("requirement failed: Version cannot be less than 0 (got " + version + ")");
    }

    /** No commit validation on 3.5: nothing to report. */
    public static void reportCommit(StateStoreConf storeConf, long newVersion, StateStoreId id, Configuration hadoopConf) {
    }

    /** No snapshot-lag reports on 3.5: nothing to report. */
    public static void reportSnapshotUploaded(StateStoreConf storeConf, Configuration hadoopConf, StateStoreId id,
                                              long version) {
    }

    /** 3.5 has no {@code minVersionsToDelete}: a cleanup deletes whatever is stale. */
    public static long minVersionsToDelete(StateStoreConf storeConf) {
        return 0;
    }

    /** 3.5 has no limit of versions one maintenance deletes. */
    public static int maxVersionsToDeletePerMaintenance(StateStoreConf storeConf) {
        return -1;
    }
}
