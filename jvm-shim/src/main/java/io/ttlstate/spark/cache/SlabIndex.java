package io.ttlstate.spark.cache;

import java.util.ArrayList;
import java.util.List;

import io.ttlstate.spark.ttl.TtlRule;

/**
 * The index of a {@link SlabCache}: open addressing with linear probing over primitive arrays,
 * no Java object per entry (docs/decisions/048-slab-cache.md) and no tombstones. A slot names
 * an entry in a slab by slab id and offset, with the home hash its probe starts from and a bit
 * set when the entry was read since it was written or moved (its second chance).
 *
 * <p>A cache of {@link PrefixedKey}s places each key by its prefix's hash and tells keys apart
 * by their own hash (a fourth index array, {@code tags}): the keys of one prefix then lie in one
 * probe run, and {@link #withPrefix} finds them all without looking at any other run
 * (docs/decisions/074-prefix-scans-from-complete-view.md).
 * A prefix of more keys than one run may hold ({@link #crowded}) goes on in a next run, from a
 * hash derived from its prefix's ({@link #runHome}), up to {@link #MAX_PREFIX_RUNS} runs; past
 * them, by the keys' own hashes (docs/decisions/080-providerbench-fix-and-prefix-runs.md).
 * A base class of the cache, not a field of it, so that a lookup reads the index and the slabs
 * without another indirection. Not thread-safe.
 */
abstract class SlabIndex extends SlabRing {
    /** Index bytes per slot: hash, slab id, offset (and a tag if keys are placed by prefix). */
    static final int SLOT_BYTES = 12;
    /** Slots used at most, as a fraction of the index (linear probing stays short below it). */
    static final double LOAD = 0.6;
    private static final int INITIAL_SLOTS = 64;
    /** Bit of a slot's offset word: the entry was read since it was written or moved. */
    private static final int ACCESSED = 1 << 31;
    /**
     * By prefix: how many keys of one prefix its run holds at most; later ones are placed by
     * their own hash. A prefix of many keys (a session key with thousands of sessions) would
     * otherwise make every probe through its run walk them all: at 10,000 keys a prefix a get
     * cost 56 µs and a put 107 µs (docs/decisions/074-prefix-scans-from-complete-view.md).
     */
    static final int MAX_PREFIX_KEYS = 64;
    /**
     * By prefix: how many runs of {@link #MAX_PREFIX_KEYS} keys one prefix may have, each from
     * its own home ({@link #runHome}), before its keys are placed by their own hash. A lookup of
     * a key in a later run walks the runs before it, so this bounds that walk
     * (docs/decisions/080-providerbench-fix-and-prefix-runs.md).
     */
    static final int MAX_PREFIX_RUNS = 4;
    /** By prefix: how far from its prefix's home a key may be placed (runs merged by neighbours). */
    static final int MAX_PREFIX_RUN = 1024;
    private static final int OVERFLOW_MASK = 1023; // 1,024 longs: 65,536 bits

    // Slot i is empty when offsets[i] == 0, else it names the entry at
    // (slabIds[i], (offsets[i] & ~ACCESSED) - 1) whose home hash (the one its probe starts from,
    // also in the entry's header) is hashes[i]; by prefix, the key's own hash is tags[i].
    private int[] hashes = new int[INITIAL_SLOTS];
    private int[] slabIds = new int[INITIAL_SLOTS];
    private int[] offsets = new int[INITIAL_SLOTS];
    /** Null unless keys are placed by prefix. */
    private int[] tags;
    /**
     * By prefix: a bit per run home (modulo its size) set when a key of that run's prefix went
     * past it because the run was {@link #crowded}: the prefix's keys are then also looked up
     * in its next run, and past its last run by their own hash, and a prefix whose last run
     * overflowed is scanned by the worker. A bit shared by two homes costs the other one the
     * same, never a wrong answer.
     */
    private long[] overflowed;
    private int size;

    /** {@code byPrefix}: the keys are {@link PrefixedKey}s, placed by their prefix's hash. */
    SlabIndex(boolean byPrefix) {
        tags = byPrefix ? new int[INITIAL_SLOTS] : null;
        overflowed = byPrefix ? new long[OVERFLOW_MASK + 1] : null;
    }

    final boolean byPrefix() {
        return tags != null;
    }

    /** Entries held. */
    final int size() {
        return size;
    }

    /** Bytes the index takes beyond an empty one's. */
    final long indexGrowthBytes() {
        return (long) (hashes.length - INITIAL_SLOTS) * (SLOT_BYTES + (tags == null ? 0 : 4));
    }

    /** The slot of {@code key} (whose {@link #hashOf} is {@code hash}), or -1. */
    final int find(byte[] key, int hash) {
        if (tags == null) {
            return findAt(key, hash, hash);
        }
        long prefixHash = prefixHash64(key);
        if (overflowed(runHome(prefixHash, MAX_PREFIX_RUNS - 1))) {
            // most keys of a prefix past its runs are placed by their own hash: look there first
            int slot = findAt(key, hash, hash);
            if (slot >= 0) {
                return slot;
            }
        }
        for (int run = 0; run < MAX_PREFIX_RUNS; run++) {
            int home = runHome(prefixHash, run);
            int slot = findAt(key, home, hash);
            if (slot >= 0 || !overflowed(home)) {
                return slot;
            }
        }
        return -1;
    }

    /**
     * Whether a key of the prefix whose hash is {@code home} may not go to {@code slot}, the
     * first empty slot of its run: the run holds {@link #MAX_PREFIX_KEYS} keys of the prefix
     * before it, or it lies more than {@link #MAX_PREFIX_RUN} slots from home.
     */
    private boolean crowded(int home, int slot) {
        int mask = hashes.length - 1;
        if (((slot - home) & mask) > MAX_PREFIX_RUN) {
            return true;
        }
        int same = 0;
        for (int i = home & mask; i != slot; i = (i + 1) & mask) {
            if (hashes[i] == home && ++same >= MAX_PREFIX_KEYS) {
                return true;
            }
        }
        return false;
    }

    /** Whether some key of the run from {@code home} may have gone past it ({@link #markOverflowed}). */
    private boolean overflowed(int home) {
        return (overflowed[(home >>> 6) & OVERFLOW_MASK] & (1L << home)) != 0;
    }

    /** Whether every run of the prefix whose 64-bit hash is {@code prefixHash} is {@link #overflowed}. */
    private boolean allRunsOverflowed(long prefixHash) {
        for (int run = MAX_PREFIX_RUNS - 1; run >= 0; run--) {
            if (!overflowed(runHome(prefixHash, run))) {
                return false;
            }
        }
        return true;
    }

    /** Records that a key of the run from {@code home} went past it (to its prefix's next run or its own hash). */
    private void markOverflowed(int home) {
        overflowed[(home >>> 6) & OVERFLOW_MASK] |= 1L << home;
    }

    /** {@link #find} of a key whose probe starts at {@code home}. */
    private int findAt(byte[] key, int home, int hash) {
        int mask = hashes.length - 1;
        for (int i = home & mask; ; i = (i + 1) & mask) {
            int off = offsets[i];
            if (off == 0) {
                return -1;
            }
            if (hashes[i] == home && (tags == null || tags[i] == hash)) {
                if (Slab.keyIs(entryAt(i), key)) {
                    return i;
                }
            }
        }
    }

    /** The hash the index uses for {@code key}. */
    static int hashOf(byte[] key) {
        return indexHash(KeyBytes.hash64(key));
    }

    /** {@link #hashOf} from the key's {@link KeyBytes#hash64}. */
    static int indexHash(long hash64) {
        return (int) (hash64 >>> 32);
    }

    /** The 64-bit hash of a {@link PrefixedKey}'s prefix (that of the prefix's own bytes). */
    private static long prefixHash64(byte[] key) {
        return KeyBytes.hash64(key, PrefixedKey.prefixBytes(key));
    }

    /**
     * The home of run {@code run} of the prefix whose 64-bit hash is {@code prefixHash}: run 0's
     * is the prefix's index hash; each later one a re-mix of it, so that the runs of one prefix
     * lie apart and a crowded prefix does not lengthen its neighbours' probes.
     */
    static int runHome(long prefixHash, int run) {
        if (run == 0) {
            return indexHash(prefixHash);
        }
        long h = prefixHash + run * 0x9e3779b97f4a7c15L;
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        h ^= h >>> 33;
        return indexHash(h);
    }

    /**
     * A slot for {@code key} (whose {@link #hashOf} is {@code hash}), which the index does not
     * hold: its home is set ({@link #home}), its entry is for the caller to name ({@link #point}).
     */
    final int addSlot(byte[] key, int hash) {
        if (size + 1 > hashes.length * LOAD) {
            resize(hashes.length * 2);
        }
        int home;
        int slot;
        if (tags == null) {
            home = hash;
            slot = emptySlot(home);
        } else {
            long prefixHash = prefixHash64(key);
            home = hash; // past the prefix's last run: its scans go to the worker now
            slot = -1;
            boolean full = allRunsOverflowed(prefixHash); // then a new key goes by its own hash at once
            for (int run = 0; run < MAX_PREFIX_RUNS && slot < 0 && !full; run++) {
                int h = runHome(prefixHash, run);
                int at = emptySlot(h);
                if (crowded(h, at)) {
                    markOverflowed(h);
                } else {
                    home = h;
                    slot = at;
                }
            }
            if (slot < 0) { // every run of the prefix is marked: its lookups reach this slot
                slot = emptySlot(home);
            }
        }
        hashes[slot] = home;
        if (tags != null) {
            tags[slot] = hash;
        }
        size++;
        return slot;
    }

    /** The home hash of the entry at {@code slot} (the one its probe starts from). */
    final int home(int slot) {
        return hashes[slot];
    }

    /** Slot {@code slot} names the entry at offset {@code o} of {@code s}; {@code accessed}: read since written. */
    final void point(int slot, Slab s, int o, boolean accessed) {
        slabIds[slot] = s.id;
        offsets[slot] = (o + 1) | (accessed ? ACCESSED : 0);
    }

    /** Marks the entry at {@code slot} as read (it survives the next drop of its slab: a second chance). */
    final void touch(int slot) {
        offsets[slot] |= ACCESSED;
    }

    /** Whether the entry at {@code slot} was read since it was written or moved. */
    final boolean accessed(int slot) {
        return (offsets[slot] & ACCESSED) != 0;
    }

    /** Slots of the index, used or not ({@link #used}). */
    final int slots() {
        return offsets.length;
    }

    final boolean used(int slot) {
        return offsets[slot] != 0;
    }

    /** The id of the slab holding the entry at {@code slot}. */
    final int slabIdOf(int slot) {
        return slabIds[slot];
    }

    /** The offset in its slab of the entry at {@code slot}. */
    final int offsetOf(int slot) {
        return (offsets[slot] & ~ACCESSED) - 1;
    }

    /** The address of the entry slot {@code slot} names. */
    final long entryAt(int slot) {
        return slab(slabIds[slot]).address + (offsets[slot] & ~ACCESSED) - 1;
    }

    /** The entry at {@code slot} is no longer live (replaced or removed): its bytes turn dead. */
    final void forget(int slot) {
        Slab s = slab(slabIds[slot]);
        s.live -= Slab.entryBytes(s.address + (offsets[slot] & ~ACCESSED) - 1);
    }

    /** The slot naming the entry at offset {@code o} of slab {@code id}, or -1 (the entry is dead). */
    final int slotOf(int hash, int id, int o) {
        int mask = hashes.length - 1;
        for (int i = hash & mask; ; i = (i + 1) & mask) {
            int off = offsets[i];
            if (off == 0) {
                return -1;
            }
            if (slabIds[i] == id && (off & ~ACCESSED) == o + 1) {
                return i;
            }
        }
    }

    private int emptySlot(int hash) {
        int mask = hashes.length - 1;
        int i = hash & mask;
        while (offsets[i] != 0) {
            i = (i + 1) & mask;
        }
        return i;
    }

    /** Empties slot {@code i}, shifting later entries of its probe run back (no tombstones). */
    final void deleteSlot(int i) {
        int mask = hashes.length - 1;
        int j = i;
        while (true) {
            j = (j + 1) & mask;
            if (offsets[j] == 0) {
                break;
            }
            int home = hashes[j] & mask;
            // j's entry may move to i when its home is not in (i, j] (cyclically)
            boolean movable = i <= j ? (home <= i || home > j) : (home <= i && home > j);
            if (movable) {
                hashes[i] = hashes[j];
                slabIds[i] = slabIds[j];
                offsets[i] = offsets[j];
                if (tags != null) {
                    tags[i] = tags[j];
                }
                i = j;
            }
        }
        offsets[i] = 0;
        size--;
    }

    private void resize(int slots) {
        int[] oldHashes = hashes;
        int[] oldIds = slabIds;
        int[] oldOffsets = offsets;
        int[] oldTags = tags;
        hashes = new int[slots];
        slabIds = new int[slots];
        offsets = new int[slots];
        tags = oldTags == null ? null : new int[slots];
        for (int k = 0; k < oldOffsets.length; k++) {
            if (oldOffsets[k] != 0) {
                int i = emptySlot(oldHashes[k]);
                hashes[i] = oldHashes[k];
                slabIds[i] = oldIds[k];
                offsets[i] = oldOffsets[k];
                if (oldTags != null) {
                    tags[i] = oldTags[k];
                }
            }
        }
    }

    /** Forgets every slot. */
    final void clearIndex() {
        hashes = new int[INITIAL_SLOTS];
        slabIds = new int[INITIAL_SLOTS];
        offsets = new int[INITIAL_SLOTS];
        tags = tags == null ? null : new int[INITIAL_SLOTS];
        overflowed = overflowed == null ? null : new long[OVERFLOW_MASK + 1];
        size = 0;
    }

    /**
     * Copies of the entries whose key starts with {@code prefix} ({keys, values}; a whole
     * prefix of a {@link PrefixedKey}, as {@link PrefixedKey#prefixBytes} measures it), in the
     * index's order. Only for a cache placed by prefix: they all lie in the probe runs from the
     * prefix's run homes, each run but the last overflowed. Null if some of them may lie
     * elsewhere (its last run overflowed: placed by their own hash).
     */
    final byte[][][] withPrefix(byte[] prefix) {
        return withPrefix(prefix, Long.MIN_VALUE);
    }

    /** {@link #withPrefix(byte[])} without the entries expired at {@code now} ({@code TtlRule}). */
    final byte[][][] withPrefix(byte[] prefix, long now) {
        if (tags == null) {
            throw new IllegalStateException("withPrefix on a cache not placed by prefix");
        }
        long prefixHash = KeyBytes.hash64(prefix);
        int[] homes = new int[MAX_PREFIX_RUNS];
        int runs = 0;
        do {
            if (runs == MAX_PREFIX_RUNS) {
                return null;
            }
            homes[runs] = runHome(prefixHash, runs);
        } while (overflowed(homes[runs++]));
        List<byte[]> keys = new ArrayList<>();
        List<byte[]> values = new ArrayList<>();
        for (int run = 0; run < runs; run++) {
            if (!sameHomeEarlier(homes, run)) { // two runs from one home (a hash collision): walked once
                collectRun(prefix, homes[run], now, keys, values);
            }
        }
        return new byte[][][] {keys.toArray(new byte[0][]), values.toArray(new byte[0][])};
    }

    private static boolean sameHomeEarlier(int[] homes, int run) {
        for (int r = 0; r < run; r++) {
            if (homes[r] == homes[run]) {
                return true;
            }
        }
        return false;
    }

    /** Adds copies of the entries of the run from {@code home} whose key starts with {@code prefix}. */
    private void collectRun(byte[] prefix, int home, long now, List<byte[]> keys, List<byte[]> values) {
        int mask = hashes.length - 1;
        for (int i = home & mask; offsets[i] != 0; i = (i + 1) & mask) {
            if (hashes[i] != home) {
                continue;
            }
            long at = entryAt(i);
            if (Slab.keyStartsWith(at, prefix) && !TtlRule.expired(Slab.expiresAt(at), now)) {
                keys.add(Slab.keyAt(at));
                values.add(Slab.valueAt(at));
            }
        }
    }
}
