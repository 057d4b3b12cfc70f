package io.ttlstate.spark;

import java.io.IOException;

import org.apache.hadoop.fs.Path;

/**
 * A checkpoint file that could not be written, or was not there whole after its atomic upload
 * (a rename the file system lost): error class {@code TTLSTATE_CHECKPOINT_WRITE} (DESIGN 21).
 */
final class CheckpointWriteException extends IOException {
    private static final long serialVersionUID = 1L;
    static final String ERROR_CLASS = "TTLSTATE_CHECKPOINT_WRITE";

    CheckpointWriteException(Path file, long version, String store, String reason, Throwable cause) {
        super("[" + ERROR_CLASS + "] Cannot write checkpoint file " + file + " of version " + version
                + " of " + store + ": " + reason, cause);
    }
}
