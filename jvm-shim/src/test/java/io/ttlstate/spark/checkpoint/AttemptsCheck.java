package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;

import io.ttlstate.spark.metrics.StoreMetrics;

/**
 * Format v1: attempt A commits versions 1-3 of a store; attempt B at version 3 (a speculative
 * copy, or a zombie task of a retried stage) fails, before its changelog upload ends or after
 * it, and discards what it wrote as a failed commit does. Version 3 must still load. Prints
 * {@code ok <case>} per case and exits 1 on any failure.
 *
 * <p>Usage: {@code java -cp <shim jar>:<test jar>:<pyspark jars>/* io.ttlstate.spark.checkpoint.AttemptsCheck <scratch dir>}
 */
public final class AttemptsCheck {
    private AttemptsCheck() {}

    public static void main(String[] args) throws Exception {
        java.nio.file.Path root = java.nio.file.Paths.get(args[0]);
        int failed = 0;
        for (String when : new String[] {"upload-fails", "fails-after-upload"}) {
            String error = run(root.resolve(when), when.equals("upload-fails"));
            System.out.println((error == null ? "ok " : "FAILED ") + when + (error == null ? "" : ": " + error));
            failed += error == null ? 0 : 1;
        }
        System.exit(failed == 0 ? 0 : 1);
    }

    /** The failure, or null. */
    private static String run(java.nio.file.Path dir, boolean uploadFails) throws IOException {
        Files.createDirectories(dir);
        StateStoreId id = new StateStoreId(dir.resolve("ck").toString(), 0, 0, "default");
        StoreCheckpoint a = StoreCheckpoint.of(id, new Configuration(), false);
        a.useCacheDir(dir.resolve("cache-a").toString(), 0);
        for (int v = 1; v <= 3; v++) {
            a.uploadChangelog(changelog(dir, "a" + v), v, null, null, new StoreMetrics(), new ArrayList<>());
        }
        StoreCheckpoint b = StoreCheckpoint.of(id, new Configuration(), false);
        b.useCacheDir(dir.resolve("cache-b").toString(), 0);
        List<Path> written = new ArrayList<>();
        try {
            java.nio.file.Path local = uploadFails ? dir.resolve("never-written.changelog") : changelog(dir, "b3");
            b.uploadChangelog(local, 3, null, null, new StoreMetrics(), written);
            if (!uploadFails) {
                throw new IOException("the commit failed after its upload");
            }
            return "attempt B's upload of a missing file did not fail";
        } catch (IOException e) {
            b.discard(written);
        }
        CheckpointFiles files = new CheckpointFiles(new Path(id.storeCheckpointLocation().toString()),
                new Configuration(), "attempts-check");
        try {
            LoadPlan.of(files.list(), files.dir(), 3, null, false);
            return null;
        } catch (MissingCheckpointFileException e) {
            return "version 3 no longer loads: " + e.getMessage();
        }
    }

    private static java.nio.file.Path changelog(java.nio.file.Path dir, String name) throws IOException {
        return Files.write(dir.resolve(name + ".changelog"), name.getBytes(StandardCharsets.UTF_8));
    }
}
