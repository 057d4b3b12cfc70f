package io.ttlstate.spark;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

class SessionExtensionCheckTest {
    private static final String PREFIX = "spark.sql.streaming.stateStore.ttlstate.";

    @Test
    void withoutEventTimeTtlASessionWithoutTheExtensionsIsWarnedAndNamesTheConf() {
        String m = SessionExtensionCheck.missing(Map.of(PREFIX + "ttl", "1h", PREFIX + "timeCharacteristic", "BatchTimestamp"));
        assertTrue(!m.startsWith(ErrorClasses.INVALID_CONF) && m.contains("read-ahead"), m);
        assertTrue(m.contains("spark.sql.extensions=io.ttlstate.spark.TtlStateExtensions"), m);
    }

    @Test
    void eventTimeTtlAnywhereIsRefusedNamingTheKeyAndValue() {
        String key = PREFIX + "operator.2.store.left-keyToNumValues.timeCharacteristic";
        String m = SessionExtensionCheck.missing(Map.of(PREFIX + "ttl", "1h", key, " eventtime "));
        assertTrue(m.startsWith(ErrorClasses.INVALID_CONF + ": Invalid value ' eventtime ' for " + key), m);
        assertTrue(m.contains("spark.sql.extensions=io.ttlstate.spark.TtlStateExtensions"), m);
    }
}
