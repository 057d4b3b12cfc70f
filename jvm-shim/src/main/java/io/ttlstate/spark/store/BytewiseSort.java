package io.ttlstate.spark.store;

import java.util.Arrays;

/**
 * Keys in RocksDB's bytewise order (unsigned lexicographic), for a read-ahead's MULTI_GET
 * (docs/decisions/088-bytewise-sort.md). A block's keys mostly differ within six bytes after the
 * prefix they all share
 * (an UnsafeRow key starts with its null bits), so each key's six bytes from there and its
 * index go into one {@code long}, a primitive sort orders those, and only keys whose six bytes
 * tie are compared whole. A comparator sort of 65,536 keys cost about 13 ms a block.
 */
public final class BytewiseSort {
    /** Keys sorted by packed prefixes at most: an index takes the low 16 bits of a packed key. */
    static final int MAX_PACKED = 1 << 16;
    private static final int PREFIX_BYTES = 6;

    private BytewiseSort() {}

    /** A new array of {@code keys[0..n)} in bytewise order (equal keys in any order). */
    public static byte[][] sorted(byte[][] keys, int n) {
        if (n > MAX_PACKED || n < 2) {
            byte[][] out = Arrays.copyOf(keys, n);
            Arrays.sort(out, Arrays::compareUnsigned);
            return out;
        }
        int common = commonPrefix(keys, n);
        long[] packed = new long[n];
        for (int i = 0; i < n; i++) {
            packed[i] = ((prefix(keys[i], common) << 16) | i) ^ Long.MIN_VALUE; // signed order = unsigned
        }
        Arrays.sort(packed);
        byte[][] out = new byte[n][];
        for (int i = 0; i < n; i++) {
            out[i] = keys[(int) (packed[i] & 0xFFFF)];
        }
        int start = 0;
        for (int i = 1; i <= n; i++) { // runs of equal prefixes: ordered by the whole key
            if (i == n || (packed[i] >>> 16) != (packed[start] >>> 16)) {
                if (i - start > 1) {
                    Arrays.sort(out, start, i, Arrays::compareUnsigned);
                }
                start = i;
            }
        }
        return out;
    }

    /** How many leading bytes all of {@code keys[0..n)} share (at most the shortest's length). */
    private static int commonPrefix(byte[][] keys, int n) {
        byte[] first = keys[0];
        int common = first.length;
        for (int i = 1; i < n && common > 0; i++) {
            byte[] k = keys[i];
            int m = Arrays.mismatch(first, 0, common, k, 0, Math.min(common, k.length));
            if (m >= 0) {
                common = m;
            }
        }
        return common;
    }

    /**
     * The {@link #PREFIX_BYTES} bytes of {@code key} from {@code from}, big-endian, zeros past
     * its end: a key before another in bytewise order never has a larger prefix.
     */
    private static long prefix(byte[] key, int from) {
        long p = 0;
        for (int j = 0; j < PREFIX_BYTES; j++) {
            int at = from + j;
            p = (p << 8) | (at < key.length ? key[at] & 0xFF : 0);
        }
        return p;
    }
}
