package io.ttlstate.spark.cache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import java.nio.ByteBuffer;

import org.apache.spark.unsafe.Platform;
import org.junit.jupiter.api.Test;

/** {@link NativeMemory}: direct buffers addressed through Spark's Platform, slab-sized ones pooled for reuse. */
class NativeMemoryTest {
    @Test
    void theAddressIsTheBuffersFirstByte() {
        ByteBuffer b = NativeMemory.allocate(64);
        assertTrue(b.isDirect());
        assertEquals(64, b.capacity());
        long at = NativeMemory.address(b);
        assertNotEquals(0, at);
        Platform.putLong(null, at + 8, 0x0102030405060708L);
        assertEquals(0x0102030405060708L, b.order(java.nio.ByteOrder.nativeOrder()).getLong(8));
        NativeMemory.release(b);
    }

    @Test
    void aReleasedSlabSizedBufferIsReused() {
        ByteBuffer[] drained = new ByteBuffer[40]; // more than the pool keeps (32): it is empty now
        for (int i = 0; i < drained.length; i++) {
            drained[i] = NativeMemory.allocate(NativeMemory.POOLED_BYTES);
        }
        ByteBuffer b = NativeMemory.allocate(NativeMemory.POOLED_BYTES);
        NativeMemory.release(b);
        assertSame(b, NativeMemory.allocate(NativeMemory.POOLED_BYTES));
        assertNotSame(b, NativeMemory.allocate(NativeMemory.POOLED_BYTES));
        for (ByteBuffer d : drained) {
            NativeMemory.free(d);
        }
    }

    @Test
    void otherSizesAreNotPooled() {
        ByteBuffer b = NativeMemory.allocate(4096);
        NativeMemory.release(b);
        assertNotSame(b, NativeMemory.allocate(4096));
    }

    /** {@code -XX:MaxDirectMemorySize} if given, else the heap's maximum (the JVM's default). */
    @Test
    void theDirectMemoryLimitIsTheJvmsOwn() {
        long expected = Runtime.getRuntime().maxMemory();
        for (String arg : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
            if (arg.startsWith("-XX:MaxDirectMemorySize=")) {
                expected = parseSize(arg.substring(arg.indexOf('=') + 1));
            }
        }
        assertEquals(expected, NativeMemory.directMemoryLimit());
        assertEquals(expected, CachedVersionView.maxBudgetBytes());
    }

    private static long parseSize(String s) {
        char unit = Character.toLowerCase(s.charAt(s.length() - 1));
        int shift = unit == 'k' ? 10 : unit == 'm' ? 20 : unit == 'g' ? 30 : 0;
        return Long.parseLong(shift == 0 ? s : s.substring(0, s.length() - 1)) << shift;
    }
}
