package io.ttlstate.spark.protocol;

import java.util.List;
import java.util.Map;

/**
 * The request bodies the JVM sends (docs/PROTOCOL.md, "Operations"), each encoded here and
 * nowhere else; WRITE_BATCH's records are {@link Records}'. The JVM never sends PING. The
 * shared vectors (tests/vectors/frames.tsv) are checked against these encoders byte for byte
 * ({@code FrameVectorsTest}).
 */
public final class Requests {
    private Requests() {}

    /** Offset in a WRITE_BATCH body of its record count (after {@code u8 op, u32 handle}). */
    private static final int BATCH_COUNT_OFFSET = 5;
    /** Offset in a WRITE_STAMPED body of its record count (after {@code u8 op, u32 handle, i64 stamp}). */
    private static final int STAMPED_COUNT_OFFSET = 13;

    public static FrameWriter hello(byte[] token) {
        return FrameWriter.request(Op.HELLO, 0).bytes(token).u16(Op.PROTOCOL_VERSION);
    }

    /** OPEN: {@code conf} in its iteration order. */
    public static FrameWriter open(String storeId, String localDir, long operatorId, String storeName,
                                   Map<String, String> conf) {
        FrameWriter w = FrameWriter.request(Op.OPEN, 0).str(storeId).str(localDir).i64(operatorId).str(storeName)
                .u32(conf.size());
        conf.forEach((k, v) -> w.str(k).str(v));
        return w;
    }

    /**
     * LOAD: {@code ssts} maps checkpoint names to local paths, {@code changelogs} versions to
     * local paths, each in its iteration order; an empty {@code manifestPath} (and
     * {@code manifestVersion} 0) starts from the empty version 0.
     */
    public static FrameWriter load(long store, long version, long batchTimestampMs, long manifestVersion,
                                   String manifestPath, Map<String, String> ssts, Map<Long, String> changelogs) {
        FrameWriter w = FrameWriter.request(Op.LOAD, store).i64(version).i64(batchTimestampMs).i64(manifestVersion)
                .str(manifestPath).u32(ssts.size());
        ssts.forEach((name, path) -> w.str(name).str(path));
        w.u32(changelogs.size());
        changelogs.forEach((v, path) -> w.i64(v).str(path));
        return w;
    }

    /** BEGIN; {@code mode} is one of {@code Op.BEGIN_*}. */
    public static FrameWriter begin(long store, long version, int mode, long batchTimestampMs) {
        return FrameWriter.request(Op.BEGIN, store).i64(version).u8(mode).i64(batchTimestampMs);
    }

    /**
     * Starts a WRITE_BATCH body in {@code w} (its buffer kept) with a record count of 0, which
     * {@link #writeBatchCount} sets once the records ({@link Records}) are appended.
     */
    public static FrameWriter writeBatch(FrameWriter w, long txn) {
        return w.startRequest(Op.WRITE_BATCH, txn).u32(0);
    }

    /** Sets the record count of a WRITE_BATCH body {@link #writeBatch} started. */
    public static FrameWriter writeBatchCount(FrameWriter batch, int records) {
        return batch.patchU32(BATCH_COUNT_OFFSET, records);
    }

    /**
     * Starts a WRITE_STAMPED body in {@code w} (its buffer kept): the {@code stamp} every put's
     * value carries, and a record count of 0, which {@link #writeStampedEnd} sets once the
     * records ({@link Records#stampedPut}, {@link Records#remove}, {@link Records#removePresent})
     * are appended.
     */
    public static FrameWriter writeStamped(FrameWriter w, long txn, long stamp) {
        return w.startRequest(Op.WRITE_STAMPED, txn).i64(stamp).u32(0);
    }

    /**
     * Ends a WRITE_STAMPED body: its record count, the reads answered in the JVM, the expiry
     * times of the live entries its records of kinds 5 and 6 name, with their counts, and the
     * keys of reads answered in the JVM because their values expired (cleaned up first).
     */
    public static FrameWriter writeStampedEnd(FrameWriter batch, int records, int accesses, LiveExpiries live,
                                              java.util.List<byte[]> expired) {
        batch.patchU32(STAMPED_COUNT_OFFSET, records).u32(accesses).u32(live.size());
        for (int i = 0; i < live.size(); i++) {
            batch.i64(live.expiresAt(i)).u32(live.count(i));
        }
        batch.u32(expired.size());
        for (byte[] key : expired) {
            batch.bytes(key);
        }
        return batch;
    }

    public static FrameWriter get(long txn, byte[] key) {
        return FrameWriter.request(Op.GET, txn).bytes(key);
    }

    /** MULTI_GET of {@code keys[from..to)}, its buffer sized once (no copies while it grows). */
    public static FrameWriter multiGet(long txn, byte[][] keys, int from, int to) {
        long size = 9; // u8 op, u32 handle, u32 n
        for (int j = from; j < to; j++) {
            size += 4L + keys[j].length;
        }
        FrameWriter w = new FrameWriter((int) Math.min(size, Op.MAX_FRAME)).startRequest(Op.MULTI_GET, txn)
                .u32(to - from);
        for (int j = from; j < to; j++) {
            w.bytes(keys[j]);
        }
        return w;
    }

    /** ITER_OPEN; {@code mode} is one of {@code Op.ITER_*}. */
    public static FrameWriter iterOpen(long txn, byte[] prefix, long maxEntries, int mode) {
        return FrameWriter.request(Op.ITER_OPEN, txn).bytes(prefix).u32(maxEntries).u8(mode);
    }

    public static FrameWriter iterNext(long iter, long maxEntries) {
        return FrameWriter.request(Op.ITER_NEXT, iter).u32(maxEntries);
    }

    public static FrameWriter iterClose(long iter) {
        return FrameWriter.request(Op.ITER_CLOSE, iter);
    }

    public static FrameWriter stats(long txn) {
        return FrameWriter.request(Op.STATS, txn);
    }

    /**
     * COMMIT as {@code newVersion} (format v2: checkpoint id {@code id} on {@code baseId}; null:
     * none); an empty {@code changelogPath} writes no changelog.
     */
    public static FrameWriter commit(long txn, long newVersion, String changelogPath, String id, String baseId) {
        return FrameWriter.request(Op.COMMIT, txn).i64(newVersion).str(changelogPath).str(id == null ? "" : id)
                .str(baseId == null ? "" : baseId);
    }

    public static FrameWriter abort(long txn) {
        return FrameWriter.request(Op.ABORT, txn);
    }

    /** SNAPSHOT into {@code dir} (format v2: the version's checkpoint id {@code id}; null: none). */
    public static FrameWriter snapshot(long store, String dir, String id) {
        return FrameWriter.request(Op.SNAPSHOT, store).str(dir).str(id == null ? "" : id);
    }

    public static FrameWriter close(long store, boolean deleteFiles) {
        return FrameWriter.request(Op.CLOSE, store).bool(deleteFiles);
    }

    public static FrameWriter maintain(long store) {
        return FrameWriter.request(Op.MAINTAIN, store);
    }

    public static FrameWriter manifestFiles(String manifestPath, long version) {
        return FrameWriter.request(Op.MANIFEST_FILES, 0).str(manifestPath).i64(version);
    }

    public static FrameWriter readChangelog(String changelogPath, long version, long fromRecord, long maxRecords) {
        return FrameWriter.request(Op.READ_CHANGELOG, 0).str(changelogPath).i64(version).i64(fromRecord)
                .u32(maxRecords);
    }

    /**
     * PLAN: {@code purpose} over {@code names} and {@code modifiedMs}, the files of a store's
     * checkpoint directory ({@code id} null: none; the limits are retention's).
     */
    public static FrameWriter plan(int purpose, boolean v2, long version, String id, long from,
                                   int minVersionsToRetain, long minVersionsToDelete, int maxVersionsToDelete,
                                   List<String> names, long[] modifiedMs) {
        FrameWriter w = FrameWriter.request(Op.PLAN, 0).u8(purpose).bool(v2).i64(version).str(id == null ? "" : id)
                .i64(from).i32(minVersionsToRetain).i64(minVersionsToDelete).i32(maxVersionsToDelete)
                .u32(names.size());
        for (int i = 0; i < names.size(); i++) {
            w.str(names.get(i)).i64(modifiedMs[i]);
        }
        return w;
    }
}
