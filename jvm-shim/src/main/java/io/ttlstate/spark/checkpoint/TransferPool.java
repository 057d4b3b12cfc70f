package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.io.InterruptedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorCompletionService;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * The JVM's one pool of checkpoint transfer threads (docs/decisions/025-transfer-pool.md): daemon
 * threads, as many as
 * the largest {@code checkpoint.transferThreads} any store asked for; idle threads exit.
 * A caller runs a batch of transfers and waits for its own batch only; the first failure
 * cancels the rest of the batch and is thrown with its cause.
 */
public final class TransferPool {
    /** One upload or download. */
    interface Transfer<T> {
        T run() throws IOException;
    }

    private static final AtomicInteger THREAD_IDS = new AtomicInteger();
    private static final ThreadPoolExecutor POOL = new ThreadPoolExecutor(
            1, 1, 30, TimeUnit.SECONDS, new LinkedBlockingQueue<>(), r -> {
                Thread t = new Thread(r, "ttlstate-transfer-" + THREAD_IDS.incrementAndGet());
                t.setDaemon(true);
                return t;
            });

    static {
        POOL.allowCoreThreadTimeOut(true);
    }

    private TransferPool() {}

    /** Grows the pool to {@code threads} if it is smaller. */
    public static synchronized void ensureThreads(int threads) {
        if (threads > POOL.getMaximumPoolSize()) {
            POOL.setMaximumPoolSize(threads);
            POOL.setCorePoolSize(threads);
        }
    }

    static int threads() {
        return POOL.getMaximumPoolSize();
    }

    /** Runs {@code transfers} in parallel; returns their results in order, or throws the first failure. */
    static <T> List<T> runAll(List<? extends Transfer<T>> transfers) throws IOException {
        if (transfers.size() == 1) {
            return List.of(transfers.get(0).run());
        }
        ExecutorCompletionService<T> done = new ExecutorCompletionService<>(POOL);
        List<Future<T>> futures = new ArrayList<>(transfers.size());
        try {
            for (Transfer<T> t : transfers) {
                futures.add(done.submit(t::run));
            }
            for (int i = 0; i < futures.size(); i++) {
                done.take().get();
            }
            List<T> out = new ArrayList<>(futures.size());
            for (Future<T> f : futures) {
                out.add(f.get());
            }
            return out;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new InterruptedIOException("interrupted while waiting for checkpoint transfers");
        } catch (ExecutionException e) {
            throw rethrow(e.getCause());
        } finally {
            for (Future<T> f : futures) {
                f.cancel(true);
            }
        }
    }

    private static IOException rethrow(Throwable cause) throws IOException {
        if (cause instanceof IOException) {
            throw (IOException) cause;
        }
        if (cause instanceof RuntimeException) {
            throw (RuntimeException) cause;
        }
        if (cause instanceof Error) {
            throw (Error) cause;
        }
        throw new IOException(cause);
    }
}
