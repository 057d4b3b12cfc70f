package io.ttlstate.spark.protocol;

import java.io.IOException;

/** A frame that does not follow docs/PROTOCOL.md; the connection carrying it is unusable. */
public class ProtocolException extends IOException {
    private static final long serialVersionUID = 1L;

    public ProtocolException(String message) {
        super(message);
    }
}
