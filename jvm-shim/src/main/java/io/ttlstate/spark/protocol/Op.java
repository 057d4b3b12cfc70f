package io.ttlstate.spark.protocol;

/** Op codes, statuses and record kinds of the wire protocol (docs/PROTOCOL.md). */
public final class Op {
    private Op() {}

    public static final int PROTOCOL_VERSION = 11;
    /** Largest frame body either side accepts. */
    public static final int MAX_FRAME = 64 * 1024 * 1024;

    public static final int HELLO = 0x01;
    public static final int OPEN = 0x02;
    public static final int LOAD = 0x03;
    public static final int BEGIN = 0x04;
    public static final int WRITE_BATCH = 0x05;
    public static final int GET = 0x06;
    public static final int MULTI_GET = 0x07;
    public static final int ITER_OPEN = 0x08;
    public static final int ITER_NEXT = 0x09;
    public static final int ITER_CLOSE = 0x0A;
    public static final int STATS = 0x0B;
    public static final int COMMIT = 0x0C;
    public static final int ABORT = 0x0D;
    public static final int SNAPSHOT = 0x0E;
    public static final int CLOSE = 0x0F;
    public static final int PING = 0x10;
    public static final int MAINTAIN = 0x11;
    public static final int MANIFEST_FILES = 0x12;
    public static final int READ_CHANGELOG = 0x13;
    public static final int PLAN = 0x14;
    /** A TTL store's WRITE_BATCH with its values stamped (docs/decisions/111-pre-stamped-ttl-writes.md). */
    public static final int WRITE_STAMPED = 0x15;

    /** PLAN purposes: a load, a replay from a chosen snapshot, a change feed's changelogs, retention. */
    public static final int PLAN_LOAD = 1;
    public static final int PLAN_FROM_SNAPSHOT = 2;
    public static final int PLAN_CHANGELOGS = 3;
    public static final int PLAN_RETENTION = 4;
    /** PLAN outcomes: planned, a file the plan needs is missing, a version has no changelog. */
    public static final int PLAN_PLANNED = 0;
    public static final int PLAN_MISSING = 1;
    public static final int PLAN_NO_CHANGELOG = 2;

    public static final int STATUS_OK = 0;
    public static final int STATUS_ERROR = 1;

    public static final int RECORD_PUT = 1;
    public static final int RECORD_REMOVE = 2;
    /** {@code u32 n}: reads the JVM answered itself, counted by the worker's TTL cleanup. */
    public static final int RECORD_ACCESS = 3;
    /** Writes of a store without TTL whose key the JVM knows is absent from / present in the committed version. */
    public static final int RECORD_PUT_NEW = 4;
    public static final int RECORD_PUT_OVER = 5;
    public static final int RECORD_REMOVE_PRESENT = 6;
    /**
     * Writes of a TTL store over an entry the JVM knows is stored and live at the transaction's
     * clock: the record's fields, then that entry's {@code i64 expiresAt} (the worker then reads
     * neither its presence nor its timestamp). {@link #RECORD_PUT_NEW} serves both kinds of store.
     */
    public static final int RECORD_PUT_OVER_LIVE = 7;
    public static final int RECORD_REMOVE_LIVE = 8;
    /** Bytes of the big-endian timestamp before each value of a WRITE_STAMPED frame (Flink's TTL layout). */
    public static final int STAMP_BYTES = 8;

    /** BEGIN modes: write (with a changelog), read-only, write without changelog (snapshot mode). */
    public static final int BEGIN_WRITE = 0;
    public static final int BEGIN_READ_ONLY = 1;
    public static final int BEGIN_WRITE_NO_CHANGELOG = 2;

    /**
     * ITER_OPEN modes: chunks of pairs, or of pairs each followed by {@code i64 expiresAt}, or of
     * every stored pair (expired ones too, untouched) each followed by {@code i64 expiresAt}.
     */
    public static final int ITER_PAIRS = 0;
    public static final int ITER_PAIRS_WITH_EXPIRY = 1;
    public static final int ITER_STORED_WITH_EXPIRY = 2;

    private static final String[] NAMES = {
        null, "HELLO", "OPEN", "LOAD", "BEGIN", "WRITE_BATCH", "GET", "MULTI_GET", "ITER_OPEN",
        "ITER_NEXT", "ITER_CLOSE", "STATS", "COMMIT", "ABORT", "SNAPSHOT", "CLOSE", "PING", "MAINTAIN",
        "MANIFEST_FILES", "READ_CHANGELOG", "PLAN", "WRITE_STAMPED"
    };

    /** The name of an op code, or null if the code is unknown. */
    public static String name(int op) {
        return op > 0 && op < NAMES.length ? NAMES[op] : null;
    }
}
