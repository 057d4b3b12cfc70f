package io.ttlstate.spark.checkpoint;

import java.io.FileNotFoundException;

import org.apache.hadoop.fs.Path;

/** A checkpoint file a load needs does not exist; the provider reports it as Spark's CANNOT_LOAD_STATE_STORE. */
public final class MissingCheckpointFileException extends FileNotFoundException {
    private static final long serialVersionUID = 1L;
    final transient Path path;

    MissingCheckpointFileException(Path path, String message) {
        super(message);
        this.path = path;
    }

    /** The missing file. */
    public Path path() {
        return path;
    }
}
