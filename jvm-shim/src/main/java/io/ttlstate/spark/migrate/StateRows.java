package io.ttlstate.spark.migrate;

import java.io.BufferedOutputStream;
import java.io.DataOutputStream;
import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.util.Iterator;

import io.ttlstate.spark.store.KeyCodec;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.StructType;

/**
 * Writes the rows of a state data source read ({@code key}, {@code value}, {@code partition_id}
 * columns, in that order) to files, one per task: {@code DIR/task-<n>.rows}, each a sequence of
 * frames {@code [i32 partition][i32 key length][stored key][i32 value length][value row]}
 * (big-endian), the key as ttlstate stores it ({@link KeyCodec}: the row's bytes, or for a
 * prefix-scan store the prefix envelope), the value as its UnsafeRow bytes. A task run again
 * rewrites its file.
 */
public final class StateRows {
    private StateRows() {
    }

    /** Writes the rows of {@code rows}; returns how many. */
    public static long write(Dataset<Row> rows, String dir, StructType keySchema, StructType valueSchema,
                             int numPrefixCols) {
        new File(dir).mkdirs();
        rows.queryExecution().toRdd().toJavaRDD()
                .foreachPartition(new Writer(dir, keySchema, valueSchema, numPrefixCols));
        long n = 0;
        File[] files = new File(dir).listFiles((d, name) -> name.endsWith(".count"));
        for (File f : files == null ? new File[0] : files) {
            n += CountFile.read(f);
        }
        return n;
    }

    private static final class Writer implements VoidFunction<Iterator<InternalRow>>, Serializable {
        private static final long serialVersionUID = 1L;
        private final String dir;
        private final StructType keySchema;
        private final StructType valueSchema;
        private final int numPrefixCols;

        Writer(String dir, StructType keySchema, StructType valueSchema, int numPrefixCols) {
            this.dir = dir;
            this.keySchema = keySchema;
            this.valueSchema = valueSchema;
            this.numPrefixCols = numPrefixCols;
        }

        @Override
        public void call(Iterator<InternalRow> it) throws IOException {
            KeyCodec codec = new KeyCodec(keySchema, numPrefixCols);
            UnsafeProjection keyRow = UnsafeProjection.create(keySchema);
            UnsafeProjection valueRow = UnsafeProjection.create(valueSchema);
            int task = TaskContext.getPartitionId();
            File out = new File(dir, "task-" + task + ".rows");
            long n = 0;
            try (DataOutputStream o = new DataOutputStream(new BufferedOutputStream(new FileOutputStream(out), 1 << 16))) {
                while (it.hasNext()) {
                    InternalRow r = it.next();
                    if (r.isNullAt(0) || r.isNullAt(1)) {
                        throw new IllegalStateException("a state row without a key or a value in " + dir);
                    }
                    InternalRow k = r.getStruct(0, keySchema.length());
                    InternalRow v = r.getStruct(1, valueSchema.length());
                    byte[] key = codec.encodeKey(k instanceof UnsafeRow ? (UnsafeRow) k : keyRow.apply(k));
                    UnsafeRow value = v instanceof UnsafeRow ? (UnsafeRow) v : valueRow.apply(v);
                    o.writeInt(r.getInt(2));
                    o.writeInt(key.length);
                    o.write(key);
                    o.writeInt(value.getSizeInBytes());
                    o.write(value.getBytes());
                    n++;
                }
            }
            CountFile.write(new File(dir, "task-" + task + ".count"), n);
        }
    }
}
