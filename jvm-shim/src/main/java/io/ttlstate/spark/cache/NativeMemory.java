package io.ttlstate.spark.cache;

import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;

import org.apache.spark.unsafe.Platform;

/**
 * Native memory for the value cache's slabs, as direct buffers: allocated and counted by the
 * JVM ({@code -XX:MaxDirectMemorySize}), read and written by address through Spark's
 * {@link Platform}, and freed either now ({@link #free}: the caller must never touch the buffer
 * or its address again) or, if never freed, by the garbage collector once no one references
 * the buffer.
 */
final class NativeMemory {
    private static final Object UNSAFE;
    private static final Method INVOKE_CLEANER;
    /** Where a {@link java.nio.Buffer} keeps its memory's address (Spark's own off-heap code relies on it too). */
    private static final long ADDRESS_FIELD;

    static {
        try {
            Class<?> c = Class.forName("sun.misc.Unsafe");
            Field f = c.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            UNSAFE = f.get(null);
            INVOKE_CLEANER = c.getMethod("invokeCleaner", ByteBuffer.class);
            ADDRESS_FIELD = (long) c.getMethod("objectFieldOffset", Field.class)
                    .invoke(UNSAFE, java.nio.Buffer.class.getDeclaredField("address"));
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    private NativeMemory() {}

    /** Size of the buffers kept for reuse: the slabs of a cache that has grown (SlabRing.MAX_SLAB). */
    static final int POOLED_BYTES = SlabRing.MAX_SLAB;
    /** Buffers kept for reuse at most (8 MiB): enough for the churn of caches at their budget. */
    private static final int MAX_POOLED = 32;
    private static final java.util.ArrayDeque<ByteBuffer> POOL = new java.util.ArrayDeque<>();

    /**
     * A direct buffer of {@code bytes} (counted against the JVM's direct memory limit), reused
     * from the pool when it has one of that size: a cache at its budget frees and takes a slab
     * for every few hundred KiB it writes, and malloc, asked for the same blocks again and
     * again by many threads, kept freed ones in its arenas
     * (docs/decisions/054-native-memory-slabs.md). Contents are undefined.
     */
    static ByteBuffer allocate(int bytes) {
        if (bytes == POOLED_BYTES) {
            synchronized (POOL) {
                ByteBuffer b = POOL.pollFirst();
                if (b != null) {
                    return b;
                }
            }
        }
        return ByteBuffer.allocateDirect(bytes);
    }

    /** Gives a buffer back: into the pool if it has room for it, else to the system ({@link #free}). */
    static void release(ByteBuffer direct) {
        if (direct.capacity() == POOLED_BYTES) {
            synchronized (POOL) {
                if (POOL.size() < MAX_POOLED) {
                    POOL.addFirst(direct);
                    return;
                }
            }
        }
        free(direct);
    }

    /** The address of a direct buffer's first byte. */
    static long address(ByteBuffer direct) {
        return Platform.getLong(direct, ADDRESS_FIELD);
    }

    /**
     * How many bytes of direct buffers this JVM may hold: {@code -XX:MaxDirectMemorySize}, whose
     * default (0) means the heap's maximum.
     */
    static long directMemoryLimit() {
        try {
            com.sun.management.HotSpotDiagnosticMXBean hotspot = java.lang.management.ManagementFactory
                    .getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
            long set = Long.parseLong(hotspot.getVMOption("MaxDirectMemorySize").getValue());
            if (set > 0) {
                return set;
            }
        } catch (RuntimeException e) {
            // not HotSpot: assume the default
        }
        return Runtime.getRuntime().maxMemory();
    }

    static void free(ByteBuffer direct) {
        try {
            INVOKE_CLEANER.invoke(UNSAFE, direct);
        } catch (ReflectiveOperationException e) {
            // left to the garbage collector, which frees a direct buffer nobody references
        }
    }
}
