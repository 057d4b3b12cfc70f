package io.ttlstate.spark.protocol;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Random;

import org.junit.jupiter.api.Test;

class LiveExpiriesTest {
    private static Map<Long, Integer> counted(LiveExpiries live) {
        Map<Long, Integer> m = new LinkedHashMap<>();
        for (int i = 0; i < live.size(); i++) {
            m.put(live.expiresAt(i), live.count(i));
        }
        return m;
    }

    @Test
    void countsEachExpiryTimeInTheOrderFirstSeen() {
        Random random = new Random(7);
        Map<Long, Integer> expected = new LinkedHashMap<>();
        LiveExpiries live = new LiveExpiries();
        for (int i = 0; i < 20_000; i++) {
            // runs of one value (a frame's usual shape) among many distinct ones, extremes included
            long v = i % 97 == 0 ? Long.MIN_VALUE : i % 89 == 0 ? Long.MAX_VALUE - 1 : random.nextInt(3000) * 1000L;
            int run = 1 + random.nextInt(3);
            for (int j = 0; j < run; j++) {
                live.add(v);
                expected.merge(v, 1, Integer::sum);
            }
        }
        assertEquals(expected, counted(live));
    }

    @Test
    void clearForgetsTheCountsAndTheTableServesAgain() {
        LiveExpiries live = new LiveExpiries();
        for (long v = 0; v < 100; v++) {
            live.add(v);
        }
        live.clear();
        assertEquals(0, live.size());
        live.add(5);
        live.add(5);
        live.add(-1);
        assertEquals(Map.of(5L, 2, -1L, 1), counted(live));
        assertEquals(5L, live.expiresAt(0));
    }
}
