package io.ttlstate.spark;

import java.util.concurrent.locks.ReentrantReadWriteLock;

import io.ttlstate.spark.compat.SparkCompat;
import io.ttlstate.spark.metrics.StoreMetrics;
import io.ttlstate.spark.store.ChangeDataReader;
import io.ttlstate.spark.store.ReadStore;
import io.ttlstate.spark.store.SparkErrors;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.RangeKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateSchemaProvider;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreErrors;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.SupportsFineGrainedReplay;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.util.NextIterator;
import scala.Enumeration;
import scala.Tuple4;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * Spark state-store provider whose data lives in the ttlstate Python service (RocksDB).
 *
 * <p>One instance serves one {@link StateStoreId}. It checks what Spark 4 asks against what
 * ttlstate supports and hands the rest to its {@link ProviderCore}, what every Spark line's
 * provider does, and the store's RemoteStore: the store as its worker holds it (stores,
 * commits, snapshots, maintenance). As {@link SupportsFineGrainedReplay} it
 * serves Spark's state reader's {@code snapshotStartBatchId} and {@code readChangeFeed}
 * (docs/decisions/062-spark-state-reader.md). Its fully qualified name is what users
 * configure and what checkpoints record: it must not move.
 */
public class TtlStateStoreProvider implements StateStoreProvider, SupportsFineGrainedReplay {
    private static final String PROVIDER_NAME = SparkErrors.PROVIDER_NAME;

    private volatile boolean unloaded;
    private ReentrantReadWriteLock maintenanceLock;

    /** What every Spark line's provider does; this class adds Spark 4's signatures and refusals. */
    private final ProviderCore core = new ProviderCore();

    /** Cheap and side-effect free: Spark also creates instances just to read the metric list. */
    public TtlStateStoreProvider() {
        StateStoreProvider.$init$(this);
    }

    // ---- trait state -------------------------------------------------------------------

    @Override
    public boolean unloaded() {
        return unloaded;
    }

    @Override
    public void unloaded_$eq(boolean b) {
        unloaded = b;
    }

    @Override
    public ReentrantReadWriteLock maintenanceLock() {
        return maintenanceLock;
    }

    @Override
    public void org$apache$spark$sql$execution$streaming$state$StateStoreProvider$_setter_$maintenanceLock_$eq(
            ReentrantReadWriteLock lock) {
        maintenanceLock = lock;
    }

    // ---- init ---------------------------------------------------------------------------

    @Override
    public void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema,
                     KeyStateEncoderSpec keyStateEncoderSpec, boolean useColumnFamilies,
                     StateStoreConf storeConfs, Configuration hadoopConf, boolean useMultipleValuesPerKey,
                     Option<StateSchemaProvider> stateSchemaProvider) {
        if (useColumnFamilies) {
            throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(PROVIDER_NAME));
        }
        if (useMultipleValuesPerKey) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException("multipleValuesPerKey", PROVIDER_NAME));
        }
        if (keyStateEncoderSpec instanceof RangeKeyScanStateEncoderSpec) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException("Range scan", PROVIDER_NAME));
        }
        if (SparkCompat.isTimestampKeySpec(keyStateEncoderSpec)) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException(
                    "Timestamp key scan (" + keyStateEncoderSpec.getClass().getSimpleName() + ")", PROVIDER_NAME));
        }
        int numPrefixCols = keyStateEncoderSpec instanceof PrefixKeyScanStateEncoderSpec
                ? ((PrefixKeyScanStateEncoderSpec) keyStateEncoderSpec).numColsPrefixKey() : 0;
        core.init(stateStoreId, keySchema, valueSchema, numPrefixCols, storeConfs, hadoopConf);
    }

    @Override
    public StateStoreId stateStoreId() {
        return core.stateStoreId();
    }

    // ---- stores -------------------------------------------------------------------------

    @Override
    public StateStore getStore(long version, Option<String> uniqueId, boolean forceSnapshotOnCommit,
                               boolean loadEmpty) {
        String id = core.checkGetStore(version, uniqueId);
        if (loadEmpty) {
            throw SparkErrors.sneaky(StateStoreErrors.unsupportedOperationException(
                    "getStore", "Internal Error: " + PROVIDER_NAME + " doesn't support loadEmpty"));
        }
        return core.remote().writeStore(version, id, forceSnapshotOnCommit);
    }

    /** Spark 4.0 and 4.1's getStore (Spark 4.2 added forceSnapshotOnCommit and loadEmpty). */
    public StateStore getStore(long version, Option<String> uniqueId) {
        return getStore(version, uniqueId, false, false);
    }

    /** Spark 4.0 and 4.1's upgradeReadStoreToWriteStore (no forceSnapshotOnCommit). */
    public StateStore upgradeReadStoreToWriteStore(ReadStateStore readStore, long version, Option<String> uniqueId) {
        return upgradeReadStoreToWriteStore(readStore, version, uniqueId, false);
    }

    /** The write store of the same version, as {@code getStore}; see {@link ReadStore#upgrade}. */
    @Override
    public StateStore upgradeReadStoreToWriteStore(ReadStateStore readStore, long version, Option<String> uniqueId,
                                                   boolean forceSnapshotOnCommit) {
        return ReadStore.upgrade(readStore, () -> getStore(version, uniqueId, forceSnapshotOnCommit, false));
    }

    /** A read store of {@code version} ({@link ProviderCore#checkGetReadStore}). */
    @Override
    public ReadStateStore getReadStore(long version, Option<String> uniqueId) {
        return core.remote().readStore(version, ProviderCore.checkGetReadStore(version, uniqueId));
    }

    // ---- fine-grained replay (Spark's state reader) ----------------------------------------

    /**
     * The store of {@code endVersion} rebuilt from the snapshot of {@code snapshotVersion} and
     * the changelogs after it; fails naming the version if it has no snapshot.
     */
    @Override
    public StateStore replayStateFromSnapshot(long snapshotVersion, long endVersion, boolean readOnly,
                                              Option<String> snapshotCkptId, Option<String> endCkptId) {
        String id = ProviderCore.checkRange(snapshotVersion, endVersion, endCkptId);
        return (StateStore) core.remote().replayStore(snapshotVersion, endVersion, id, false);
    }

    /** A read store of {@code endVersion} rebuilt from the snapshot of {@code snapshotVersion}. */
    @Override
    public ReadStateStore replayReadStateFromSnapshot(long snapshotVersion, long endVersion,
                                                      Option<String> snapshotCkptId, Option<String> endCkptId) {
        String id = ProviderCore.checkRange(snapshotVersion, endVersion, endCkptId);
        return core.remote().replayStore(snapshotVersion, endVersion, id, true);
    }

    /** Spark 4.0's replayStateFromSnapshot (4.1 added readOnly and the checkpoint ids). */
    public StateStore replayStateFromSnapshot(long snapshotVersion, long endVersion) {
        return replayStateFromSnapshot(snapshotVersion, endVersion, false, Option.empty(), Option.empty());
    }

    /** Spark 4.0's replayReadStateFromSnapshot. */
    public ReadStateStore replayReadStateFromSnapshot(long snapshotVersion, long endVersion) {
        return replayReadStateFromSnapshot(snapshotVersion, endVersion, Option.empty(), Option.empty());
    }

    /**
     * The records of the changelogs of versions {@code startVersion} to {@code endVersion}
     * (Spark's change feed); refused with the conf to change when the query wrote no
     * changelogs ({@code checkpoint.mode=snapshot}). Column families: only the default.
     */
    @Override
    public NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> getStateStoreChangeDataReader(
            long startVersion, long endVersion, Option<String> colFamilyName, Option<String> endCkptId) {
        if (colFamilyName != null && colFamilyName.isDefined()
                && !StateStore.DEFAULT_COL_FAMILY_NAME().equals(colFamilyName.get())) {
            throw SparkErrors.sneaky(StateStoreErrors.multipleColumnFamiliesNotSupported(PROVIDER_NAME));
        }
        String id = ProviderCore.checkRange(startVersion, endVersion, endCkptId);
        return new ChangeDataReader(core.remote(), startVersion, endVersion, id);
    }

    /** Spark 4.0's getStateStoreChangeDataReader (4.1 added the end checkpoint id). */
    public NextIterator<Tuple4<Enumeration.Value, UnsafeRow, UnsafeRow, Object>> getStateStoreChangeDataReader(
            long startVersion, long endVersion, Option<String> colFamilyName) {
        return getStateStoreChangeDataReader(startVersion, endVersion, colFamilyName, Option.empty());
    }

    // ---- maintenance --------------------------------------------------------------------

    @Override
    public void doMaintenance() {
        doSnapshotMaintenance();
        doCleanupMaintenance();
    }

    /** Snapshots the loaded version once {@code minDeltasForSnapshot} changelogs followed the last snapshot. */
    @Override
    public void doSnapshotMaintenance() {
        core.doSnapshotMaintenance();
    }

    /**
     * MAINTAINs the store on its worker and deletes the checkpoint files recovery no longer
     * needs (RemoteStore.cleanupMaintenance). MAINTAIN is here, not only in
     * {@link #doMaintenance}, because Spark 4.3's periodic maintenance calls the split
     * methods; doMaintenance runs only with unloadOnCommit.
     */
    @Override
    public void doCleanupMaintenance() {
        core.doCleanupMaintenance();
    }

    /** CLOSEs the store on its worker (deleting its local files) and the connection; idempotent. */
    @Override
    public void close() {
        core.close();
    }

    // ---- metrics ------------------------------------------------------------------------

    @Override
    public scala.collection.immutable.Seq<StateStoreCustomMetric> supportedCustomMetrics() {
        SessionExtensionCheck.onDriver(); // Spark asks for the list on the driver while it plans a batch
        return StoreMetrics.supported();
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
