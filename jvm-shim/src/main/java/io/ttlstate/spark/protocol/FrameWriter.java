package io.ttlstate.spark.protocol;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * Builds one frame body (little-endian). The first 4 bytes of the internal buffer are
 * reserved for the length prefix, so {@link #frame()} needs no copy.
 */
public final class FrameWriter {
    private byte[] buf;
    private int pos;

    public FrameWriter() {
        this(64);
    }

    public FrameWriter(int capacity) {
        buf = new byte[Math.max(16, capacity + 4)];
        pos = 4;
    }

    /** A request body starting with its op code and handle. */
    public static FrameWriter request(int op, long handle) {
        return new FrameWriter().startRequest(op, handle);
    }

    /** Forgets everything written and starts a request body with its op code and handle, keeping the buffer. */
    public FrameWriter startRequest(int op, long handle) {
        return reset().u8(op).u32(handle);
    }

    private void ensure(int n) {
        if (pos + n > buf.length) {
            buf = Arrays.copyOf(buf, Math.max(buf.length * 2, pos + n));
        }
    }

    public FrameWriter u8(int v) {
        ensure(1);
        buf[pos++] = (byte) v;
        return this;
    }

    public FrameWriter u16(int v) {
        ensure(2);
        buf[pos++] = (byte) v;
        buf[pos++] = (byte) (v >>> 8);
        return this;
    }

    /** An unsigned 32-bit value (only the low 32 bits of {@code v} are written). */
    public FrameWriter u32(long v) {
        ensure(4);
        putInt(pos, (int) v);
        pos += 4;
        return this;
    }

    public FrameWriter i32(int v) {
        return u32(v);
    }

    public FrameWriter i64(long v) {
        ensure(8);
        for (int i = 0; i < 8; i++) {
            buf[pos++] = (byte) (v >>> (8 * i));
        }
        return this;
    }

    /** An i64 in big-endian order (the TTL timestamp before a stored value; every other field is little-endian). */
    public FrameWriter i64BigEndian(long v) {
        ensure(8);
        for (int i = 7; i >= 0; i--) {
            buf[pos++] = (byte) (v >>> (8 * i));
        }
        return this;
    }

    public FrameWriter bool(boolean v) {
        return u8(v ? 1 : 0);
    }

    public FrameWriter bytes(byte[] v) {
        return bytes(v, 0, v.length);
    }

    public FrameWriter bytes(byte[] v, int off, int len) {
        u32(len);
        raw(v, off, len);
        return this;
    }

    /** Bytes without a length prefix. */
    public FrameWriter raw(byte[] v, int off, int len) {
        ensure(len);
        System.arraycopy(v, off, buf, pos, len);
        pos += len;
        return this;
    }

    public FrameWriter str(String v) {
        return bytes(v.getBytes(StandardCharsets.UTF_8));
    }

    public FrameWriter optbytes(byte[] v) {
        return v == null ? u8(0) : u8(1).bytes(v);
    }

    /** Overwrites a u32 already written at body offset {@code bodyOffset}. */
    public FrameWriter patchU32(int bodyOffset, long v) {
        putInt(bodyOffset + 4, (int) v);
        return this;
    }

    /** Length of the body written so far. */
    public int size() {
        return pos - 4;
    }

    /** Forgets everything written, keeping the buffer. */
    public FrameWriter reset() {
        pos = 4;
        return this;
    }

    /** A copy of the body. */
    public byte[] body() {
        return Arrays.copyOfRange(buf, 4, pos);
    }

    /** The internal buffer holding {@code u32 length, body} in its first {@link #frameLength()} bytes. */
    public byte[] frame() {
        putInt(0, pos - 4);
        return buf;
    }

    public int frameLength() {
        return pos;
    }

    private void putInt(int at, int v) {
        buf[at] = (byte) v;
        buf[at + 1] = (byte) (v >>> 8);
        buf[at + 2] = (byte) (v >>> 16);
        buf[at + 3] = (byte) (v >>> 24);
    }
}
