package io.ttlstate.spark.protocol;

/**
 * The records of a WRITE_BATCH body (docs/PROTOCOL.md, {@code record := u8 kind, ...}), each
 * appended to a body {@link Requests#writeBatch} started, and of a WRITE_STAMPED one
 * ({@link Requests#writeStamped}); kinds 4-8 are presence hints. Checked
 * byte for byte against the shared vectors (tests/vectors/frames.tsv, {@code FrameVectorsTest}).
 */
public final class Records {
    private Records() {}

    /** PUT (kind 1): the worker looks the key up. */
    public static FrameWriter put(FrameWriter batch, byte[] key, byte[] value) {
        return batch.u8(Op.RECORD_PUT).bytes(key).bytes(value);
    }

    /** REMOVE (kind 2). */
    public static FrameWriter remove(FrameWriter batch, byte[] key) {
        return batch.u8(Op.RECORD_REMOVE).bytes(key);
    }

    /** ACCESS (kind 3): {@code n} reads the JVM answered itself. */
    public static FrameWriter access(FrameWriter batch, int n) {
        return batch.u8(Op.RECORD_ACCESS).u32(n);
    }

    /** PUT_NEW (kind 4): a key not stored in the transaction's committed version. */
    public static FrameWriter putNew(FrameWriter batch, byte[] key, byte[] value) {
        return batch.u8(Op.RECORD_PUT_NEW).bytes(key).bytes(value);
    }

    /** PUT_OVER (kind 5): a key stored there (a store without TTL). */
    public static FrameWriter putOver(FrameWriter batch, byte[] key, byte[] value) {
        return batch.u8(Op.RECORD_PUT_OVER).bytes(key).bytes(value);
    }

    /** REMOVE_PRESENT (kind 6): a key stored there (a store without TTL). */
    public static FrameWriter removePresent(FrameWriter batch, byte[] key) {
        return batch.u8(Op.RECORD_REMOVE_PRESENT).bytes(key);
    }

    /** PUT_OVER_LIVE (kind 7): a TTL store's key stored and live at the clock, expiring at {@code expiresAt}. */
    public static FrameWriter putOverLive(FrameWriter batch, byte[] key, byte[] value, long expiresAt) {
        return batch.u8(Op.RECORD_PUT_OVER_LIVE).bytes(key).bytes(value).i64(expiresAt);
    }

    /**
     * A put of a WRITE_STAMPED frame: {@code kind} PUT, PUT_NEW or PUT_OVER (a live entry), the
     * value stored as the worker stores it, the 8-byte big-endian {@code stamp} before it.
     */
    public static FrameWriter stampedPut(FrameWriter batch, int kind, byte[] key, long stamp, byte[] value) {
        return batch.u8(kind).bytes(key).u32(Op.STAMP_BYTES + value.length).i64BigEndian(stamp)
                .raw(value, 0, value.length);
    }

    /** REMOVE_LIVE (kind 8): such a key removed. */
    public static FrameWriter removeLive(FrameWriter batch, byte[] key, long expiresAt) {
        return batch.u8(Op.RECORD_REMOVE_LIVE).bytes(key).i64(expiresAt);
    }
}
