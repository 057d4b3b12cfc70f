package io.ttlstate.spark.store;

import java.util.Map;

import io.ttlstate.spark.ConfKeys;

/**
 * The settings of one store as the worker resolved them in its OPEN reply (docs/PROTOCOL.md),
 * read by the names {@link ConfKeys#RESOLVED} declares. Every key, default and rule lives in
 * Python ({@code ttlstate.conf}, one registry); the JVM has no defaults of its own: a reply that
 * lacks a value it needs, or holds one it cannot read, means the worker and the shim do not
 * match, and opening the store fails saying so.
 */
final class StoreSettings {
    final int writeBatchBytes;
    final int iteratorChunkEntries;
    final long workerTimeoutMillis;
    final boolean snapshotMode;
    final int transferThreads;
    /** null: the default local cache root (see {@code StoreCheckpoint.useCacheDir}). */
    final String localCacheDir;
    /** Store directories of the local cache unused this long are swept (0: never). */
    final long localCacheMaxAgeMillis;
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
    /** TTL is on and its clock is the batch's event-time watermark ({@code batchWatermarkMs}). */
    final boolean ttlEventTime;
    /** The worker's incremental cleanup counts state accesses (so reads the JVM answers are reported). */
    final boolean ttlCountsAccesses;
    /** TTL's {@code ReturnExpiredIfNotCleanedUp}: reads may return an expired entry the worker still stores. */
    final boolean ttlReturnExpired;
    /** The worker's incremental cleanup counts every entry an iterator returns as an access. */
    final boolean ttlCountsEveryRecord;
    /** Sample every n-th get and put for the latency metrics; 0: latency tracking is off. */
    final int latencySampleInterval;

    StoreSettings(Map<String, String> resolved) {
        writeBatchBytes = (int) number(resolved, ConfKeys.WRITE_BATCH_BYTES);
        iteratorChunkEntries = (int) number(resolved, ConfKeys.ITERATOR_CHUNK_ENTRIES);
        workerTimeoutMillis = number(resolved, ConfKeys.WORKER_TIMEOUT);
        snapshotMode = "snapshot".equalsIgnoreCase(required(resolved, ConfKeys.CHECKPOINT_MODE));
        transferThreads = (int) number(resolved, ConfKeys.TRANSFER_THREADS);
        localCacheDir = resolved.get(ConfKeys.LOCAL_CACHE_DIR); // absent: the default directory
        localCacheMaxAgeMillis = number(resolved, ConfKeys.LOCAL_CACHE_MAX_AGE);
        cacheMaxBytes = number(resolved, ConfKeys.CACHE_MAX_BYTES);
        keyFilter = flag(resolved, ConfKeys.KEY_FILTER);
        ttlMs = number(resolved, ConfKeys.TTL_MS);
        ttlRefreshOnRead = flag(resolved, ConfKeys.TTL_REFRESH_ON_READ);
        ttlBatchClock = flag(resolved, ConfKeys.TTL_BATCH_CLOCK);
        ttlEventTime = flag(resolved, ConfKeys.TTL_EVENT_TIME);
        ttlCountsAccesses = flag(resolved, ConfKeys.TTL_COUNTS_ACCESSES);
        ttlReturnExpired = flag(resolved, ConfKeys.TTL_RETURN_EXPIRED);
        ttlCountsEveryRecord = flag(resolved, ConfKeys.TTL_COUNTS_EVERY_RECORD);
        latencySampleInterval = flag(resolved, ConfKeys.LATENCY_TRACKING)
                ? (int) number(resolved, ConfKeys.LATENCY_SAMPLE_INTERVAL) : 0;
    }

    /**
     * Whether a transaction with batch timestamp {@code batchTimestampMs} may use the JVM's
     * view (cache and filter): the JVM must know the transaction's clock, which it does
     * without TTL, with the batch clock of a known batch, and under EventTime with the
     * watermark of a known batch (the JVM follows the worker's stamping of the entries written
     * before the watermark started, docs/decisions/104-event-time-jvm-view.md). Never under
     * ProcessingTime (the clock moves
     * with every access).
     */
    boolean viewUsable(long batchTimestampMs) {
        return ttlMs == 0 || ((ttlBatchClock || ttlEventTime) && batchTimestampMs >= 0);
    }

    /**
     * Whether a transaction that may use the view ({@link #viewUsable}) may also read ahead
     * through the worker (prefetch, read-ahead) and scan the view instead of the worker
     * (resident scans): a worker read and a worker iterator then do nothing the operator's own
     * reads would not, but clean up expired entries, which no read of it can see. Not under
     * {@code OnReadAndWrite} (a worker read refreshes the entry: a read-ahead of a key the
     * operator then does not read would refresh it; a scan refreshes every entry), nor under
     * {@code ReturnExpiredIfNotCleanedUp} (a worker read that cleans an expired entry up
     * changes what the operator's read returns; the view need not hold the expired entries a
     * scan returns), nor, for scans, when the cleanup counts every record an iterator returns
     * (docs/decisions/102-ttl-batch-clock-fast-paths.md).
     */
    boolean readsLikeTheWorker(boolean scan) {
        return ttlMs == 0 || (!ttlRefreshOnRead && !ttlReturnExpired && !(scan && ttlCountsEveryRecord));
    }

    private static String required(Map<String, String> resolved, String name) {
        String v = resolved.get(name);
        if (v == null) {
            throw new IllegalStateException("The worker's OPEN reply lacks the resolved setting '" + name
                    + "': the Python package and the shim jar do not match (reinstall ttlstate)");
        }
        return v;
    }

    private static long number(Map<String, String> resolved, String name) {
        String v = required(resolved, name);
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalStateException("The worker resolved the setting '" + name + "' to '" + v
                    + "', not a whole number: the Python package and the shim jar do not match", e);
        }
    }

    private static boolean flag(Map<String, String> resolved, String name) {
        String v = required(resolved, name);
        if (!v.equals("true") && !v.equals("false")) {
            throw new IllegalStateException("The worker resolved the setting '" + name + "' to '" + v
                    + "', not true or false: the Python package and the shim jar do not match");
        }
        return v.equals("true");
    }
}
