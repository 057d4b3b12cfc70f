package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HexFormat;
import java.util.List;
import java.util.stream.Stream;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;
import io.ttlstate.spark.cache.PrefixedKey;

/**
 * The shared prefix-key vectors (tests/vectors/prefix_keys.tsv: key schema, prefix columns,
 * the key's values, the stored key): {@link KeyCodec} stores each key as the vector's bytes,
 * reads the key row back from them, and encodes the key's prefix as their leading bytes, which
 * {@link PrefixedKey#prefixBytes} finds. Python's offline tools read the same bytes
 * ({@code ttlstate.prefix_key}, tests/test_prefix_key_vectors.py).
 */
class PrefixKeyVectorsTest {
    private static final ObjectMapper JSON = new ObjectMapper();

    static Stream<String[]> vectors() {
        List<String[]> rows = Vectors.rows("prefix_keys.tsv", 8, 5);
        return rows.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("vectors")
    void theKeyCodecStoresTheVectorsBytes(String name, String schemaJson, String prefixCols, String values,
                                          String hex) throws Exception {
        StructType schema = (StructType) DataType.fromJson(schemaJson);
        int n = Integer.parseInt(prefixCols);
        UnsafeRow key = row(schema, JSON.readTree(values), schema.length());
        KeyCodec codec = new KeyCodec(schema, n);
        byte[] stored = codec.encodeKey(key);
        assertEquals(hex, HexFormat.of().formatHex(stored), name);
        assertEquals(key, codec.decodeKey(stored, codec.newKeyRow()), name + ": the key row read back");
        if (n > 0) {
            StructType prefixSchema = new StructType(java.util.Arrays.copyOf(schema.fields(), n, StructField[].class));
            byte[] prefix = codec.encodePrefix(row(prefixSchema, JSON.readTree(values), n));
            assertEquals(hex.substring(0, 2 * prefix.length), HexFormat.of().formatHex(prefix), name + ": prefix");
            assertEquals(prefix.length, PrefixedKey.prefixBytes(stored), name + ": prefix length");
        }
    }

    /** The UnsafeRow of the first {@code n} values for {@code schema}. */
    private static UnsafeRow row(StructType schema, JsonNode values, int n) {
        Object[] out = new Object[n];
        for (int i = 0; i < n; i++) {
            JsonNode v = values.get(i);
            DataType t = schema.fields()[i].dataType();
            if (v.isNull()) {
                out[i] = null;
            } else if (t.equals(DataTypes.StringType)) {
                out[i] = UTF8String.fromString(v.asText());
            } else if (t.equals(DataTypes.LongType)) {
                out[i] = v.asLong();
            } else if (t.equals(DataTypes.IntegerType)) {
                out[i] = v.asInt();
            } else {
                throw new AssertionError("no vector values of type " + t);
            }
        }
        return UnsafeProjection.create(schema).apply(new GenericInternalRow(out)).copy();
    }
}
