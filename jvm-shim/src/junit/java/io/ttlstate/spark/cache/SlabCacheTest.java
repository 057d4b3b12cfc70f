package io.ttlstate.spark.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** {@link SlabCache} as a map from key bytes to (value bytes, expiry time). */
class SlabCacheTest {
    static byte[] bytes(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    static String hex(byte[] b) {
        return HexFormat.of().formatHex(b);
    }

    static void put(SlabCache c, byte[] key, byte[] value, long expiresAt) {
        c.put(key, SlabCache.hashOf(key), value, expiresAt);
    }

    static int find(SlabCache c, byte[] key) {
        return c.find(key, SlabCache.hashOf(key));
    }

    /** The value held for {@code key}, or null. */
    static byte[] get(SlabCache c, byte[] key) {
        int slot = find(c, key);
        return slot < 0 ? null : c.value(slot);
    }

    @Test
    void holdsWhatWasPutAndReplacesIt() {
        SlabCache c = new SlabCache();
        assertEquals(-1, find(c, bytes("k")));
        put(c, bytes("k"), bytes("v1"), 100);
        put(c, bytes("k"), bytes("v2"), 200);
        assertEquals(1, c.size());
        int slot = find(c, bytes("k"));
        assertArrayEquals(bytes("v2"), c.value(slot));
        assertEquals(200, c.expiresAt(slot));
    }

    @Test
    void emptyKeysAndValuesAreEntriesLikeAnyOther() {
        SlabCache c = new SlabCache();
        put(c, new byte[0], new byte[0], Long.MAX_VALUE);
        put(c, new byte[] {0}, bytes("zero"), Long.MIN_VALUE);
        assertEquals(2, c.size());
        assertArrayEquals(new byte[0], get(c, new byte[0]));
        assertArrayEquals(bytes("zero"), get(c, new byte[] {0}));
        assertEquals(Long.MIN_VALUE, c.expiresAt(find(c, new byte[] {0})));
        assertTrue(c.remove(new byte[0], SlabCache.hashOf(new byte[0])));
        assertEquals(-1, find(c, new byte[0]));
    }

    @Test
    void removeSaysWhetherTheKeyWasHeld() {
        SlabCache c = new SlabCache();
        put(c, bytes("a"), bytes("1"), 0);
        assertFalse(c.remove(bytes("b"), SlabCache.hashOf(bytes("b"))));
        assertTrue(c.remove(bytes("a"), SlabCache.hashOf(bytes("a"))));
        assertFalse(c.remove(bytes("a"), SlabCache.hashOf(bytes("a"))));
        assertEquals(0, c.size());
    }

    @Test
    void anEntryLargerThanASlabGetsASlabOfItsOwn() {
        SlabCache c = new SlabCache();
        byte[] big = new byte[SlabCache.MAX_SLAB + 1000];
        new Random(1).nextBytes(big);
        put(c, bytes("small"), bytes("s"), 0);
        put(c, bytes("big"), big, 0);
        assertEquals(2, c.slabCount());
        assertArrayEquals(big, get(c, bytes("big")));
        assertTrue(c.memoryBytes() >= big.length + SlabCache.MIN_SLAB);
    }

    @Test
    void clearForgetsEverythingAndGivesTheMemoryBack() {
        SlabCache c = new SlabCache();
        for (int i = 0; i < 2000; i++) {
            put(c, bytes("k" + i), new byte[100], 0);
        }
        assertTrue(c.memoryBytes() > 2000 * 100);
        c.clear();
        assertEquals(0, c.size());
        assertEquals(0, c.slabCount());
        assertEquals(0, c.memoryBytes());
        assertEquals(-1, find(c, bytes("k1")));
        put(c, bytes("again"), bytes("v"), 0);
        assertArrayEquals(bytes("v"), get(c, bytes("again")));
    }

    /** Random puts, replacements and removals against a HashMap (index growth, backward-shift deletion). */
    @ParameterizedTest(name = "by prefix: {0}")
    @ValueSource(booleans = {false, true})
    void agreesWithAMapUnderRandomOperations(boolean byPrefix) {
        SlabCache c = new SlabCache(byPrefix);
        Map<String, byte[]> model = new HashMap<>();
        Random rng = new Random(7);
        List<byte[]> keys = new ArrayList<>();
        for (int i = 0; i < 3000; i++) {
            byte[] prefix = bytes("p" + rng.nextInt(40)); // few prefixes: long runs when placed by prefix
            byte[] key = new byte[4 + prefix.length + 4];
            PrefixedKey.putPrefixRowBytes(key, prefix.length);
            System.arraycopy(prefix, 0, key, 4, prefix.length);
            key[key.length - 2] = (byte) (i >> 8);
            key[key.length - 1] = (byte) i;
            keys.add(key);
        }
        for (int op = 0; op < 30_000; op++) {
            byte[] key = keys.get(rng.nextInt(keys.size()));
            String k = hex(key);
            if (rng.nextInt(3) == 0) {
                assertEquals(model.remove(k) != null, c.remove(key, SlabCache.hashOf(key)), k);
            } else {
                byte[] value = new byte[rng.nextInt(40)];
                rng.nextBytes(value);
                put(c, key, value, op);
                model.put(k, value);
            }
        }
        assertEquals(model.size(), c.size());
        for (byte[] key : keys) {
            byte[] want = model.get(hex(key));
            byte[] got = get(c, key);
            if (want == null) {
                assertNull(got);
            } else {
                assertArrayEquals(want, got);
            }
        }
    }
}
