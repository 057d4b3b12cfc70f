package io.ttlstate.spark.cache;

import java.util.ArrayList;
import java.util.List;

/**
 * A Bloom filter of the keys a store version may hold, so most lookups of absent keys cost
 * no round trip to the worker. It only grows: a removed key stays in it (a later lookup of
 * it asks the worker, which is correct, only slower). When a stage is full a new one of
 * twice the capacity is added (a scalable Bloom filter), so the false-positive rate stays
 * near {@code stages x 2^-(BITS_PER_KEY x ln 2)} however many keys arrive. Not thread-safe.
 */
public final class KeyFilter {
    static final int BITS_PER_KEY = 16;
    private static final int HASHES = 11; // ~ BITS_PER_KEY x ln 2
    private static final int MIN_CAPACITY = 1024;

    private final List<Stage> stages = new ArrayList<>();
    private long keys;

    /** An empty filter sized for {@code expectedKeys}. */
    public KeyFilter(long expectedKeys) {
        stages.add(new Stage(Math.max(MIN_CAPACITY, expectedKeys)));
    }

    public void add(byte[] key) {
        long h = KeyBytes.hash64(key);
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

    boolean mightContain(byte[] key) {
        long h = KeyBytes.hash64(key);
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

    private static final class Stage {
        final long capacity;
        final long[] bits;
        final long numBits;
        long count;

        Stage(long capacity) {
            this.capacity = capacity;
            long words = Math.max(1, (capacity * BITS_PER_KEY + 63) / 64);
            this.bits = new long[(int) Math.min(words, Integer.MAX_VALUE - 8)];
            this.numBits = 64L * bits.length;
        }

        void add(long h) {
            int h1 = (int) h;
            int h2 = (int) (h >>> 32);
            for (int i = 0; i < HASHES; i++) {
                long bit = Integer.toUnsignedLong(h1 + i * h2) % numBits;
                bits[(int) (bit >>> 6)] |= 1L << bit;
            }
            count++;
        }

        boolean contains(long h) {
            int h1 = (int) h;
            int h2 = (int) (h >>> 32);
            for (int i = 0; i < HASHES; i++) {
                long bit = Integer.toUnsignedLong(h1 + i * h2) % numBits;
                if ((bits[(int) (bit >>> 6)] & (1L << bit)) == 0) {
                    return false;
                }
            }
            return true;
        }
    }
}
