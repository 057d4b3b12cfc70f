package io.ttlstate.spark.metrics;

import java.util.Arrays;

/**
 * Sampled latencies of one kind of state access in one store version, like Flink's
 * {@code state.latency-track}: every {@code interval}-th access is timed (two
 * {@code System.nanoTime()} calls), the last {@link #HISTORY} samples are kept, and the
 * percentiles are computed when Spark asks for the store's metrics. Used by one task
 * thread at a time; the provider's maintenance never touches it.
 */
public final class LatencyTracker {
    static final int HISTORY = 1024;

    private final int interval;
    private final long[] samples = new long[HISTORY];
    private int count;
    private int recorded;

    LatencyTracker(int interval) {
        this.interval = Math.max(1, interval);
    }

    /** Whether this access should be timed (counts the access). */
    public boolean sample() {
        if (++count < interval) {
            return false;
        }
        count = 0;
        return true;
    }

    public void record(long nanos) {
        samples[recorded++ % HISTORY] = nanos;
    }

    /** Adds the samples of {@code other} (a read store's, into its write store's tracker). */
    void addAll(LatencyTracker other) {
        for (int i = 0, n = Math.min(other.recorded, HISTORY); i < n; i++) {
            record(other.samples[i]);
        }
    }

    /** The {@code q}-quantile (0..1) of the kept samples in microseconds, rounded up; 0 without samples. */
    long percentileMicros(double q) {
        int n = Math.min(recorded, HISTORY);
        if (n == 0) {
            return 0;
        }
        long[] sorted = Arrays.copyOf(samples, n);
        Arrays.sort(sorted);
        int idx = (int) Math.min(n - 1, Math.max(0, Math.ceil(q * n) - 1));
        return (sorted[idx] + 999) / 1000;
    }
}
