package io.ttlstate.spark;

/** The Python store service could not be started; the message says which Python was tried and why. */
public class ServiceStartException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public ServiceStartException(String message) {
        super(message);
    }

    public ServiceStartException(String message, Throwable cause) {
        super(message, cause);
    }
}
