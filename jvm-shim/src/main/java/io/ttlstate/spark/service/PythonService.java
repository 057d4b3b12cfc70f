package io.ttlstate.spark.service;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.InvalidConfException;
import io.ttlstate.spark.ServiceStartException;
import io.ttlstate.spark.compat.SparkCompat;
import org.apache.spark.SparkEnv;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Python store service of this JVM ({@code python -m ttlstate.service}): one per JVM,
 * started lazily by the first provider {@code init}, shut down when the JVM exits or when
 * the SparkEnv it was started under goes away ({@code spark.stop()} in local mode).
 *
 * <p>Start-up follows docs/PROTOCOL.md: token and confs on stdin, {@code READY <pid> <workers> <workerTimeoutMs>}
 * on stdout. Stdin stays open for the service's whole life; its EOF tells the service that
 * the JVM is gone, so no Python process outlives a killed JVM.
 */
public final class PythonService {
    private static final Logger LOG = LoggerFactory.getLogger(PythonService.class);

    private static final long READY_TIMEOUT_MS = 60_000;
    private static final long STOP_TIMEOUT_MS = 5_000;
    private static final long WATCHDOG_INTERVAL_MS = 250;
    private static final int STDERR_TAIL_LINES = 30;
    /**
     * Unix socket paths are limited to 107 bytes: a base directory keeps room for
     * "/ttlstate-" + 16 hex digits + "/w<index>.sock".
     */
    private static final int MAX_BASE_LENGTH = 64;

    private static PythonService current;

    private final String python;
    private final Path dir;
    private final byte[] token;
    private final Process process;
    private final OutputStream stdin;
    private final SparkEnv sparkEnv;
    private final Deque<String> stderrTail = new ArrayDeque<>();
    private final Thread shutdownHook;
    /** Forwards the service's stderr (and keeps its tail); set once by {@link #handshake}. */
    private volatile Thread stderrReader;
    private volatile int workers;
    private volatile long pid;
    private volatile long workerTimeoutMillis;
    private volatile boolean stopped;

    private PythonService(String python, Path dir, byte[] token, Process process, SparkEnv env) {
        this.python = python;
        this.dir = dir;
        this.token = token;
        this.process = process;
        this.stdin = process.getOutputStream();
        this.sparkEnv = env;
        this.shutdownHook = new Thread(this::shutdown, "ttlstate-service-shutdown");
    }

    /**
     * The running service, started first if there is none, if it died, or if it was started
     * under another SparkEnv. {@code ttlstateConfs} (full keys under {@link ConfKeys#PREFIX}) are
     * only used when a service is started.
     */
    public static synchronized PythonService get(Map<String, String> ttlstateConfs) {
        SparkEnv env = SparkEnv.get();
        if (current != null && (current.stopped || !current.process.isAlive()
                || (current.sparkEnv != null && current.sparkEnv != env))) {
            current.shutdown();
            current = null;
        }
        if (current == null) {
            current = start(env, ttlstateConfs);
        }
        return current;
    }

    /** The running service, or null; used by tests and tools. */
    public static synchronized PythonService currentOrNull() {
        return current;
    }

    public Path dir() {
        return dir;
    }

    public byte[] token() {
        return token.clone();
    }

    public int workers() {
        return workers;
    }

    public long pid() {
        return pid;
    }

    /** The query's resolved {@code workerTimeout} (READY line): a connection's timeout until OPEN. */
    public long workerTimeoutMillis() {
        return workerTimeoutMillis;
    }

    public boolean isUsable() {
        return !stopped && process.isAlive();
    }

    /** Why the service cannot be used: stopped, or exited with its code and the end of its stderr. */
    public String whyUnusable() {
        if (process.isAlive()) {
            return "ttlstate store service " + this + " was stopped";
        }
        Thread err = stderrReader;
        if (err != null) {
            try {
                err.join(2000); // its last lines, which say why it stopped, may still be in the pipe
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        return String.format("ttlstate store service %s exited with code %d; its stderr ends with:%n%s", this,
                process.exitValue(), stderrTail());
    }

    /** Socket path of worker {@code index}. */
    public Path socketPath(int index) {
        return dir.resolve("w" + index + ".sock");
    }

    private static String pythonExecutable(SparkEnv env) {
        if (env != null) {
            scala.Option<String> conf = env.conf().getOption("spark.pyspark.python");
            if (conf.isDefined() && !conf.get().isBlank()) {
                return conf.get();
            }
        }
        String fromEnv = System.getenv("PYSPARK_PYTHON");
        return fromEnv != null && !fromEnv.isBlank() ? fromEnv : "python3";
    }

    /**
     * The service's private directory (its sockets and its stores' files): under the first of
     * Spark's local dir, {@code java.io.tmpdir} and {@code /tmp} whose path leaves room for a
     * Unix socket path; fails naming all three when none does.
     */
    private static Path createServiceDir(SparkEnv env, SecureRandom random) throws IOException {
        List<String> candidates = new ArrayList<>();
        if (env != null && SparkCompat.localDir(env.conf()) != null) {
            candidates.add(SparkCompat.localDir(env.conf()));
        }
        candidates.add(System.getProperty("java.io.tmpdir"));
        candidates.add("/tmp");
        String base = null;
        for (String candidate : candidates) {
            if (candidate != null && candidate.length() <= MAX_BASE_LENGTH) {
                base = candidate;
                break;
            }
        }
        if (base == null) {
            throw new IOException("none of " + candidates + " is short enough (at most "
                    + MAX_BASE_LENGTH + " characters) to hold the service's Unix sockets");
        }
        if (!base.equals(candidates.get(0))) {
            // usual on cluster executors (standalone: <worker dir>/spark-<uuid>/executor-<uuid>/...)
            LOG.info("{} is too long for a Unix socket path; the store service uses {}",
                    candidates.subList(0, candidates.indexOf(base)), base);
        }
        byte[] suffix = new byte[8];
        random.nextBytes(suffix);
        Path dir = Paths.get(base, "ttlstate-" + HexFormat.of().formatHex(suffix));
        Files.createDirectories(dir.getParent());
        return Files.createDirectory(dir,
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
    }

    private static String executorCores(SparkEnv env) {
        if (env != null) {
            scala.Option<String> cores = env.conf().getOption("spark.executor.cores");
            if (cores.isDefined()) {
                return cores.get().trim();
            }
        }
        return Integer.toString(Runtime.getRuntime().availableProcessors());
    }

    private static PythonService start(SparkEnv env, Map<String, String> ttlstateConfs) {
        String python = pythonExecutable(env);
        SecureRandom random = new SecureRandom();
        Path dir;
        try {
            dir = createServiceDir(env, random);
        } catch (IOException e) {
            throw new ServiceStartException("Cannot create the ttlstate service directory: " + e, e);
        }
        byte[] token = new byte[32];
        random.nextBytes(token);
        List<String> cmd = List.of(python, "-m", "ttlstate.service", "--dir", dir.toString());
        LOG.info("Starting ttlstate store service: {}", String.join(" ", cmd));
        Process process;
        try {
            process = new ProcessBuilder(cmd).redirectInput(ProcessBuilder.Redirect.PIPE).start();
        } catch (IOException e) {
            LocalFiles.deleteQuietly(dir);
            throw new ServiceStartException(String.format(
                    "Cannot start the ttlstate store service with Python '%s': %s. %s",
                    python, e.getMessage(), HOW_TO_CHOOSE), e);
        }
        PythonService service = new PythonService(python, dir, token, process, env);
        try {
            service.handshake(ttlstateConfs, env);
        } catch (RuntimeException e) {
            service.shutdown();
            throw e;
        }
        return service;
    }

    private static final String HOW_TO_CHOOSE = "Choose the Python that has ttlstate installed with "
            + "the Spark conf spark.pyspark.python or the environment variable PYSPARK_PYTHON "
            + "(ttlstate.configure() pins the driver's interpreter).";

    private void handshake(Map<String, String> ttlstateConfs, SparkEnv env) {
        CountDownLatch ready = new CountDownLatch(1);
        Thread err = daemon("ttlstate-service-stderr", () -> forwardStderr());
        stderrReader = err;
        Thread out = daemon("ttlstate-service-stdout", () -> readStdout(ready));
        err.start();
        out.start();
        StringBuilder init = new StringBuilder();
        init.append(HexFormat.of().formatHex(token)).append('\n');
        for (Map.Entry<String, String> e : new TreeMap<>(ttlstateConfs).entrySet()) {
            if (e.getKey().startsWith(ConfKeys.PREFIX)) {
                init.append(e.getKey()).append('=').append(e.getValue()).append('\n');
            }
        }
        init.append("executorCores=").append(executorCores(env)).append('\n');
        init.append("sparkVersion=").append(io.ttlstate.spark.compat.SparkCompat.SPARK_VERSION).append('\n');
        init.append('\n');
        try {
            stdin.write(init.toString().getBytes(StandardCharsets.UTF_8));
            stdin.flush();
        } catch (IOException e) {
            // the process probably died at once; the wait below reports why
            LOG.debug("Writing the service's start-up lines failed", e);
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(READY_TIMEOUT_MS);
        try {
            while (!ready.await(100, TimeUnit.MILLISECONDS)) {
                if (!process.isAlive()) {
                    out.join(1000); // READY may still be in the pipe
                    if (ready.getCount() == 0) {
                        break;
                    }
                    err.join(2000);
                    String invalid = invalidConfLine();
                    if (invalid != null) {
                        throw new InvalidConfException(invalid);
                    }
                    throw new ServiceStartException(String.format(
                            "The ttlstate store service (Python '%s') exited with code %d before it "
                                    + "was ready. Its stderr ends with:%n%s%n%s",
                            python, process.exitValue(), stderrTail(), HOW_TO_CHOOSE));
                }
                if (System.nanoTime() > deadline) {
                    throw new ServiceStartException(String.format(
                            "The ttlstate store service (Python '%s') was not ready after %d s. "
                                    + "Its stderr ends with:%n%s%n%s",
                            python, READY_TIMEOUT_MS / 1000, stderrTail(), HOW_TO_CHOOSE));
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ServiceStartException("Interrupted while starting the ttlstate store service", e);
        }
        LOG.info("ttlstate store service ready: pid {}, {} workers, dir {}", pid, workers, dir);
        try {
            Runtime.getRuntime().addShutdownHook(shutdownHook);
        } catch (IllegalStateException e) {
            // the JVM is already shutting down
        }
        daemon("ttlstate-service-watchdog", this::watch).start();
    }

    private void readStdout(CountDownLatch ready) {
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                if (ready.getCount() > 0 && line.startsWith("READY ")) {
                    String[] parts = line.trim().split("\\s+");
                    try {
                        pid = Long.parseLong(parts[1]);
                        workers = Integer.parseInt(parts[2]);
                        workerTimeoutMillis = Long.parseLong(parts[3]);
                        if (workers < 1 || workerTimeoutMillis < 1) {
                            throw new NumberFormatException("workers or workerTimeoutMs < 1");
                        }
                        ready.countDown();
                    } catch (RuntimeException e) {
                        LOG.error("ttlstate service printed a malformed READY line: {}", line);
                    }
                } else {
                    LOG.info("[ttlstate service] {}", line);
                }
            }
        } catch (IOException e) {
            LOG.debug("ttlstate service stdout closed", e);
        }
    }

    private void forwardStderr() {
        try (BufferedReader r = new BufferedReader(
                new InputStreamReader(process.getErrorStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                synchronized (stderrTail) {
                    if (stderrTail.size() == STDERR_TAIL_LINES) {
                        stderrTail.removeFirst();
                    }
                    stderrTail.addLast(line);
                }
                LOG.info("[ttlstate service] {}", line);
            }
        } catch (IOException e) {
            LOG.debug("ttlstate service stderr closed", e);
        }
    }

    /** The message of a {@code TTLSTATE_INVALID_CONF: ...} line the service printed before exiting, or null. */
    private String invalidConfLine() {
        String prefix = ErrorClasses.INVALID_CONF + ": ";
        synchronized (stderrTail) {
            for (String line : stderrTail) {
                if (line.startsWith(prefix)) {
                    return line.substring(prefix.length());
                }
            }
        }
        return null;
    }

    private String stderrTail() {
        synchronized (stderrTail) {
            return stderrTail.isEmpty() ? "  (nothing)" : "  " + String.join("\n  ", stderrTail);
        }
    }

    /** Shuts the service down once the SparkEnv it served is stopped or replaced. */
    private void watch() {
        SparkEnv seen = sparkEnv;
        while (!stopped) {
            try {
                Thread.sleep(WATCHDOG_INTERVAL_MS);
            } catch (InterruptedException e) {
                return;
            }
            SparkEnv env = SparkEnv.get();
            if (seen == null) {
                seen = env;
            } else if (env != seen) {
                LOG.info("SparkEnv stopped or replaced; stopping the ttlstate store service");
                shutdown();
                return;
            }
            if (!process.isAlive() && !stopped) {
                LOG.warn("The ttlstate store service exited with code {}; stderr ends with:\n{}",
                        process.exitValue(), stderrTail());
                shutdown();
                return;
            }
        }
    }

    /** Closes stdin, waits up to 5 s, kills what is left and deletes the service dir. Idempotent. */
    public void shutdown() {
        synchronized (this) {
            if (stopped) {
                return;
            }
            stopped = true;
        }
        try {
            stdin.close();
        } catch (IOException e) {
            LOG.debug("closing the service's stdin", e);
        }
        try {
            if (!process.waitFor(STOP_TIMEOUT_MS, TimeUnit.MILLISECONDS)) {
                LOG.warn("ttlstate store service did not stop within {} ms; killing it", STOP_TIMEOUT_MS);
                process.descendants().forEach(ProcessHandle::destroyForcibly);
                process.destroyForcibly();
                process.waitFor(STOP_TIMEOUT_MS, TimeUnit.MILLISECONDS);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            process.destroyForcibly();
        }
        LocalFiles.deleteQuietly(dir);
        try {
            Runtime.getRuntime().removeShutdownHook(shutdownHook);
        } catch (IllegalStateException | IllegalArgumentException e) {
            // running inside the hook, or it was never registered
        }
        synchronized (PythonService.class) {
            if (current == this) {
                current = null;
            }
        }
        LOG.info("ttlstate store service stopped (dir {})", dir);
    }

    private static Thread daemon(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    @Override
    public String toString() {
        return "PythonService[pid=" + pid + ",workers=" + workers + ",dir=" + dir + ",python=" + python + "]";
    }
}
