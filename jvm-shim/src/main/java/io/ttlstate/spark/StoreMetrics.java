package io.ttlstate.spark;

import java.util.List;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSizeMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSumMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomTimingMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreInstanceMetric;

/**
 * The provider's custom metrics (declared statically, so {@code supportedCustomMetrics} works on
 * an uninitialised provider) and the counters of one store version.
 */
@SuppressWarnings("unchecked")
final class StoreMetrics {
    static final StateStoreCustomMetric COMMIT_MS = new StateStoreCustomTimingMetric(
            "ttlstateCommitMs", "ttlstate: time to commit a version (flush, changelog, upload)");
    static final StateStoreCustomMetric LOAD_MS = new StateStoreCustomTimingMetric(
            "ttlstateLoadMs", "ttlstate: time to load a version from the checkpoint");
    static final StateStoreCustomMetric SNAPSHOT_MS = new StateStoreCustomTimingMetric(
            "ttlstateSnapshotMs", "ttlstate: time to write and upload a snapshot at commit");
    static final StateStoreCustomMetric UPLOADED_BYTES = new StateStoreCustomSizeMetric(
            "ttlstateUploadedBytes", "ttlstate: bytes uploaded to the checkpoint", false);
    static final StateStoreCustomMetric UPLOADED_FILES = new StateStoreCustomSumMetric(
            "ttlstateUploadedFiles", "ttlstate: files uploaded to the checkpoint");
    static final StateStoreCustomMetric DOWNLOADED_BYTES = new StateStoreCustomSizeMetric(
            "ttlstateDownloadedBytes", "ttlstate: bytes downloaded from the checkpoint", false);
    static final StateStoreCustomMetric ROUND_TRIPS = new StateStoreCustomSumMetric(
            "ttlstateRoundTrips", "ttlstate: synchronous requests to the store worker");

    static final List<StateStoreCustomMetric> ALL = List.of(
            COMMIT_MS, LOAD_MS, SNAPSHOT_MS, UPLOADED_BYTES, UPLOADED_FILES, DOWNLOADED_BYTES, ROUND_TRIPS);

    final AtomicLong commitMs = new AtomicLong();
    final AtomicLong loadMs = new AtomicLong();
    final AtomicLong snapshotMs = new AtomicLong();
    final AtomicLong uploadedBytes = new AtomicLong();
    final AtomicLong uploadedFiles = new AtomicLong();
    final AtomicLong downloadedBytes = new AtomicLong();
    final AtomicLong roundTrips = new AtomicLong();

    void roundTrip() {
        roundTrips.incrementAndGet();
    }

    void uploaded(long bytes) {
        uploadedBytes.addAndGet(bytes);
        uploadedFiles.incrementAndGet();
    }

    /** The counters as Spark's {@code customMetrics} map (boxed Longs). */
    scala.collection.immutable.Map<StateStoreCustomMetric, Object> toScala() {
        scala.collection.immutable.Map<StateStoreCustomMetric, Object> m = scala.collection.immutable.Map$.MODULE$.empty();
        m = m.updated(COMMIT_MS, (Object) commitMs.get());
        m = m.updated(LOAD_MS, (Object) loadMs.get());
        m = m.updated(SNAPSHOT_MS, (Object) snapshotMs.get());
        m = m.updated(UPLOADED_BYTES, (Object) uploadedBytes.get());
        m = m.updated(UPLOADED_FILES, (Object) uploadedFiles.get());
        m = m.updated(DOWNLOADED_BYTES, (Object) downloadedBytes.get());
        m = m.updated(ROUND_TRIPS, (Object) roundTrips.get());
        return m;
    }

    static scala.collection.immutable.Map<StateStoreInstanceMetric, Object> noInstanceMetrics() {
        return scala.collection.immutable.Map$.MODULE$.empty();
    }

    static scala.collection.immutable.Seq<StateStoreCustomMetric> supported() {
        return scala.jdk.javaapi.CollectionConverters.asScala(ALL).toList();
    }
}
