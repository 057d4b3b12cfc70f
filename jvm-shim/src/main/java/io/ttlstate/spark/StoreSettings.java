package io.ttlstate.spark;

import java.util.Map;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The settings of one store as the worker resolved them in its OPEN reply (docs/PROTOCOL.md).
 * Every key, default and rule lives in Python ({@code ttlstate.conf}); the JVM only reads the
 * resolved values, falling back to the protocol's defaults for a value the reply lacks.
 */
final class StoreSettings {
    private static final Logger LOG = LoggerFactory.getLogger(StoreSettings.class);

    final int writeBatchBytes;
    final int iteratorChunkEntries;
    final long workerTimeoutMillis;
    final boolean snapshotMode;
    final int transferThreads;
    /** null: {@link LocalFileCache#defaultRoot()}. */
    final String localCacheDir;
    /** The JVM's value cache budget, shared by all stores of the executor (0: no cache). */
    final long cacheMaxBytes;
    /** Whether lookups of absent keys consult a Bloom filter of the version's keys. */
    final boolean keyFilter;
    /** The store's TTL in milliseconds (0: no TTL). */
    final long ttlMs;
    /** TTL's {@code OnReadAndWrite}: a read through a write store refreshes the entry. */
    final boolean ttlRefreshOnRead;
    /** TTL's clock is the batch timestamp (else the worker's wall clock at each access). */
    final boolean ttlBatchClock;
    /** The worker's incremental cleanup counts state accesses (so reads the JVM answers are reported). */
    final boolean ttlCountsAccesses;
    /** Sample every n-th get and put for the latency metrics; 0: latency tracking is off. */
    final int latencySampleInterval;

    StoreSettings(Map<String, String> resolved) {
        writeBatchBytes = (int) number(resolved, "writeBatchBytes", 256 * 1024);
        iteratorChunkEntries = (int) number(resolved, "iteratorChunkEntries", 1024);
        workerTimeoutMillis = number(resolved, "workerTimeout", WorkerConnection.DEFAULT_TIMEOUT_MILLIS);
        snapshotMode = "snapshot".equalsIgnoreCase(resolved.get("checkpoint.mode"));
        transferThreads = (int) number(resolved, "checkpoint.transferThreads", 4);
        localCacheDir = resolved.get("checkpoint.localCacheDir");
        cacheMaxBytes = number(resolved, "cache.maxBytes", 0);
        keyFilter = Boolean.parseBoolean(resolved.getOrDefault("keyFilter.enabled", "false"));
        ttlMs = number(resolved, "ttl.ms", 0);
        ttlRefreshOnRead = Boolean.parseBoolean(resolved.getOrDefault("ttl.refreshOnRead", "false"));
        ttlBatchClock = Boolean.parseBoolean(resolved.getOrDefault("ttl.batchClock", "true"));
        ttlCountsAccesses = Boolean.parseBoolean(resolved.getOrDefault("ttl.countsAccesses", "false"));
        latencySampleInterval = Boolean.parseBoolean(resolved.getOrDefault("latencyTracking.enabled", "false"))
                ? (int) number(resolved, "latencyTracking.sampleInterval", 100) : 0;
    }

    /**
     * Whether a transaction with batch timestamp {@code batchTimestampMs} may use the JVM's
     * view (cache and filter): the JVM must know the transaction's clock, which it does
     * without TTL and with the batch clock of a known batch.
     */
    boolean viewUsable(long batchTimestampMs) {
        return ttlMs == 0 || (ttlBatchClock && batchTimestampMs >= 0);
    }

    private static long number(Map<String, String> resolved, String name, long dflt) {
        String v = resolved.get(name);
        if (v == null) {
            return dflt;
        }
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            LOG.warn("Ignoring malformed resolved setting {}={}", name, v);
            return dflt;
        }
    }
}
