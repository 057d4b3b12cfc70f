package io.ttlstate.spark.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

import io.ttlstate.spark.ttl.TtlRule;

/**
 * The value caches' memory budget ({@code cache.maxBytes}, {@link CacheBudget}): the views
 * of one budget hold at most it together; a view that writes past it evicts its own oldest
 * values, unless it is below its equal share and another is above its own, which then gives way
 * (docs/decisions/069-view-takes-back-its-share.md). Views share a budget by its size, so each
 * test uses a size of its own.
 */
class CacheBudgetTest {
    private final List<CachedVersionView> views = new ArrayList<>();

    private CachedVersionView view(long budget) {
        CachedVersionView v = new CachedVersionView(budget, false);
        v.reset(1, 100); // version 1, of keys the view does not know
        views.add(v);
        return v;
    }

    @AfterEach
    void closeViews() {
        views.forEach(CachedVersionView::close);
    }

    private static byte[] key(String view, int i) {
        return (view + i).getBytes();
    }

    private static void write(CachedVersionView v, String name, int from, int to, int valueBytes) {
        for (int i = from; i < to; i++) {
            v.remember(key(name, i), new byte[valueBytes], TtlRule.NEVER, 1);
        }
    }

    @Test
    void aViewEvictsItsOldestValuesToStayWithinTheBudget() {
        long budget = (64 << 10) + 1;
        CachedVersionView v = view(budget);
        for (int i = 0; i < 2000; i++) {
            write(v, "a", i, i + 1, 100);
            assertTrue(v.bytes() <= budget, "holds " + v.bytes() + " after " + i);
        }
        assertTrue(v.bytes() > budget / 2, "holds " + v.bytes());
        assertNotNull(v.lookup(key("a", 1999), 1, 0));
        assertNull(v.lookup(key("a", 0), 1, 0));
        v.close();
        assertEquals(0, v.bytes());
    }

    @Test
    void aViewBelowItsShareMakesTheOthersGiveWay() {
        long budget = (128 << 10) + 2;
        CachedVersionView a = view(budget);
        CachedVersionView b = view(budget);
        write(a, "a", 0, 400, 1000); // a takes the whole budget while b holds nothing
        assertTrue(a.bytes() > budget / 2 && a.bytes() <= budget, "a holds " + a.bytes());
        write(b, "b", 0, 40, 1000); // within b's share (half the budget)
        assertTrue(a.bytes() + b.bytes() <= budget, a.bytes() + " + " + b.bytes());
        assertTrue(b.bytes() <= budget / 2, "b holds " + b.bytes());
        for (int i = 0; i < 40; i++) {
            assertNotNull(b.lookup(key("b", i), 1, 0), "b's value " + i + " was evicted");
        }
        assertNotNull(a.lookup(key("a", 399), 1, 0)); // a gave back its oldest values
        assertNull(a.lookup(key("a", 0), 1, 0));
    }

    @Test
    void aClosedViewLeavesTheBudgetToTheOthers() {
        long budget = (128 << 10) + 3;
        CachedVersionView a = view(budget);
        CachedVersionView b = view(budget);
        write(a, "a", 0, 10, 1000);
        write(b, "b", 0, 50, 1000);
        assertTrue(b.bytes() > budget / 4 && a.bytes() + b.bytes() + budget / 4 < budget, a.bytes() + ", " + b.bytes());
        assertFalse(b.hasRoomFor(budget / 4), "the budget has room, b's share (half of it) has not");
        a.close();
        assertTrue(b.hasRoomFor(budget / 4));
        assertFalse(b.hasRoomFor(budget - b.bytes() + 1));
    }

    @Test
    void aZeroBudgetCachesNothing() {
        CachedVersionView v = view(0);
        write(v, "z", 0, 10, 10);
        assertEquals(0, v.bytes());
        assertNull(v.lookup(key("z", 1), 1, 0));
        assertFalse(v.hasRoomFor(1));
        v.reset(2, 0);
        assertFalse(v.isComplete(), "no cache, so never complete");
    }

    /** At most an eighth of the budget, and a quarter of the view's share, over the mean entry size. */
    @Test
    void aReadAheadFitsInAQuarterOfTheShare() {
        long budget = 1 << 20;
        CachedVersionView v = view(budget);
        assertEquals((budget / 8) / 256, v.prefetchRoom()); // empty: 256-byte entries assumed
        view(budget);
        view(budget);
        view(budget); // four views: a quarter of a quarter of the budget
        assertEquals((budget / 16) / 256, v.prefetchRoom());
    }
}
