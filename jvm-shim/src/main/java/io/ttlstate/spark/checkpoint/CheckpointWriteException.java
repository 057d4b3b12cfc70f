package io.ttlstate.spark.checkpoint;

import java.io.IOException;

import io.ttlstate.spark.ErrorClasses;
import org.apache.hadoop.fs.Path;

/**
 * A checkpoint file that could not be written, or was not there whole after its atomic upload
 * (a rename the file system lost): error class {@code TTLSTATE_CHECKPOINT_WRITE}
 * (docs/decisions/021-every-upload-verified.md).
 */
final class CheckpointWriteException extends IOException {
    private static final long serialVersionUID = 1L;

    CheckpointWriteException(Path file, long version, String store, String reason, Throwable cause) {
        super("[" + ErrorClasses.CHECKPOINT_WRITE + "] Cannot write checkpoint file " + file + " of version " + version
                + " of " + store + ": " + reason, cause);
    }
}
