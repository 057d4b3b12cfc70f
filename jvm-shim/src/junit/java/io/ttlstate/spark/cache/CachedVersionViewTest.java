package io.ttlstate.spark.cache;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ttlstate.spark.ttl.TtlRule;

/**
 * {@link CachedVersionView} serves one committed version: never another version's values, never
 * an expired value, and "absent" only when its key filter or its completeness says so.
 */
class CachedVersionViewTest {
    private static final long BUDGET = (1 << 20) + 7;
    private static final byte[] REMOVED = new byte[0];
    private final CachedVersionView view = new CachedVersionView(BUDGET, true);
    private final List<CachedVersionView> opened = new ArrayList<>();

    @AfterEach
    void close() {
        view.close();
        opened.forEach(CachedVersionView::close);
    }

    /** A view of a TTL store whose expired values may show ({@code mayShow}) or not; closed after the test. */
    private CachedVersionView ttlView(boolean mayShow) {
        CachedVersionView v = new CachedVersionView(BUDGET, true, false, mayShow);
        opened.add(v);
        return v;
    }

    private static byte[] b(String s) {
        return s.getBytes();
    }

    @Test
    void servesOnlyItsVersion() {
        view.reset(5, 10);
        view.remember(b("k"), b("v"), TtlRule.NEVER, 5);
        view.remember(b("old"), b("v"), TtlRule.NEVER, 4); // a read of another version: not kept
        assertArrayEquals(b("v"), view.lookup(b("k"), 5, 0).value);
        assertNull(view.lookup(b("k"), 6, 0));
        assertNull(view.lookup(b("old"), 5, 0));
        assertEquals(CachedVersionView.Presence.UNKNOWN, view.presence(b("k"), 4));
        assertEquals(CachedVersionView.Presence.PRESENT, view.presence(b("k"), 5));
    }

    @Test
    void noAnswerWithoutAValueCountsAsAValue() throws IllegalAccessException {
        int answers = 0;
        for (java.lang.reflect.Field f : CachedVersionView.class.getFields()) {
            int m = f.getModifiers();
            if (f.getType() == CachedVersionView.Cached.class && java.lang.reflect.Modifier.isStatic(m)
                    && java.lang.reflect.Modifier.isFinal(m)) {
                answers++;
                assertFalse(CachedVersionView.isValue((CachedVersionView.Cached) f.get(null)), f.getName());
            }
        }
        assertEquals(4, answers); // ABSENT, EXPIRED, NO_LIVE_VALUE, GONE
        view.reset(1, 10);
        view.remember(b("k"), b("v"), TtlRule.NEVER, 1);
        assertTrue(CachedVersionView.isValue(view.lookup(b("k"), 1, 0)));
        assertFalse(CachedVersionView.isValue(null));
    }

    @Test
    void eventTimeStampingGivesTheNeverExpiringValuesTheWatermarkOnce() {
        long ttl = 1000;
        view.reset(1, 10);
        view.remember(b("unstamped"), b("u"), TtlRule.eventTimeWriteExpiresAt(0, ttl), 1);
        view.remember(b("stamped"), b("s"), 1500, 1);
        assertEquals(0, view.stamped(0, 5000, ttl)); // another version: nothing
        assertEquals(0, view.stamped(1, 0, ttl)); // watermark 0: the worker does not stamp
        assertEquals(TtlRule.NEVER, view.lookup(b("unstamped"), 1, 0).expiresAt);
        assertEquals(1, view.stamped(1, 5000, ttl));
        assertEquals(6000, view.lookup(b("unstamped"), 1, 5000).expiresAt);
        assertEquals(1500, view.lookup(b("stamped"), 1, 1000).expiresAt); // a stamped value keeps its time
        assertEquals(0, view.stamped(1, 7000, ttl)); // once: nothing never-expiring is left
        assertEquals(6000, view.lookup(b("unstamped"), 1, 5000).expiresAt);
        // the slab's expiry follows the stamps: a commit at a clock past every value frees it
        long held = view.bytes();
        view.committed(1, 2, Map.of(), REMOVED, 6000, 6000, Long.MIN_VALUE);
        assertTrue(view.bytes() < held, held + " -> " + view.bytes());
        assertNull(view.lookup(b("unstamped"), 2, 6000));
    }

    @Test
    void neverServesAnExpiredValue() {
        view.reset(1, 10);
        view.remember(b("k"), b("v"), 1000, 1);
        CachedVersionView.Cached c = view.lookup(b("k"), 1, 999);
        assertEquals(1000, c.expiresAt);
        assertSame(CachedVersionView.EXPIRED, view.lookup(b("k"), 1, 1000, true)); // a peek keeps it
        assertSame(CachedVersionView.EXPIRED, view.lookup(b("k"), 1, 1000)); // expired at its expiry time
        assertNull(view.lookup(b("k"), 1, 0)); // and forgotten: the worker cleans it up
    }

    @Test
    void anEmptyVersionIsCompleteAndFollowsCommits() {
        view.reset(3, 0);
        assertTrue(view.isComplete());
        assertSame(CachedVersionView.ABSENT, view.lookup(b("any"), 3, 0));
        view.remember(b("gone"), b("x"), TtlRule.NEVER, 3);
        Map<KeyBytes, byte[]> writes = new LinkedHashMap<>();
        writes.put(new KeyBytes(b("k")), b("v"));
        writes.put(new KeyBytes(b("gone")), REMOVED);
        view.committed(3, 4, writes, REMOVED, 2000, 0, Long.MIN_VALUE);
        CachedVersionView.Cached k = view.lookup(b("k"), 4, 0);
        assertArrayEquals(b("v"), k.value);
        assertEquals(2000, k.expiresAt);
        assertSame(CachedVersionView.ABSENT, view.lookup(b("gone"), 4, 0));
        assertSame(CachedVersionView.ABSENT, view.lookup(b("other"), 4, 0));
        Iterator<byte[][][]> entries = view.entriesIfComplete(4, 10);
        byte[][][] chunk = entries.next();
        assertArrayEquals(new byte[][] {b("k")}, chunk[0]);
        assertFalse(entries.hasNext());
    }

    @Test
    void aCommitFromAnotherVersionForgetsEverything() {
        view.reset(3, 0);
        view.committed(7, 8, Map.of(new KeyBytes(b("k")), b("v")), REMOVED, TtlRule.NEVER, 0, Long.MIN_VALUE);
        assertNull(view.lookup(b("k"), 8, 0));
        assertNull(view.lookup(b("k"), 3, 0));
        assertFalse(view.isComplete());
    }

    @Test
    void theKeyFilterRulesOutAbsentKeys() {
        view.reset(5, 10);
        assertTrue(view.wantsWarmUp(5));
        assertNull(view.lookup(b("a"), 5, 0)); // filter unknown: ask the worker
        KeyFilter scanned = new KeyFilter(10);
        scanned.add(b("a"));
        view.filterReady(5, scanned, false, Long.MIN_VALUE);
        assertFalse(view.wantsWarmUp(5));
        assertFalse(view.isComplete());
        assertNull(view.lookup(b("a"), 5, 0)); // may be there: ask
        assertSame(CachedVersionView.ABSENT, view.lookup(b("b"), 5, 0));
        assertEquals(CachedVersionView.Presence.ABSENT, view.presence(b("b"), 5));
    }

    @Test
    void storedTellsALiveEntrysExpiryAndNotStoredOnlyFromTheFilterWithTtl() {
        view.reset(5, 0); // an empty version: complete, its filter empty
        view.written(new KeyBytes(b("live")), b("v"), 2000, 5);
        view.written(new KeyBytes(b("old")), b("v"), 1000, 5);
        view.written(new KeyBytes(b("never")), b("v"), TtlRule.NEVER, 5);
        assertEquals(2000, view.stored(new KeyBytes(b("live")), 5, 1500, true));
        // expired at now: the worker may have cleaned it up
        assertEquals(CachedVersionView.STORED_UNKNOWN, view.stored(new KeyBytes(b("old")), 5, 1500, true));
        // a saturated expiry tells no timestamp
        assertEquals(CachedVersionView.STORED_UNKNOWN, view.stored(new KeyBytes(b("never")), 5, 1500, true));
        assertEquals(CachedVersionView.NOT_STORED, view.stored(new KeyBytes(b("none")), 5, 1500, true));
        assertEquals(CachedVersionView.STORED_UNKNOWN, view.stored(new KeyBytes(b("live")), 4, 1500, true));
        // without TTL: present or absent, as presence says
        assertEquals(Long.MAX_VALUE, view.stored(new KeyBytes(b("old")), 5, 1500, false));

        // a loaded version whose filter holds a key the view does not (an expired stored entry):
        // complete holds every live entry, yet the key may be stored
        view.reset(6, 1);
        KeyFilter scanned = new KeyFilter(1);
        scanned.add(b("expired"));
        view.filterReady(6, scanned, true, 1000); // it left out an entry expiring at 1000
        assertTrue(view.isComplete());
        assertSame(CachedVersionView.NO_LIVE_VALUE, view.lookup(b("expired"), 6, 1500)); // no live entry, one may be stored
        assertEquals(CachedVersionView.STORED_UNKNOWN, view.stored(new KeyBytes(b("expired")), 6, 1500, true));
        assertEquals(CachedVersionView.NOT_STORED, view.stored(new KeyBytes(b("expired")), 6, 1500, false));
    }

    @Test
    void aTtlScanLeavesOutTheValuesExpiredAtItsClock() {
        view.reset(1, 0);
        view.written(new KeyBytes(b("a")), b("1"), 1000, 1);
        view.written(new KeyBytes(b("b")), b("2"), 3000, 1);
        byte[][][] chunk = view.entriesIfComplete(1, 10, 2000).next();
        assertArrayEquals(new byte[][] {b("b")}, chunk[0]);
        assertArrayEquals(new byte[][] {b("2")}, chunk[1]);
        assertEquals(2, view.entriesIfComplete(1, 10).next()[0].length);
    }

    @Test
    void anEvictionEndsCompleteness() {
        view.reset(1, 0);
        Map<KeyBytes, byte[]> writes = new LinkedHashMap<>();
        for (int i = 0; i < 3000; i++) {
            writes.put(new KeyBytes(b("k" + i)), new byte[1000]);
        }
        view.committed(1, 2, writes, REMOVED, TtlRule.NEVER, 0, Long.MIN_VALUE); // 3 MB into a 1 MiB budget
        assertTrue(view.bytes() <= BUDGET);
        assertFalse(view.isComplete());
        assertNull(view.entriesIfComplete(2, 10));
        assertNull(view.lookup(b("k0"), 2, 0)); // evicted, in the filter: ask the worker
        assertNotNull(view.lookup(b("k2999"), 2, 0).value);
        assertSame(CachedVersionView.ABSENT, view.lookup(b("never written"), 2, 0));
    }

    @Test
    void forgettingExpiredValuesKeepsAViewCompleteUnlessTheyMayStillShow() {
        for (boolean mayShow : new boolean[] {false, true}) {
            CachedVersionView v = ttlView(mayShow);
            v.reset(1, 0); // an empty version: complete
            v.written(new KeyBytes(b("old")), b("v"), 1000, 1);
            v.written(new KeyBytes(b("live")), b("v"), 5000, 1);
            assertSame(CachedVersionView.EXPIRED, v.lookup(b("old"), 1, 2000)); // expired at 2000: may be stored
            assertEquals(!mayShow, v.isComplete(), "mayShow " + mayShow);
            v.advance(1, 2, 2000, Long.MIN_VALUE);
            v.written(new KeyBytes(b("soon")), b("v"), 2500, 2);
            v.advance(2, 3, 6000, Long.MIN_VALUE); // every value expired: the slabs are freed
            assertEquals(!mayShow, v.isComplete(), "mayShow " + mayShow);
            if (!mayShow) { // it still holds every live entry: none
                assertSame(CachedVersionView.NO_LIVE_VALUE, v.lookup(b("live"), 3, 6000)); // stored, expired
                assertSame(CachedVersionView.ABSENT, v.lookup(b("never"), 3, 6000));
                assertFalse(v.entriesIfComplete(3, 10, 6000).hasNext());
                // the key filter still tells that the expired entries may be stored
                assertEquals(CachedVersionView.STORED_UNKNOWN, v.stored(new KeyBytes(b("live")), 3, 6000, true));
            }
        }
    }

    @Test
    void aKeyWhoseValueExpiredBeforeEveryStoredEntryIsNotStored() {
        CachedVersionView v = ttlView(false);
        v.reset(1, 0); // an empty version: complete
        v.written(new KeyBytes(b("a")), b("v"), 1000, 1);
        v.written(new KeyBytes(b("b")), b("v"), 3000, 1);
        v.written(new KeyBytes(b("c")), b("v"), 5000, 1);
        v.advance(1, 2, 500, Long.MIN_VALUE); // the worker told nothing
        assertSame(CachedVersionView.EXPIRED, v.lookup(b("a"), 2, 1500)); // may be stored: for the worker
        assertSame(CachedVersionView.EXPIRED, v.lookup(b("a"), 2, 1500)); // kept, so asked again
        assertEquals(CachedVersionView.STORED_UNKNOWN, v.stored(new KeyBytes(b("a")), 2, 1500, true));
        v.advance(2, 3, 1500, 3000); // no entry of version 3 expires before 3000
        assertEquals(CachedVersionView.NOT_STORED, v.stored(new KeyBytes(b("a")), 3, 3500, true));
        assertSame(CachedVersionView.GONE, v.lookup(b("a"), 3, 3500, true)); // a peek keeps it
        assertSame(CachedVersionView.GONE, v.lookup(b("a"), 3, 3500)); // forgotten now
        assertSame(CachedVersionView.EXPIRED, v.lookup(b("b"), 3, 3500)); // expired at 3000: may be stored
        assertArrayEquals(b("v"), v.lookup(b("c"), 3, 3500).value);
        assertTrue(v.isComplete());
        // complete: every value it forgot expired before 3000, so a key only the filter holds is not stored
        assertSame(CachedVersionView.GONE, v.lookup(b("a"), 3, 3500));
        assertEquals(CachedVersionView.NOT_STORED, v.stored(new KeyBytes(b("a")), 3, 3500, true));
        assertSame(CachedVersionView.ABSENT, v.lookup(b("never"), 3, 3500));
        v.advance(3, 4, 6000, 5500); // c's slab expired at 6000 and is freed; 5000 < 5500: c is not stored
        assertSame(CachedVersionView.GONE, v.lookup(b("c"), 4, 6000));
        v.advance(4, 5, 6000, 4000); // a version that may store entries expiring at 4000 (<= 5000, forgotten)
        assertSame(CachedVersionView.NO_LIVE_VALUE, v.lookup(b("c"), 5, 6000));
        assertEquals(CachedVersionView.STORED_UNKNOWN, v.stored(new KeyBytes(b("c")), 5, 6000, true));
        v.reset(6, 3); // a load: nothing known until a commit tells
        assertNull(v.lookup(b("a"), 6, 6000));
    }

    @Test
    void aWarmUpsLeftOutEntriesCountAsForgotten() {
        CachedVersionView v = ttlView(false);
        v.reset(1, 1);
        KeyFilter scanned = new KeyFilter(1);
        scanned.add(b("expired"));
        v.filterReady(1, scanned, true, 2000);
        v.advance(1, 2, 2500, 2000); // may store it (expiring at 2000)
        assertSame(CachedVersionView.NO_LIVE_VALUE, v.lookup(b("expired"), 2, 2500));
        v.advance(2, 3, 2500, 2001);
        assertSame(CachedVersionView.GONE, v.lookup(b("expired"), 3, 2500));
    }

    @Test
    void noKeyIsGoneWhereExpiredValuesMayShow() {
        CachedVersionView v = ttlView(true);
        v.reset(1, 0);
        v.written(new KeyBytes(b("a")), b("v"), 1000, 1);
        v.advance(1, 2, 500, 3000);
        assertSame(CachedVersionView.EXPIRED, v.lookup(b("a"), 2, 1500));
        assertEquals(CachedVersionView.STORED_UNKNOWN, v.stored(new KeyBytes(b("a")), 2, 1500, true));
    }
}
