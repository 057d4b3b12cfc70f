package io.ttlstate.spark.protocol;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * The worker's replies (docs/PROTOCOL.md, "Operations"), decoded here and nowhere else from a
 * reader positioned after the status byte ({@link FrameReader#status}). Each decoder of a whole
 * reply checks that nothing trails it. The shared vectors (tests/vectors/replies.tsv, written
 * by the worker's own encoders) are checked against these decoders ({@code ReplyVectorsTest}).
 */
public final class Reply {
    private Reply() {}

    /** An ERROR reply's payload. */
    public static final class Failed {
        public final String errorClass;
        public final String message;

        private Failed(String errorClass, String message) {
            this.errorClass = errorClass;
            this.message = message;
        }
    }

    public static final class Hello {
        public final int protocolVersion;
        public final int workerPid;
        public final long workerIndex;

        private Hello(int protocolVersion, int workerPid, long workerIndex) {
            this.protocolVersion = protocolVersion;
            this.workerPid = workerPid;
            this.workerIndex = workerIndex;
        }
    }

    /** OPEN: the store's handle and its settings as the worker resolved them (sorted by name). */
    public static final class Opened {
        public final long storeHandle;
        public final Map<String, String> settings;

        private Opened(long storeHandle, Map<String, String> settings) {
            this.storeHandle = storeHandle;
            this.settings = settings;
        }
    }

    public static final class Begun {
        public final long txnHandle;
        public final boolean direct;
        /** The transaction takes WRITE_STAMPED frames, its values stamped with {@link #stamp}. */
        public final boolean stamped;
        public final long stamp;

        private Begun(long txnHandle, boolean direct, boolean stamped, long stamp) {
            this.txnHandle = txnHandle;
            this.direct = direct;
            this.stamped = stamped;
            this.stamp = stamp;
        }
    }

    /** A GET answer: {@code value} null if absent, {@code expiresAt} then 0. */
    public static final class Answer {
        public final byte[] value;
        public final long expiresAt;

        private Answer(byte[] value, long expiresAt) {
            this.value = value;
            this.expiresAt = expiresAt;
        }
    }

    /** A chunk of an iterator; {@code expiresAt} null in mode {@code ITER_PAIRS}. */
    public static final class Chunk {
        public final boolean last;
        public final byte[][] keys;
        public final byte[][] values;
        public final long[] expiresAt;

        private Chunk(boolean last, byte[][] keys, byte[][] values, long[] expiresAt) {
            this.last = last;
            this.keys = keys;
            this.values = values;
            this.expiresAt = expiresAt;
        }
    }

    /** ITER_OPEN: the iterator's handle (0 when the first chunk is the last) and its first chunk. */
    public static final class IterOpened {
        public final long iterHandle;
        public final Chunk chunk;

        private IterOpened(long iterHandle, Chunk chunk) {
            this.iterHandle = iterHandle;
            this.chunk = chunk;
        }
    }

    /** STATS; {@code metrics} by name in reply order (a repeated name: its last value). */
    public static final class Stats {
        public final long numKeys;
        public final long memoryUsedBytes;
        public final Map<String, Long> metrics;

        private Stats(long numKeys, long memoryUsedBytes, Map<String, Long> metrics) {
            this.numKeys = numKeys;
            this.memoryUsedBytes = memoryUsedBytes;
            this.metrics = metrics;
        }
    }

    public static final class Committed {
        public final long numKeys;
        public final long fileBytes;
        public final long memoryUsedBytes;
        public final boolean snapshotWanted;
        /** The changelog's name in the checkpoint, the worker's ("" without changelog). */
        public final String changelogName;
        /** The earliest expiry time of the new version's stored entries ({@code Long.MIN_VALUE}: not known). */
        public final long storedFrom;
        public final Map<String, Long> metrics;

        private Committed(long numKeys, long fileBytes, long memoryUsedBytes, boolean snapshotWanted,
                          String changelogName, long storedFrom, Map<String, Long> metrics) {
            this.numKeys = numKeys;
            this.fileBytes = fileBytes;
            this.memoryUsedBytes = memoryUsedBytes;
            this.snapshotWanted = snapshotWanted;
            this.changelogName = changelogName;
            this.storedFrom = storedFrom;
            this.metrics = metrics;
        }
    }

    /** An SST of a SNAPSHOT reply: its checkpoint name, where the worker put it, its size. */
    public static final class LocalSst {
        public final String name;
        public final String path;
        public final long size;

        private LocalSst(String name, String path, long size) {
            this.name = name;
            this.path = path;
            this.size = size;
        }
    }

    public static final class Snapshot {
        public final long version;
        public final long numKeys;
        public final String manifestPath;
        /** The manifest's name in the checkpoint, the worker's. */
        public final String manifestName;
        public final List<LocalSst> ssts;

        private Snapshot(long version, long numKeys, String manifestPath, String manifestName, List<LocalSst> ssts) {
            this.version = version;
            this.numKeys = numKeys;
            this.manifestPath = manifestPath;
            this.manifestName = manifestName;
            this.ssts = ssts;
        }
    }

    /** An SST a manifest lists: its checkpoint name and size. */
    public static final class Sst {
        public final String name;
        public final long size;

        private Sst(String name, long size) {
            this.name = name;
            this.size = size;
        }
    }

    /** READ_CHANGELOG: the records' keys and values (null: a remove), and the next record's index (-1: none). */
    public static final class ChangelogRecords {
        public final List<byte[]> keys;
        public final List<byte[]> values;
        public final long next;

        private ChangelogRecords(List<byte[]> keys, List<byte[]> values, long next) {
            this.keys = keys;
            this.values = values;
            this.next = next;
        }
    }

    /** An ERROR reply's fields (what follows them is not read). */
    public static Failed error(FrameReader r) throws ProtocolException {
        return new Failed(r.str(), r.str());
    }

    public static Hello hello(FrameReader r) throws ProtocolException {
        Hello h = new Hello(r.u16(), r.i32(), r.u32());
        r.end();
        return h;
    }

    public static Opened open(FrameReader r) throws ProtocolException {
        long handle = r.u32();
        Map<String, String> settings = new TreeMap<>();
        for (int i = 0, n = r.count(8); i < n; i++) {
            settings.put(r.str(), r.str());
        }
        r.end();
        return new Opened(handle, settings);
    }

    /** LOAD: the loaded version's number of keys. */
    public static long load(FrameReader r) throws ProtocolException {
        long n = r.i64();
        r.end();
        return n;
    }

    public static Begun begin(FrameReader r) throws ProtocolException {
        Begun b = new Begun(r.u32(), r.bool(), r.bool(), r.i64());
        r.end();
        return b;
    }

    /** One {@code answer := optbytes value, [i64 expiresAt if present]}. */
    public static Answer answer(FrameReader r) throws ProtocolException {
        byte[] value = r.optbytes();
        return new Answer(value, value == null ? 0 : r.i64());
    }

    public static Answer get(FrameReader r) throws ProtocolException {
        Answer a = answer(r);
        r.end();
        return a;
    }

    /**
     * MULTI_GET of {@code asked} keys: the answers of the first of them, in request order; at
     * least one and at most {@code asked} (the JVM asks again for the rest).
     */
    public static Answer[] multiGet(FrameReader r, int asked) throws ProtocolException {
        long n = r.u32();
        if (n < 1 || n > asked) {
            throw new ProtocolException("MULTI_GET of " + asked + " keys answered " + n);
        }
        Answer[] out = new Answer[(int) n];
        for (int i = 0; i < out.length; i++) {
            out[i] = answer(r);
        }
        r.end();
        return out;
    }

    /** ITER_OPEN in mode {@code ITER_PAIRS} ({@code withExpiry} false) or a mode with expiry times. */
    public static IterOpened iterOpen(FrameReader r, boolean withExpiry) throws ProtocolException {
        long handle = iterHandle(r);
        return new IterOpened(handle, chunk(r, withExpiry));
    }

    /** The first field of ITER_OPEN's reply; its chunk ({@link #chunk}) follows. */
    public static long iterHandle(FrameReader r) throws ProtocolException {
        return r.u32();
    }

    /** ITER_NEXT's reply, or the rest of ITER_OPEN's: {@code u8 last, u32 n, entry * n}. */
    public static Chunk chunk(FrameReader r, boolean withExpiry) throws ProtocolException {
        boolean last = r.bool();
        int n = r.count(withExpiry ? 16 : 8);
        byte[][] keys = new byte[n][];
        byte[][] values = new byte[n][];
        long[] expiresAt = withExpiry ? new long[n] : null;
        for (int i = 0; i < n; i++) {
            keys[i] = r.bytes();
            values[i] = r.bytes();
            if (withExpiry) {
                expiresAt[i] = r.i64();
            }
        }
        r.end();
        return new Chunk(last, keys, values, expiresAt);
    }

    public static Stats stats(FrameReader r) throws ProtocolException {
        Stats s = new Stats(r.i64(), r.i64(), metrics(r));
        r.end();
        return s;
    }

    public static Committed commit(FrameReader r) throws ProtocolException {
        Committed c = new Committed(r.i64(), r.i64(), r.i64(), r.bool(), r.str(), r.i64(), metrics(r));
        r.end();
        return c;
    }

    /** {@code metrics := u32 n, (str name, i64 value) * n}. */
    private static Map<String, Long> metrics(FrameReader r) throws ProtocolException {
        Map<String, Long> out = new LinkedHashMap<>();
        for (int i = 0, n = r.count(12); i < n; i++) {
            out.put(r.str(), r.i64());
        }
        return out;
    }

    public static Snapshot snapshot(FrameReader r) throws ProtocolException {
        long version = r.i64();
        long numKeys = r.i64();
        String manifest = r.str();
        String manifestName = r.str();
        int n = r.count(16);
        List<LocalSst> ssts = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            ssts.add(new LocalSst(r.str(), r.str(), r.i64()));
        }
        r.end();
        return new Snapshot(version, numKeys, manifest, manifestName, ssts);
    }

    public static List<Sst> manifestFiles(FrameReader r) throws ProtocolException {
        int n = r.count(12);
        List<Sst> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            out.add(new Sst(r.str(), r.i64()));
        }
        r.end();
        return out;
    }

    /** READ_CHANGELOG: {@code u32 n, record * n, i64 nextRecord}, records of kinds PUT and REMOVE only. */
    public static ChangelogRecords readChangelog(FrameReader r) throws ProtocolException {
        int n = r.count(5);
        List<byte[]> keys = new ArrayList<>(n);
        List<byte[]> values = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            int kind = r.u8();
            keys.add(r.bytes());
            if (kind == Op.RECORD_PUT) {
                values.add(r.bytes());
            } else if (kind == Op.RECORD_REMOVE) {
                values.add(null);
            } else {
                throw new ProtocolException("unknown changelog record kind " + kind);
            }
        }
        long next = r.i64();
        r.end();
        return new ChangelogRecords(keys, values, next);
    }

    /**
     * PLAN of a load, a replay from a snapshot or a change feed's changelogs: which listed files
     * (by their index in the request) rebuild the version, or why none can.
     */
    public static final class Plan {
        /** {@link Op#PLAN_PLANNED}, {@link Op#PLAN_MISSING} or {@link Op#PLAN_NO_CHANGELOG}. */
        public final int outcome;
        /** The version's checkpoint id (format v2), else null. */
        public final String id;
        /** The manifest's version, 0 without one. */
        public final long manifestVersion;
        /** The manifest's index, -1: none (the empty version 0). */
        public final int manifest;
        /** The changelogs' indices and versions, oldest first. */
        public final int[] changelogs;
        public final long[] changelogVersions;
        /** Format v1 files of versions above the planned one: indices, versions, whether a manifest. */
        public final int[] later;
        public final long[] laterVersions;
        public final boolean[] laterManifests;
        /** {@link Op#PLAN_MISSING}: the missing file's name (a pattern) and the message, {@code {path}} in it. */
        public final String missingPattern;
        public final String missingMessage;
        /** {@link Op#PLAN_NO_CHANGELOG}: the version that has a snapshot and no changelog. */
        public final long noChangelogVersion;

        private Plan(int outcome, String id, long manifestVersion, int manifest, int[] changelogs,
                     long[] changelogVersions, int[] later, long[] laterVersions, boolean[] laterManifests,
                     String missingPattern, String missingMessage, long noChangelogVersion) {
            this.outcome = outcome;
            this.id = id;
            this.manifestVersion = manifestVersion;
            this.manifest = manifest;
            this.changelogs = changelogs;
            this.changelogVersions = changelogVersions;
            this.later = later;
            this.laterVersions = laterVersions;
            this.laterManifests = laterManifests;
            this.missingPattern = missingPattern;
            this.missingMessage = missingMessage;
            this.noChangelogVersion = noChangelogVersion;
        }

        /** A plan that could not be made ({@link Op#PLAN_MISSING}, {@link Op#PLAN_NO_CHANGELOG}): no files. */
        private static Plan failed(int outcome, String missingPattern, String missingMessage, long noChangelogVersion) {
            return new Plan(outcome, null, 0, -1, new int[0], new long[0], new int[0], new long[0], new boolean[0],
                    missingPattern, missingMessage, noChangelogVersion);
        }
    }

    /** PLAN of retention: what a cleanup pass deletes, by index in the request's listing. */
    public static final class Retention {
        public final long keepFrom;
        /** False when the pass leaves stale versions for a later one, or could not plan. */
        public final boolean complete;
        /** The oldest retained file's modification time ({@code Long.MIN_VALUE}: none); nothing younger goes. */
        public final long oldestRetainedMs;
        public final int[] deletable;
        /** The retained manifests' indices and versions (their SSTs stay). */
        public final int[] retainedManifests;
        public final long[] retainedManifestVersions;

        private Retention(long keepFrom, boolean complete, long oldestRetainedMs, int[] deletable,
                          int[] retainedManifests, long[] retainedManifestVersions) {
            this.keepFrom = keepFrom;
            this.complete = complete;
            this.oldestRetainedMs = oldestRetainedMs;
            this.deletable = deletable;
            this.retainedManifests = retainedManifests;
            this.retainedManifestVersions = retainedManifestVersions;
        }
    }

    /**
     * PLAN (purposes load, from snapshot, changelogs): {@code u8 outcome}, then for PLANNED
     * {@code str id, i64 manifestVersion, i32 manifest, u32 n, (i32 index, i64 version) * n,
     * u32 m, (i32 index, i64 version, bool manifest) * m}, for MISSING {@code str pattern,
     * str message}, for NO_CHANGELOG {@code i64 version}.
     */
    public static Plan plan(FrameReader r) throws ProtocolException {
        int outcome = r.u8();
        Plan p;
        if (outcome == Op.PLAN_PLANNED) {
            String id = r.str();
            long manifestVersion = r.i64();
            int manifest = r.i32();
            int n = r.count(12);
            int[] changelogs = new int[n];
            long[] versions = new long[n];
            for (int i = 0; i < n; i++) {
                changelogs[i] = r.i32();
                versions[i] = r.i64();
            }
            int m = r.count(13);
            int[] later = new int[m];
            long[] laterVersions = new long[m];
            boolean[] laterManifests = new boolean[m];
            for (int i = 0; i < m; i++) {
                later[i] = r.i32();
                laterVersions[i] = r.i64();
                laterManifests[i] = r.bool();
            }
            p = new Plan(outcome, id.isEmpty() ? null : id, manifestVersion, manifest, changelogs, versions, later,
                    laterVersions, laterManifests, null, null, -1);
        } else if (outcome == Op.PLAN_MISSING) {
            String pattern = r.str();
            p = Plan.failed(outcome, pattern, r.str(), -1);
        } else if (outcome == Op.PLAN_NO_CHANGELOG) {
            p = Plan.failed(outcome, null, null, r.i64());
        } else {
            throw new ProtocolException("unknown PLAN outcome " + outcome);
        }
        r.end();
        return p;
    }

    /**
     * PLAN (purpose retention): {@code u8 outcome (0), i64 keepFrom, bool complete,
     * i64 oldestRetainedMs, u32 n, i32 deletable * n, u32 m, (i32 manifest, i64 version) * m}.
     */
    public static Retention retention(FrameReader r) throws ProtocolException {
        int outcome = r.u8();
        if (outcome != Op.PLAN_PLANNED) {
            throw new ProtocolException("unknown retention PLAN outcome " + outcome);
        }
        long keepFrom = r.i64();
        boolean complete = r.bool();
        long oldest = r.i64();
        int[] deletable = indices(r);
        int m = r.count(12);
        int[] retained = new int[m];
        long[] versions = new long[m];
        for (int i = 0; i < m; i++) {
            retained[i] = r.i32();
            versions[i] = r.i64();
        }
        r.end();
        return new Retention(keepFrom, complete, oldest, deletable, retained, versions);
    }

    private static int[] indices(FrameReader r) throws ProtocolException {
        int n = r.count(4);
        int[] out = new int[n];
        for (int i = 0; i < n; i++) {
            out[i] = r.i32();
        }
        return out;
    }

    /** The empty reply of ITER_CLOSE, ABORT, CLOSE, PING and MAINTAIN. */
    public static void empty(FrameReader r) throws ProtocolException {
        r.end();
    }
}
