package io.ttlstate.spark.protocol;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/** Decodes the fields of one frame body, checking every length; see docs/PROTOCOL.md. */
public final class FrameReader {
    private final byte[] buf;
    private final int end;
    private int pos;

    public FrameReader(byte[] buf) {
        this(buf, 0, buf.length);
    }

    public FrameReader(byte[] buf, int off, int len) {
        this.buf = buf;
        this.pos = off;
        this.end = off + len;
    }

    private void need(int n) throws ProtocolException {
        if (n > end - pos) {
            throw new ProtocolException("frame truncated at byte " + pos);
        }
    }

    public int u8() throws ProtocolException {
        need(1);
        return buf[pos++] & 0xFF;
    }

    public int u16() throws ProtocolException {
        need(2);
        int v = (buf[pos] & 0xFF) | (buf[pos + 1] & 0xFF) << 8;
        pos += 2;
        return v;
    }

    public long u32() throws ProtocolException {
        return i32() & 0xFFFFFFFFL;
    }

    public int i32() throws ProtocolException {
        need(4);
        int v = (buf[pos] & 0xFF) | (buf[pos + 1] & 0xFF) << 8
                | (buf[pos + 2] & 0xFF) << 16 | (buf[pos + 3] & 0xFF) << 24;
        pos += 4;
        return v;
    }

    public long i64() throws ProtocolException {
        need(8);
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (buf[pos + i] & 0xFF);
        }
        pos += 8;
        return v;
    }

    public boolean bool() throws ProtocolException {
        int v = u8();
        if (v > 1) {
            throw new ProtocolException("boolean byte must be 0 or 1, got " + v);
        }
        return v == 1;
    }

    public byte[] bytes() throws ProtocolException {
        long n = u32();
        if (n > end - pos) {
            throw new ProtocolException("byte string of " + n + " bytes overruns the frame at byte " + pos);
        }
        byte[] v = new byte[(int) n];
        System.arraycopy(buf, pos, v, 0, (int) n);
        pos += (int) n;
        return v;
    }

    public String str() throws ProtocolException {
        byte[] raw = bytes();
        try {
            return StandardCharsets.UTF_8.newDecoder()
                    .onMalformedInput(CodingErrorAction.REPORT)
                    .onUnmappableCharacter(CodingErrorAction.REPORT)
                    .decode(ByteBuffer.wrap(raw)).toString();
        } catch (CharacterCodingException e) {
            throw new ProtocolException("string is not valid UTF-8: " + e);
        }
    }

    public byte[] optbytes() throws ProtocolException {
        return bool() ? bytes() : null;
    }

    /** A repeat count, refused if the items could not fit in the rest of the frame. */
    public int count(int minItemSize) throws ProtocolException {
        long n = u32();
        if (n * minItemSize > end - pos) {
            throw new ProtocolException("count " + n + " exceeds what the frame can hold");
        }
        return (int) n;
    }

    /** Reads the status byte of a response, refusing anything but OK and ERROR. */
    public int status() throws ProtocolException {
        int s = u8();
        if (s != Op.STATUS_OK && s != Op.STATUS_ERROR) {
            throw new ProtocolException("unknown response status " + s);
        }
        return s;
    }

    /** Checks that the whole frame was consumed. */
    public void end() throws ProtocolException {
        if (pos != end) {
            throw new ProtocolException((end - pos) + " trailing bytes in frame");
        }
    }

    public int remaining() {
        return end - pos;
    }
}
