package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;

/**
 * The store requests that move checkpoint data (docs/PROTOCOL.md): LOAD, SNAPSHOT,
 * MANIFEST_FILES and READ_CHANGELOG, encoded and decoded in one place. Errors come back as
 * {@link WorkerException}, I/O failures as {@link java.io.UncheckedIOException}.
 */
final class CheckpointRequests {
    private CheckpointRequests() {}

    /** An SST of a manifest: its checkpoint name and size. */
    static class Sst {
        final String name;
        final long size;

        Sst(String name, long size) {
            this.name = name;
            this.size = size;
        }
    }

    /** An SST of a SNAPSHOT reply: name, size and where the worker put it. */
    static final class LocalSst extends Sst {
        final java.nio.file.Path path;

        LocalSst(String name, long size, java.nio.file.Path path) {
            super(name, size);
            this.path = path;
        }
    }

    /** What SNAPSHOT made: the version, its key count, its manifest and every SST. */
    static final class Snapshot {
        final long version;
        final long numKeys;
        final java.nio.file.Path manifest;
        final List<LocalSst> ssts;

        Snapshot(long version, long numKeys, java.nio.file.Path manifest, List<LocalSst> ssts) {
            this.version = version;
            this.numKeys = numKeys;
            this.manifest = manifest;
            this.ssts = ssts;
        }
    }

    /**
     * LOAD {@code version} from the manifest of {@code manifestVersion} (null path: the empty
     * version 0), its SSTs (checkpoint name to local path) and the changelogs (version to
     * local path, in order); returns the number of keys.
     */
    static long load(WorkerConnection conn, long storeHandle, long version, long batchTimestampMs,
                     long manifestVersion, java.nio.file.Path manifest, Map<String, java.nio.file.Path> ssts,
                     Map<Long, java.nio.file.Path> changelogs) {
        FrameWriter w = FrameWriter.request(Op.LOAD, storeHandle)
                .i64(version).i64(batchTimestampMs).i64(manifestVersion)
                .str(manifest == null ? "" : manifest.toString())
                .u32(ssts.size());
        ssts.forEach((name, path) -> w.str(name).str(path.toString()));
        w.u32(changelogs.size());
        changelogs.forEach((v, path) -> w.i64(v).str(path.toString()));
        FrameReader r = conn.call(w);
        return Replies.decode(() -> {
            long n = r.i64();
            r.end();
            return n;
        });
    }

    /** SNAPSHOT the store's committed version into {@code dir} (which must not exist). */
    static Snapshot snapshot(WorkerConnection conn, long storeHandle, java.nio.file.Path dir) {
        FrameReader r = conn.call(FrameWriter.request(Op.SNAPSHOT, storeHandle).str(dir.toString()));
        return Replies.decode(() -> {
            long version = r.i64();
            long numKeys = r.i64();
            java.nio.file.Path manifest = java.nio.file.Path.of(r.str());
            int n = r.count(16);
            List<LocalSst> ssts = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                String name = r.str();
                java.nio.file.Path path = java.nio.file.Path.of(r.str());
                ssts.add(new LocalSst(name, r.i64(), path));
            }
            r.end();
            return new Snapshot(version, numKeys, manifest, ssts);
        });
    }

    /** The SSTs the manifest of {@code version} at local path {@code manifest} references. */
    static List<Sst> manifestFiles(WorkerConnection conn, java.nio.file.Path manifest, long version) {
        FrameReader r = conn.call(FrameWriter.request(Op.MANIFEST_FILES, 0).str(manifest.toString()).i64(version));
        return Replies.decode(() -> {
            int n = r.count(12);
            List<Sst> out = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                out.add(new Sst(r.str(), r.i64()));
            }
            r.end();
            return out;
        });
    }

    /** READ_CHANGELOG: up to {@code maxRecords} records of a local changelog from index {@code fromRecord}. */
    static ChangelogChunk readChangelog(WorkerConnection conn, java.nio.file.Path changelog, long version,
                                        long fromRecord, int maxRecords) {
        FrameReader r = conn.call(FrameWriter.request(Op.READ_CHANGELOG, 0).str(changelog.toString()).i64(version)
                .i64(fromRecord).u32(maxRecords));
        return Replies.decode(() -> {
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
                    throw new io.ttlstate.spark.protocol.ProtocolException("unknown changelog record kind " + kind);
                }
            }
            long next = r.i64();
            r.end();
            return new ChangelogChunk(keys, values, next);
        });
    }
}
