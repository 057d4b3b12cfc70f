package io.ttlstate.spark;

import io.ttlstate.spark.store.ReadStore;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.TaskCompletionListener;
import scala.Option;

/**
 * Spark 3.5's state-store provider whose data lives in the ttlstate Python service (RocksDB):
 * 3.5's signatures over the {@link ProviderCore} every line shares. 3.5 has no
 * {@code upgradeReadStoreToWriteStore}: when a task that opened a read store asks for the
 * write store of the same version (the aggregation's and session window's restore and save
 * steps), the read store is upgraded here, as Spark 4 asks for explicitly; a read store is
 * ended when its task completes, as 3.5 does not end read stores. Its fully qualified name is
 * the one users configure on every line.
 */
public class TtlStateStoreProvider implements StateStoreProvider {
    private final ProviderCore core = new ProviderCore();

    /** The read store the running task opened last, with that task and version; null: none. */
    private ReadStore taskReadStore;
    private long taskReadStoreAttempt = -1;
    private long taskReadStoreVersion = -1;

    /** Cheap and side-effect free: Spark also creates instances just to read the metric list. */
    public TtlStateStoreProvider() {
        StateStoreProvider.$init$(this);
    }

    @Override
    public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema, int numColsPrefixKey,
                     StateStoreConf storeConfs, Configuration hadoopConf) {
        core.init(stateStoreId, keySchema, valueSchema, numColsPrefixKey, storeConfs, hadoopConf);
    }

    @Override
    public StateStoreId stateStoreId() {
        return core.stateStoreId();
    }

    @Override
    public StateStore getStore(long version) {
        String id = core.checkGetStore(version, Option.empty());
        ReadStore read = takeTaskReadStore(version);
        return ReadStore.upgrade(read, () -> core.remote().writeStore(version, id, false));
    }

    @Override
    public ReadStateStore getReadStore(long version) {
        ReadStore store = (ReadStore) core.remote().readStore(version,
                ProviderCore.checkGetReadStore(version, Option.empty()));
        TaskContext task = TaskContext.get();
        if (task != null) {
            synchronized (this) {
                taskReadStore = store;
                taskReadStoreAttempt = task.taskAttemptId();
                taskReadStoreVersion = version;
            }
            task.addTaskCompletionListener(new TaskCompletionListener() {
                @Override
                public void onTaskCompletion(TaskContext context) {
                    store.abort();
                    forgetTaskReadStore();
                }
            });
        }
        return store;
    }

    /** The read store the running task opened at {@code version} (null: none); forgets any. */
    private synchronized ReadStore takeTaskReadStore(long version) {
        TaskContext task = TaskContext.get();
        ReadStore read = taskReadStore;
        boolean same = read != null && task != null && task.taskAttemptId() == taskReadStoreAttempt
                && version == taskReadStoreVersion;
        forgetTaskReadStore();
        return same ? read : null;
    }

    private synchronized void forgetTaskReadStore() {
        taskReadStore = null;
    }

    @Override
    public void doMaintenance() {
        core.doSnapshotMaintenance();
        core.doCleanupMaintenance();
    }

    @Override
    public void close() {
        core.close();
    }

    @Override
    public scala.collection.Seq<StateStoreCustomMetric> supportedCustomMetrics() {
        SessionExtensionCheck.onDriver(); // Spark asks for the list on the driver while it plans a batch
        return io.ttlstate.spark.metrics.StoreMetrics.supported();
    }

    /** The committed version the worker's database holds, or -1; for tests and logs. */
    public long loadedVersion() {
        return core.loadedVersion();
    }

    @Override
    public String toString() {
        return core.toString();
    }
}
