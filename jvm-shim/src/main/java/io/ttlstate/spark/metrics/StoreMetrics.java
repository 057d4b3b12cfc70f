package io.ttlstate.spark.metrics;

import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.stream.Collectors;

import io.ttlstate.spark.MaxMetric;
import io.ttlstate.spark.compat.ScalaColls;
import io.ttlstate.spark.compat.SparkCompat;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSumMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomTimingMetric;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The provider's custom metrics (declared statically, so {@code supportedCustomMetrics} works on
 * an uninitialised provider) and the counters of one store version: the JVM's own, and the
 * worker's ({@link #WORKER}) as the latest STATS or COMMIT reply of the version gave them.
 */
@SuppressWarnings("unchecked")
public final class StoreMetrics {
    private static final Logger LOG = LoggerFactory.getLogger(StoreMetrics.class);

    static final StateStoreCustomMetric COMMIT_MS = new StateStoreCustomTimingMetric(
            "ttlstateCommitMs", "ttlstate: time to commit a version (worker commit, uploads, snapshot at commit)");
    static final StateStoreCustomMetric LOAD_MS = new StateStoreCustomTimingMetric(
            "ttlstateLoadMs", "ttlstate: time to load a version from the checkpoint");
    static final StateStoreCustomMetric CHECKPOINT_LOADS = new StateStoreCustomSumMetric(
            "ttlstateCheckpointLoads",
            "ttlstate: store versions loaded from the checkpoint (a store's first use on an executor, a store that moved between executors, or recovery)");
    static final StateStoreCustomMetric SNAPSHOT_MS = new StateStoreCustomTimingMetric(
            "ttlstateSnapshotMs", "ttlstate: time to take and upload an incremental snapshot at commit");
    static final StateStoreCustomMetric UPLOADED_BYTES = SparkCompat.sizeMetric(
            "ttlstateUploadedBytes", "ttlstate: bytes uploaded to the checkpoint");
    static final StateStoreCustomMetric UPLOADED_FILES = new StateStoreCustomSumMetric(
            "ttlstateUploadedFiles", "ttlstate: files uploaded to the checkpoint");
    static final StateStoreCustomMetric REUSED_FILES = new StateStoreCustomSumMetric(
            "ttlstateReusedFiles",
            "ttlstate: SST files a snapshot did not upload (the checkpoint holds them) and files a load took from the local cache");
    static final StateStoreCustomMetric DOWNLOADED_BYTES = SparkCompat.sizeMetric(
            "ttlstateDownloadedBytes", "ttlstate: bytes downloaded from the checkpoint");
    static final StateStoreCustomMetric ROUND_TRIPS = new StateStoreCustomSumMetric(
            "ttlstateRoundTrips", "ttlstate: synchronous requests to the store worker");
    static final StateStoreCustomMetric CACHE_HITS = new StateStoreCustomSumMetric(
            "ttlstateCacheHits", "ttlstate: reads answered by the JVM's value cache");
    static final StateStoreCustomMetric CACHE_MISSES = new StateStoreCustomSumMetric(
            "ttlstateCacheMisses", "ttlstate: reads the JVM's value cache and key filter could not answer (asked the worker)");
    static final StateStoreCustomMetric FILTER_SKIPS = new StateStoreCustomSumMetric(
            "ttlstateFilterSkips", "ttlstate: reads of absent keys answered in the JVM: by its key filter, or by a view holding every live entry");
    static final StateStoreCustomMetric RESIDENT_SCANS = new StateStoreCustomSumMetric(
            "ttlstateResidentScans",
            "ttlstate: iterators and prefix scans served from the JVM's complete copy of the version, without the store worker");
    static final StateStoreCustomMetric PREFETCHED = new StateStoreCustomSumMetric(
            "ttlstatePrefetchedValues",
            "ttlstate: values read ahead of the operator's reads, one request per block (a join's eviction, a join's or an aggregation's input)");
    static final StateStoreCustomMetric SENT_AHEAD = new StateStoreCustomSumMetric(
            "ttlstateSentAhead",
            "ttlstate: requests sent before their answer was needed (a join's next block of values, its counts' next chunk), answered while the operator went on");
    static final StateStoreCustomMetric CACHE_BYTES = SparkCompat.sizeMetric(
            "ttlstateCacheBytes", "ttlstate: bytes of the JVM's value cache (native) and key filter (heap) of the store");

    static final StateStoreCustomMetric EXPIRED_ON_READ = new StateStoreCustomSumMetric(
            "ttlstateExpiredOnRead", "ttlstate: expired entries found by a read and removed");
    static final StateStoreCustomMetric EXPIRED_INCREMENTAL = new StateStoreCustomSumMetric(
            "ttlstateExpiredIncremental", "ttlstate: expired entries removed by the incremental cleanup");
    static final StateStoreCustomMetric EXPIRED_BY_COMPACTION = new StateStoreCustomSumMetric(
            "ttlstateExpiredByCompaction",
            "ttlstate: expired entries dropped by RocksDB's TTL compaction filter");
    static final StateStoreCustomMetric OPEN_TRANSACTIONS = new StateStoreCustomSumMetric(
            "ttlstateOpenTransactions",
            "ttlstate: other transactions open on the store's worker at commit (0 unless a read store was never ended)");
    /** The same setting in every store, so the maximum, not the sum, over stores and tasks. */
    static final MaxMetric TTL_MS = new MaxMetric("ttlstateTtlMs", "ttlstate: state TTL in force (ms)");
    /** The TTL clock of the batch (the same in every store of a batch, so the maximum). */
    static final MaxMetric TTL_CLOCK_MS = new MaxMetric("ttlstateTtlClockMs",
            "ttlstate: the TTL clock of the batch (ms since the epoch): its event-time watermark under EventTime, its timestamp under BatchTimestamp");
    static final MaxMetric TTL_EVENT_TIME = new MaxMetric("ttlstateTtlEventTime",
            "ttlstate: 1 when the TTL clock is the event-time watermark (timeCharacteristic=EventTime), else 0");

    /** Latency tracking ({@code latencyTracking.enabled}): percentiles of the store's sampled accesses. */
    static final MaxMetric GET_P50 = new MaxMetric("ttlstateLatencyGetP50Micros",
            "ttlstate: median of sampled get latencies (us; the largest over the batch's stores)");
    static final MaxMetric GET_P99 = new MaxMetric("ttlstateLatencyGetP99Micros",
            "ttlstate: 99th percentile of sampled get latencies (us; the largest over the batch's stores)");
    static final MaxMetric PUT_P50 = new MaxMetric("ttlstateLatencyPutP50Micros",
            "ttlstate: median of sampled put latencies (us; the largest over the batch's stores)");
    static final MaxMetric PUT_P99 = new MaxMetric("ttlstateLatencyPutP99Micros",
            "ttlstate: 99th percentile of sampled put latencies (us; the largest over the batch's stores)");
    static final MaxMetric COMMIT_MAX = new MaxMetric("ttlstateLatencyCommitMaxMs",
            "ttlstate: the slowest commit of the batch's stores (ms)");
    private static final List<MaxMetric> LATENCY = List.of(GET_P50, GET_P99, PUT_P50, PUT_P99, COMMIT_MAX);

    /** The metrics the worker reports by name in STATS and COMMIT replies. */
    static final List<StateStoreCustomMetric> WORKER = List.of(
            EXPIRED_ON_READ, EXPIRED_INCREMENTAL, EXPIRED_BY_COMPACTION, TTL_MS, OPEN_TRANSACTIONS,
            TTL_CLOCK_MS, TTL_EVENT_TIME);
    private static final Map<String, Integer> WORKER_INDEX = WORKER.stream().collect(
            Collectors.toMap(StateStoreCustomMetric::name, WORKER::indexOf));
    /** Undeclared names the worker sent, each logged once. */
    private static final Set<String> UNKNOWN_LOGGED = ConcurrentHashMap.newKeySet();

    static final List<StateStoreCustomMetric> ALL = List.of(
            COMMIT_MS, LOAD_MS, CHECKPOINT_LOADS, SNAPSHOT_MS, UPLOADED_BYTES, UPLOADED_FILES, REUSED_FILES, DOWNLOADED_BYTES, ROUND_TRIPS,
            CACHE_HITS, CACHE_MISSES, FILTER_SKIPS, RESIDENT_SCANS, PREFETCHED, SENT_AHEAD, CACHE_BYTES,
            EXPIRED_ON_READ, EXPIRED_INCREMENTAL, EXPIRED_BY_COMPACTION, TTL_MS, OPEN_TRANSACTIONS,
            TTL_CLOCK_MS, TTL_EVENT_TIME, GET_P50, GET_P99, PUT_P50, PUT_P99, COMMIT_MAX);

    public final AtomicLong commitMs = new AtomicLong();
    public final AtomicLong loadMs = new AtomicLong();
    public final AtomicLong checkpointLoads = new AtomicLong();
    public final AtomicLong snapshotMs = new AtomicLong();
    public final AtomicLong uploadedBytes = new AtomicLong();
    public final AtomicLong uploadedFiles = new AtomicLong();
    public final AtomicLong reusedFiles = new AtomicLong();
    public final AtomicLong downloadedBytes = new AtomicLong();
    public final AtomicLong roundTrips = new AtomicLong();
    public final AtomicLong cacheHits = new AtomicLong();
    public final AtomicLong cacheMisses = new AtomicLong();
    public final AtomicLong filterSkips = new AtomicLong();
    public final AtomicLong residentScans = new AtomicLong();
    public final AtomicLong prefetched = new AtomicLong();
    public final AtomicLong sentAhead = new AtomicLong();
    public final AtomicLong cacheBytes = new AtomicLong();
    private final AtomicLongArray worker = new AtomicLongArray(WORKER.size());
    /** This store's own keys of the worker's {@link MaxMetric}s (see {@link MaxMetric}), by index in {@link #WORKER}. */
    private final StateStoreCustomMetric[] workerKeys = WORKER.stream()
            .map(w -> w instanceof MaxMetric ? ((MaxMetric) w).forStore() : w).toArray(StateStoreCustomMetric[]::new);
    /** Sampled get and put latencies; null unless latency tracking is on. */
    public LatencyTracker gets;
    public LatencyTracker puts;

    /** Samples every {@code interval}-th get and put of this store version. */
    public void trackLatency(int interval) {
        gets = new LatencyTracker(interval);
        puts = new LatencyTracker(interval);
    }

    public void roundTrip() {
        roundTrips.incrementAndGet();
    }

    public void uploaded(long bytes) {
        uploadedBytes.addAndGet(bytes);
        uploadedFiles.incrementAndGet();
    }

    /** Adds what {@code other} (a read store's metrics) spent loading the version. */
    public void addLoad(StoreMetrics other) {
        loadMs.addAndGet(other.loadMs.get());
        checkpointLoads.addAndGet(other.checkpointLoads.get());
        downloadedBytes.addAndGet(other.downloadedBytes.get());
        reusedFiles.addAndGet(other.reusedFiles.get());
    }

    /** Adds the reads of {@code other} (a read store this version's write store was upgraded from). */
    public void addReads(StoreMetrics other) {
        if (gets != null && other.gets != null) {
            gets.addAll(other.gets);
        }
        roundTrips.addAndGet(other.roundTrips.get());
        cacheHits.addAndGet(other.cacheHits.get());
        cacheMisses.addAndGet(other.cacheMisses.get());
        filterSkips.addAndGet(other.filterSkips.get());
        residentScans.addAndGet(other.residentScans.get());
        prefetched.addAndGet(other.prefetched.get());
        sentAhead.addAndGet(other.sentAhead.get());
    }

    /** Milliseconds since {@code startNanos}, rounded up: a step that ran never reports 0. */
    public static long millisSince(long startNanos) {
        return (System.nanoTime() - startNanos + 999_999) / 1_000_000;
    }

    /**
     * Takes a reply's {@code metrics} (by name); its declared metrics replace the worker values
     * (absent ones become 0), undeclared names are ignored.
     */
    public void workerMetrics(Map<String, Long> reported) {
        long[] values = new long[WORKER.size()];
        for (Map.Entry<String, Long> e : reported.entrySet()) {
            String name = e.getKey();
            long value = e.getValue();
            Integer index = WORKER_INDEX.get(name);
            if (index != null) {
                values[index] = value;
            } else if (UNKNOWN_LOGGED.add(name)) {
                LOG.debug("Ignoring metric {} from the ttlstate worker (not declared by the JVM)", name);
            }
        }
        for (int i = 0; i < values.length; i++) {
            worker.set(i, values[i]);
        }
    }

    /** The counters as Spark's {@code customMetrics} map (boxed Longs). */
    public scala.collection.immutable.Map<StateStoreCustomMetric, Object> toScala() {
        scala.collection.immutable.Map<StateStoreCustomMetric, Object> m = scala.collection.immutable.Map$.MODULE$.empty();
        m = m.updated(COMMIT_MS, (Object) commitMs.get());
        m = m.updated(LOAD_MS, (Object) loadMs.get());
        m = m.updated(CHECKPOINT_LOADS, (Object) checkpointLoads.get());
        m = m.updated(SNAPSHOT_MS, (Object) snapshotMs.get());
        m = m.updated(UPLOADED_BYTES, (Object) uploadedBytes.get());
        m = m.updated(UPLOADED_FILES, (Object) uploadedFiles.get());
        m = m.updated(REUSED_FILES, (Object) reusedFiles.get());
        m = m.updated(DOWNLOADED_BYTES, (Object) downloadedBytes.get());
        m = m.updated(ROUND_TRIPS, (Object) roundTrips.get());
        m = m.updated(CACHE_HITS, (Object) cacheHits.get());
        m = m.updated(CACHE_MISSES, (Object) cacheMisses.get());
        m = m.updated(FILTER_SKIPS, (Object) filterSkips.get());
        m = m.updated(RESIDENT_SCANS, (Object) residentScans.get());
        m = m.updated(PREFETCHED, (Object) prefetched.get());
        m = m.updated(SENT_AHEAD, (Object) sentAhead.get());
        m = m.updated(CACHE_BYTES, (Object) cacheBytes.get());
        for (int i = 0; i < WORKER.size(); i++) {
            m = m.updated(workerKeys[i], (Object) worker.get(i));
        }
        long[] latency = gets == null ? new long[LATENCY.size()] : new long[] {
            gets.percentileMicros(0.5), gets.percentileMicros(0.99), puts.percentileMicros(0.5),
            puts.percentileMicros(0.99), commitMs.get()};
        for (int i = 0; i < LATENCY.size(); i++) {
            m = m.updated(LATENCY.get(i).forStore(), (Object) latency[i]);
        }
        return m;
    }

    public static scala.collection.immutable.Seq<StateStoreCustomMetric> supported() {
        return ScalaColls.scalaList(ALL);
    }
}
