package io.ttlstate.spark.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;

import org.junit.jupiter.api.Test;

/**
 * {@link KeyFilter}: never a false negative; about 0.1% false positives a stage, new stages of
 * twice the capacity as keys arrive; only grows.
 */
class KeyFilterTest {
    private static byte[] key(long i) {
        return ByteBuffer.allocate(16).putLong(0).putLong(i).array(); // an UnsafeRow of one long
    }

    private static double falsePositiveRate(KeyFilter f, long from, int n) {
        int hits = 0;
        for (long i = from; i < from + n; i++) {
            hits += f.mightContain(key(i)) ? 1 : 0;
        }
        return (double) hits / n;
    }

    @Test
    void neverForgetsAKeyAcrossItsStages() {
        KeyFilter f = new KeyFilter(1000);
        for (long i = 0; i < 50_000; i++) {
            f.add(key(i));
        }
        for (long i = 0; i < 50_000; i++) {
            assertTrue(f.mightContain(key(i)), "key " + i);
        }
        assertTrue(f.bytes() > 1024 * KeyFilter.BITS_PER_KEY / 8, "grew: " + f.bytes());
    }

    @Test
    void aStageAtItsCapacityHasAboutOneInAThousandFalsePositives() {
        KeyFilter f = new KeyFilter(100_000);
        for (long i = 0; i < 100_000; i++) {
            f.add(key(i));
        }
        assertEquals(100_000L * KeyFilter.BITS_PER_KEY / 8, f.bytes()); // one stage
        double rate = falsePositiveRate(f, 1_000_000, 200_000);
        assertTrue(rate < 0.003, "false positives: " + rate);
    }

    @Test
    void growingStagesKeepTheRateLow() {
        KeyFilter f = new KeyFilter(10_000);
        for (long i = 0; i < 150_000; i++) {
            f.add(key(i));
        }
        assertTrue(f.bytes() >= 150_000L * KeyFilter.BITS_PER_KEY / 8, "stages: " + f.bytes() + " bytes");
        double rate = falsePositiveRate(f, 1_000_000, 200_000);
        assertTrue(rate < 0.01, "false positives: " + rate);
    }

    @Test
    void countsAKeyOnce() {
        KeyFilter f = new KeyFilter(0);
        f.add(key(1));
        f.add(key(1));
        f.add(new byte[0]);
        assertEquals(2, f.keys());
        assertTrue(f.mightContain(new byte[0]));
        assertTrue(f.mightContain(key(1)));
    }

    @Test
    void anEmptyFilterHoldsNothingAndHasTheMinimumSize() {
        KeyFilter f = new KeyFilter(0);
        assertEquals(0, f.keys());
        assertEquals(1024L * KeyFilter.BITS_PER_KEY / 8, f.bytes());
        assertEquals(0.0, falsePositiveRate(f, 0, 10_000));
    }
}
