package io.ttlstate.spark.compat;

import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.errors.QueryExecutionErrors;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCoordinatorRef;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider$;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import scala.Option;

/**
 * Spark 4.x's API that Spark 3.5 lacks, called from code the two generations share: the 3.5
 * line will have a class of this name with the same static methods (its equivalents, or
 * refusals), so the common tree names neither generation's types
 * (docs/decisions/108-spark-35-plan.md, section 2). Calls of 4.1+ are guarded here, not at
 * the callers.
 */
public final class LineApi {
    private LineApi() {
    }

    /** Spark's error for a checkpoint id passed to a store running checkpoint format v1 (4.1+; a plain error on 4.0). */
    public static RuntimeException checkpointIdsNotSupported(String message) {
        return SparkCompat.atLeast(4, 1) ? Since41.checkpointIdsNotSupported(message) : new IllegalStateException(message);
    }

    /** Whether the query runs checkpoint format v2 (state files named by checkpoint ids). */
    public static boolean checkpointIds(StateStoreConf storeConf) {
        return storeConf.enableStateStoreCheckpointIds();
    }

    /** Spark's error for a state file a load needs and cannot find. */
    public static Throwable missingStateFile(Path path, Throwable cause) {
        return QueryExecutionErrors.failedToReadStreamingStateFileError(path, cause);
    }

    /** Spark's error for a commit that failed ({@code what}: the store and the cause's message). */
    public static Throwable failedToCommit(String what, Throwable cause) {
        return QueryExecutionErrors.failedToCommitStateFileError(what, cause);
    }

    /** Spark's error for a store version below 0, or a replay's versions out of order. */
    public static Throwable unexpectedStateStoreVersion(long version) {
        return QueryExecutionErrors.unexpectedStateStoreVersion(version);
    }

    /** Spark's error for a store that failed to load. */
    public static Throwable cannotLoadStore(Throwable cause) {
        return QueryExecutionErrors.cannotLoadStore(cause);
    }

    /** Reports a committed version to the coordinator when commit validation is on (4.1+). */
    public static void reportCommit(StateStoreConf storeConf, long newVersion, StateStoreId id, Configuration hadoopConf) {
        if (SparkCompat.atLeast(4, 1) && storeConf.commitValidationEnabled()) {
            StateStore.reportCommitToCoordinator(newVersion, id, hadoopConf);
        }
    }

    /**
     * Tells the coordinator that {@code version} of {@code id} has a snapshot, when the query
     * reports snapshot upload lag (4.1+); nothing without a coordinator. Throws what the
     * coordinator's call throws.
     */
    public static void reportSnapshotUploaded(StateStoreConf storeConf, Configuration hadoopConf, StateStoreId id,
                                              long version) {
        if (!SparkCompat.atLeast(4, 1) || !storeConf.reportSnapshotUploadLag()) {
            return;
        }
        Option<StateStoreCoordinatorRef> ref = StateStoreProvider$.MODULE$.coordinatorRef();
        if (ref.isDefined()) {
            UUID runId = UUID.fromString(StateStoreProvider$.MODULE$.getRunId(hadoopConf));
            ref.get().snapshotUploaded(new StateStoreProviderId(id, runId), version, System.currentTimeMillis());
        }
    }

    /** Spark's {@code minVersionsToDelete}: stale versions a cleanup waits for. */
    public static long minVersionsToDelete(StateStoreConf storeConf) {
        return storeConf.minVersionsToDelete();
    }

    /** Spark's limit of versions one maintenance deletes (4.1+), or -1: none. */
    public static int maxVersionsToDeletePerMaintenance(StateStoreConf storeConf) {
        return SparkCompat.atLeast(4, 1) ? storeConf.maxVersionsToDeletePerMaintenance() : -1;
    }

    /**
     * Calls whose classes only 4.1+ has. In a class of their own: verifying a method that returns
     * one of them as a RuntimeException loads the class, so on 4.0 LineApi itself would fail.
     */
    private static final class Since41 {
        static RuntimeException checkpointIdsNotSupported(String message) {
            return StateStoreErrors.stateStoreCheckpointIdsNotSupported(message);
        }
    }
}
