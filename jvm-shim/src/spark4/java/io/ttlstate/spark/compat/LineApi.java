package io.ttlstate.spark.compat;

import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;

/**
 * Spark 4.x's API that Spark 3.5 lacks, called from code the two generations share: the 3.5
 * line will have a class of this name with the same static methods (its equivalents, or
 * refusals), so the common tree names neither generation's types
 * (docs/decisions/108-spark-35-plan.md, section 2).
 */
public final class LineApi {
    private LineApi() {
    }

    /** Spark's error for a checkpoint id passed to a store running checkpoint format v1 (4.1+; a plain error on 4.0). */
    public static RuntimeException checkpointIdsNotSupported(String message) {
        return SparkCompat.atLeast(4, 1) ? Since41.checkpointIdsNotSupported(message) : new IllegalStateException(message);
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
