package io.ttlstate.spark.cache;

import java.nio.ByteBuffer;

import org.apache.spark.unsafe.Platform;

/**
 * One slab of a {@link SlabCache}: native memory of {@code capacity} bytes at {@code address},
 * owned by a direct buffer ({@link NativeMemory}, docs/decisions/054-native-memory-slabs.md),
 * that entries are appended to and never changed in place, and the layout of an entry in it.
 *
 * <p>It is freed when the cache has dropped the slab and no snapshot reads it any more
 * ({@link #pin}, {@link #unpin}); a snapshot abandoned unfinished leaves it to the garbage
 * collector, which frees a direct buffer nobody references.
 */
final class Slab {
    /** Entry layout in a slab: int hash, int key length, int value length, long expiresAt, key, value. */
    static final int HEADER = 20;
    private static final long BYTES = Platform.BYTE_ARRAY_OFFSET;

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

    /**
     * Appends an entry of {@code key} to {@code value}, expiring at {@code expiresAt}, whose
     * probe starts at {@code home}; returns its offset. The caller made room ({@link SlabRing#slabFor}).
     */
    int append(int home, byte[] key, byte[] value, long expiresAt) {
        int entry = HEADER + key.length + value.length;
        int o = fill;
        long at = address + o;
        Platform.putInt(null, at, home);
        Platform.putInt(null, at + 4, key.length);
        Platform.putInt(null, at + 8, value.length);
        Platform.putLong(null, at + 12, expiresAt);
        Platform.copyMemory(key, BYTES, null, at + HEADER, key.length);
        Platform.copyMemory(value, BYTES, null, at + HEADER + key.length, value.length);
        fill += entry;
        live += entry;
        maxExpiresAt = Math.max(maxExpiresAt, expiresAt);
        return o;
    }

    /** Appends a copy of the {@code entry} bytes of the entry at address {@code at} (of another slab); returns its offset. */
    int copy(long at, int entry) {
        int o = fill;
        Platform.copyMemory(null, at, null, address + o, entry);
        maxExpiresAt = Math.max(maxExpiresAt, expiresAt(at));
        fill += entry;
        live += entry;
        return o;
    }

    // -- an entry at an address ------------------------------------------------------------

    /** The home hash of the entry at address {@code at}. */
    static int home(long at) {
        return Platform.getInt(null, at);
    }

    static int keyLength(long at) {
        return Platform.getInt(null, at + 4);
    }

    /** The bytes the entry at address {@code at} takes: its header, key and value. */
    static int entryBytes(long at) {
        return HEADER + Platform.getInt(null, at + 4) + Platform.getInt(null, at + 8);
    }

    static long expiresAt(long at) {
        return Platform.getLong(null, at + 12);
    }

    static void setExpiresAt(long at, long expiresAt) {
        Platform.putLong(null, at + 12, expiresAt);
    }

    /** A copy of the key of the entry at address {@code at}. */
    static byte[] keyAt(long at) {
        byte[] key = new byte[Platform.getInt(null, at + 4)];
        Platform.copyMemory(null, at + HEADER, key, BYTES, key.length);
        return key;
    }

    /** A copy of the value of the entry at address {@code at}. */
    static byte[] valueAt(long at) {
        byte[] value = new byte[Platform.getInt(null, at + 8)];
        Platform.copyMemory(null, at + HEADER + Platform.getInt(null, at + 4), value, BYTES, value.length);
        return value;
    }

    /** Whether the key of the entry at address {@code at} starts with {@code prefix} (or is it). */
    static boolean keyStartsWith(long at, byte[] prefix) {
        return Platform.getInt(null, at + 4) >= prefix.length && bytesEqual(at + HEADER, prefix);
    }

    /** Whether the key of the entry at address {@code at} is {@code key}. */
    static boolean keyIs(long at, byte[] key) {
        return Platform.getInt(null, at + 4) == key.length && bytesEqual(at + HEADER, key);
    }

    /** Whether the {@code key.length} bytes at address {@code at} are {@code key}. */
    private static boolean bytesEqual(long at, byte[] key) {
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
}
