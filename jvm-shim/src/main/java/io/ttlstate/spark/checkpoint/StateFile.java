package io.ttlstate.spark.checkpoint;

import org.apache.hadoop.fs.FileStatus;

/**
 * A manifest or changelog a worker's PLAN named from a listing ({@link CheckpointPlans}): the
 * listed file and the version its name says (the JVM reads no name itself).
 */
final class StateFile {
    final FileStatus status;
    final long version;

    StateFile(FileStatus status, long version) {
        this.status = status;
        this.version = version;
    }
}
