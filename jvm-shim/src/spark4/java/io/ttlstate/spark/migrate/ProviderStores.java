package io.ttlstate.spark.migrate;

import java.io.File;
import java.io.Serializable;
import java.util.Iterator;

import io.ttlstate.spark.compat.SparkCompat;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.types.StructType;

/**
 * Writes the rows of a state data source read ({@code key}, {@code value}, {@code partition_id})
 * through one of Spark's own providers: for each of the operator's partitions the provider is
 * opened on a store under the checkpoint root {@code ROOT} (a scratch directory), version 0 is
 * filled with that partition's rows and committed as version 1, and maintenance runs, so the
 * provider's own code writes its files (the HDFS-backed provider's {@code 1.snapshot}, the
 * RocksDB provider's {@code 1.zip} and SSTs, its changelog checkpointing off in the session). A partition
 * without rows gets an empty version 1. Python moves the files into the query's checkpoint under
 * the migration's version (docs/decisions/107-migrate-between-providers.md).
 */
public final class ProviderStores {
    private ProviderStores() {
    }

    /** Writes every partition's store; returns the rows written. */
    public static long write(Dataset<Row> rows, String root, long operatorId, String storeName, String providerClass,
                             StructType keySchema, StructType valueSchema, int numPrefixCols, int numPartitions) {
        Target target = new Target(root, operatorId, storeName, providerClass, keySchema, valueSchema, numPrefixCols,
                new StateStoreConf(rows.sparkSession().sessionState().conf(),
                        scala.collection.immutable.Map$.MODULE$.<String, String>empty()),
                new org.apache.spark.util.SerializableConfiguration(rows.sparkSession().sessionState().newHadoopConf()));
        rows.queryExecution().toRdd().toJavaRDD().foreachPartition(target);
        long n = 0;
        for (int p = 0; p < numPartitions; p++) {
            File count = target.countFile(p);
            if (count.exists()) {
                n += CountFile.read(count);
            } else {
                target.fill(p, java.util.Collections.emptyIterator());
            }
        }
        return n;
    }

    private static final class Target implements VoidFunction<Iterator<InternalRow>>, Serializable {
        private static final long serialVersionUID = 1L;
        private final String root;
        private final long operatorId;
        private final String storeName;
        private final String providerClass;
        private final StructType keySchema;
        private final StructType valueSchema;
        private final int numPrefixCols;
        private final StateStoreConf storeConf;
        private final org.apache.spark.util.SerializableConfiguration hadoopConf;

        Target(String root, long operatorId, String storeName, String providerClass, StructType keySchema,
               StructType valueSchema, int numPrefixCols, StateStoreConf storeConf,
               org.apache.spark.util.SerializableConfiguration hadoopConf) {
            this.root = root;
            this.operatorId = operatorId;
            this.storeName = storeName;
            this.providerClass = providerClass;
            this.keySchema = keySchema;
            this.valueSchema = valueSchema;
            this.numPrefixCols = numPrefixCols;
            this.storeConf = storeConf;
            this.hadoopConf = hadoopConf;
        }

        File countFile(int partition) {
            return new File(root, "count-" + operatorId + "-" + storeName + "-" + partition);
        }

        @Override
        public void call(Iterator<InternalRow> it) {
            if (!it.hasNext()) {
                return;
            }
            InternalRow first = it.next();
            int partition = first.getInt(2);
            Iterator<InternalRow> all = new Iterator<InternalRow>() {
                private InternalRow pending = first;

                @Override
                public boolean hasNext() {
                    return pending != null || it.hasNext();
                }

                @Override
                public InternalRow next() {
                    InternalRow r = pending != null ? pending : it.next();
                    pending = null;
                    if (r.getInt(2) != partition) {
                        throw new IllegalStateException("task " + TaskContext.getPartitionId() + " read partitions "
                                + partition + " and " + r.getInt(2));
                    }
                    return r;
                }
            };
            fill(partition, all);
        }

        /** Version 1 of the partition's store with the rows of {@code rows}, written by the provider. */
        void fill(int partition, Iterator<InternalRow> rows) {
            StateStoreId id = new StateStoreId(root, operatorId, partition, storeName);
            KeyStateEncoderSpec spec = numPrefixCols > 0
                    ? new PrefixKeyScanStateEncoderSpec(keySchema, numPrefixCols)
                    : new NoPrefixKeyStateEncoderSpec(keySchema);
            Configuration conf = new Configuration(hadoopConf.value());
            conf.set(SparkCompat.RUN_ID_KEY, java.util.UUID.randomUUID().toString());
            // the target's class, not the session's providerClass (createAndInit would take that)
            StateStoreProvider provider = StateStoreProvider.create(providerClass);
            provider.init(id, keySchema, valueSchema, spec, false, storeConf, conf, false, scala.Option.empty());
            long n = 0;
            try {
                StateStore store = SparkCompat.writableStore(provider, 0);
                UnsafeProjection keyRow = UnsafeProjection.create(keySchema);
                UnsafeProjection valueRow = UnsafeProjection.create(valueSchema);
                while (rows.hasNext()) {
                    InternalRow r = rows.next();
                    InternalRow k = r.getStruct(0, keySchema.length());
                    InternalRow v = r.getStruct(1, valueSchema.length());
                    UnsafeRow key = (k instanceof UnsafeRow ? (UnsafeRow) k : keyRow.apply(k)).copy();
                    UnsafeRow value = (v instanceof UnsafeRow ? (UnsafeRow) v : valueRow.apply(v)).copy();
                    store.put(key, value, StateStore.DEFAULT_COL_FAMILY_NAME());
                    n++;
                }
                store.commit();
                provider.doMaintenance();
            } finally {
                provider.close();
            }
            CountFile.write(countFile(partition), n);
        }
    }
}
