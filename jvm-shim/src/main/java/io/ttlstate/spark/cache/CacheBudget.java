package io.ttlstate.spark.cache;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The executor's memory budget for value caches: all {@link CachedVersionView}s of the JVM with
 * the same budget ({@code cache.maxBytes}) share one, which counts the bytes they hold and the
 * views open with it, and decides which view gives memory back.
 *
 * <p>A view may grow while the views together hold less than the budget, and one that writes
 * while they hold more evicts its own least recently used values until they fit again, so busy
 * stores use what idle ones leave (a store's values go when it closes); but a view below its
 * equal share (the budget divided by the open views with it) is not held there by views above
 * theirs: those give back their oldest values down to their share instead
 * (docs/decisions/069-view-takes-back-its-share.md: stores
 * of a stopped query stay open until Spark's maintenance unloads them, and a new query's
 * stores could otherwise keep no more than one slab, losing what they read ahead). What a
 * view holds is counted as the memory its slabs (native) and index (heap) take (dead bytes of replaced or
 * removed values included, until their slab is freed). The
 * warm-up after a load fills at most an equal share, so the first store loaded does not take the
 * budget from the others. Thread-safe: each view's count is read without its lock.
 */
final class CacheBudget {
    /** The budgets of this JVM by their size: views with the same size share one. */
    private static final Map<Long, CacheBudget> BUDGETS = new ConcurrentHashMap<>();

    /** The budget's size in bytes (0: no cache). */
    final long maxBytes;
    /** Bytes its views hold together. */
    private final AtomicLong held = new AtomicLong();
    private final Set<CachedVersionView> views = ConcurrentHashMap.newKeySet();

    private CacheBudget(long maxBytes) {
        this.maxBytes = maxBytes;
    }

    /** The budget of {@code maxBytes} (at least 0) that every view of that size shares. */
    static CacheBudget of(long maxBytes) {
        return BUDGETS.computeIfAbsent(Math.max(0, maxBytes), CacheBudget::new);
    }

    /**
     * The largest cache budget this JVM can hold: the values live in direct buffers (native
     * memory, docs/decisions/054-native-memory-slabs.md), limited by {@code
     * -XX:MaxDirectMemorySize} (by default the heap's maximum).
     */
    static long maxBudgetBytes() {
        return NativeMemory.directMemoryLimit();
    }

    /** {@code view} opened with this budget: it counts in the shares from now on. */
    void join(CachedVersionView view) {
        views.add(view);
    }

    /** {@code view} closed: it no longer counts in the shares. */
    void leave(CachedVersionView view) {
        views.remove(view);
    }

    /** A view's count changed by {@code delta} bytes. */
    void add(long delta) {
        held.addAndGet(delta);
    }

    /** The budget divided by the open views with it. */
    long share() {
        return maxBytes / Math.max(1, views.size());
    }

    /**
     * Whether a view holding {@code bytes} may add {@code entryBytes} within its share and
     * without exceeding the budget (a warm-up stops where it may not).
     */
    boolean hasRoomFor(long bytes, long entryBytes) {
        return bytes + entryBytes <= share() && held.get() + entryBytes <= maxBytes;
    }

    /** Whether the budget is exceeded while a view holding {@code bytes} is above its share. */
    boolean aboveShare(long bytes) {
        return held.get() > maxBytes && bytes > share();
    }

    /**
     * Whether {@code view}, which just added a value, frees its own oldest slab: the budget is
     * exceeded and the view is above its share or no other view is above its own (else that
     * one gives way, {@link #reclaimShare}).
     */
    boolean evictsOwn(CachedVersionView view) {
        return held.get() > maxBytes && (view.budgeted() > share() || mostAboveShare(view) == null);
    }

    /** Another open view of this budget above its share (the one most above it), or null. */
    private CachedVersionView mostAboveShare(CachedVersionView except) {
        long share = share();
        CachedVersionView most = null;
        long mostOver = 0;
        for (CachedVersionView v : views) {
            long over = v.budgeted() - share;
            if (v != except && over > mostOver) {
                most = v;
                mostOver = over;
            }
        }
        return most;
    }

    /**
     * While the budget is exceeded, the views above their share (other than {@code asking})
     * give back their oldest values down to it. Called without {@code asking}'s lock (it takes
     * one other view's lock at a time, so two views doing this at once cannot deadlock).
     */
    void reclaimShare(CachedVersionView asking) {
        CachedVersionView other;
        while (held.get() > maxBytes && (other = mostAboveShare(asking)) != null) {
            if (!other.giveBackAboveShare()) {
                return;
            }
        }
    }
}
