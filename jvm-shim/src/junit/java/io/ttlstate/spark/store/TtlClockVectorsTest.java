package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;
import io.ttlstate.spark.ConfKeys;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.Reply;

/**
 * The TTL clock (tests/vectors/ttl_clock.tsv): {@link BatchClock} reads the clock the vector
 * says the JVM sends from the offset log's line, and {@link StoreSettings#viewUsable} lets the
 * view answer reads exactly where the vector says the JVM knows the worker's clock (the worker's
 * side, {@code txn.transaction_clock}: tests/test_ttl_clock_vectors.py).
 */
class TtlClockVectorsTest {
    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("ttl_clock.tsv", 8, 7);
        return rows.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void theJvmSendsTheVectorsClockAndKnowsItWhereTheVectorSays(String name, String metadata, String characteristic,
                                                                String committed, String sent, String clock,
                                                                String jvmKnows) throws Exception {
        BatchClock.Times times;
        try {
            times = metadata.equals("-") ? BatchClock.UNKNOWN : BatchClock.parse("v1", metadata);
        } catch (IOException e) {
            times = BatchClock.UNKNOWN; // as batchTimes: an unreadable entry is an unknown clock
        }
        boolean eventTime = characteristic.equals("EventTime");
        assertEquals(Long.parseLong(sent), times.ttlClock(eventTime), name);
        Map<String, String> resolved = new TreeMap<>(defaults());
        resolved.put(ConfKeys.TTL_MS, "1000");
        resolved.put(ConfKeys.TTL_BATCH_CLOCK, String.valueOf(characteristic.equals("BatchTimestamp")));
        resolved.put(ConfKeys.TTL_EVENT_TIME, String.valueOf(eventTime));
        assertEquals(Boolean.parseBoolean(jvmKnows), new StoreSettings(resolved).viewUsable(Long.parseLong(sent)), name);
    }

    /** The settings of the worker's OPEN reply for default confs (tests/vectors/replies.tsv). */
    private static Map<String, String> defaults() throws Exception {
        String hex = Vectors.rows("replies.tsv").stream().filter(r -> r[0].equals("open-defaults"))
                .findFirst().orElseThrow()[3];
        FrameReader r = new FrameReader(HexFormat.of().parseHex(hex));
        r.status();
        return Reply.open(r).settings;
    }
}
