package io.ttlstate.spark.checkpoint;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import io.ttlstate.spark.compat.CheckpointFileOps;
import io.ttlstate.spark.service.LocalFiles;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.CommonPathCapabilities;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A store's checkpoint directory ({@code StateStoreId.storeCheckpointLocation()}): lists its
 * manifests, changelogs and {@code sst/} files, and moves files between it and local disk
 * through Spark's {@code CheckpointFileManager} ({@link CheckpointFileOps}). Every upload is atomic and then verified by
 * the file's status (docs/decisions/021-every-upload-verified.md). Thread-safe: transfers run on
 * the {@link TransferPool}.
 */
final class CheckpointFiles {
    private static final Logger LOG = LoggerFactory.getLogger(CheckpointFiles.class);
    /** A store's SSTs, {@code <store dir>/sst/<name>} (docs/PROTOCOL.md, "Checkpoint layout of a store"). */
    static final String SST_DIR = "sst";

    private final Path dir;
    private final Path sstDir;
    private final Configuration hadoopConf;
    private final String store;
    private final Set<Path> createdDirs = ConcurrentHashMap.newKeySet();
    /** Uploads that failed so far: each may have left a temp file or an orphan (ListingGate). */
    private final java.util.concurrent.atomic.AtomicLong failedWrites = new java.util.concurrent.atomic.AtomicLong();
    private CheckpointFileOps fm;
    private FileSystem fs;
    private Boolean visibleAtClose;

    /** {@code store} names the store in messages. */
    CheckpointFiles(Path dir, Configuration hadoopConf, String store) {
        this.dir = dir;
        this.sstDir = new Path(dir, SST_DIR);
        this.hadoopConf = hadoopConf;
        this.store = store;
    }

    Path dir() {
        return dir;
    }

    Path stateFilePath(String name) {
        return new Path(dir, name);
    }

    Path sstPath(String sstName) {
        return new Path(sstDir, sstName);
    }

    private synchronized CheckpointFileOps fm() {
        if (fm == null) {
            fm = CheckpointFileOps.create(dir, hadoopConf);
        }
        return fm;
    }

    private synchronized FileSystem fs() throws IOException {
        if (fs == null) {
            fs = dir.getFileSystem(hadoopConf);
        }
        return fs;
    }

    /** The directory, fully qualified (scheme and authority), to identify the store stably. */
    String qualifiedLocation() throws IOException {
        return fs().makeQualified(dir).toString();
    }

    // ---- listing ------------------------------------------------------------------------

    /**
     * The directory's files: every plain file but temp and hidden ones, which a worker's PLAN
     * reads as state files or ignores (the JVM parses no name: {@link CheckpointPlans}), and
     * leftover temp files.
     */
    static final class Listing {
        final List<FileStatus> files = new ArrayList<>();
        final List<FileStatus> temps = new ArrayList<>();

        /** {@code st} replaces any listed file of its name (a re-run's upload replaces its own). */
        void put(FileStatus st) {
            String name = st.getPath().getName();
            files.removeIf(f -> f.getPath().getName().equals(name));
            files.add(st);
        }

        Listing without(Set<Path> deleted) {
            Listing l = new Listing();
            files.stream().filter(f -> !deleted.contains(f.getPath())).forEach(l.files::add);
            return l;
        }
    }

    Listing list() throws IOException {
        Listing l = new Listing();
        for (FileStatus st : listDir(dir)) {
            if (isTemp(st)) {
                l.temps.add(st);
            } else if (st.isFile() && !st.getPath().getName().startsWith(".")) {
                l.files.add(st);
            }
        }
        return l;
    }

    /** The files of {@code sst/} by name, and leftover temp files there. */
    static final class SstListing {
        final Map<String, FileStatus> ssts = new HashMap<>();
        final List<FileStatus> temps = new ArrayList<>();
    }

    SstListing listSsts() throws IOException {
        SstListing l = new SstListing();
        for (FileStatus st : listDir(sstDir)) {
            if (isTemp(st)) {
                l.temps.add(st);
            } else if (st.isFile() && !st.getPath().getName().startsWith(".")) {
                l.ssts.put(st.getPath().getName(), st);
            }
        }
        return l;
    }

    /**
     * The files of {@code d}, none if it does not exist. One listing: an {@code exists} first
     * costs an object store a HEAD and another LIST (S3A: a directory is a key prefix).
     */
    private FileStatus[] listDir(Path d) throws IOException {
        try {
            return fm().list(d);
        } catch (FileNotFoundException e) {
            return new FileStatus[0];
        }
    }

    /** Whether the checkpoint is on the local file system ({@code file:}). */
    boolean isLocal() throws IOException {
        return "file".equals(fs().getUri().getScheme());
    }

    /** How many uploads failed, or commits were discarded ({@link #noteFailedWrite}). */
    long failedWrites() {
        return failedWrites.get();
    }

    /** A write of this store failed: it may have left files a cleanup has to list to find. */
    void noteFailedWrite() {
        failedWrites.incrementAndGet();
    }

    /** A temp file of {@code CheckpointFileManager.createAtomic} ({@code .<name>.<uuid>.tmp}). */
    private static boolean isTemp(FileStatus st) {
        String n = st.getPath().getName();
        return st.isFile() && n.startsWith(".") && (n.endsWith(".tmp") || n.endsWith(".tmp.crc"));
    }

    // ---- transfers ----------------------------------------------------------------------

    /**
     * Uploads {@code local} to {@code target} atomically (replacing an older file), then
     * checks that the file is there with the right length; returns its status. Any failure
     * is a {@link CheckpointWriteException} naming the file and {@code version}.
     */
    FileStatus upload(java.nio.file.Path local, Path target, long version) throws IOException {
        if (isLocal()) {
            return uploadLocal(local, target, version);
        }
        if (visibleAtClose()) {
            return uploadInPlace(local, target, version);
        }
        long size;
        Path parent = target.getParent();
        try {
            if (createdDirs.add(parent)) {
                fm().mkdirs(parent);
            }
            FSDataOutputStream out = fm().createAtomic(target, true);
            try {
                size = Files.copy(local, out);
                out.close();
            } catch (IOException | RuntimeException e) {
                CheckpointFileOps.cancel(out);
                throw e;
            }
        } catch (IOException | RuntimeException e) {
            createdDirs.remove(parent); // it may be gone: create it again next time
            failedWrites.incrementAndGet();
            throw new CheckpointWriteException(target, version, store, "upload failed: " + e, e);
        }
        return uploaded(target, version, size);
    }

    /**
     * Whether a file written here becomes visible only when its stream closes, whole, and not
     * at all when the stream is aborted: an object store (S3A declares abortable output
     * streams), where one PUT is atomic and a rename is a copy and a delete.
     */
    private synchronized boolean visibleAtClose() throws IOException {
        if (visibleAtClose == null) {
            visibleAtClose = fs().hasPathCapability(dir, CommonPathCapabilities.ABORTABLE_STREAM);
        }
        return visibleAtClose;
    }

    /**
     * {@link #upload} to an object store ({@link #visibleAtClose}): written in place, as one
     * object, without the temp file and the rename of {@code createAtomic} (on S3A a PUT, a
     * copy, a delete and the probes of each:
     * docs/decisions/105-object-store-puts-and-listings.md); a failed write is aborted, leaving
     * the older object, if any, as it was. {@code fs.s3a.create.performance} skips S3A's
     * checks that the path is no directory and has no file above it (the layout has none).
     */
    private FileStatus uploadInPlace(java.nio.file.Path local, Path target, long version) throws IOException {
        long size;
        try {
            FSDataOutputStream out = (FSDataOutputStream) fs().createFile(target).overwrite(true)
                    .opt("fs.s3a.create.performance", true).build();
            try {
                size = Files.copy(local, out);
                out.close();
            } catch (IOException | RuntimeException e) {
                try {
                    out.abort();
                } catch (RuntimeException abortFailed) {
                    e.addSuppressed(abortFailed);
                }
                throw e;
            }
        } catch (IOException | RuntimeException e) {
            failedWrites.incrementAndGet();
            throw new CheckpointWriteException(target, version, store, "upload failed: " + e, e);
        }
        return uploaded(target, version, size);
    }

    /** The status of {@code target} just uploaded with {@code size} bytes, checked to be there with them. */
    private FileStatus uploaded(Path target, long version, long size) throws IOException {
        FileStatus st;
        try {
            st = fs().getFileStatus(target);
        } catch (FileNotFoundException e) {
            failedWrites.incrementAndGet();
            throw new CheckpointWriteException(target, version, store,
                    "the file is missing after its atomic upload (lost rename?)", e);
        } catch (IOException e) {
            failedWrites.incrementAndGet();
            throw new CheckpointWriteException(target, version, store, "cannot verify the upload: " + e, e);
        }
        if (st.getLen() != size) {
            failedWrites.incrementAndGet();
            throw new CheckpointWriteException(target, version, store, "the file has " + st.getLen()
                    + " bytes after its upload, expected " + size, null);
        }
        return st;
    }

    /**
     * {@link #upload} to a {@code file:} location with Java's file operations: a temp file named
     * as {@code createAtomic} names them, then an atomic rename. Hadoop's local file system
     * takes 8 ms to create and 26 ms to close and rename such a file on an idle 2-core machine
     * (50-90 ms with queries running: most of a commit), this under 1 ms. Hadoop's checksum
     * sidecar of an earlier copy (a re-committed version) is removed, or Hadoop would check the
     * new bytes against it; our files carry their own CRCs.
     */
    private FileStatus uploadLocal(java.nio.file.Path local, Path target, long version) throws IOException {
        java.nio.file.Path dest = java.nio.file.Paths.get(fs().makeQualified(target).toUri());
        java.nio.file.Path tmp = dest.resolveSibling("." + dest.getFileName() + "." + java.util.UUID.randomUUID()
                + ".tmp");
        long size;
        try {
            Files.createDirectories(dest.getParent());
            Files.copy(local, tmp);
            size = Files.size(tmp);
            Files.deleteIfExists(dest.resolveSibling("." + dest.getFileName() + ".crc"));
            Files.move(tmp, dest, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException | RuntimeException e) {
            LocalFiles.deleteQuietly(tmp);
            failedWrites.incrementAndGet();
            throw new CheckpointWriteException(target, version, store, "upload failed: " + e, e);
        }
        return uploaded(target, version, size);
    }

    /**
     * Copies {@code remote} to {@code local} (replacing it) and checks it got
     * {@code expectedLength} bytes (-1: any); returns the length. A missing file is a
     * {@link MissingCheckpointFileException}.
     */
    long download(Path remote, long expectedLength, java.nio.file.Path local) throws IOException {
        long n;
        try (InputStream in = fm().open(remote)) {
            n = Files.copy(in, local, StandardCopyOption.REPLACE_EXISTING);
        } catch (FileNotFoundException e) {
            MissingCheckpointFileException missing = new MissingCheckpointFileException(remote,
                    "Checkpoint file " + remote + " of " + store + " does not exist");
            missing.initCause(e);
            throw missing;
        }
        if (expectedLength >= 0 && n != expectedLength) {
            throw new IOException("Downloaded " + n + " bytes of checkpoint file " + remote + " of " + store
                    + ", expected " + expectedLength);
        }
        return n;
    }

    /** Deletes a checkpoint file (nothing if it is missing). */
    void delete(Path p) throws IOException {
        fm().delete(p);
    }

    /** Deletes {@code paths}, logging failures (cleanup of a failed commit). */
    void deleteQuietly(Collection<Path> paths) {
        for (Path p : paths) {
            try {
                delete(p);
            } catch (IOException | RuntimeException e) {
                LOG.warn("Cannot delete {} of {} after a failed write", p, store, e);
            }
        }
    }

    String store() {
        return store;
    }
}
