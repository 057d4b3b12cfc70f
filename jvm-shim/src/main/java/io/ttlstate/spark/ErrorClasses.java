package io.ttlstate.spark;

/**
 * The ttlstate error classes the JVM names, in one place: those of the worker's ERROR replies
 * ({@link WorkerException#errorClass()}; Python declares them in {@code ttlstate.errors}), of
 * the service's start-up refusal, and the JVM's own (worker timeout, checkpoint write).
 */
public final class ErrorClasses {
    private ErrorClasses() {}

    /** A conf value the service refused (reply, or the service's last stderr line at start-up). */
    public static final String INVALID_CONF = "TTLSTATE_INVALID_CONF";
    /** A malformed frame or a protocol version mismatch; the worker closes the connection. */
    public static final String PROTOCOL_ERROR = "TTLSTATE_PROTOCOL_ERROR";
    /** HELLO with a wrong token; the worker closes the connection. */
    public static final String AUTH = "TTLSTATE_AUTH";
    /** A worker that did not answer within {@code workerTimeout} (raised by the JVM). */
    public static final String WORKER_TIMEOUT = "TTLSTATE_WORKER_TIMEOUT";
    /** A checkpoint file the worker found damaged. */
    public static final String CORRUPT_FILE = "TTLSTATE_CORRUPT_FILE";
    /** A checkpoint file the JVM could not write or verify (docs/decisions/021-every-upload-verified.md). */
    public static final String CHECKPOINT_WRITE = "TTLSTATE_CHECKPOINT_WRITE";
}
