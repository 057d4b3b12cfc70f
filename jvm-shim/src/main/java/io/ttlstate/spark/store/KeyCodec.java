package io.ttlstate.spark.store;

import java.util.ArrayList;
import java.util.List;

import io.ttlstate.spark.cache.PrefixedKey;
import io.ttlstate.spark.compat.ScalaColls;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.Platform;

/**
 * Turns key rows into the bytes stored in the worker and back.
 *
 * <p>NoPrefix specs store the key row's bytes. For {@code PrefixKeyScanStateEncoderSpec(schema, n)}
 * the stored key is a {@link PrefixedKey}, the prefix row being an UnsafeProjection of the
 * first n key columns, so a prefix scan is a byte-prefix scan on {@code [u32 length][prefix row]}.
 */
public final class KeyCodec {
    private final int numKeyFields;
    private final int numPrefixCols;
    /** Not thread-safe: one per store object. */
    private final UnsafeProjection prefixProjection;

    public KeyCodec(StructType keySchema, int numPrefixCols) {
        this.numKeyFields = keySchema.length();
        this.numPrefixCols = numPrefixCols;
        if (numPrefixCols > 0) {
            StructField[] fields = keySchema.fields();
            List<Expression> refs = new ArrayList<>();
            for (int i = 0; i < numPrefixCols; i++) {
                refs.add(new BoundReference(i, fields[i].dataType(), fields[i].nullable()));
            }
            prefixProjection = UnsafeProjection.create(
                    ScalaColls.scalaList(refs));
        } else {
            prefixProjection = null;
        }
    }

    boolean hasPrefix() {
        return numPrefixCols > 0;
    }

    /** A copy of the row's bytes; callers may reuse the row afterwards. */
    static byte[] bytesOf(UnsafeRow row) {
        byte[] out = new byte[row.getSizeInBytes()];
        row.writeToMemory(out, Platform.BYTE_ARRAY_OFFSET);
        return out;
    }

    /** The stored key of a key row. */
    public byte[] encodeKey(UnsafeRow key) {
        if (numPrefixCols == 0) {
            return bytesOf(key);
        }
        UnsafeRow prefix = prefixProjection.apply(key);
        int p = prefix.getSizeInBytes();
        int k = key.getSizeInBytes();
        byte[] out = new byte[PrefixedKey.LENGTH_BYTES + p + k];
        PrefixedKey.putPrefixRowBytes(out, p);
        prefix.writeToMemory(out, Platform.BYTE_ARRAY_OFFSET + PrefixedKey.LENGTH_BYTES);
        key.writeToMemory(out, Platform.BYTE_ARRAY_OFFSET + PrefixedKey.LENGTH_BYTES + p);
        return out;
    }

    /** The byte prefix shared by every stored key whose leading columns equal {@code prefixRow}. */
    byte[] encodePrefix(UnsafeRow prefixRow) {
        int p = prefixRow.getSizeInBytes();
        byte[] out = new byte[PrefixedKey.LENGTH_BYTES + p];
        PrefixedKey.putPrefixRowBytes(out, p);
        prefixRow.writeToMemory(out, Platform.BYTE_ARRAY_OFFSET + PrefixedKey.LENGTH_BYTES);
        return out;
    }

    /** Points {@code row} at the key row inside a stored key (no copy). */
    UnsafeRow decodeKey(byte[] stored, UnsafeRow row) {
        if (numPrefixCols == 0) {
            row.pointTo(stored, stored.length);
        } else {
            int off = PrefixedKey.LENGTH_BYTES + PrefixedKey.prefixRowBytes(stored);
            row.pointTo(stored, Platform.BYTE_ARRAY_OFFSET + off, stored.length - off);
        }
        return row;
    }

    UnsafeRow newKeyRow() {
        return new UnsafeRow(numKeyFields);
    }
}
