package io.ttlstate.spark.cache;

import java.util.Arrays;

import org.apache.spark.unsafe.Platform;

/**
 * Key bytes as a hash-map key, with a well-mixed hash. {@code Arrays.hashCode} and
 * {@code ByteBuffer.hashCode} are polynomial hashes that map keys differing only in their
 * last bytes (an UnsafeRow of one long: 8 bytes of null bits, then the value) onto a few
 * thousand values, which turns hash-map buckets into trees.
 */
public class KeyBytes {
    public final byte[] bytes;
    private final long hash64; // kept whole for the key filter (no bigger an object than an int's)

    public KeyBytes(byte[] bytes) {
        this.bytes = bytes;
        this.hash64 = hash64(bytes);
    }

    /** {@link #hash64(byte[])} of {@link #bytes}. */
    public final long hash64() {
        return hash64;
    }

    private static final long M1 = 0x9e3779b97f4a7c15L;
    private static final long M2 = 0xc2b2ae3d27d4eb4fL;

    /**
     * A 64-bit hash of {@code key} read eight bytes at a time (each word multiplied, folded in
     * and rotated, as in xxHash's rounds), with murmur3's finaliser: every bit of the key
     * reaches every bit of the hash. Also the key filter's and the cache index's hash; it lives
     * only in this JVM's memory. Byte-at-a-time FNV-1a, its predecessor, cost a chain of 16
     * dependent multiplies for a key of one long, computed up to three times per read.
     */
    static long hash64(byte[] key) {
        return hash64(key, key.length);
    }

    /** {@link #hash64(byte[])} of the first {@code n} bytes of {@code key}. */
    static long hash64(byte[] key, int n) {
        long h = M2 ^ (n * M1);
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            h = Long.rotateLeft(h ^ (Platform.getLong(key, Platform.BYTE_ARRAY_OFFSET + i) * M1), 31) * M2;
        }
        if (i < n) {
            long tail = 0;
            for (int shift = 0; i < n; i++, shift += 8) {
                tail |= (key[i] & 0xffL) << shift;
            }
            h = Long.rotateLeft(h ^ (tail * M1), 31) * M2;
        }
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return h;
    }

    @Override
    public final boolean equals(Object o) {
        return o instanceof KeyBytes && Arrays.equals(bytes, ((KeyBytes) o).bytes);
    }

    @Override
    public final int hashCode() {
        return (int) (hash64 >>> 32);
    }
}
