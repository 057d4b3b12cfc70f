package io.ttlstate.spark.service;

import java.io.UncheckedIOException;

import io.ttlstate.spark.protocol.ProtocolException;

/** Decodes the body of a worker's OK reply; a malformed one fails as an {@link UncheckedIOException}. */
public final class Replies {
    private Replies() {}

    /** A decoding step that may find a malformed reply. */
    public interface Decoding<T> {
        T run() throws ProtocolException;
    }

    public static <T> T decode(Decoding<T> d) {
        try {
            return d.run();
        } catch (ProtocolException e) {
            throw new UncheckedIOException("malformed response from ttlstate worker", e);
        }
    }
}
