package io.ttlstate.spark.cache;

/**
 * The slabs of a {@link SlabCache}, oldest first: entries are appended to the newest, which
 * grows with the cache up to {@link #MAX_SLAB}, and memory is given back a slab at a time, the
 * oldest first. A base class of the cache, not a field of it, so that a lookup reaches a slab
 * without another indirection. Not thread-safe.
 */
abstract class SlabRing {
    /** The first slab's size; slabs double with the cache up to {@link #MAX_SLAB}. */
    static final int MIN_SLAB = 4 << 10;
    static final int MAX_SLAB = 256 << 10;

    /** Live slabs by id: slab {@code id} is at {@code ring[id & (ring.length - 1)]}; ids are consecutive. */
    private Slab[] ring = new Slab[8];
    private int oldestId;
    private int slabCount;
    private long slabBytes;

    final int slabCount() {
        return slabCount;
    }

    /** The id of the oldest slab (the first of a {@link #pinSlabs}). */
    final int oldestId() {
        return oldestId;
    }

    /** The oldest slab; only while there is one. */
    final Slab oldestSlab() {
        return slab(oldestId);
    }

    /** Native bytes the slabs take (dead bytes included). */
    final long slabBytes() {
        return slabBytes;
    }

    final Slab slab(int id) {
        return ring[id & (ring.length - 1)];
    }

    /** The newest slab if {@code entry} bytes fit in it, else a new one. */
    final Slab slabFor(int entry) {
        if (slabCount > 0) {
            Slab head = slab(oldestId + slabCount - 1);
            if (head.capacity - head.fill >= entry) {
                return head;
            }
        }
        long grown = Long.highestOneBit(Math.max(MIN_SLAB, slabBytes / 4));
        int size = (int) Math.max(entry, Math.min(MAX_SLAB, grown));
        if (slabCount == ring.length) {
            Slab[] bigger = new Slab[ring.length * 2];
            for (int k = 0; k < slabCount; k++) {
                Slab s = slab(oldestId + k);
                bigger[s.id & (bigger.length - 1)] = s;
            }
            ring = bigger;
        }
        if (slabCount == 0) {
            oldestId = 0;
        }
        Slab s = new Slab(size, oldestId + slabCount);
        ring[s.id & (ring.length - 1)] = s;
        slabCount++;
        slabBytes += size;
        return s;
    }

    /** The expiry time no entry of the oldest slab outlives (Long.MAX_VALUE if there is no slab). */
    final long oldestSlabExpiry() {
        return slabCount == 0 ? Long.MAX_VALUE : slab(oldestId).maxExpiresAt;
    }

    /** Gives up {@code old}, the oldest slab, once the index no longer names its entries. */
    final void retireOldest(Slab old) {
        ring[old.id & (ring.length - 1)] = null;
        oldestId++;
        slabCount--;
        slabBytes -= old.capacity;
        old.drop();
    }

    /**
     * Whether the slabs hold more dead bytes (of replaced or removed entries) than live ones,
     * and more than a slab's worth, in two slabs or more ({@link SlabCache#compactIfMostlyDead}).
     */
    final boolean mostlyDead() {
        long live = 0;
        long dead = 0;
        for (int k = 0; k < slabCount; k++) {
            Slab s = slab(oldestId + k);
            live += s.live;
            dead += s.fill - s.live;
        }
        return !(slabCount < 2 || dead <= live || dead <= MAX_SLAB);
    }

    /** Sets every slab's {@code maxExpiresAt} to none, for the caller to bring back to its live entries'. */
    final void clearMaxExpiries() {
        for (int k = 0; k < slabCount; k++) {
            slab(oldestId + k).maxExpiresAt = Long.MIN_VALUE;
        }
    }

    /** Every slab, oldest first, each pinned for a snapshot that reads them ({@link SlabSnapshot}). */
    final Slab[] pinSlabs() {
        Slab[] slabs = new Slab[slabCount];
        for (int k = 0; k < slabCount; k++) {
            slabs[k] = slab(oldestId + k);
            slabs[k].pin();
        }
        return slabs;
    }

    /** Gives every slab up. */
    final void dropSlabs() {
        for (int k = 0; k < slabCount; k++) {
            slab(oldestId + k).drop();
        }
        ring = new Slab[8];
        slabCount = 0;
        slabBytes = 0;
    }
}
