package io.ttlstate.spark;

/** A {@code spark.sql.streaming.stateStore.ttlstate.*} value the service refused; the message names key, value and what is allowed. */
public class InvalidConfException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public InvalidConfException(String message) {
        super(message);
    }
}
