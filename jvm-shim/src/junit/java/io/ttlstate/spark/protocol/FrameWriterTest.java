package io.ttlstate.spark.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.Arrays;
import java.util.HexFormat;

import org.junit.jupiter.api.Test;

/** {@link FrameWriter}'s encodings (little-endian, u32-prefixed byte strings) and its buffer handling. */
class FrameWriterTest {
    private static String hex(FrameWriter w) {
        return HexFormat.of().formatHex(w.body());
    }

    @Test
    void writesLittleEndianFields() {
        FrameWriter w = new FrameWriter().u8(0xAB).u16(0x1234).u32(0xDEADBEEFL).i64(-2);
        assertEquals("ab" + "3412" + "efbeadde" + "feffffffffffffff", hex(w));
        assertEquals(1 + 2 + 4 + 8, w.size());
    }

    @Test
    void u32KeepsOnlyTheLow32Bits() {
        assertEquals("ffffffff", hex(new FrameWriter().u32(-1L)));
        assertEquals("01000000", hex(new FrameWriter().u32(0x1_0000_0001L)));
        assertEquals("ffffffff", hex(new FrameWriter().i32(-1)));
    }

    @Test
    void byteStringsAndStringsAreLengthPrefixed() {
        assertEquals("00000000", hex(new FrameWriter().bytes(new byte[0])));
        assertEquals("02000000" + "c3a9", hex(new FrameWriter().str("é")));
        assertEquals("02000000" + "0203", hex(new FrameWriter().bytes(new byte[] {1, 2, 3, 4}, 1, 2)));
        assertEquals("0203", hex(new FrameWriter().raw(new byte[] {1, 2, 3, 4}, 1, 2)));
    }

    @Test
    void optionalBytesAndBooleans() {
        assertEquals("00", hex(new FrameWriter().optbytes(null)));
        assertEquals("01" + "01000000" + "07", hex(new FrameWriter().optbytes(new byte[] {7})));
        assertEquals("0100", hex(new FrameWriter().bool(true).bool(false)));
    }

    @Test
    void frameStartsWithTheBodyLength() {
        FrameWriter w = FrameWriter.request(Op.GET, 9).bytes(new byte[] {5});
        byte[] frame = Arrays.copyOf(w.frame(), w.frameLength());
        assertEquals("0a000000" + "06" + "09000000" + "01000000" + "05", HexFormat.of().formatHex(frame));
    }

    @Test
    void growsPastItsInitialCapacity() {
        byte[] big = new byte[100_000];
        Arrays.fill(big, (byte) 7);
        FrameWriter w = new FrameWriter(1).u8(1).bytes(big).u8(2);
        byte[] body = w.body();
        assertEquals(1 + 4 + big.length + 1, body.length);
        assertArrayEquals(big, Arrays.copyOfRange(body, 5, 5 + big.length));
        assertEquals(2, body[body.length - 1]);
    }

    @Test
    void patchesAU32InPlace() {
        FrameWriter w = new FrameWriter().u8(1).u32(0).u8(2);
        w.patchU32(1, 0x01020304L);
        assertEquals("01" + "04030201" + "02", hex(w));
    }

    @Test
    void resetAndStartRequestReuseTheBuffer() {
        FrameWriter w = new FrameWriter(8);
        w.bytes(new byte[1000]);
        byte[] buffer = w.frame();
        w.startRequest(Op.PING, 3);
        assertEquals("10" + "03000000", hex(w));
        assertSame(buffer, w.frame());
        assertEquals(0, w.reset().size());
        assertEquals(0, w.body().length);
    }
}
