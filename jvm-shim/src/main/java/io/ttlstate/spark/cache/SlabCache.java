package io.ttlstate.spark.cache;

import java.nio.ByteBuffer;
import java.util.Iterator;
import java.util.NoSuchElementException;

import io.ttlstate.spark.ttl.TtlRule;
import org.apache.spark.unsafe.Platform;

/**
 * A map from key bytes to (value bytes, expiry time) kept in a few large blocks of native
 * memory ("slabs", {@link NativeMemory}) and an open-addressing index of primitive arrays: no
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
 * are immutable once written, a {@link Snapshot} reads them safely while the cache changes; a
 * slab the cache drops is freed once no snapshot reads it.
 *
 * <p>A cache of {@link PrefixedKey}s places each key by its prefix's hash and tells keys apart
 * by their own hash (a fourth index array, {@code tags}): the keys of one prefix then lie in one
 * probe run, and {@link #withPrefix} finds them all without looking at any other run
 * (docs/decisions/074-prefix-scans-from-complete-view.md).
 * A prefix of more keys than one run may hold ({@link #crowded}) goes on in a next run, from a
 * hash derived from its prefix's ({@link #runHome}), up to {@link #MAX_PREFIX_RUNS} runs; past
 * them, by the keys' own hashes (docs/decisions/080-providerbench-fix-and-prefix-runs.md).
 * Not thread-safe: {@link CachedVersionView} synchronises.
 */
final class SlabCache {
    /** Entry layout in a slab: int hash, int key length, int value length, long expiresAt, key, value. */
    static final int HEADER = 20;
    /** Index bytes per slot: hash, slab id, offset (and a tag if keys are placed by prefix). */
    static final int SLOT_BYTES = 12;
    /** Slots used at most, as a fraction of the index (linear probing stays short below it). */
    private static final double LOAD = 0.6;
    /** Bytes one entry takes besides its key and value: its header and its share of the index. */
    static final int ENTRY_OVERHEAD = HEADER + (int) Math.round(SLOT_BYTES / LOAD);
    /** {@link #ENTRY_OVERHEAD} with a slot's tag, for a cache placed by prefix. */
    static final int PREFIXED_ENTRY_OVERHEAD = HEADER + (int) Math.round((SLOT_BYTES + 4) / LOAD);
    /** The first slab's size; slabs double with the cache up to {@link #MAX_SLAB}. */
    static final int MIN_SLAB = 4 << 10;
    static final int MAX_SLAB = 256 << 10;
    private static final int INITIAL_SLOTS = 64;
    /** Bit of a slot's offset word: the entry was read since it was written or moved. */
    private static final int ACCESSED = 1 << 31;
    private static final long BYTES = Platform.BYTE_ARRAY_OFFSET;
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

    /**
     * Native memory of {@code capacity} bytes at {@code address}, owned by a direct buffer. It is
     * freed when the cache has dropped the slab and no snapshot reads it any more ({@link #pin},
     * {@link #unpin}); a snapshot abandoned unfinished leaves it to the garbage collector, which
     * frees a direct buffer nobody references.
     */
    private static final class Slab {
        private final ByteBuffer buffer;
        final long address;
        final int capacity;
        final int id;
        int fill;
        /** Bytes of the entries in it that the index still names. */
        int live;
        long maxExpiresAt = Long.MIN_VALUE;
        private int pins;
        private boolean dropped;
        private boolean freed;

        Slab(int size, int id) {
            this.buffer = NativeMemory.allocate(size);
            this.address = NativeMemory.address(buffer);
            this.capacity = size;
            this.id = id;
        }

        synchronized void pin() {
            pins++;
        }

        void unpin() {
            synchronized (this) {
                pins--;
                if (!freeable()) {
                    return;
                }
            }
            NativeMemory.release(buffer);
        }

        /** The cache no longer holds it: its memory goes now, or when the last snapshot ends. */
        void drop() {
            synchronized (this) {
                dropped = true;
                if (!freeable()) {
                    return;
                }
            }
            NativeMemory.release(buffer);
        }

        private boolean freeable() {
            if (!dropped || pins > 0 || freed) {
                return false;
            }
            freed = true;
            return true;
        }
    }

    /** Live slabs by id: slab {@code id} is at {@code ring[id & (ring.length - 1)]}; ids are consecutive. */
    private Slab[] ring = new Slab[8];
    private int oldestId;
    private int slabCount;
    private long slabBytes;

    // The index: slot i is empty when offsets[i] == 0, else it names the entry at
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

    /** A cache of keys placed by their own hash. */
    SlabCache() {
        this(false);
    }

    /** {@code byPrefix}: the keys are {@link PrefixedKey}s, placed by their prefix's hash. */
    SlabCache(boolean byPrefix) {
        tags = byPrefix ? new int[INITIAL_SLOTS] : null;
        overflowed = byPrefix ? new long[OVERFLOW_MASK + 1] : null;
    }

    boolean byPrefix() {
        return tags != null;
    }

    /** Bytes one entry of this cache takes besides its key and value. */
    int entryOverhead() {
        return tags == null ? ENTRY_OVERHEAD : PREFIXED_ENTRY_OVERHEAD;
    }

    /** Bytes this cache holds beyond an empty one (its slabs, and the index's growth). */
    long memoryBytes() {
        return slabBytes + (long) (hashes.length - INITIAL_SLOTS) * (SLOT_BYTES + (tags == null ? 0 : 4));
    }

    /** Entries held. */
    int size() {
        return size;
    }

    int slabCount() {
        return slabCount;
    }

    /** The slot of {@code key} (whose {@link #hashOf} is {@code hash}), or -1. */
    int find(byte[] key, int hash) {
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
                long at = entryAt(i);
                if (Platform.getInt(null, at + 4) == key.length && keyEquals(at + HEADER, key)) {
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

    /** A copy of the value at {@code slot}. */
    byte[] value(int slot) {
        return valueAt(entryAt(slot));
    }

    /** The address of the entry slot {@code slot} names. */
    private long entryAt(int slot) {
        return slab(slabIds[slot]).address + (offsets[slot] & ~ACCESSED) - 1;
    }

    /** A copy of the key of the entry at address {@code at}. */
    private static byte[] keyAt(long at) {
        byte[] key = new byte[Platform.getInt(null, at + 4)];
        Platform.copyMemory(null, at + HEADER, key, BYTES, key.length);
        return key;
    }

    /** A copy of the value of the entry at address {@code at}. */
    private static byte[] valueAt(long at) {
        byte[] value = new byte[Platform.getInt(null, at + 8)];
        Platform.copyMemory(null, at + HEADER + Platform.getInt(null, at + 4), value, BYTES, value.length);
        return value;
    }

    long expiresAt(int slot) {
        return Platform.getLong(null, entryAt(slot) + 12);
    }

    /** Marks the entry at {@code slot} as read (it survives the next {@link #dropOldest} of its slab). */
    void touch(int slot) {
        offsets[slot] |= ACCESSED;
    }

    /** Maps {@code key} to {@code value} and {@code expiresAt}, replacing what it mapped to. */
    void put(byte[] key, int hash, byte[] value, long expiresAt) {
        int entry = HEADER + key.length + value.length;
        Slab s = slabFor(entry); // first: allocation may fail, and the index is untouched yet
        int slot = find(key, hash);
        int home;
        if (slot >= 0) {
            home = hashes[slot];
            forget(slot);
        } else {
            if (size + 1 > hashes.length * LOAD) {
                resize(hashes.length * 2);
            }
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
        }
        int o = s.fill;
        long at = s.address + o;
        Platform.putInt(null, at, home);
        Platform.putInt(null, at + 4, key.length);
        Platform.putInt(null, at + 8, value.length);
        Platform.putLong(null, at + 12, expiresAt);
        Platform.copyMemory(key, BYTES, null, at + HEADER, key.length);
        Platform.copyMemory(value, BYTES, null, at + HEADER + key.length, value.length);
        s.fill += entry;
        s.live += entry;
        s.maxExpiresAt = Math.max(s.maxExpiresAt, expiresAt);
        slabIds[slot] = s.id;
        offsets[slot] = o + 1;
    }

    /**
     * Gives every entry that expires at {@code from} the expiry time {@code to} instead, in place
     * (the only change made to an entry in a slab: {@link Snapshot}s copy keys and values, never
     * the expiry time), and brings each slab's {@code maxExpiresAt} back to its live entries'
     * largest; returns how many entries changed. For EventTime's stamping
     * (docs/decisions/104-event-time-jvm-view.md).
     */
    int restamp(long from, long to) {
        int changed = 0;
        for (int i = 0; i < offsets.length; i++) {
            if (offsets[i] != 0) {
                long at = entryAt(i) + 12;
                if (Platform.getLong(null, at) == from) {
                    Platform.putLong(null, at, to);
                    changed++;
                }
            }
        }
        if (changed > 0) {
            for (int k = 0; k < slabCount; k++) {
                slab(oldestId + k).maxExpiresAt = Long.MIN_VALUE;
            }
            for (int i = 0; i < offsets.length; i++) {
                if (offsets[i] != 0) {
                    Slab sl = slab(slabIds[i]);
                    sl.maxExpiresAt = Math.max(sl.maxExpiresAt, Platform.getLong(null, entryAt(i) + 12));
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

    /** The expiry time no entry of the oldest slab outlives (Long.MAX_VALUE if there is no slab). */
    long oldestSlabExpiry() {
        return slabCount == 0 ? Long.MAX_VALUE : slab(oldestId).maxExpiresAt;
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
        if (slabCount == 0) {
            return 0;
        }
        Slab old = slab(oldestId);
        boolean canMove = secondChance && slabCount > 1;
        boolean moveAll = canMove && (keepAll || old.live <= old.fill / 2);
        int dropped = 0;
        for (int o = 0; o < old.fill; ) {
            long at = old.address + o;
            int hash = Platform.getInt(null, at);
            int entry = HEADER + Platform.getInt(null, at + 4) + Platform.getInt(null, at + 8);
            int slot = slotOf(hash, old.id, o);
            if (slot >= 0) {
                boolean keep = moveAll || (canMove && (offsets[slot] & ACCESSED) != 0);
                if (keep && (!keepAll || !TtlRule.expired(Platform.getLong(null, at + 12), now))) {
                    Slab s = slabFor(entry);
                    Platform.copyMemory(null, at, null, s.address + s.fill, entry);
                    s.maxExpiresAt = Math.max(s.maxExpiresAt, Platform.getLong(null, at + 12));
                    slabIds[slot] = s.id;
                    offsets[slot] = (s.fill + 1) | (offsets[slot] & ACCESSED & (moveAll ? ~0 : 0));
                    s.fill += entry;
                    s.live += entry;
                } else {
                    deleteSlot(slot);
                    dropped++;
                }
            }
            o += entry;
        }
        ring[old.id & (ring.length - 1)] = null;
        oldestId++;
        slabCount--;
        slabBytes -= old.capacity;
        old.drop();
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
        long live = 0;
        long dead = 0;
        for (int k = 0; k < slabCount; k++) {
            Slab s = slab(oldestId + k);
            live += s.live;
            dead += s.fill - s.live;
        }
        if (slabCount < 2 || dead <= live || dead <= MAX_SLAB) {
            return 0;
        }
        int forgotten = 0;
        for (int n = slabCount - 1; n > 0; n--) {
            forgotten += dropOldest(true, true, now);
        }
        return forgotten;
    }

    /** Forgets everything and gives the memory back. */
    void clear() {
        for (int k = 0; k < slabCount; k++) {
            slab(oldestId + k).drop();
        }
        ring = new Slab[8];
        slabCount = 0;
        slabBytes = 0;
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
    byte[][][] withPrefix(byte[] prefix) {
        return withPrefix(prefix, Long.MIN_VALUE);
    }

    /** {@link #withPrefix(byte[])} without the entries expired at {@code now} ({@code TtlRule}). */
    byte[][][] withPrefix(byte[] prefix, long now) {
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
        java.util.List<byte[]> keys = new java.util.ArrayList<>();
        java.util.List<byte[]> values = new java.util.ArrayList<>();
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
    private void collectRun(byte[] prefix, int home, long now, java.util.List<byte[]> keys,
                            java.util.List<byte[]> values) {
        int mask = hashes.length - 1;
        for (int i = home & mask; offsets[i] != 0; i = (i + 1) & mask) {
            if (hashes[i] != home) {
                continue;
            }
            long at = entryAt(i);
            if (Platform.getInt(null, at + 4) >= prefix.length && keyEquals(at + HEADER, prefix)
                    && !TtlRule.expired(Platform.getLong(null, at + 12), now)) {
                keys.add(keyAt(at));
                values.add(valueAt(at));
            }
        }
    }

    /** Every entry as it is now; later changes to the cache do not show in it. */
    Snapshot snapshot() {
        return snapshot(Long.MIN_VALUE);
    }

    /** {@link #snapshot()} without the entries expired at {@code now} ({@code TtlRule}). */
    Snapshot snapshot(long now) {
        int[] ids = new int[size];
        int[] offs = new int[size];
        int n = 0;
        for (int i = 0; i < offsets.length; i++) {
            if (offsets[i] != 0) {
                int off = (offsets[i] & ~ACCESSED) - 1;
                if (now != Long.MIN_VALUE && TtlRule.expired(Platform.getLong(null, slab(slabIds[i]).address + off + 12), now)) {
                    continue;
                }
                ids[n] = slabIds[i];
                offs[n++] = off;
            }
        }
        if (n < size) {
            ids = java.util.Arrays.copyOf(ids, n);
            offs = java.util.Arrays.copyOf(offs, n);
        }
        Slab[] slabs = new Slab[slabCount];
        for (int k = 0; k < slabCount; k++) {
            slabs[k] = slab(oldestId + k);
            slabs[k].pin();
        }
        return new Snapshot(slabs, oldestId, ids, offs);
    }

    /**
     * The entries of a {@link #snapshot}, copied out a chunk at a time as {keys, values}. It pins
     * the slabs it reads until it has handed out its last entry.
     */
    static final class Snapshot implements Iterator<byte[][][]> {
        private final Slab[] slabs;
        private boolean unpinned;
        private final int firstId;
        private final int[] ids;
        private final int[] offs;
        private int next;
        private int chunk = 1024;

        Snapshot(Slab[] slabs, int firstId, int[] ids, int[] offs) {
            this.slabs = slabs;
            this.firstId = firstId;
            this.ids = ids;
            this.offs = offs;
        }

        /** Entries per chunk handed out by {@link #next}. */
        Snapshot chunkEntries(int n) {
            chunk = Math.max(1, n);
            return this;
        }

        @Override
        public boolean hasNext() {
            if (next < ids.length) {
                return true;
            }
            unpinAll();
            return false;
        }

        private void unpinAll() {
            if (!unpinned) {
                unpinned = true;
                for (Slab s : slabs) {
                    s.unpin();
                }
            }
        }

        @Override
        public byte[][][] next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            int n = Math.min(chunk, ids.length - next);
            byte[][] keys = new byte[n][];
            byte[][] values = new byte[n][];
            for (int j = 0; j < n; j++, next++) {
                long at = slabs[ids[next] - firstId].address + offs[next];
                keys[j] = keyAt(at);
                values[j] = valueAt(at);
            }
            if (next == ids.length) {
                unpinAll();
            }
            return new byte[][][] {keys, values};
        }
    }

    // -- internals ------------------------------------------------------------------------

    private Slab slab(int id) {
        return ring[id & (ring.length - 1)];
    }

    /** The entry at {@code slot} is no longer live (replaced or removed): its bytes turn dead. */
    private void forget(int slot) {
        Slab s = slab(slabIds[slot]);
        int o = (offsets[slot] & ~ACCESSED) - 1;
        s.live -= HEADER + Platform.getInt(null, s.address + o + 4) + Platform.getInt(null, s.address + o + 8);
    }

    /** The newest slab if {@code entry} bytes fit in it, else a new one. */
    private Slab slabFor(int entry) {
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

    /** The slot naming the entry at offset {@code o} of slab {@code id}, or -1 (the entry is dead). */
    private int slotOf(int hash, int id, int o) {
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

    /** Whether the {@code key.length} bytes at address {@code at} are {@code key}. */
    private static boolean keyEquals(long at, byte[] key) {
        int n = key.length;
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            if (Platform.getLong(null, at + i) != Platform.getLong(key, BYTES + i)) {
                return false;
            }
        }
        for (; i < n; i++) {
            if (Platform.getByte(null, at + i) != key[i]) {
                return false;
            }
        }
        return true;
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
    private void deleteSlot(int i) {
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
}
