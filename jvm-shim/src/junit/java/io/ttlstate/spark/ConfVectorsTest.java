package io.ttlstate.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * The conf vectors shared with the service: {@link ConfKeys#split} parses every key of
 * tests/vectors/conf_keys.tsv as Python's {@code ttl.config.split_key} does, and
 * {@link TtlStateExtensions#eventTimeSetting} names, for the confs of every line of
 * tests/vectors/conf_overrides.tsv, the key the vector says (one whenever the worker puts a store
 * of those confs on event time).
 */
class ConfVectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Stream<String[]> keys() {
        List<String[]> rows = Vectors.rows("conf_keys.tsv", 10, 4);
        return rows.stream();
    }

    static Stream<String[]> overrides() {
        List<String[]> rows = Vectors.rows("conf_overrides.tsv", 10, 6);
        return rows.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("keys")
    void theJvmSplitsKeysAsTheVectorsSay(String key, String operator, String store, String name) {
        ConfKeys.Scoped k = ConfKeys.split(ConfKeys.PREFIX + key);
        assertNotNull(k, key);
        String op = Vectors.opt(operator);
        assertEquals(op == null ? null : new BigInteger(op), k.operator == null ? null : new BigInteger(k.operator), key);
        assertEquals(Vectors.opt(store), k.store, key);
        assertEquals(name, k.name, key);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("overrides")
    void theEventTimeCheckNamesTheVectorsKey(String name, String confs, String operator, String store,
                                             String resolved, String jvmKey) throws Exception {
        Map<String, String> full = new TreeMap<>();
        JSON.readTree(confs).properties().forEach(e -> full.put(ConfKeys.PREFIX + e.getKey(), e.getValue().asText()));
        Map.Entry<String, String> named = TtlStateExtensions.eventTimeSetting(full);
        String expected = Vectors.opt(jvmKey);
        assertEquals(expected == null ? null : ConfKeys.PREFIX + expected, named == null ? null : named.getKey(), name);
    }

    @Test
    void aKeyOutsideThePrefixIsNone() {
        assertNull(ConfKeys.split("spark.sql.streaming.stateStore.providerClass"));
    }
}
