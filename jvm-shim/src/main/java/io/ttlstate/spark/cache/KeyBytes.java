package io.ttlstate.spark.cache;

import java.util.Arrays;

/**
 * Key bytes as a hash-map key, with a well-mixed hash. {@code Arrays.hashCode} and
 * {@code ByteBuffer.hashCode} are polynomial hashes that map keys differing only in their
 * last bytes (an UnsafeRow of one long: 8 bytes of null bits, then the value) onto a few
 * thousand values, which turns hash-map buckets into trees.
 */
public class KeyBytes {
    public final byte[] bytes;
    private final int hash;

    public KeyBytes(byte[] bytes) {
        this.bytes = bytes;
        this.hash = (int) (hash64(bytes) >>> 32);
    }

    /** 64-bit FNV-1a with murmur3's finaliser: fast and well mixed (also the key filter's hash). */
    static long hash64(byte[] key) {
        long h = 0xcbf29ce484222325L;
        for (byte b : key) {
            h ^= b & 0xff;
            h *= 0x100000001b3L;
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
        return hash;
    }
}
