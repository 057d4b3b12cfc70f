package io.ttlstate.spark.cache;

import java.util.ArrayList;
import java.util.List;

/**
 * A Bloom filter of the keys a store version may hold, so most lookups of absent keys cost
 * no round trip to the worker. It only grows: a removed key stays in it (a later lookup of
 * it asks the worker, which is correct, only slower). When a stage is full a new one of
 * twice the capacity is added (a scalable Bloom filter), so the false-positive rate stays
 * near {@code stages x} one stage's (about 0.1%) however many keys arrive. Not thread-safe.
 */
public final class KeyFilter {
    static final int BITS_PER_KEY = 16;
    private static final int MIN_CAPACITY = 1024;

    private final List<Stage> stages = new ArrayList<>();
    private long keys;

    /** An empty filter sized for {@code expectedKeys}. */
    public KeyFilter(long expectedKeys) {
        stages.add(new Stage(Math.max(MIN_CAPACITY, expectedKeys)));
    }

    public void add(byte[] key) {
        addHash(KeyBytes.hash64(key));
    }

    /** {@link #add} of the key whose {@link KeyBytes#hash64} is {@code h}. */
    void addHash(long h) {
        if (stages.get(stages.size() - 1).contains(h)) {
            return; // already (or seemingly) present: no need to fill the stage
        }
        Stage last = stages.get(stages.size() - 1);
        if (last.count >= last.capacity) {
            last = new Stage(2 * last.capacity);
            stages.add(last);
        }
        last.add(h);
        keys++;
    }

    public boolean mightContain(byte[] key) {
        return mightContainHash(KeyBytes.hash64(key));
    }

    /** {@link #mightContain} of the key whose {@link KeyBytes#hash64} is {@code h}. */
    boolean mightContainHash(long h) {
        for (int i = stages.size() - 1; i >= 0; i--) {
            if (stages.get(i).contains(h)) {
                return true;
            }
        }
        return false;
    }

    /** Keys added (those the filter did not seem to hold already). */
    long keys() {
        return keys;
    }

    /** Heap bytes of the bit arrays. */
    long bytes() {
        long b = 0;
        for (Stage s : stages) {
            b += 8L * s.bits.length;
        }
        return b;
    }

    /**
     * A blocked Bloom filter stage: each key sets (and a lookup tests) one bit in each of the
     * 8 words of one 64-byte block, so an operation touches one cache line instead of
     * {@code ~BITS_PER_KEY x ln 2} scattered ones (the split block Bloom filter of Parquet and
     * Impala; at 16 bits per key its false-positive rate is about 0.1%, measured in tests).
     */
    private static final class Stage {
        private static final long[] SALT = {
            0x47b6137b44974d91L, 0x8824ad5ba2b7289dL, 0x705495c72df1424bL, 0x9efc49475c6bfb31L,
            0x2ba5a4c5c1f1b4e5L, 0xa7d7f1e6c3b2d4c9L, 0x5bd1e9955bd1e995L, 0xc2b2ae3d27d4eb4fL};
        final long capacity;
        final long[] bits;
        final int blocks;
        long count;

        Stage(long capacity) {
            this.capacity = capacity;
            long words = Math.max(8, (capacity * BITS_PER_KEY + 63) / 64);
            this.blocks = (int) Math.min((words + 7) / 8, (Integer.MAX_VALUE - 8) / 8);
            this.bits = new long[8 * blocks];
        }

        /** The first word of the block of hash {@code h} (its high half picks the block). */
        private int block(long h) {
            return 8 * (int) (((h >>> 32) * blocks) >>> 32);
        }

        /** The bit {@code h}'s low half selects in word {@code i} of its block. */
        private static long mask(long h, int i) {
            return 1L << (((h & 0xffffffffL) * SALT[i]) >>> 58);
        }

        void add(long h) {
            int b = block(h);
            for (int i = 0; i < 8; i++) {
                bits[b + i] |= mask(h, i);
            }
            count++;
        }

        boolean contains(long h) {
            int b = block(h);
            for (int i = 0; i < 8; i++) {
                if ((bits[b + i] & mask(h, i)) == 0) {
                    return false;
                }
            }
            return true;
        }
    }
}
