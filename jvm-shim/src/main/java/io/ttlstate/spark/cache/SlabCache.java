package io.ttlstate.spark.cache;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * A map from key bytes to (value bytes, expiry time) kept in a few large byte arrays
 * ("slabs") and an open-addressing index of primitive arrays: no Java object per entry, so
 * the garbage collector marks, scans and copies next to nothing however many values it
 * holds (DESIGN 48; a {@code LinkedHashMap} of byte arrays made G1 grow the heap to about
 * five times what it held).
 *
 * <p>Entries are appended to the newest slab and never changed in place: replacing or removing
 * a key leaves its old bytes dead in their slab. Memory is given back a slab at a time, oldest
 * first ({@link #dropOldest}); entries of that slab read since they were written move to the
 * newest slab (a second chance: CLOCK's approximation of least-recently-used), and so do all
 * of its live entries when most of it is dead (the slab is compacted, nothing is evicted:
 * a store that rewrites its values would otherwise lose live ones for dead bytes). Because slabs
 * are immutable once written, a {@link Snapshot} reads them safely while the cache changes.
 * Not thread-safe: {@link CachedVersionView} synchronises.
 */
final class SlabCache {
    /** Entry layout in a slab: int hash, int key length, int value length, long expiresAt, key, value. */
    static final int HEADER = 20;
    /** Index bytes per slot: hash, slab id, offset. */
    static final int SLOT_BYTES = 12;
    /** Slots used at most, as a fraction of the index (linear probing stays short below it). */
    private static final double LOAD = 0.6;
    /** Heap bytes one entry takes besides its key and value: its header and its share of the index. */
    static final int ENTRY_OVERHEAD = HEADER + (int) Math.round(SLOT_BYTES / LOAD);
    /** The first slab's size; slabs double with the cache up to {@link #MAX_SLAB}. */
    static final int MIN_SLAB = 4 << 10;
    static final int MAX_SLAB = 256 << 10;
    private static final int INITIAL_SLOTS = 64;
    /** Bit of a slot's offset word: the entry was read since it was written or moved. */
    private static final int ACCESSED = 1 << 31;
    private static final VarHandle INT = MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle LONG = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    private static final class Slab {
        final byte[] data;
        final int id;
        int fill;
        /** Bytes of the entries in it that the index still names. */
        int live;
        long maxExpiresAt = Long.MIN_VALUE;

        Slab(int size, int id) {
            this.data = new byte[size];
            this.id = id;
        }
    }

    /** Live slabs by id: slab {@code id} is at {@code ring[id & (ring.length - 1)]}; ids are consecutive. */
    private Slab[] ring = new Slab[8];
    private int oldestId;
    private int slabCount;
    private long slabBytes;

    // The index: slot i is empty when offsets[i] == 0, else it names the entry at
    // (slabIds[i], (offsets[i] & ~ACCESSED) - 1) whose hash is hashes[i].
    private int[] hashes = new int[INITIAL_SLOTS];
    private int[] slabIds = new int[INITIAL_SLOTS];
    private int[] offsets = new int[INITIAL_SLOTS];
    private int size;

    /** Bytes of Java heap this cache holds beyond an empty one (slabs, and the index's growth). */
    long memoryBytes() {
        return slabBytes + (long) (hashes.length - INITIAL_SLOTS) * SLOT_BYTES;
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
        int mask = hashes.length - 1;
        for (int i = hash & mask; ; i = (i + 1) & mask) {
            int off = offsets[i];
            if (off == 0) {
                return -1;
            }
            if (hashes[i] == hash) {
                byte[] data = slab(slabIds[i]).data;
                int o = (off & ~ACCESSED) - 1;
                int keyLength = (int) INT.get(data, o + 4);
                if (keyLength == key.length && Arrays.equals(data, o + HEADER, o + HEADER + keyLength, key, 0, keyLength)) {
                    return i;
                }
            }
        }
    }

    /** The hash the index uses for {@code key}. */
    static int hashOf(byte[] key) {
        return (int) (KeyBytes.hash64(key) >>> 32);
    }

    /** A copy of the value at {@code slot}. */
    byte[] value(int slot) {
        byte[] data = slab(slabIds[slot]).data;
        int o = (offsets[slot] & ~ACCESSED) - 1;
        int keyLength = (int) INT.get(data, o + 4);
        int valueLength = (int) INT.get(data, o + 8);
        int from = o + HEADER + keyLength;
        return Arrays.copyOfRange(data, from, from + valueLength);
    }

    long expiresAt(int slot) {
        return (long) LONG.get(slab(slabIds[slot]).data, (offsets[slot] & ~ACCESSED) - 1 + 12);
    }

    /** Marks the entry at {@code slot} as read (it survives the next {@link #dropOldest} of its slab). */
    void touch(int slot) {
        offsets[slot] |= ACCESSED;
    }

    /** Maps {@code key} to {@code value} and {@code expiresAt}, replacing what it mapped to. */
    void put(byte[] key, int hash, byte[] value, long expiresAt) {
        int slot = find(key, hash);
        int entry = HEADER + key.length + value.length;
        Slab s = slabFor(entry);
        int o = s.fill;
        INT.set(s.data, o, hash);
        INT.set(s.data, o + 4, key.length);
        INT.set(s.data, o + 8, value.length);
        LONG.set(s.data, o + 12, expiresAt);
        System.arraycopy(key, 0, s.data, o + HEADER, key.length);
        System.arraycopy(value, 0, s.data, o + HEADER + key.length, value.length);
        s.fill += entry;
        s.live += entry;
        s.maxExpiresAt = Math.max(s.maxExpiresAt, expiresAt);
        if (slot >= 0) {
            forget(slot);
        } else {
            if (size + 1 > hashes.length * LOAD) {
                resize(hashes.length * 2);
            }
            slot = emptySlot(hash);
            hashes[slot] = hash;
            size++;
        }
        slabIds[slot] = s.id;
        offsets[slot] = o + 1;
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
        if (slabCount == 0) {
            return 0;
        }
        Slab old = slab(oldestId);
        boolean canMove = secondChance && slabCount > 1;
        boolean moveAll = canMove && old.live <= old.fill / 2;
        int dropped = 0;
        for (int o = 0; o < old.fill; ) {
            int hash = (int) INT.get(old.data, o);
            int entry = HEADER + (int) INT.get(old.data, o + 4) + (int) INT.get(old.data, o + 8);
            int slot = slotOf(hash, old.id, o);
            if (slot >= 0) {
                if (moveAll || (canMove && (offsets[slot] & ACCESSED) != 0)) {
                    Slab s = slabFor(entry);
                    System.arraycopy(old.data, o, s.data, s.fill, entry);
                    s.maxExpiresAt = Math.max(s.maxExpiresAt, (long) LONG.get(old.data, o + 12));
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
        slabBytes -= old.data.length;
        return dropped;
    }

    /** Forgets everything and gives the memory back. */
    void clear() {
        ring = new Slab[8];
        slabCount = 0;
        slabBytes = 0;
        hashes = new int[INITIAL_SLOTS];
        slabIds = new int[INITIAL_SLOTS];
        offsets = new int[INITIAL_SLOTS];
        size = 0;
    }

    /** Every entry as it is now; later changes to the cache do not show in it. */
    Snapshot snapshot() {
        int[] ids = new int[size];
        int[] offs = new int[size];
        int n = 0;
        for (int i = 0; i < offsets.length; i++) {
            if (offsets[i] != 0) {
                ids[n] = slabIds[i];
                offs[n++] = (offsets[i] & ~ACCESSED) - 1;
            }
        }
        byte[][] slabs = new byte[slabCount][];
        for (int k = 0; k < slabCount; k++) {
            slabs[k] = slab(oldestId + k).data;
        }
        return new Snapshot(slabs, oldestId, ids, offs);
    }

    /** The entries of a {@link #snapshot}, copied out a chunk at a time as {keys, values}. */
    static final class Snapshot implements Iterator<byte[][][]> {
        private final byte[][] slabs;
        private final int firstId;
        private final int[] ids;
        private final int[] offs;
        private int next;
        private int chunk = 1024;

        Snapshot(byte[][] slabs, int firstId, int[] ids, int[] offs) {
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
            return next < ids.length;
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
                byte[] data = slabs[ids[next] - firstId];
                int o = offs[next];
                int keyLength = (int) INT.get(data, o + 4);
                int valueLength = (int) INT.get(data, o + 8);
                keys[j] = Arrays.copyOfRange(data, o + HEADER, o + HEADER + keyLength);
                values[j] = Arrays.copyOfRange(data, o + HEADER + keyLength, o + HEADER + keyLength + valueLength);
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
        int entry = HEADER + (int) INT.get(s.data, o + 4) + (int) INT.get(s.data, o + 8);
        s.live -= entry;
    }

    /** The newest slab if {@code entry} bytes fit in it, else a new one. */
    private Slab slabFor(int entry) {
        if (slabCount > 0) {
            Slab head = slab(oldestId + slabCount - 1);
            if (head.data.length - head.fill >= entry) {
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
        hashes = new int[slots];
        slabIds = new int[slots];
        offsets = new int[slots];
        for (int k = 0; k < oldOffsets.length; k++) {
            if (oldOffsets[k] != 0) {
                int i = emptySlot(oldHashes[k]);
                hashes[i] = oldHashes[k];
                slabIds[i] = oldIds[k];
                offsets[i] = oldOffsets[k];
            }
        }
    }
}
