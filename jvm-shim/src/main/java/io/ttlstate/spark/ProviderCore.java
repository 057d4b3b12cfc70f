package io.ttlstate.spark;

import io.ttlstate.spark.compat.LineApi;
import io.ttlstate.spark.store.RemoteStore;
import io.ttlstate.spark.store.SparkErrors;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.types.StructType;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.Option;

/**
 * What {@link TtlStateStoreProvider} does whatever Spark line's provider interface it
 * implements: the store's {@link RemoteStore} once initialised, the checks of versions and
 * checkpoint ids, maintenance and close. Each line's provider class fronts it with that
 * line's signatures and refusals.
 */
final class ProviderCore {
    /** Logs as the provider. */
    private static final Logger LOG = LoggerFactory.getLogger(TtlStateStoreProvider.class.getName());
    static final String PROVIDER_NAME = SparkErrors.PROVIDER_NAME;

    private volatile StateStoreId stateStoreId;
    /** Null until {@link #init}. */
    private volatile RemoteStore remote;

    /** Starts the store of {@code stateStoreId} ({@code numPrefixCols}: key columns a prefix scan matches). */
    void init(StateStoreId stateStoreId, StructType keySchema, StructType valueSchema, int numPrefixCols,
              StateStoreConf storeConfs, Configuration hadoopConf) {
        this.stateStoreId = stateStoreId;
        RemoteStore r = new RemoteStore(stateStoreId, keySchema, valueSchema, numPrefixCols, storeConfs, hadoopConf);
        this.remote = r;
        r.start();
        LOG.info("Initialised {} (key prefix columns: {})", this, numPrefixCols);
    }

    StateStoreId stateStoreId() {
        return stateStoreId;
    }

    /** The initialised store. */
    RemoteStore remote() {
        RemoteStore r = remote;
        if (r == null) {
            throw new IllegalStateException(PROVIDER_NAME + " was not initialised");
        }
        return r;
    }

    /** Fails with Spark's error unless {@code version} is a version (0 or more). */
    static void checkVersion(long version) {
        if (version < 0) {
            throw SparkErrors.sneaky(LineApi.unexpectedStateStoreVersion(version));
        }
    }

    /** Checks the arguments of a store to write; returns the checkpoint id to load (null: any). */
    String checkGetStore(long version, Option<String> uniqueId) {
        checkVersion(version);
        RemoteStore r = remote;
        if (uniqueId.isDefined() && (r == null || !r.checkpointIds())) {
            throw SparkErrors.sneaky(LineApi.checkpointIdsNotSupported(PROVIDER_NAME
                    + " runs with checkpointFormatVersion 1 but a state store checkpointID is passed in"));
        }
        return version == 0 || uniqueId.isEmpty() ? null : uniqueId.get();
    }

    /**
     * Checks a read store's version; returns the checkpoint id to load (null: any). An id is
     * taken whatever the conf's format version (a read store writes nothing): Spark's state
     * reader passes the commit log's ids of a format-v2 checkpoint without the query's
     * {@code checkpointFormatVersion}.
     */
    static String checkGetReadStore(long version, Option<String> uniqueId) {
        checkVersion(version);
        return version == 0 || uniqueId == null || uniqueId.isEmpty() ? null : uniqueId.get();
    }

    /**
     * Checks a replay's or a change feed's versions ({@code from} 1 or more, {@code to} not
     * below it); returns the checkpoint id to end at (null: any). An id is taken whatever the
     * conf's format version: Spark's state reader passes the commit log's ids without the
     * query's {@code checkpointFormatVersion}, and an id names a format-v2 file.
     */
    static String checkRange(long from, long to, Option<String> toId) {
        if (from < 1 || to < from) {
            throw SparkErrors.sneaky(LineApi.unexpectedStateStoreVersion(from < 1 ? from : to));
        }
        return toId == null || toId.isEmpty() ? null : toId.get();
    }

    /** Snapshots the loaded version once {@code minDeltasForSnapshot} changelogs followed the last snapshot. */
    void doSnapshotMaintenance() {
        RemoteStore r = remote;
        if (r != null) {
            r.snapshotMaintenance();
        }
    }

    /** MAINTAINs the store on its worker and deletes the checkpoint files recovery no longer needs. */
    void doCleanupMaintenance() {
        RemoteStore r = remote;
        if (r != null) {
            r.cleanupMaintenance();
        }
    }

    /** CLOSEs the store on its worker (deleting its local files) and the connection; idempotent. */
    void close() {
        RemoteStore r = remote;
        if (r != null) {
            r.close();
        } else {
            LOG.info("Closed {}", this);
        }
    }

    /** The committed version the worker's database holds, or -1. */
    long loadedVersion() {
        RemoteStore r = remote;
        return r == null ? -1 : r.loadedVersion();
    }

    @Override
    public String toString() {
        RemoteStore r = remote;
        return r == null ? PROVIDER_NAME + "[uninitialised]" : r.toString();
    }
}
