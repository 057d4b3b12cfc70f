package io.ttlstate.spark.cache;

import static io.ttlstate.spark.cache.SlabCacheTest.bytes;
import static io.ttlstate.spark.cache.SlabCacheTest.find;
import static io.ttlstate.spark.cache.SlabCacheTest.get;
import static io.ttlstate.spark.cache.SlabCacheTest.put;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/**
 * {@link SlabCache} gives memory back a slab at a time, oldest first: read entries get a second
 * chance, a mostly dead slab is compacted, and slabs of dead or expired bytes are freed.
 */
class SlabCacheEvictionTest {
    /** Key {@code k<i>} (4 bytes for i < 1000); value of {@code 76 - key} bytes: 100 bytes with the header, 40 a first slab. */
    private static byte[] key(int i) {
        return bytes(String.format("k%03d", i));
    }

    private static byte[] value(int i) {
        byte[] v = new byte[100 - Slab.HEADER - 4];
        v[0] = (byte) i;
        return v;
    }

    private static SlabCache filled(int n, long expiresAt) {
        SlabCache c = new SlabCache();
        for (int i = 0; i < n; i++) {
            put(c, key(i), value(i), expiresAt);
        }
        return c;
    }

    @Test
    void dropOldestForgetsTheOldestSlabsEntries() {
        SlabCache c = filled(100, 0);
        assertEquals(3, c.slabCount()); // 40 + 40 + 20 entries of 100 bytes in 4 KiB slabs
        assertEquals(40, c.dropOldest(false));
        assertEquals(60, c.size());
        assertEquals(2, c.slabCount());
        for (int i = 0; i < 100; i++) {
            assertEquals(i >= 40, find(c, key(i)) >= 0, "key " + i);
        }
        assertArrayEquals(value(40), get(c, key(40)));
    }

    @Test
    void entriesReadSinceWrittenGetASecondChance() {
        SlabCache c = filled(100, 0);
        c.touch(find(c, key(5)));
        c.touch(find(c, key(39)));
        assertEquals(38, c.dropOldest(true));
        assertArrayEquals(value(5), get(c, key(5)));
        assertArrayEquals(value(39), get(c, key(39)));
        assertEquals(-1, find(c, key(6)));
        assertEquals(62, c.size());
        assertEquals(40, c.dropOldest(false)); // the next slab, keys 40-79: no second chance asked
    }

    @Test
    void theLastSlabGoesWholeEvenWithSecondChance() {
        SlabCache c = filled(10, 0);
        c.touch(find(c, key(1)));
        assertEquals(10, c.dropOldest(true));
        assertEquals(0, c.size());
        assertEquals(0, c.slabCount());
        assertEquals(0, c.dropOldest(true)); // nothing left
    }

    @Test
    void aMostlyDeadSlabIsCompactedNotEvicted() {
        SlabCache c = filled(40, 0); // the first slab, full
        for (int i = 0; i < 30; i++) {
            put(c, key(i), value(i + 100), 0); // its bytes of keys 0-29 turn dead
        }
        assertEquals(0, c.dropOldest(true));
        assertEquals(40, c.size());
        for (int i = 0; i < 40; i++) {
            assertArrayEquals(value(i < 30 ? i + 100 : i), get(c, key(i)), "key " + i);
        }
    }

    @Test
    void oldestSlabExpiryIsTheLatestExpiryInIt() {
        SlabCache c = new SlabCache();
        assertEquals(Long.MAX_VALUE, c.oldestSlabExpiry());
        for (int i = 0; i < 50; i++) {
            put(c, key(i), value(i), i < 40 ? 1000 + i : 5000);
        }
        assertEquals(1039, c.oldestSlabExpiry());
        c.dropOldest(false);
        assertEquals(5000, c.oldestSlabExpiry());
    }

    /** A small state rewritten many times: its dead bytes are freed, and values expired at {@code now} forgotten. */
    @Test
    void compactsWhenMostBytesAreDead() {
        SlabCache c = new SlabCache();
        byte[] big = new byte[1000];
        put(c, key(0), big, 50);
        put(c, key(1), big, 50);
        for (int round = 0; round < 400; round++) {
            for (int i = 2; i < 10; i++) {
                put(c, key(i), big, 10_000 + round);
            }
        }
        long before = c.memoryBytes();
        assertTrue(before > 2 * SlabCache.MAX_SLAB, "held " + before);
        assertEquals(2, c.compactIfMostlyDead(100)); // keys 0 and 1, in the oldest slab, expired at 50
        assertEquals(8, c.size());
        assertTrue(c.slabCount() <= 2 && c.memoryBytes() <= 2L * SlabCache.MAX_SLAB,
                "held " + c.memoryBytes() + " of " + before);
        for (int i = 2; i < 10; i++) {
            assertEquals(10_399, c.expiresAt(find(c, key(i))));
        }
        assertEquals(0, c.compactIfMostlyDead(100)); // nothing dead left
    }

    @Test
    void doesNotCompactWhileLiveBytesDominate() {
        SlabCache c = filled(100, 0);
        long before = c.memoryBytes();
        assertEquals(0, c.compactIfMostlyDead(Long.MAX_VALUE));
        assertEquals(100, c.size());
        assertEquals(before, c.memoryBytes());
    }
}
