package io.ttlstate.spark.service;

import java.io.Closeable;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SocketChannel;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.ErrorClasses;
import io.ttlstate.spark.WorkerException;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.ProtocolException;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One connection to one store worker: HELLO handshake, then framed request/response under
 * one lock (task threads and maintenance threads share a provider and so a connection).
 * Any I/O or framing failure marks the connection broken; the provider then reconnects.
 * A request the worker does not answer within the timeout ({@code workerTimeout}) kills the
 * worker (its service starts a new one), closes the connection and fails with
 * {@code TTLSTATE_WORKER_TIMEOUT}, which the provider does not retry: the task fails. One
 * watchdog thread checks the open connections every second, so a request only stamps its
 * start time (no timer per request on the hot path).
 *
 * <p>A request can also be sent ahead ({@link #callAhead}): the worker answers requests in
 * order, so its reply is read when {@link #await} asks for it or, kept in its {@link Pending},
 * before the reply of any later {@link #call}. The caller goes on meanwhile and the worker
 * works for it (a join's read-ahead of the next block, docs/decisions/071-requests-sent-ahead.md).
 */
public final class WorkerConnection implements Closeable {
    private static final Logger LOG = LoggerFactory.getLogger(WorkerConnection.class);

    static final String TIMEOUT_KEY = ConfKeys.PREFIX + ConfKeys.WORKER_TIMEOUT;
    private static final Set<WorkerConnection> OPEN = ConcurrentHashMap.newKeySet();
    private static final ScheduledExecutorService WATCHDOG = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "ttlstate-worker-watchdog");
        t.setDaemon(true);
        return t;
    });

    static {
        WATCHDOG.scheduleWithFixedDelay(WorkerConnection::expireOverdue, 1, 1, TimeUnit.SECONDS);
    }

    private final ReentrantLock lock = new ReentrantLock();
    /** Requests sent ahead whose replies are not read yet, oldest first. */
    private final ArrayDeque<Pending> pending = new ArrayDeque<>();
    /** The query's {@code workerTimeout} from the service's READY line until OPEN gives the store's. */
    private volatile long timeoutMillis;
    /** System.nanoTime() when the request in flight started; 0: none. */
    private volatile long requestStartNanos;
    private volatile boolean timedOut;
    private final SocketChannel channel;
    private final PythonService service;
    private final int workerIndex;
    private final ByteBuffer header = ByteBuffer.allocate(4).order(ByteOrder.LITTLE_ENDIAN);
    private volatile boolean broken;
    private volatile boolean closed;
    private int workerPid;

    private WorkerConnection(SocketChannel channel, PythonService service, int workerIndex) {
        this.channel = channel;
        this.service = service;
        this.workerIndex = workerIndex;
        this.timeoutMillis = service.workerTimeoutMillis();
        OPEN.add(this);
    }

    /**
     * Connects to worker {@code index} of {@code service} and says HELLO, retrying for up to
     * {@code retryMillis} while the socket is missing or refuses (the service's supervisor
     * restarts a dead worker).
     */
    public static WorkerConnection open(PythonService service, int index, long retryMillis) {
        Path socket = service.socketPath(index);
        long deadline = System.nanoTime() + retryMillis * 1_000_000L;
        IOException last = null;
        do {
            if (!service.isUsable()) {
                throw new IllegalStateException(service.whyUnusable());
            }
            SocketChannel ch = null;
            WorkerConnection c = null;
            try {
                ch = SocketChannel.open(StandardProtocolFamily.UNIX);
                ch.connect(UnixDomainSocketAddress.of(socket));
                c = new WorkerConnection(ch, service, index);
                c.hello();
                return c;
            } catch (WorkerException e) {
                closeQuietly(c != null ? c : ch);
                throw e; // refused (auth, version or timeout): retrying cannot help
            } catch (IOException e) {
                closeQuietly(c != null ? c : ch);
                last = e;
            }
            try {
                Thread.sleep(100);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        } while (System.nanoTime() < deadline);
        throw new UncheckedIOException("Cannot connect to ttlstate worker " + index + " at " + socket, last);
    }

    private void hello() throws IOException {
        Reply.Hello hello = Reply.hello(callUnchecked(Requests.hello(service.token())));
        int version = hello.protocolVersion;
        workerPid = hello.workerPid;
        long index = hello.workerIndex;
        if (version != Op.PROTOCOL_VERSION) {
            throw new WorkerException(ErrorClasses.PROTOCOL_ERROR,
                    "worker speaks protocol version " + version + ", expected " + Op.PROTOCOL_VERSION);
        }
        LOG.debug("Connected to ttlstate worker {} (pid {}, index {})", workerIndex, workerPid, index);
    }

    public boolean isBroken() {
        return broken || closed;
    }

    public PythonService service() {
        return service;
    }

    int workerIndex() {
        return workerIndex;
    }

    /**
     * Sends a request and returns a reader positioned after the OK status byte. An ERROR
     * response becomes a {@link WorkerException}; an I/O failure an {@link UncheckedIOException}.
     */
    public FrameReader call(FrameWriter request) {
        try {
            return callUnchecked(request);
        } catch (IOException e) {
            throw new UncheckedIOException("ttlstate worker " + workerIndex + ": " + e.getMessage(), e);
        }
    }

    private FrameReader callUnchecked(FrameWriter request) throws IOException {
        lock.lock();
        try {
            while (!pending.isEmpty()) {
                readPending();
            }
            ensureOpen();
            requestStartNanos = System.nanoTime() | 1;
            try {
                write(request);
                return readResponse();
            } catch (IOException e) {
                broken = true;
                if (timedOut) {
                    throw timeoutError(request);
                }
                throw failedDuring(request, e);
            } finally {
                requestStartNanos = 0;
            }
        } finally {
            lock.unlock();
        }
    }

    /** A request sent ahead; its reply (or its failure) once read. */
    public static final class Pending {
        private final FrameWriter request;
        private FrameReader reply;
        private RuntimeException failure;
        private boolean done;

        private Pending(FrameWriter request) {
            this.request = request;
        }
    }

    /** Sends {@code request} now; {@link #await} returns its reply (read in order with any other). */
    public Pending callAhead(FrameWriter request) {
        lock.lock();
        try {
            ensureOpen();
            write(request);
            Pending p = new Pending(request);
            pending.add(p);
            return p;
        } catch (IOException e) {
            broken = true;
            IOException named = failedDuring(request, e);
            throw new UncheckedIOException("ttlstate worker " + workerIndex + ": " + named.getMessage(), named);
        } finally {
            lock.unlock();
        }
    }

    /** The reply to a request sent ahead, as {@link #call} would have returned it. */
    public FrameReader await(Pending p) {
        lock.lock();
        try {
            while (!p.done) {
                readPending();
            }
        } finally {
            lock.unlock();
        }
        if (p.failure != null) {
            throw p.failure;
        }
        return p.reply;
    }

    /**
     * Reads the oldest pending reply into its {@link Pending}. A worker's error stays with it;
     * an I/O failure breaks the connection and fails every pending request.
     */
    private void readPending() {
        Pending p = pending.poll();
        if (broken || closed) {
            fail(p, new UncheckedIOException(new IOException("connection " + (closed ? "closed" : "broken")
                    + " before the reply to " + opName(p.request))));
            return;
        }
        requestStartNanos = System.nanoTime() | 1;
        try {
            p.reply = readResponse();
        } catch (WorkerException e) {
            p.failure = e;
        } catch (IOException e) {
            broken = true;
            fail(p, timedOut ? timeoutError(p.request) : new UncheckedIOException(
                    "ttlstate worker " + workerIndex + ": " + failedDuring(p.request, e).getMessage(), e));
        } finally {
            requestStartNanos = 0;
            p.done = true;
        }
    }

    private void fail(Pending p, RuntimeException failure) {
        p.failure = failure;
        p.done = true;
        for (Pending q : pending) {
            q.failure = failure;
            q.done = true;
        }
        pending.clear();
    }

    private static String opName(FrameWriter request) {
        return Op.name(request.frame()[4] & 0xFF);
    }

    /** {@code e} with the request it interrupted and the worker's pid in its message. */
    private IOException failedDuring(FrameWriter request, IOException e) {
        return new IOException(String.format("%s during %s (worker pid %d)", e.getMessage(), opName(request),
                workerPid), e);
    }

    /** Sets how long a request may wait for its answer (the store's {@code workerTimeout}). */
    public void timeoutMillis(long millis) {
        timeoutMillis = millis;
    }

    private WorkerException timeoutError(FrameWriter request) {
        return new WorkerException(ErrorClasses.WORKER_TIMEOUT, String.format(
                "ttlstate worker %d (pid %d) did not answer %s within %d ms (%s); it was killed and its "
                        + "service starts a new one; the task's retry reloads the store from the checkpoint",
                workerIndex, workerPid, opName(request), timeoutMillis, TIMEOUT_KEY));
    }

    /** The watchdog's round: expires every connection whose request in flight is overdue. */
    private static void expireOverdue() {
        long now = System.nanoTime();
        for (WorkerConnection c : OPEN) {
            long start = c.requestStartNanos;
            if (start != 0 && !c.timedOut && now - start > c.timeoutMillis * 1_000_000L) {
                c.expire();
            }
        }
    }

    /** The worker did not answer in time: kill it and close the channel, so the blocked
     * read or write returns with an exception. */
    private void expire() {
        timedOut = true;
        LOG.error("ttlstate worker {} (pid {}) did not answer within {} ms ({}); killing it", workerIndex,
                workerPid, timeoutMillis, TIMEOUT_KEY);
        if (workerPid > 0) {
            ProcessHandle.of(workerPid).ifPresent(ProcessHandle::destroyForcibly);
        }
        closeQuietly(channel);
    }

    /** Sends a request that gets no response (WRITE_BATCH). */
    public void send(FrameWriter request) {
        lock.lock();
        try {
            ensureOpen();
            requestStartNanos = System.nanoTime() | 1;
            write(request);
        } catch (IOException e) {
            broken = true;
            if (timedOut) {
                throw timeoutError(request);
            }
            IOException named = failedDuring(request, e);
            throw new UncheckedIOException("ttlstate worker " + workerIndex + ": " + named.getMessage(), named);
        } finally {
            requestStartNanos = 0;
            lock.unlock();
        }
    }

    private void ensureOpen() throws IOException {
        if (closed) {
            throw new IOException("connection closed");
        }
        if (broken) {
            throw new IOException("connection broken by an earlier failure");
        }
    }

    private void write(FrameWriter request) throws IOException {
        if (request.size() > Op.MAX_FRAME) {
            throw new ProtocolException("request of " + request.size() + " bytes exceeds the frame limit");
        }
        ByteBuffer buf = ByteBuffer.wrap(request.frame(), 0, request.frameLength());
        while (buf.hasRemaining()) {
            channel.write(buf);
        }
    }

    private FrameReader readResponse() throws IOException {
        header.clear();
        readFully(header);
        header.flip();
        long length = header.getInt() & 0xFFFFFFFFL;
        if (length < 1 || length > Op.MAX_FRAME) {
            throw new ProtocolException("response frame of " + length + " bytes");
        }
        byte[] body = new byte[(int) length];
        readFully(ByteBuffer.wrap(body));
        FrameReader r = new FrameReader(body);
        if (r.status() == Op.STATUS_ERROR) {
            Reply.Failed failed = Reply.error(r);
            String errorClass = failed.errorClass;
            String message = failed.message;
            if (ErrorClasses.PROTOCOL_ERROR.equals(errorClass) || ErrorClasses.AUTH.equals(errorClass)) {
                broken = true; // the worker closes the connection after these
            }
            throw new WorkerException(errorClass, message);
        }
        return r;
    }

    private void readFully(ByteBuffer buf) throws IOException {
        while (buf.hasRemaining()) {
            if (channel.read(buf) < 0) {
                throw new EOFException("ttlstate worker closed the connection");
            }
        }
    }

    @Override
    public void close() {
        closed = true;
        OPEN.remove(this);
        closeQuietly(channel);
    }

    private static void closeQuietly(Closeable c) {
        if (c != null) {
            try {
                c.close();
            } catch (IOException e) {
                // ignore
            }
        }
    }

    @Override
    public String toString() {
        return "WorkerConnection[worker=" + workerIndex + ",pid=" + workerPid + (isBroken() ? ",broken" : "") + "]";
    }
}
