package io.ttlstate.spark;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.errors.QueryExecutionErrors;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A store's checkpoint directory ({@code StateStoreId.storeCheckpointLocation()}): lists its
 * {@code <v>.snapshot} / {@code <v>.changelog} files, plans loads and cleanups, and moves files
 * between it and local disk through Spark's {@link CheckpointFileManager} (atomic uploads).
 */
final class CheckpointFiles {
    private static final Logger LOG = LoggerFactory.getLogger(CheckpointFiles.class);
    private static final Pattern NAME = Pattern.compile("(\\d+)\\.(snapshot|changelog)");
    static final String SNAPSHOT = "snapshot";
    static final String CHANGELOG = "changelog";

    private final Path dir;
    private final Configuration hadoopConf;
    private CheckpointFileManager fm;
    private boolean dirCreated;

    CheckpointFiles(Path dir, Configuration hadoopConf) {
        this.dir = dir;
        this.hadoopConf = hadoopConf;
    }

    Path dir() {
        return dir;
    }

    private synchronized CheckpointFileManager fm() {
        if (fm == null) {
            fm = CheckpointFileManager.create(dir, hadoopConf);
        }
        return fm;
    }

    Path path(long version, String kind) {
        return new Path(dir, version + "." + kind);
    }

    /** The snapshot and changelog versions present, each sorted. */
    static final class Listing {
        final TreeMap<Long, FileStatus> snapshots = new TreeMap<>();
        final TreeMap<Long, FileStatus> changelogs = new TreeMap<>();

        long latest() {
            long s = snapshots.isEmpty() ? 0 : snapshots.lastKey();
            long c = changelogs.isEmpty() ? 0 : changelogs.lastKey();
            return Math.max(s, c);
        }
    }

    Listing list() throws IOException {
        Listing l = new Listing();
        CheckpointFileManager m = fm();
        if (!m.exists(dir)) {
            return l;
        }
        for (FileStatus st : m.list(dir)) {
            Matcher mt = NAME.matcher(st.getPath().getName());
            if (mt.matches()) {
                long v = Long.parseLong(mt.group(1));
                (SNAPSHOT.equals(mt.group(2)) ? l.snapshots : l.changelogs).put(v, st);
            }
        }
        return l;
    }

    /** Files to load version {@code v}: the newest snapshot at or below it, then changelogs. */
    static final class LoadPlan {
        final long version;
        /** Snapshot version, or 0 when starting from the empty version 0. */
        final long snapshotVersion;
        final List<FileStatus> files = new ArrayList<>();
        final List<Long> fileVersions = new ArrayList<>();
        final List<Boolean> isSnapshot = new ArrayList<>();

        LoadPlan(long version, long snapshotVersion) {
            this.version = version;
            this.snapshotVersion = snapshotVersion;
        }

        void add(FileStatus f, long v, boolean snapshot) {
            files.add(f);
            fileVersions.add(v);
            isSnapshot.add(snapshot);
        }
    }

    /**
     * Plans the load of {@code version}; a missing file fails with
     * {@code CANNOT_LOAD_STATE_STORE.CANNOT_READ_STREAMING_STATE_FILE} naming it.
     */
    LoadPlan plan(long version) throws IOException {
        LoadPlan plan;
        if (version == 0) {
            return new LoadPlan(0, 0);
        }
        Listing l = list();
        Map.Entry<Long, FileStatus> snap = l.snapshots.floorEntry(version);
        long start = snap == null ? 0 : snap.getKey();
        plan = new LoadPlan(version, start);
        if (snap != null) {
            plan.add(snap.getValue(), start, true);
        }
        for (long v = start + 1; v <= version; v++) {
            FileStatus f = l.changelogs.get(v);
            if (f == null) {
                Path missing = path(v, CHANGELOG);
                throw SparkErrors.sneaky(QueryExecutionErrors.failedToReadStreamingStateFileError(missing,
                        new FileNotFoundException("State file " + missing + " of version " + v
                                + " does not exist (needed to load version " + version + ")")));
            }
            plan.add(f, v, false);
        }
        return plan;
    }

    /** Copies a checkpoint file to {@code local}; returns its size. */
    long download(Path remote, java.nio.file.Path local) throws IOException {
        Files.createDirectories(local.getParent());
        try (InputStream in = fm().open(remote)) {
            return Files.copy(in, local, StandardCopyOption.REPLACE_EXISTING);
        }
    }

    /** Uploads {@code local} as {@code <version>.<kind>} atomically, replacing any old one; returns its size. */
    long upload(java.nio.file.Path local, long version, String kind) throws IOException {
        CheckpointFileManager m = fm();
        if (!dirCreated) {
            m.mkdirs(dir);
            dirCreated = true;
        }
        Path target = path(version, kind);
        CheckpointFileManager.CancellableFSDataOutputStream out = m.createAtomic(target, true);
        long size;
        try {
            size = Files.copy(local, out);
            out.close();
        } catch (IOException | RuntimeException e) {
            out.cancel();
            throw e;
        }
        return size;
    }

    void deleteIfExists(long version, String kind) throws IOException {
        Path p = path(version, kind);
        CheckpointFileManager m = fm();
        if (m.exists(p)) {
            m.delete(p);
        }
    }

    /**
     * Deletes what is not needed to recover the last {@code minVersionsToRetain} versions:
     * snapshots and changelogs older than the newest snapshot at or below
     * {@code latest - minVersionsToRetain + 1}. Deletes nothing if there is no such snapshot.
     * Returns the number of files deleted.
     */
    int cleanup(int minVersionsToRetain) throws IOException {
        Listing l = list();
        long latest = l.latest();
        if (latest == 0) {
            return 0;
        }
        long keepFrom = latest - Math.max(1, minVersionsToRetain) + 1;
        Long base = l.snapshots.floorKey(keepFrom);
        if (base == null) {
            return 0;
        }
        int deleted = 0;
        CheckpointFileManager m = fm();
        for (FileStatus f : l.snapshots.headMap(base, false).values()) {
            m.delete(f.getPath());
            deleted++;
        }
        for (FileStatus f : l.changelogs.headMap(base, false).values()) {
            m.delete(f.getPath());
            deleted++;
        }
        if (deleted > 0) {
            LOG.info("Deleted {} state files older than snapshot {} in {}", deleted, base, dir);
        }
        return deleted;
    }
}
