package io.ttlstate.spark.cache;

import static io.ttlstate.spark.cache.SlabCacheTest.bytes;
import static io.ttlstate.spark.cache.SlabCacheTest.hex;
import static io.ttlstate.spark.cache.SlabCacheTest.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.NoSuchElementException;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

/** A {@link SlabSnapshot} reads the entries as they were, whatever the cache does after. */
class SlabCacheSnapshotTest {
    private static Map<String, String> drain(SlabSnapshot s, int chunk) {
        Map<String, String> out = new TreeMap<>();
        while (s.hasNext()) {
            byte[][][] kv = s.next();
            assertTrue(kv[0].length >= 1 && kv[0].length <= chunk, "chunk of " + kv[0].length);
            for (int i = 0; i < kv[0].length; i++) {
                out.put(hex(kv[0][i]), hex(kv[1][i]));
            }
        }
        return out;
    }

    @Test
    void seesTheEntriesAsTheyWereWhenTaken() {
        SlabCache c = new SlabCache();
        Map<String, String> expected = new TreeMap<>();
        for (int i = 0; i < 500; i++) {
            put(c, bytes("k" + i), bytes("v" + i), 0);
            expected.put(hex(bytes("k" + i)), hex(bytes("v" + i)));
        }
        SlabSnapshot s = c.snapshot().chunkEntries(7);
        put(c, bytes("k1"), bytes("changed"), 0);
        c.remove(bytes("k2"), SlabCache.hashOf(bytes("k2")));
        put(c, bytes("new"), bytes("n"), 0);
        c.dropOldest(false);
        c.clear(); // the slabs it reads stay until it is done
        for (int i = 0; i < 300; i++) {
            put(c, bytes("other" + i), new byte[200], 0); // new slabs: freed memory is not handed out under it
        }
        assertEquals(expected, drain(s, 7));
        assertThrows(NoSuchElementException.class, s::next);
    }

    @Test
    void anEmptyCachesSnapshotHasNoEntries() {
        SlabSnapshot s = new SlabCache().snapshot();
        assertFalse(s.hasNext());
    }
}
