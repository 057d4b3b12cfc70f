package io.ttlstate.spark.cache;

import static io.ttlstate.spark.cache.SlabCacheTest.bytes;
import static io.ttlstate.spark.cache.SlabCacheTest.find;
import static io.ttlstate.spark.cache.SlabCacheTest.hex;
import static io.ttlstate.spark.cache.SlabCacheTest.put;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import java.util.TreeSet;

import org.junit.jupiter.api.Test;

/**
 * A {@link SlabCache} of {@link PrefixedKey}s finds all keys of a prefix in its probe runs
 * ({@link SlabCache#withPrefix}), until the prefix has more keys than its runs hold
 * (docs/decisions/074-prefix-scans-from-complete-view.md,
 * docs/decisions/080-providerbench-fix-and-prefix-runs.md).
 */
class SlabCachePrefixTest {
    /** {@code [u32 n][prefix][suffix]}. */
    static byte[] key(String prefix, String suffix) {
        byte[] p = bytes(prefix);
        byte[] s = bytes(suffix);
        byte[] k = new byte[4 + p.length + s.length];
        PrefixedKey.putPrefixRowBytes(k, p.length);
        System.arraycopy(p, 0, k, 4, p.length);
        System.arraycopy(s, 0, k, 4 + p.length, s.length);
        return k;
    }

    static byte[] prefix(String prefix) {
        return key(prefix, "");
    }

    private static Set<String> keysWithPrefix(SlabCache c, String prefix) {
        byte[][][] found = c.withPrefix(prefix(prefix));
        if (found == null) {
            return null;
        }
        assertEquals(found[0].length, found[1].length);
        Set<String> out = new TreeSet<>();
        for (int i = 0; i < found[0].length; i++) {
            assertEquals(hex(found[0][i]), hex(found[1][i]), "the value of key " + hex(found[0][i]));
            out.add(hex(found[0][i]));
        }
        return out;
    }

    /** Puts keys {@code prefix + 0..n-1}, each with itself as value; returns their hex. */
    private static Set<String> putKeys(SlabCache c, String prefix, int n) {
        Set<String> out = new TreeSet<>();
        for (int i = 0; i < n; i++) {
            byte[] k = key(prefix, Integer.toString(i));
            put(c, k, k, 0);
            out.add(hex(k));
        }
        return out;
    }

    @Test
    void leavesOutTheKeysExpiredAtItsClock() {
        SlabCache c = new SlabCache(true);
        byte[] old = key("alice", "old");
        byte[] live = key("alice", "live");
        put(c, old, old, 1000);
        put(c, live, live, 3000);
        byte[][][] found = c.withPrefix(prefix("alice"), 2000);
        assertEquals(Set.of(hex(live)), Set.of(hex(found[0][0])));
        assertEquals(1, found[0].length);
        assertEquals(2, c.withPrefix(prefix("alice"))[0].length); // no clock: every key
    }

    @Test
    void findsExactlyThePrefixsKeys() {
        SlabCache c = new SlabCache(true);
        Set<String> alice = putKeys(c, "alice", 20);
        putKeys(c, "bob", 20);
        putKeys(c, "alic", 20); // a shorter prefix: another length field, so no match
        assertEquals(alice, keysWithPrefix(c, "alice"));
        assertEquals(Set.of(), keysWithPrefix(c, "carol"));
        c.remove(key("alice", "3"), SlabCache.hashOf(key("alice", "3")));
        alice.remove(hex(key("alice", "3")));
        assertEquals(alice, keysWithPrefix(c, "alice"));
    }

    @Test
    void aPrefixOfMoreKeysThanOneRunGoesOnInItsNextRuns() {
        SlabCache c = new SlabCache(true);
        int n = SlabCache.MAX_PREFIX_KEYS * (SlabCache.MAX_PREFIX_RUNS - 1) + 10;
        Set<String> keys = putKeys(c, "crowded", n);
        putKeys(c, "other", 5);
        assertEquals(keys, keysWithPrefix(c, "crowded"));
        assertEquals(5, keysWithPrefix(c, "other").size());
    }

    @Test
    void pastItsLastRunAPrefixIsNotServedButItsKeysAreStillFound() {
        SlabCache c = new SlabCache(true);
        int n = SlabCache.MAX_PREFIX_KEYS * SlabCache.MAX_PREFIX_RUNS + 50;
        putKeys(c, "huge", n);
        assertNull(keysWithPrefix(c, "huge"));
        for (int i = 0; i < n; i++) {
            assertTrue(find(c, key("huge", Integer.toString(i))) >= 0, "key " + i);
        }
        assertEquals(n, c.size());
        assertNotNull(keysWithPrefix(c, "small"));
    }

    @Test
    void keysShorterThanTheirLengthFieldAreTheirOwnPrefix() {
        SlabCache c = new SlabCache(true);
        byte[] odd = {0, 0, 0, 9, 1}; // says 9 bytes of prefix row, has 1
        put(c, odd, bytes("v"), 0);
        put(c, new byte[] {1}, bytes("w"), 0);
        assertTrue(find(c, odd) >= 0);
        assertTrue(find(c, new byte[] {1}) >= 0);
        assertEquals(5, PrefixedKey.prefixBytes(odd));
        assertEquals(1, PrefixedKey.prefixBytes(new byte[] {1}));
    }

    @Test
    void aCacheNotPlacedByPrefixRefusesPrefixLookups() {
        assertThrows(IllegalStateException.class, () -> new SlabCache(false).withPrefix(prefix("a")));
    }
}
