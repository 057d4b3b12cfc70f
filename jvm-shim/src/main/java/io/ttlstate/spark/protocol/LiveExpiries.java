package io.ttlstate.spark.protocol;

import java.util.Arrays;

/**
 * The tail of a WRITE_STAMPED frame: the {@code expiresAt} of each live entry its records of
 * kinds 5 and 6 name, counted by value (a frame's entries share few expiry times). An
 * open-addressing table of longs, kept in the order first seen; no boxing. Not thread-safe.
 */
public final class LiveExpiries {
    private long[] slotKeys = new long[16];
    /** Index into {@link #values}/{@link #counts} plus one (0: an empty slot). */
    private int[] slotIndex = new int[16];
    private long[] values = new long[8];
    private int[] counts = new int[8];
    private int size;
    private int lastIndex = -1;

    /** Counts one live entry expiring at {@code expiresAt}. */
    public void add(long expiresAt) {
        if (lastIndex >= 0 && values[lastIndex] == expiresAt) {
            counts[lastIndex]++;
            return;
        }
        int mask = slotKeys.length - 1;
        int slot = hash(expiresAt) & mask;
        while (slotIndex[slot] != 0) {
            if (slotKeys[slot] == expiresAt) {
                lastIndex = slotIndex[slot] - 1;
                counts[lastIndex]++;
                return;
            }
            slot = (slot + 1) & mask;
        }
        if (size == values.length) {
            values = Arrays.copyOf(values, size * 2);
            counts = Arrays.copyOf(counts, size * 2);
        }
        values[size] = expiresAt;
        counts[size] = 1;
        slotKeys[slot] = expiresAt;
        slotIndex[slot] = ++size;
        lastIndex = size - 1;
        if (size * 2 > slotKeys.length) {
            rehash(slotKeys.length * 2);
        }
    }

    /** Distinct expiry times counted. */
    public int size() {
        return size;
    }

    public long expiresAt(int i) {
        return values[i];
    }

    public int count(int i) {
        return counts[i];
    }

    /** Forgets every count (the table keeps its size). */
    public void clear() {
        if (size > 0) {
            Arrays.fill(slotIndex, 0);
            size = 0;
            lastIndex = -1;
        }
    }

    private void rehash(int slots) {
        slotKeys = new long[slots];
        slotIndex = new int[slots];
        int mask = slots - 1;
        for (int i = 0; i < size; i++) {
            int slot = hash(values[i]) & mask;
            while (slotIndex[slot] != 0) {
                slot = (slot + 1) & mask;
            }
            slotKeys[slot] = values[i];
            slotIndex[slot] = i + 1;
        }
    }

    private static int hash(long v) {
        long h = v * 0x9E3779B97F4A7C15L;
        return (int) (h ^ (h >>> 32));
    }
}
