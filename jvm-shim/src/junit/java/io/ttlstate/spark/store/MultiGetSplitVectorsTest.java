package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;
import io.ttlstate.spark.protocol.FrameReader;
import io.ttlstate.spark.protocol.FrameWriter;
import io.ttlstate.spark.protocol.Op;
import io.ttlstate.spark.protocol.Reply;
import io.ttlstate.spark.protocol.Requests;

/**
 * How a MULTI_GET is split (tests/vectors/multi_get_split.tsv): the JVM cuts its requests where
 * the vector says ({@link RemoteTxn#requestEnd}), each within the frame limit; and it takes each
 * of the worker's replies as the vector cuts them (those {@code protocol.answerable} gives,
 * tests/test_multi_get_vectors.py): a frame within its limit, answering the first keys asked.
 */
class MultiGetSplitVectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("multi_get_split.tsv", 8, 4);
        return rows.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void theJvmSplitsAndTakesMultiGetsAsTheVectorSays(String name, String kind, String sizes, String cuts)
            throws Exception {
        JsonNode s = JSON.readTree(sizes);
        JsonNode c = JSON.readTree(cuts);
        Map<Integer, byte[]> arrays = new HashMap<>();
        byte[][] items = new byte[s.size()][];
        for (int i = 0; i < items.length; i++) {
            items[i] = s.get(i).isNull() ? null : arrays.computeIfAbsent(s.get(i).asInt(), byte[]::new);
        }
        List<Integer> got = new ArrayList<>();
        for (int from = 0; from < items.length; ) {
            int n;
            if (kind.equals("request")) {
                n = RemoteTxn.requestEnd(items, from, items.length) - from;
                assertTrue(Requests.multiGet(1, items, from, from + n).size() <= Op.MAX_FRAME, name);
            } else {
                n = c.get(got.size()).asInt();
                FrameWriter reply = new FrameWriter().u8(Op.STATUS_OK).u32(n);
                for (int i = from; i < from + n; i++) {
                    reply.optbytes(items[i]);
                    if (items[i] != null) {
                        reply.i64(Long.MAX_VALUE);
                    }
                }
                assertTrue(reply.size() <= Op.MAX_FRAME, name + ": a reply of " + reply.size() + " bytes");
                FrameReader r = new FrameReader(reply.body());
                r.status();
                assertEquals(n, Reply.multiGet(r, items.length - from).length, name);
            }
            got.add(n);
            from += n;
        }
        List<Integer> expected = new ArrayList<>();
        c.forEach(x -> expected.add(x.asInt()));
        assertEquals(expected, got, name);
    }
}
