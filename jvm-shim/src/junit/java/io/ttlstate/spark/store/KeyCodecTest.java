package io.ttlstate.spark.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Arrays;

import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

import io.ttlstate.spark.cache.PrefixedKey;

/**
 * {@link KeyCodec}: a key row's stored bytes, the row itself without a prefix, else
 * {@code [u32 big-endian n][prefix row, n bytes][key row]}, and back (no Spark session needed).
 */
class KeyCodecTest {
    private static final StructType SCHEMA = new StructType()
            .add("user", DataTypes.StringType).add("session", DataTypes.LongType);

    private static UnsafeRow row(StructType schema, Object... values) {
        for (int i = 0; i < values.length; i++) {
            if (values[i] instanceof String) {
                values[i] = UTF8String.fromString((String) values[i]);
            }
        }
        return UnsafeProjection.create(schema).apply(new GenericInternalRow(values)).copy();
    }

    private static boolean startsWith(byte[] bytes, byte[] prefix) {
        return bytes.length >= prefix.length && Arrays.equals(bytes, 0, prefix.length, prefix, 0, prefix.length);
    }

    @Test
    void withoutPrefixStoresTheRowsBytes() {
        KeyCodec codec = new KeyCodec(SCHEMA, 0);
        assertFalse(codec.hasPrefix());
        UnsafeRow key = row(SCHEMA, "alice", 7L);
        byte[] stored = codec.encodeKey(key);
        assertArrayEquals(key.getBytes(), stored);
        assertArrayEquals(stored, KeyCodec.bytesOf(key));
        assertEquals(key, codec.decodeKey(stored, codec.newKeyRow()));
    }

    @Test
    void theStoredBytesAreACopy() {
        KeyCodec codec = new KeyCodec(SCHEMA, 0);
        UnsafeRow key = row(SCHEMA, "alice", 7L);
        byte[] stored = codec.encodeKey(key);
        key.setLong(1, 8L);
        assertEquals(7L, codec.decodeKey(stored, codec.newKeyRow()).getLong(1));
    }

    @Test
    void aPrefixedKeyIsLengthPrefixRowThenKeyRow() {
        KeyCodec codec = new KeyCodec(SCHEMA, 1);
        assertTrue(codec.hasPrefix());
        UnsafeRow key = row(SCHEMA, "alice", 7L);
        byte[] prefixRow = row(new StructType().add("user", DataTypes.StringType), "alice").getBytes();
        byte[] stored = codec.encodeKey(key);
        assertEquals(4 + prefixRow.length + key.getSizeInBytes(), stored.length);
        assertEquals(prefixRow.length, PrefixedKey.prefixRowBytes(stored));
        assertEquals(4 + prefixRow.length, PrefixedKey.prefixBytes(stored));
        assertArrayEquals(prefixRow, Arrays.copyOfRange(stored, 4, 4 + prefixRow.length));
        assertArrayEquals(key.getBytes(), Arrays.copyOfRange(stored, 4 + prefixRow.length, stored.length));
    }

    @Test
    void keysOfOnePrefixStartWithItsEncodedPrefix() {
        KeyCodec codec = new KeyCodec(SCHEMA, 1);
        byte[] prefix = codec.encodePrefix(row(new StructType().add("user", DataTypes.StringType), "alice"));
        assertTrue(startsWith(codec.encodeKey(row(SCHEMA, "alice", 1L)), prefix));
        assertTrue(startsWith(codec.encodeKey(row(SCHEMA, "alice", Long.MAX_VALUE)), prefix));
        assertFalse(startsWith(codec.encodeKey(row(SCHEMA, "alicf", 1L)), prefix));
        assertFalse(startsWith(codec.encodeKey(row(SCHEMA, "alice2", 1L)), prefix)); // a longer value: another length
    }

    @Test
    void decodesThePrefixedKeyRowInPlace() {
        KeyCodec codec = new KeyCodec(SCHEMA, 1);
        UnsafeRow key = row(SCHEMA, "x".repeat(300), -1L); // a prefix row of more than 255 bytes: big-endian length
        byte[] stored = codec.encodeKey(key);
        assertNotEquals(0, stored[2]);
        UnsafeRow decoded = codec.decodeKey(stored, codec.newKeyRow());
        assertEquals(key, decoded);
        assertEquals("x".repeat(300), decoded.getUTF8String(0).toString());
        assertSame(stored, decoded.getBaseObject()); // no copy
    }

    @Test
    void aKeyWithoutColumnsIsEmpty() {
        StructType none = new StructType();
        KeyCodec codec = new KeyCodec(none, 0);
        byte[] stored = codec.encodeKey(row(none));
        assertEquals(0, stored.length);
        assertEquals(0, codec.decodeKey(stored, codec.newKeyRow()).numFields());
    }
}
