package io.ttlstate.testfs;

import java.io.FilterOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.net.URI;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.permission.FsPermission;

/**
 * The local file system under the scheme {@code faulty} ({@code faulty:///tmp/x} is the local
 * {@code /tmp/x}), counting what goes through it and failing on request. Test suite only.
 *
 * <p>Register it with {@code spark.hadoop.fs.faulty.impl=io.ttlstate.testfs.FaultyFileSystem}.
 * It has no {@code AbstractFileSystem}, so Spark's {@code CheckpointFileManager.create} falls
 * back to its {@code FileSystemBasedCheckpointFileManager} (atomic writes: a temp file
 * {@code .<name>.<uuid>.tmp} in the same directory, then {@code rename}).
 *
 * <p>All controls are static (one JVM-wide state, whatever FileSystem instances Hadoop's
 * cache hands out), thread-safe, and callable from Python through py4j:
 * {@code spark._jvm.io.ttlstate.testfs.FaultyFileSystem.failCreate("/sst/", 1)}.
 * Paths are matched as their plain path ({@code path.toUri().getPath()}, no scheme) with
 * {@link java.util.regex.Matcher#find()}: a regex matches anywhere in the path, and a temp
 * file {@code .5.manifest.<uuid>.tmp} matches {@code \.manifest}.
 */
public class FaultyFileSystem extends RawLocalFileSystem {
    public static final String SCHEME = "faulty";
    private static final URI NAME = URI.create(SCHEME + ":///");

    private enum Kind { CREATE, WRITE, OPEN, RENAME_FAIL, RENAME_LOSE, DELETE_FAIL }

    private static final class Fault {
        final Kind kind;
        final Pattern pattern;
        int remaining;

        Fault(Kind kind, String regex, int times) {
            this.kind = kind;
            this.pattern = Pattern.compile(regex);
            this.remaining = times;
        }
    }

    /** Per path: bytes written, bytes read, creates, opens, renames to it, deletes. */
    private static final class Stats {
        long written, read, created, opened, renamedTo, deleted;
    }

    private static final Object LOCK = new Object();
    private static final List<Fault> FAULTS = new ArrayList<>();
    private static final Map<String, Stats> STATS = new LinkedHashMap<>();
    private static final List<String> INJECTED = new ArrayList<>();

    // ------------------------------------------------------------------------------------
    // Controls (static)

    /** The next {@code times} creates (or appends) of a file matching {@code pathRegex} throw. */
    public static void failCreate(String pathRegex, int times) {
        add(Kind.CREATE, pathRegex, times);
    }

    /**
     * The next {@code times} files matching {@code pathRegex} are created, but writing to them
     * (or closing them, for a file written with no bytes) throws: a partial file stays behind.
     */
    public static void failWrite(String pathRegex, int times) {
        add(Kind.WRITE, pathRegex, times);
    }

    /** The next {@code times} opens for reading of a file matching {@code pathRegex} throw. */
    public static void failOpen(String pathRegex, int times) {
        add(Kind.OPEN, pathRegex, times);
    }

    /** The next {@code times} renames to a path matching {@code dstRegex} throw. */
    public static void failRename(String dstRegex, int times) {
        add(Kind.RENAME_FAIL, dstRegex, times);
    }

    /**
     * The next {@code times} renames to a path matching {@code dstRegex} return true and do
     * nothing: the source (the temp file) stays, the destination does not appear.
     */
    public static void loseRename(String dstRegex, int times) {
        add(Kind.RENAME_LOSE, dstRegex, times);
    }

    /** The next {@code times} deletes of a path matching {@code pathRegex} throw. */
    public static void failDelete(String pathRegex, int times) {
        add(Kind.DELETE_FAIL, pathRegex, times);
    }

    /** Forgets every fault still pending (counters and the injected log stay). */
    public static void clearFaults() {
        synchronized (LOCK) {
            FAULTS.clear();
        }
    }

    /** Forgets every fault, counter and logged injection. */
    public static void reset() {
        synchronized (LOCK) {
            FAULTS.clear();
            STATS.clear();
            INJECTED.clear();
        }
    }

    /** Faults set up and not fired yet (sum of their remaining counts). */
    public static int pendingFaults() {
        synchronized (LOCK) {
            int n = 0;
            for (Fault f : FAULTS) {
                n += f.remaining;
            }
            return n;
        }
    }

    /** One line per fault fired so far: {@code "<kind> <path>"}. */
    public static List<String> injected() {
        synchronized (LOCK) {
            return new ArrayList<>(INJECTED);
        }
    }

    public static long bytesWritten() {
        return sum(null, 0);
    }

    public static long bytesWritten(String pathRegex) {
        return sum(pathRegex, 0);
    }

    public static long bytesRead() {
        return sum(null, 1);
    }

    public static long bytesRead(String pathRegex) {
        return sum(pathRegex, 1);
    }

    public static long filesCreated() {
        return sum(null, 2);
    }

    public static long filesCreated(String pathRegex) {
        return sum(pathRegex, 2);
    }

    public static long filesOpened() {
        return sum(null, 3);
    }

    public static long filesOpened(String pathRegex) {
        return sum(pathRegex, 3);
    }

    /** Successful renames to a path (matching {@code pathRegex}). */
    public static long renames(String pathRegex) {
        return sum(pathRegex, 4);
    }

    /** Deletes of a path (matching {@code pathRegex}) that deleted something. */
    public static long deletes(String pathRegex) {
        return sum(pathRegex, 5);
    }

    /** Every path created so far (matching {@code pathRegex}, or all with null), in order. */
    public static List<String> createdPaths(String pathRegex) {
        Pattern p = pathRegex == null ? null : Pattern.compile(pathRegex);
        List<String> out = new ArrayList<>();
        synchronized (LOCK) {
            for (Map.Entry<String, Stats> e : STATS.entrySet()) {
                if (e.getValue().created > 0 && (p == null || p.matcher(e.getKey()).find())) {
                    out.add(e.getKey());
                }
            }
        }
        return out;
    }

    /** Every path opened for reading so far (matching {@code pathRegex}, or all with null). */
    public static List<String> openedPaths(String pathRegex) {
        Pattern p = pathRegex == null ? null : Pattern.compile(pathRegex);
        List<String> out = new ArrayList<>();
        synchronized (LOCK) {
            for (Map.Entry<String, Stats> e : STATS.entrySet()) {
                if (e.getValue().opened > 0 && (p == null || p.matcher(e.getKey()).find())) {
                    out.add(e.getKey());
                }
            }
        }
        return out;
    }

    private static void add(Kind kind, String regex, int times) {
        if (times <= 0) {
            throw new IllegalArgumentException("times must be positive: " + times);
        }
        Fault f = new Fault(kind, regex, times);
        synchronized (LOCK) {
            FAULTS.add(f);
        }
    }

    private static long sum(String regex, int field) {
        Pattern p = regex == null ? null : Pattern.compile(regex);
        long total = 0;
        synchronized (LOCK) {
            for (Map.Entry<String, Stats> e : STATS.entrySet()) {
                if (p != null && !p.matcher(e.getKey()).find()) {
                    continue;
                }
                Stats s = e.getValue();
                switch (field) {
                    case 0: total += s.written; break;
                    case 1: total += s.read; break;
                    case 2: total += s.created; break;
                    case 3: total += s.opened; break;
                    case 4: total += s.renamedTo; break;
                    default: total += s.deleted; break;
                }
            }
        }
        return total;
    }

    private static Stats stats(String path) {
        // callers hold LOCK
        return STATS.computeIfAbsent(path, k -> new Stats());
    }

    /** True (and the fault used up once) if a pending fault of {@code kind} matches. */
    private static boolean fire(Kind kind, String path) {
        synchronized (LOCK) {
            Iterator<Fault> it = FAULTS.iterator();
            while (it.hasNext()) {
                Fault f = it.next();
                if (f.kind == kind && f.pattern.matcher(path).find()) {
                    f.remaining--;
                    if (f.remaining <= 0) {
                        it.remove();
                    }
                    INJECTED.add(kind + " " + path);
                    return true;
                }
            }
            return false;
        }
    }

    private static String key(Path p) {
        return p.toUri().getPath();
    }

    // ------------------------------------------------------------------------------------
    // The file system

    @Override
    public URI getUri() {
        return NAME;
    }

    @Override
    public String getScheme() {
        return SCHEME;
    }

    @Override
    protected OutputStream createOutputStream(Path f, boolean append) throws IOException {
        return createOutputStreamWithMode(f, append, null);
    }

    @Override
    protected OutputStream createOutputStreamWithMode(Path f, boolean append, FsPermission permission)
            throws IOException {
        String path = key(f);
        if (fire(Kind.CREATE, path)) {
            throw new IOException("injected create failure (FaultyFileSystem) of " + path);
        }
        boolean failWrites = fire(Kind.WRITE, path);
        OutputStream out = super.createOutputStreamWithMode(f, append, permission);
        synchronized (LOCK) {
            stats(path).created++;
        }
        return new CountingOutputStream(out, path, failWrites);
    }

    @Override
    public FSDataInputStream open(Path f, int bufferSize) throws IOException {
        String path = key(f);
        if (fire(Kind.OPEN, path)) {
            throw new IOException("injected open failure (FaultyFileSystem) of " + path);
        }
        FSDataInputStream in = super.open(f, bufferSize);
        synchronized (LOCK) {
            stats(path).opened++;
        }
        return new FSDataInputStream(new CountingInputStream(in, path));
    }

    @Override
    public boolean rename(Path src, Path dst) throws IOException {
        String to = key(dst);
        if (fire(Kind.RENAME_FAIL, to)) {
            throw new IOException("injected rename failure (FaultyFileSystem) of " + key(src) + " to " + to);
        }
        if (fire(Kind.RENAME_LOSE, to)) {
            return true; // the lost rename: claims success, moves nothing
        }
        boolean ok = super.rename(src, dst);
        if (ok) {
            synchronized (LOCK) {
                stats(to).renamedTo++;
            }
        }
        return ok;
    }

    @Override
    public boolean delete(Path p, boolean recursive) throws IOException {
        String path = key(p);
        if (fire(Kind.DELETE_FAIL, path)) {
            throw new IOException("injected delete failure (FaultyFileSystem) of " + path);
        }
        boolean ok = super.delete(p, recursive);
        if (ok) {
            synchronized (LOCK) {
                stats(path).deleted++;
            }
        }
        return ok;
    }

    @Override
    public String toString() {
        return "FaultyFileSystem(" + NAME + ")";
    }

    /** Counts the bytes written to one file; with {@code fail}, throws at the first write or close. */
    private static final class CountingOutputStream extends FilterOutputStream {
        private final String path;
        private boolean fail;

        CountingOutputStream(OutputStream out, String path, boolean fail) {
            super(out);
            this.path = path;
            this.fail = fail;
        }

        private void check() throws IOException {
            if (fail) {
                fail = false; // once: a retry of close() by the caller gets through
                throw new IOException("injected write failure (FaultyFileSystem) of " + path);
            }
        }

        private void count(long n) {
            synchronized (LOCK) {
                stats(path).written += n;
            }
        }

        @Override
        public void write(int b) throws IOException {
            check();
            out.write(b);
            count(1);
        }

        @Override
        public void write(byte[] b, int off, int len) throws IOException {
            check();
            out.write(b, off, len);
            count(len);
        }

        @Override
        public void close() throws IOException {
            try {
                check();
            } finally {
                out.close();
            }
        }
    }

    /** Counts the bytes read from one file. */
    private static final class CountingInputStream extends FSInputStream {
        private final FSDataInputStream in;
        private final String path;

        CountingInputStream(FSDataInputStream in, String path) {
            this.in = in;
            this.path = path;
        }

        private int count(int n) {
            if (n > 0) {
                synchronized (LOCK) {
                    stats(path).read += n;
                }
            }
            return n;
        }

        @Override
        public int read() throws IOException {
            int b = in.read();
            if (b >= 0) {
                count(1);
            }
            return b;
        }

        @Override
        public int read(byte[] b, int off, int len) throws IOException {
            return count(in.read(b, off, len));
        }

        @Override
        public int read(long position, byte[] buffer, int offset, int length) throws IOException {
            return count(in.read(position, buffer, offset, length));
        }

        @Override
        public void seek(long pos) throws IOException {
            in.seek(pos);
        }

        @Override
        public long getPos() throws IOException {
            return in.getPos();
        }

        @Override
        public boolean seekToNewSource(long targetPos) throws IOException {
            return in.seekToNewSource(targetPos);
        }

        @Override
        public int available() throws IOException {
            return in.available();
        }

        @Override
        public long skip(long n) throws IOException {
            return in.skip(n);
        }

        @Override
        public void close() throws IOException {
            in.close();
        }
    }
}
