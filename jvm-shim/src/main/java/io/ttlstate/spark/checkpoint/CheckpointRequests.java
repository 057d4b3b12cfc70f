package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import io.ttlstate.spark.service.Replies;
import io.ttlstate.spark.service.WorkerConnection;

/**
 * The store requests that move checkpoint data (docs/PROTOCOL.md): LOAD, SNAPSHOT,
 * MANIFEST_FILES and READ_CHANGELOG, sent ({@link Requests} encodes them, {@link Reply}
 * decodes their replies) and answered in the checkpoint's terms. Errors come back as
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

    /** What SNAPSHOT made: the version, its key count, its manifest (and its checkpoint name) and every SST. */
    static final class Snapshot {
        final long version;
        final long numKeys;
        final java.nio.file.Path manifest;
        final String manifestName;
        final List<LocalSst> ssts;

        Snapshot(long version, long numKeys, java.nio.file.Path manifest, String manifestName, List<LocalSst> ssts) {
            this.version = version;
            this.numKeys = numKeys;
            this.manifest = manifest;
            this.manifestName = manifestName;
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
        Map<String, String> sstPaths = new LinkedHashMap<>();
        ssts.forEach((name, path) -> sstPaths.put(name, path.toString()));
        Map<Long, String> changelogPaths = new LinkedHashMap<>();
        changelogs.forEach((v, path) -> changelogPaths.put(v, path.toString()));
        FrameReader r = conn.call(Requests.load(storeHandle, version, batchTimestampMs, manifestVersion,
                manifest == null ? "" : manifest.toString(), sstPaths, changelogPaths));
        return Replies.decode(() -> Reply.load(r));
    }

    /**
     * SNAPSHOT the store's committed version (format v2: checkpoint id {@code id}) into
     * {@code dir} (which must not exist).
     */
    static Snapshot snapshot(WorkerConnection conn, long storeHandle, java.nio.file.Path dir, String id) {
        FrameReader r = conn.call(Requests.snapshot(storeHandle, dir.toString(), id));
        Reply.Snapshot s = Replies.decode(() -> Reply.snapshot(r));
        List<LocalSst> ssts = new ArrayList<>(s.ssts.size());
        for (Reply.LocalSst sst : s.ssts) {
            ssts.add(new LocalSst(sst.name, sst.size, java.nio.file.Path.of(sst.path)));
        }
        return new Snapshot(s.version, s.numKeys, java.nio.file.Path.of(s.manifestPath), s.manifestName, ssts);
    }

    /** The SSTs the manifest of {@code version} at local path {@code manifest} references. */
    static List<Sst> manifestFiles(WorkerConnection conn, java.nio.file.Path manifest, long version) {
        FrameReader r = conn.call(Requests.manifestFiles(manifest.toString(), version));
        List<Reply.Sst> listed = Replies.decode(() -> Reply.manifestFiles(r));
        List<Sst> out = new ArrayList<>(listed.size());
        for (Reply.Sst sst : listed) {
            out.add(new Sst(sst.name, sst.size));
        }
        return out;
    }

    /** READ_CHANGELOG: up to {@code maxRecords} records of a local changelog from index {@code fromRecord}. */
    static ChangelogChunk readChangelog(WorkerConnection conn, java.nio.file.Path changelog, long version,
                                        long fromRecord, int maxRecords) {
        FrameReader r = conn.call(Requests.readChangelog(changelog.toString(), version, fromRecord, maxRecords));
        Reply.ChangelogRecords c = Replies.decode(() -> Reply.readChangelog(r));
        return new ChangelogChunk(c.keys, c.values, c.next);
    }
}
