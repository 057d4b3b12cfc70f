package io.ttlstate.spark.protocol;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HexFormat;

import org.junit.jupiter.api.Test;

/** {@link FrameReader}: what the writer writes reads back, and every malformed frame is refused. */
class FrameReaderTest {
    private static FrameReader reader(String hex) {
        return new FrameReader(HexFormat.of().parseHex(hex));
    }

    @Test
    void readsBackWhatTheWriterWrote() throws ProtocolException {
        byte[] body = new FrameWriter().u8(255).u16(65535).u32(0xFFFFFFFFL).i32(Integer.MIN_VALUE)
                .i64(Long.MIN_VALUE).i64(Long.MAX_VALUE).bool(true).bytes(new byte[0]).str("héllo")
                .optbytes(null).optbytes(new byte[] {9}).body();
        FrameReader r = new FrameReader(body);
        assertEquals(255, r.u8());
        assertEquals(65535, r.u16());
        assertEquals(0xFFFFFFFFL, r.u32());
        assertEquals(Integer.MIN_VALUE, r.i32());
        assertEquals(Long.MIN_VALUE, r.i64());
        assertEquals(Long.MAX_VALUE, r.i64());
        assertTrue(r.bool());
        assertArrayEquals(new byte[0], r.bytes());
        assertEquals("héllo", r.str());
        assertNull(r.optbytes());
        assertArrayEquals(new byte[] {9}, r.optbytes());
        assertEquals(0, r.remaining());
        r.end();
    }

    @Test
    void refusesTruncatedFields() {
        assertThrows(ProtocolException.class, () -> reader("").u8());
        assertThrows(ProtocolException.class, () -> reader("01").u16());
        assertThrows(ProtocolException.class, () -> reader("010203").u32());
        assertThrows(ProtocolException.class, () -> reader("01020304050607").i64());
    }

    @Test
    void refusesByteStringsThatOverrunTheFrame() {
        assertThrows(ProtocolException.class, () -> reader("0300000061").bytes());
        assertThrows(ProtocolException.class, () -> reader("ffffffff61").bytes()); // 4 GiB: no int overflow
        assertThrows(ProtocolException.class, () -> reader("0100").bytes());  // its length truncated
    }

    @Test
    void refusesCountsTheFrameCannotHold() throws ProtocolException {
        assertThrows(ProtocolException.class, () -> reader("40420f00").count(1));
        assertThrows(ProtocolException.class, () -> reader("ffffffff" + "00".repeat(16)).count(12));
        assertThrows(ProtocolException.class, () -> reader("02000000" + "00".repeat(23)).count(12));
        assertEquals(2, reader("02000000" + "00".repeat(24)).count(12));
        assertEquals(0, reader("00000000").count(8));
    }

    @Test
    void refusesBooleansOtherThanZeroOrOne() throws ProtocolException {
        assertFalse(reader("00").bool());
        assertThrows(ProtocolException.class, () -> reader("02").bool());
        assertThrows(ProtocolException.class, () -> reader("02").optbytes());
    }

    @Test
    void refusesInvalidUtf8() {
        ProtocolException e = assertThrows(ProtocolException.class, () -> reader("02000000fffe").str());
        assertTrue(e.getMessage().contains("UTF-8"), e.getMessage());
        assertThrows(ProtocolException.class, () -> reader("01000000c3").str()); // a cut multi-byte sequence
    }

    @Test
    void refusesTrailingBytes() throws ProtocolException {
        FrameReader r = reader("0102");
        r.u8();
        assertEquals(1, r.remaining());
        ProtocolException e = assertThrows(ProtocolException.class, r::end);
        assertTrue(e.getMessage().contains("1 trailing"), e.getMessage());
    }

    @Test
    void acceptsOnlyKnownStatuses() throws ProtocolException {
        assertEquals(Op.STATUS_OK, reader("00").status());
        assertEquals(Op.STATUS_ERROR, reader("01").status());
        assertThrows(ProtocolException.class, () -> reader("02").status());
    }

    @Test
    void readsOnlyItsWindowOfTheBuffer() throws ProtocolException {
        byte[] buf = HexFormat.of().parseHex("ff" + "0200000061" + "62" + "ff");
        FrameReader r = new FrameReader(buf, 1, 5);
        assertThrows(ProtocolException.class, r::bytes); // the string's second byte lies outside
        FrameReader whole = new FrameReader(buf, 1, 6);
        assertArrayEquals(new byte[] {'a', 'b'}, whole.bytes());
        whole.end();
    }

    @Test
    void opNamesCoverTheCodesAndRefuseOthers() {
        assertEquals("HELLO", Op.name(Op.HELLO));
        assertEquals("READ_CHANGELOG", Op.name(Op.READ_CHANGELOG));
        assertEquals("PLAN", Op.name(Op.PLAN));
        assertEquals("WRITE_STAMPED", Op.name(Op.WRITE_STAMPED));
        assertNull(Op.name(0));
        assertNull(Op.name(Op.WRITE_STAMPED + 1));
        assertNull(Op.name(-1));
    }
}
