package io.ttlstate.spark.cache;

import java.util.Arrays;

import io.ttlstate.spark.ttl.TtlRule;

/**
 * A map from key bytes to (value bytes, expiry time) kept in a few large blocks of native
 * memory ("slabs", {@link Slab}, {@link SlabRing}) and an open-addressing index of primitive
 * arrays ({@link SlabIndex}): no
 * Java object per entry (docs/decisions/048-slab-cache.md; a {@code LinkedHashMap} of byte arrays
 * made G1 grow the
 * heap to about five times what it held), and the values outside the Java heap, which G1 sizes
 * at a multiple of its live set (docs/decisions/054-native-memory-slabs.md).
 *
 * <p>Entries are appended to the newest slab and never changed in place: replacing or removing
 * a key leaves its old bytes dead in their slab. Memory is given back a slab at a time, oldest
 * first ({@link #dropOldest}); entries of that slab read since they were written move to the
 * newest slab (a second chance: CLOCK's approximation of least-recently-used), and so do all
 * of its live entries when most of it is dead (the slab is compacted, nothing is evicted:
 * a store that rewrites its values would otherwise lose live ones for dead bytes). Because slabs
 * are immutable once written, a {@link SlabSnapshot} reads them safely while the cache changes; a
 * slab the cache drops is freed once no snapshot reads it.
 * Not thread-safe: {@link CachedVersionView} synchronises.
 */
final class SlabCache extends SlabIndex {
    /** Bytes one entry takes besides its key and value: its header and its share of the index. */
    static final int ENTRY_OVERHEAD = Slab.HEADER + (int) Math.round(SLOT_BYTES / LOAD);
    /** {@link #ENTRY_OVERHEAD} with a slot's tag, for a cache placed by prefix. */
    static final int PREFIXED_ENTRY_OVERHEAD = Slab.HEADER + (int) Math.round((SLOT_BYTES + 4) / LOAD);

    /** A cache of keys placed by their own hash. */
    SlabCache() {
        this(false);
    }

    /** {@code byPrefix}: the keys are {@link PrefixedKey}s, placed by their prefix's hash. */
    SlabCache(boolean byPrefix) {
        super(byPrefix);
    }

    /** Bytes one entry of this cache takes besides its key and value. */
    int entryOverhead() {
        return byPrefix() ? PREFIXED_ENTRY_OVERHEAD : ENTRY_OVERHEAD;
    }

    /** Bytes this cache holds beyond an empty one (its slabs, and the index's growth). */
    long memoryBytes() {
        return slabBytes() + indexGrowthBytes();
    }

    /** A copy of the value at {@code slot}. */
    byte[] value(int slot) {
        return Slab.valueAt(entryAt(slot));
    }

    long expiresAt(int slot) {
        return Slab.expiresAt(entryAt(slot));
    }

    /** Maps {@code key} to {@code value} and {@code expiresAt}, replacing what it mapped to. */
    void put(byte[] key, int hash, byte[] value, long expiresAt) {
        int entry = Slab.HEADER + key.length + value.length;
        Slab s = slabFor(entry); // first: allocation may fail, and the index is untouched yet
        int slot = find(key, hash);
        if (slot >= 0) {
            forget(slot);
        } else {
            slot = addSlot(key, hash);
        }
        int o = s.append(home(slot), key, value, expiresAt);
        point(slot, s, o, false);
    }

    /**
     * Gives every entry that expires at {@code from} the expiry time {@code to} instead, in place
     * (the only change made to an entry in a slab: {@link SlabSnapshot}s copy keys and values, never
     * the expiry time), and brings each slab's {@code maxExpiresAt} back to its live entries'
     * largest; returns how many entries changed. For EventTime's stamping
     * (docs/decisions/104-event-time-jvm-view.md).
     */
    int restamp(long from, long to) {
        int changed = 0;
        for (int i = 0; i < slots(); i++) {
            if (used(i)) {
                long at = entryAt(i);
                if (Slab.expiresAt(at) == from) {
                    Slab.setExpiresAt(at, to);
                    changed++;
                }
            }
        }
        if (changed > 0) {
            clearMaxExpiries();
            for (int i = 0; i < slots(); i++) {
                if (used(i)) {
                    Slab sl = slab(slabIdOf(i));
                    sl.maxExpiresAt = Math.max(sl.maxExpiresAt, Slab.expiresAt(entryAt(i)));
                }
            }
        }
        return changed;
    }

    /** Forgets {@code key}; whether it was held. */
    boolean remove(byte[] key, int hash) {
        int slot = find(key, hash);
        if (slot < 0) {
            return false;
        }
        forget(slot);
        deleteSlot(slot);
        return true;
    }

    /**
     * Frees the oldest slab. If {@code secondChance} and another slab exists, its live entries
     * move to the newest slab when at most half of its bytes are live (compaction), else those
     * read since written do; the others are forgotten. Returns how many entries were forgotten.
     */
    int dropOldest(boolean secondChance) {
        return dropOldest(secondChance, false, Long.MIN_VALUE);
    }

    /**
     * {@link #dropOldest(boolean)}; {@code keepAll}: every live entry moves (if another slab
     * exists) except those expired at {@code now}.
     */
    private int dropOldest(boolean secondChance, boolean keepAll, long now) {
        if (slabCount() == 0) {
            return 0;
        }
        Slab old = oldestSlab();
        boolean canMove = secondChance && slabCount() > 1;
        boolean moveAll = canMove && (keepAll || old.live <= old.fill / 2);
        int dropped = 0;
        for (int o = 0; o < old.fill; ) {
            long at = old.address + o;
            int entry = Slab.entryBytes(at);
            int slot = slotOf(Slab.home(at), old.id, o);
            if (slot >= 0) {
                boolean keep = moveAll || (canMove && accessed(slot));
                if (keep && (!keepAll || !TtlRule.expired(Slab.expiresAt(at), now))) {
                    Slab s = slabFor(entry);
                    point(slot, s, s.copy(at, entry), moveAll && accessed(slot));
                } else {
                    deleteSlot(slot);
                    dropped++;
                }
            }
            o += entry;
        }
        retireOldest(old);
        return dropped;
    }

    /**
     * Once the slabs hold more dead bytes (of replaced or removed entries) than live ones, and
     * more than a slab's worth, moves the live entries of every slab but the newest to the
     * newest, freeing them; forgets only values expired at {@code now} (moving them would keep
     * them from the expiry of whole slabs). Returns how many it forgot. Without it a store that rewrites a small state
     * (a session window's sessions, every batch) kept its dead bytes until the budget pressed,
     * the budget's whole size of native memory (docs/decisions/075-slab-compaction-at-commit.md).
     * The copying is at most the live
     * bytes, once the dead ones outgrew them: amortised, a copy per byte written.
     */
    int compactIfMostlyDead(long now) {
        if (!mostlyDead()) {
            return 0;
        }
        int forgotten = 0;
        for (int n = slabCount() - 1; n > 0; n--) {
            forgotten += dropOldest(true, true, now);
        }
        return forgotten;
    }

    /** Forgets everything and gives the memory back. */
    void clear() {
        dropSlabs();
        clearIndex();
    }

    /** Every entry as it is now; later changes to the cache do not show in it. */
    SlabSnapshot snapshot() {
        return snapshot(Long.MIN_VALUE);
    }

    /** {@link #snapshot()} without the entries expired at {@code now} ({@code TtlRule}). */
    SlabSnapshot snapshot(long now) {
        int[] ids = new int[size()];
        int[] offs = new int[size()];
        int n = 0;
        for (int i = 0; i < slots(); i++) {
            if (used(i)) {
                int off = offsetOf(i);
                if (now != Long.MIN_VALUE && TtlRule.expired(Slab.expiresAt(slab(slabIdOf(i)).address + off), now)) {
                    continue;
                }
                ids[n] = slabIdOf(i);
                offs[n++] = off;
            }
        }
        if (n < size()) {
            ids = Arrays.copyOf(ids, n);
            offs = Arrays.copyOf(offs, n);
        }
        return new SlabSnapshot(pinSlabs(), oldestId(), ids, offs);
    }
}
