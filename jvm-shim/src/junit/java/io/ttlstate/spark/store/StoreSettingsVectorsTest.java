package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;
import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.Reply;

/**
 * The settings of the worker's OPEN replies (the OPEN lines of tests/vectors/replies.tsv, written
 * from confs by the worker's own resolver and encoder): every name {@link ConfKeys#RESOLVED}
 * declares is there (but the optional local cache directory), {@link StoreSettings} reads each
 * one, by that name (without it the store does not open), and takes its value.
 */
class StoreSettingsVectorsTest {
    static Stream<String> openReplies() {
        List<String> rows = Vectors.rows("replies.tsv").stream()
                .filter(r -> r[1].equals("OPEN") && !r[0].startsWith("bad-"))
                .map(r -> r[0] + "\t" + r[3]).collect(Collectors.toList());
        assertTrue(rows.size() >= 2, "OPEN replies in replies.tsv: " + rows.size());
        return rows.stream();
    }

    @ParameterizedTest
    @MethodSource("openReplies")
    void storeSettingsReadEveryDeclaredNameOfTheReply(String row) throws Exception {
        String name = row.split("\t")[0];
        FrameReader r = new FrameReader(HexFormat.of().parseHex(row.split("\t")[1]));
        assertEquals(0, r.status(), name);
        Map<String, String> resolved = Reply.open(r).settings;
        for (String setting : ConfKeys.RESOLVED) {
            if (!setting.equals(ConfKeys.LOCAL_CACHE_DIR)) {
                assertTrue(resolved.containsKey(setting), name + " lacks " + setting);
            }
        }
        StoreSettings s = new StoreSettings(resolved);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.WRITE_BATCH_BYTES)), s.writeBatchBytes, name);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.ITERATOR_CHUNK_ENTRIES)), s.iteratorChunkEntries, name);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.WORKER_TIMEOUT)), s.workerTimeoutMillis, name);
        assertEquals("snapshot".equals(resolved.get(ConfKeys.CHECKPOINT_MODE)), s.snapshotMode, name);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.TRANSFER_THREADS)), s.transferThreads, name);
        assertEquals(resolved.get(ConfKeys.LOCAL_CACHE_DIR), s.localCacheDir, name);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.LOCAL_CACHE_MAX_AGE)), s.localCacheMaxAgeMillis, name);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.CACHE_MAX_BYTES)), s.cacheMaxBytes, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.KEY_FILTER)), s.keyFilter, name);
        assertEquals(Long.parseLong(resolved.get(ConfKeys.TTL_MS)), s.ttlMs, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.TTL_REFRESH_ON_READ)), s.ttlRefreshOnRead, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.TTL_BATCH_CLOCK)), s.ttlBatchClock, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.TTL_EVENT_TIME)), s.ttlEventTime, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.TTL_COUNTS_ACCESSES)), s.ttlCountsAccesses, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.TTL_RETURN_EXPIRED)), s.ttlReturnExpired, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.TTL_COUNTS_EVERY_RECORD)), s.ttlCountsEveryRecord, name);
        assertEquals(Boolean.parseBoolean(resolved.get(ConfKeys.LATENCY_TRACKING))
                ? Long.parseLong(resolved.get(ConfKeys.LATENCY_SAMPLE_INTERVAL)) : 0, s.latencySampleInterval, name);
        for (String setting : ConfKeys.RESOLVED) {
            if (setting.equals(ConfKeys.LOCAL_CACHE_DIR)
                    || (setting.equals(ConfKeys.LATENCY_SAMPLE_INTERVAL) && s.latencySampleInterval == 0)) {
                continue; // optional; read only with latency tracking on
            }
            Map<String, String> without = new HashMap<>(resolved);
            without.remove(setting);
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> new StoreSettings(without),
                    name + " without " + setting);
            assertTrue(e.getMessage().contains("'" + setting + "'"), e.getMessage());
        }
    }
}
