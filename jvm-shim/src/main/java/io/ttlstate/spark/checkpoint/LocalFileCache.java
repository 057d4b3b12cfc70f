package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;

import io.ttlstate.spark.service.LocalFiles;
import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Local copies of one store's checkpoint files (docs/decisions/022-local-file-cache.md), in
 * {@code <root>/<op>_<part>_<store>_<hash of the checkpoint location>/}: SSTs under
 * {@code sst/} by their unique name (a hit needs the manifest's size), manifests and
 * changelogs by {@code <name>#<length>#<mtime>} of their checkpoint file, because format v1
 * rewrites a changelog when a batch is re-run. Entries appear atomically (written to
 * {@code tmp/}, then moved), so a reader never sees half a file; several providers of one
 * store (a restarted query) may share the directory. A store directory no store has used for
 * {@code checkpoint.localCacheMaxAge} is deleted by a sweep of its root ({@link #sweepUnused}).
 * Thread-safe.
 */
final class LocalFileCache {
    private static final Logger LOG = LoggerFactory.getLogger(LocalFileCache.class);
    private static final String SST_DIR = "sst";
    private static final String TMP_DIR = "tmp";
    /** A temp file this old is a leftover of a crashed JVM. */
    private static final long STALE_TMP_MILLIS = TimeUnit.DAYS.toMillis(1);
    /** How {@link #forStore} names a store's directory: {@code <op>_<part>_<store>_<16 hex digits>}. */
    private static final Pattern STORE_DIR = Pattern.compile("\\d+_\\d+_.+_[0-9a-f]{16}");
    /** A JVM sweeps a cache root at most this often. */
    static final long SWEEP_INTERVAL_MILLIS = TimeUnit.HOURS.toMillis(1);
    /** Per cache root: when this JVM last swept it. */
    private static final ConcurrentHashMap<Path, Long> LAST_SWEEP = new ConcurrentHashMap<>();

    /** Fetches a checkpoint file into a local path; returns its length. */
    interface Downloader {
        long download(java.nio.file.Path local) throws IOException;
    }

    /** A file taken from the cache or downloaded into it. */
    static final class Entry {
        final Path path;
        /** True if the cache held the file; false if it was downloaded now. */
        final boolean hit;
        /** 0 on a hit. */
        final long downloadedBytes;

        Entry(Path path, boolean hit, long downloadedBytes) {
            this.path = path;
            this.hit = hit;
            this.downloadedBytes = downloadedBytes;
        }
    }

    private final Path dir;

    LocalFileCache(Path dir) {
        this.dir = dir;
    }

    /** The cache directory of a store under {@code root}. */
    static LocalFileCache forStore(Path root, StateStoreId id, String qualifiedLocation) {
        String name = LocalFiles.storeDirStem(id) + "_" + hash(qualifiedLocation);
        return new LocalFileCache(root.resolve(name));
    }

    /** The default root: {@code <java.io.tmpdir>/ttlstate-cache-<user.name>}. */
    static Path defaultRoot() {
        return Path.of(System.getProperty("java.io.tmpdir"), "ttlstate-cache-" + System.getProperty("user.name"));
    }

    private static String hash(String s) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
            return HexFormat.of().formatHex(d, 0, 8);
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    Path dir() {
        return dir;
    }

    /** The cache key of a manifest or changelog: name, length and modification time. */
    static String key(FileStatus remote) {
        return remote.getPath().getName() + "#" + remote.getLen() + "#" + remote.getModificationTime();
    }

    Path stateFilePath(FileStatus remote) {
        return dir.resolve(key(remote));
    }

    Path sstPath(String sstName) {
        return dir.resolve(SST_DIR).resolve(sstName);
    }

    /** A manifest or changelog, from the cache if it holds this very file, else downloaded into it. */
    Entry stateFile(FileStatus remote, Downloader d) throws IOException {
        return fetch(stateFilePath(remote), remote.getLen(), d);
    }

    /** An SST by its checkpoint name, from the cache if it holds one of {@code size} bytes, else downloaded. */
    Entry sst(String sstName, long size, Downloader d) throws IOException {
        return fetch(sstPath(sstName), size, d);
    }

    private Entry fetch(Path target, long size, Downloader d) throws IOException {
        if (sizeOf(target) == size) {
            return new Entry(target, true, 0);
        }
        Path tmp = tmpFile(target);
        try {
            long n = d.download(tmp);
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            return new Entry(target, false, n);
        } finally {
            Files.deleteIfExists(tmp);
        }
    }

    /** Adds a manifest or changelog this JVM uploaded as {@code remote} (hard link, else copy). */
    void addStateFile(Path local, FileStatus remote) {
        add(local, stateFilePath(remote));
    }

    /** Adds an SST this JVM uploaded or found in the checkpoint, unless the cache holds it. */
    void addSst(Path local, String sstName, long size) {
        Path target = sstPath(sstName);
        if (sizeOf(target) != size) {
            add(local, target);
        }
    }

    private void add(Path local, Path target) {
        Path tmp = null;
        try {
            tmp = tmpFile(target);
            try {
                Files.createLink(tmp, local);
            } catch (IOException | UnsupportedOperationException e) {
                Files.copy(local, tmp, StandardCopyOption.REPLACE_EXISTING); // another file system
            }
            Files.move(tmp, target, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (IOException | RuntimeException e) {
            LOG.warn("Cannot add {} to the local checkpoint cache {} (ignored)", local, dir, e);
        } finally {
            if (tmp != null) {
                LocalFiles.deleteQuietly(tmp);
            }
        }
    }

    /** Marks the store's directory used now (its modification time), so no sweep takes it. */
    void markUsed() {
        try {
            Files.createDirectories(dir);
            Files.setLastModifiedTime(dir, FileTime.fromMillis(System.currentTimeMillis()));
        } catch (IOException e) {
            LOG.debug("Cannot mark the local checkpoint cache {} used", dir, e);
        }
    }

    /**
     * Deletes the other store directories under this cache's root that no store has used for
     * {@code maxAgeMillis} (by their modification time: {@link #markUsed}, or an entry added or
     * removed); a JVM sweeps a root at most once per {@link #SWEEP_INTERVAL_MILLIS}, and never
     * with {@code maxAgeMillis} 0. Only names of store directories are considered; a failure is
     * logged, never thrown (the cache is only a cache). Returns how many it deleted.
     */
    int sweepUnused(long maxAgeMillis) {
        Path root = dir.getParent();
        long now = System.currentTimeMillis();
        if (maxAgeMillis <= 0 || root == null || !claimSweep(root, now)) {
            return 0;
        }
        int deleted = 0;
        try {
            for (Path p : entries(root)) {
                if (!p.equals(dir) && STORE_DIR.matcher(p.getFileName().toString()).matches()
                        && Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) && modifiedBefore(p, now - maxAgeMillis)) {
                    LocalFiles.deleteQuietly(p);
                    if (!Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
                        deleted++;
                    }
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.warn("Cannot sweep the local checkpoint cache {} of unused store directories (ignored)", root, e);
        }
        if (deleted > 0) {
            LOG.info("Deleted {} store directories no store used for {} s from the local checkpoint cache {} "
                    + "(checkpoint.localCacheMaxAge)", deleted, maxAgeMillis / 1000, root);
        }
        return deleted;
    }

    /** Whether this thread is the one to sweep {@code root} now. */
    private static boolean claimSweep(Path root, long now) {
        Long last = LAST_SWEEP.get(root);
        if (last == null) {
            return LAST_SWEEP.putIfAbsent(root, now) == null;
        }
        return now - last >= SWEEP_INTERVAL_MILLIS && LAST_SWEEP.replace(root, last, now);
    }

    /** Drops an entry (a file the worker found damaged). */
    void evict(Path cached) {
        LocalFiles.deleteQuietly(cached);
    }

    /**
     * Deletes entries whose checkpoint file is gone: state files whose key is not in
     * {@code liveKeys}, SSTs not in {@code liveSsts} (both as listed at {@code listedAtMillis};
     * younger entries are left alone), and temp files of crashed writers; returns how many.
     */
    int prune(Set<String> liveKeys, Set<String> liveSsts, long listedAtMillis) throws IOException {
        int deleted = pruneDir(dir, liveKeys, listedAtMillis) + pruneDir(dir.resolve(SST_DIR), liveSsts, listedAtMillis);
        long cutoff = System.currentTimeMillis() - STALE_TMP_MILLIS;
        for (Path p : entries(dir.resolve(TMP_DIR))) {
            if (modifiedBefore(p, cutoff) && Files.deleteIfExists(p)) {
                deleted++;
            }
        }
        return deleted;
    }

    private static int pruneDir(Path d, Set<String> live, long listedAtMillis) throws IOException {
        int deleted = 0;
        for (Path p : entries(d)) {
            if (Files.isRegularFile(p) && !live.contains(p.getFileName().toString())
                    && modifiedBefore(p, listedAtMillis) && Files.deleteIfExists(p)) {
                deleted++;
            }
        }
        return deleted;
    }

    private static boolean modifiedBefore(Path p, long millis) throws IOException {
        try {
            return Files.getLastModifiedTime(p).toMillis() < millis;
        } catch (java.nio.file.NoSuchFileException e) {
            return false;
        }
    }

    private static List<Path> entries(Path d) throws IOException {
        List<Path> out = new ArrayList<>();
        if (!Files.isDirectory(d)) {
            return out;
        }
        try (DirectoryStream<Path> s = Files.newDirectoryStream(d)) {
            s.forEach(out::add);
        }
        return out;
    }

    private Path tmpFile(Path target) throws IOException {
        Path tmpDir = dir.resolve(TMP_DIR);
        Files.createDirectories(tmpDir);
        Files.createDirectories(target.getParent());
        return tmpDir.resolve(target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    }

    /** The size of a cached file, -1 if it is missing or unreadable. */
    private static long sizeOf(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            return -1;
        }
    }

    @Override
    public String toString() {
        return dir.toString();
    }
}
