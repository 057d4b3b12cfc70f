package io.ttlstate.spark;

import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The ttlstate conf names the JVM knows, declared once for it: the prefix of every ttlstate
 * conf (Python's is {@code ttlstate.confkeys.PREFIX}), the grammar of per-operator and per-store
 * overrides, and the names of the settings a store's OPEN reply resolves that the JVM reads
 * (docs/PROTOCOL.md, OPEN). Spark forwards every key under the prefix to each provider through
 * {@code StateStoreConf.sqlConfs}; the JVM passes them on to the service, which owns their
 * names, defaults and parsers ({@code ttlstate.conf.REGISTRY}). Pinned against the service by
 * tests/vectors/conf_keys.tsv and the OPEN replies of tests/vectors/replies.tsv.
 */
public final class ConfKeys {
    private ConfKeys() {}

    public static final String PREFIX = "spark.sql.streaming.stateStore.ttlstate.";

    // Settings of the service's registry, by name (the conf key is PREFIX + name); an OPEN
    // reply resolves those of scope "store" by these names.
    public static final String WRITE_BATCH_BYTES = "writeBatchBytes";
    public static final String ITERATOR_CHUNK_ENTRIES = "iteratorChunkEntries";
    public static final String WORKER_TIMEOUT = "workerTimeout";
    public static final String CHECKPOINT_MODE = "checkpoint.mode";
    public static final String TRANSFER_THREADS = "checkpoint.transferThreads";
    /** The one setting an OPEN reply may leave out (no default: the JVM picks the directory). */
    public static final String LOCAL_CACHE_DIR = "checkpoint.localCacheDir";
    public static final String LOCAL_CACHE_MAX_AGE = "checkpoint.localCacheMaxAge";
    public static final String CACHE_MAX_BYTES = "cache.maxBytes";
    public static final String KEY_FILTER = "keyFilter.enabled";
    public static final String LATENCY_TRACKING = "latencyTracking.enabled";
    public static final String LATENCY_SAMPLE_INTERVAL = "latencyTracking.sampleInterval";
    /** A TTL setting (overridable per operator and store): the clock. */
    public static final String TIME_CHARACTERISTIC = "timeCharacteristic";
    /** The value of {@link #TIME_CHARACTERISTIC} that puts TTL on event time (any case). */
    public static final String EVENT_TIME = "EventTime";

    // What an OPEN reply adds for the JVM to answer reads itself (not conf keys).
    public static final String TTL_MS = "ttl.ms";
    public static final String TTL_REFRESH_ON_READ = "ttl.refreshOnRead";
    public static final String TTL_BATCH_CLOCK = "ttl.batchClock";
    public static final String TTL_EVENT_TIME = "ttl.eventTime";
    public static final String TTL_COUNTS_ACCESSES = "ttl.countsAccesses";
    public static final String TTL_RETURN_EXPIRED = "ttl.returnExpired";
    public static final String TTL_COUNTS_EVERY_RECORD = "ttl.countsEveryRecord";

    /** Every resolved setting the JVM reads from an OPEN reply. */
    public static final List<String> RESOLVED = List.of(WRITE_BATCH_BYTES, ITERATOR_CHUNK_ENTRIES, WORKER_TIMEOUT,
            CHECKPOINT_MODE, TRANSFER_THREADS, LOCAL_CACHE_DIR, LOCAL_CACHE_MAX_AGE, CACHE_MAX_BYTES, KEY_FILTER,
            LATENCY_TRACKING, LATENCY_SAMPLE_INTERVAL, TTL_MS, TTL_REFRESH_ON_READ, TTL_BATCH_CLOCK, TTL_EVENT_TIME,
            TTL_COUNTS_ACCESSES, TTL_RETURN_EXPIRED, TTL_COUNTS_EVERY_RECORD);

    /** A ttlstate key's parts: the operator id (its digits) and store name of an override, else null; the setting's name. */
    public static final class Scoped {
        public final String operator;
        public final String store;
        public final String name;

        private Scoped(String operator, String store, String name) {
            this.operator = operator;
            this.store = store;
            this.name = name;
        }
    }

    private static final Pattern OVERRIDE = Pattern.compile("operator\\.(\\d+)\\.(?:store\\.([^.]+)\\.)?(.+)");

    /**
     * The parts of a ttlstate key, {@code PREFIX[operator.<id>.[store.<name>.]]<setting>}
     * (Python's {@code ttl.config.split_key}), or null if {@code key} is not under the prefix.
     */
    public static Scoped split(String key) {
        if (!key.startsWith(PREFIX)) {
            return null;
        }
        String rest = key.substring(PREFIX.length());
        Matcher m = OVERRIDE.matcher(rest);
        return m.matches() ? new Scoped(m.group(1), m.group(2), m.group(3)) : new Scoped(null, null, rest);
    }
}
