package io.ttlstate.spark.cache;

/**
 * The stored key of a store scanned by prefix ({@code PrefixKeyScanStateEncoderSpec}):
 * {@code [u32 big-endian length n][prefix row, n bytes][full key row]}. Every key whose leading
 * columns are equal starts with the same {@code 4 + n} bytes, its prefix, so a prefix scan is a
 * byte-prefix scan in the worker's sorted database and a group lookup in the JVM's cache.
 */
public final class PrefixedKey {
    /** Bytes of the length field before the prefix row. */
    public static final int LENGTH_BYTES = 4;

    private PrefixedKey() {
    }

    /** The length field's value: how many bytes of prefix row follow it. */
    public static int prefixRowBytes(byte[] stored) {
        return ((stored[0] & 0xFF) << 24) | ((stored[1] & 0xFF) << 16)
                | ((stored[2] & 0xFF) << 8) | (stored[3] & 0xFF);
    }

    /** Writes the length field of a prefix row of {@code n} bytes at the start of {@code out}. */
    public static void putPrefixRowBytes(byte[] out, int n) {
        out[0] = (byte) (n >>> 24);
        out[1] = (byte) (n >>> 16);
        out[2] = (byte) (n >>> 8);
        out[3] = (byte) n;
    }

    /**
     * How many leading bytes of {@code stored} are its prefix (length field and prefix row); the
     * whole key if it is too short to hold what its length field says (no key ttlstate wrote).
     */
    public static int prefixBytes(byte[] stored) {
        if (stored.length < LENGTH_BYTES) {
            return stored.length;
        }
        int n = prefixRowBytes(stored);
        return n < 0 || n > stored.length - LENGTH_BYTES ? stored.length : LENGTH_BYTES + n;
    }
}
