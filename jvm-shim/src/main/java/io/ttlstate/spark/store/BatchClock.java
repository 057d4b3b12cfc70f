package io.ttlstate.spark.store;

import java.io.BufferedReader;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.ttlstate.spark.compat.SparkCompat;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.Path;
import org.apache.spark.TaskContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The TTL clocks of a micro-batch, from the metadata line (the second) of the query's offset
 * log {@code <checkpointLocation>/offsets/<batchId>}: its logical timestamp
 * {@code batchTimestampMs} ({@code BatchTimestamp}) and its event-time watermark
 * {@code batchWatermarkMs} ({@code EventTime}). {@code StateStoreId.checkpointRootLocation()}
 * is {@code <checkpointLocation>/state}.
 *
 * <p>The batch is the task's {@code streaming.sql.batchId} property, else the store version
 * (batch v uses version v). Timestamps found are cached per executor by checkpoint, query run
 * (a new run may follow a deleted checkpoint) and batch; a missing or unparsable file gives -1
 * (the worker then uses its wall clock) and is looked up again next time.
 */
final class BatchClock {
    private static final Logger LOG = LoggerFactory.getLogger(BatchClock.class);
    static final String BATCH_ID_PROPERTY = "streaming.sql.batchId";
    private static final Pattern TIMESTAMP = Pattern.compile("\"batchTimestampMs\"\\s*:\\s*(-?\\d+)");
    private static final Pattern WATERMARK = Pattern.compile("\"batchWatermarkMs\"\\s*:\\s*(-?\\d+)");
    /** Both clocks unknown (no offset log file). */
    static final Times UNKNOWN = new Times(-1, -1);
    private static final int MAX_CACHED = 256;

    /** "checkpoint root|run id|batchId" to the batch's clocks. */
    private static final Map<String, Times> CACHE = lru(MAX_CACHED);
    /** Checkpoint roots whose missing timestamp was logged already. */
    private static final Set<String> LOGGED = Collections.newSetFromMap(lru(MAX_CACHED));

    private BatchClock() {}

    private static <V> Map<String, V> lru(int max) {
        return Collections.synchronizedMap(new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, V> eldest) {
                return size() > max;
            }
        });
    }

    /** A batch's clocks (ms): its timestamp and its event-time watermark; -1 each when unknown. */
    static final class Times {
        final long timestampMs;
        final long watermarkMs;

        Times(long timestampMs, long watermarkMs) {
            this.timestampMs = timestampMs;
            this.watermarkMs = watermarkMs;
        }

        /** The TTL clock a store uses: the watermark under EventTime, else the timestamp. */
        long ttlClock(boolean eventTime) {
            return eventTime ? watermarkMs : timestampMs;
        }
    }

    /** The clocks of the batch using {@code version} of a store under {@code checkpointRoot}, or {@link #UNKNOWN}. */
    static Times batchTimes(String checkpointRoot, long version, Configuration hadoopConf) {
        long batchId = batchId(version);
        String runId = SparkCompat.runId(hadoopConf);
        String key = checkpointRoot + "|" + runId + "|" + batchId;
        Times cached = CACHE.get(key);
        if (cached != null) {
            return cached;
        }
        Path offsets = new Path(new Path(checkpointRoot).getParent(), "offsets/" + batchId);
        String problem;
        try {
            Times times = read(offsets, hadoopConf);
            CACHE.put(key, times);
            return times;
        } catch (FileNotFoundException e) {
            problem = "no offset log file";
        } catch (IOException | RuntimeException e) {
            problem = "cannot read the offset log file (" + e + ")";
        }
        if (LOGGED.add(checkpointRoot)) {
            LOG.info("No batch timestamp for the state under {} ({} {}); its TTL clock is the worker's"
                    + " wall clock whenever this happens, or no watermark yet under EventTime"
                    + " (logged once per checkpoint)", checkpointRoot, problem, offsets);
        }
        return UNKNOWN;
    }

    private static long batchId(long version) {
        TaskContext task = TaskContext.get();
        String id = task == null ? null : task.getLocalProperty(BATCH_ID_PROPERTY);
        if (id != null) {
            try {
                return Long.parseLong(id.trim());
            } catch (NumberFormatException e) {
                LOG.debug("Ignoring malformed {}={}", BATCH_ID_PROPERTY, id);
            }
        }
        return version;
    }

    private static Times read(Path offsets, Configuration hadoopConf) throws IOException {
        try (FSDataInputStream in = offsets.getFileSystem(hadoopConf).open(offsets);
             BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            String version = r.readLine();
            return parse(version, r.readLine());
        }
    }

    /** The clocks of an offset log entry from its first two lines (null: none), read as {@link #read} does. */
    static Times parse(String version, String metadata) throws IOException {
        Matcher ts = metadata == null ? null : TIMESTAMP.matcher(metadata);
        if (version == null || ts == null || !ts.find()) {
            throw new IOException("no batchTimestampMs on the second line");
        }
        Matcher wm = WATERMARK.matcher(metadata);
        // Spark always writes batchWatermarkMs (0 until the query has a watermark)
        return new Times(Long.parseLong(ts.group(1)), wm.find() ? Long.parseLong(wm.group(1)) : 0);
    }
}
