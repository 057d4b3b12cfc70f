package io.ttlstate.spark.ttl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/** {@link TtlRule} against the rule's shared vectors (tests/vectors/ttl.tsv, make_ttl_vectors.py). */
class TtlRuleTest {
    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("ttl.tsv");
        assertTrue(rows.size() > 50, "ttl.tsv has " + rows.size() + " vectors");
        return rows.stream();
    }

    /** Columns: ts, ttl_ms, now, expires_at, expired, refreshes. */
    @ParameterizedTest(name = "{0} {1} {2}")
    @MethodSource("vectors")
    void followsTheVector(String ts, String ttl, String now, String expiresAt, String expired, String refreshes) {
        long e = Long.parseLong(expiresAt);
        assertEquals(e, TtlRule.expiresAt(Long.parseLong(ts), Long.parseLong(ttl)), "expiresAt");
        assertEquals(Boolean.parseBoolean(expired), TtlRule.expired(e, Long.parseLong(now)), "expired");
        assertEquals(Boolean.parseBoolean(refreshes), TtlRule.refreshes(e, Long.parseLong(now), Long.parseLong(ttl)),
                "refreshes");
    }

    @Test
    void saturatesInsteadOfOverflowing() {
        assertEquals(TtlRule.NEVER, TtlRule.expiresAt(Long.MAX_VALUE - 10, 1000));
        assertEquals(Long.MAX_VALUE - 1, TtlRule.expiresAt(Long.MAX_VALUE - 1001, 1000));
        assertEquals(Long.MIN_VALUE + 1, TtlRule.expiresAt(Long.MIN_VALUE, 1));
    }

    @Test
    void noTtlNeverExpiresNorRefreshes() {
        assertEquals(TtlRule.NEVER, TtlRule.expiresAt(1000, 0));
        assertEquals(TtlRule.NEVER, TtlRule.expiresAt(1000, -5));
        assertFalse(TtlRule.expired(TtlRule.NEVER, Long.MAX_VALUE - 1));
        assertFalse(TtlRule.refreshes(TtlRule.NEVER, 123, 0));
    }

    @Test
    void expiryIsInclusive() {
        assertFalse(TtlRule.expired(1500, 1499));
        assertTrue(TtlRule.expired(1500, 1500));
    }
}
