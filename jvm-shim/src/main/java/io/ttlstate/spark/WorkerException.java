package io.ttlstate.spark;

/** An ERROR response of a store worker: its error class (e.g. TTLSTATE_INVALID_CONF) and message. */
public class WorkerException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String errorClass;

    public WorkerException(String errorClass, String message) {
        super("[" + errorClass + "] " + message);
        this.errorClass = errorClass;
    }

    public String errorClass() {
        return errorClass;
    }

    /** The worker's message without the error class. */
    public String workerMessage() {
        String m = getMessage();
        return m.substring(errorClass.length() + 3);
    }
}
