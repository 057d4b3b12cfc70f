package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.List;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import io.ttlstate.spark.metrics.StoreMetrics;

/**
 * Format v1, on the local file system: attempt A commits versions 1-3 of a store; attempt B at
 * version 3 (a speculative copy, or a zombie task of a retried stage) fails, before its
 * changelog upload ends or after it, and discards what it wrote as a failed commit does.
 * Version 3 must still load: a failed commit deleted the v1 changelog path it had started
 * writing, which is every attempt's (docs/decisions/094-state-rules-audit.md (d)).
 */
class StoreCheckpointAttemptsTest {
    @TempDir
    java.nio.file.Path dir;

    @ParameterizedTest(name = "upload fails: {0}")
    @ValueSource(booleans = {true, false})
    void aFailedAttemptLeavesTheFilesOfItsVersion(boolean uploadFails) throws IOException {
        StateStoreId id = new StateStoreId(dir.resolve("ck").toString(), 0, 0, "default");
        StoreCheckpoint a = StoreCheckpoint.of(id, new Configuration(), false);
        a.useCacheDir(dir.resolve("cache-a").toString(), 0);
        for (int v = 1; v <= 3; v++) {
            a.uploadChangelog(changelog("a" + v), v + ".changelog", v, false, new StoreMetrics(), new ArrayList<>());
        }
        StoreCheckpoint b = StoreCheckpoint.of(id, new Configuration(), false);
        b.useCacheDir(dir.resolve("cache-b").toString(), 0);
        List<Path> written = new ArrayList<>();
        if (uploadFails) {
            assertThrows(IOException.class, () -> b.uploadChangelog(dir.resolve("never-written.changelog"),
                    "3.changelog", 3, false, new StoreMetrics(), written), "attempt B's upload of a missing file");
        } else {
            b.uploadChangelog(changelog("b3"), "3.changelog", 3, false, new StoreMetrics(), written); // then its commit fails
        }
        b.discard(written);
        CheckpointFiles files = new CheckpointFiles(new Path(id.storeCheckpointLocation().toString()),
                new Configuration(), "attempts-test");
        // version 3 still loads: its plan needs the changelogs of versions 1 to 3
        assertEquals(java.util.Set.of("1.changelog", "2.changelog", "3.changelog"), Listings.names(files.list().files));
    }

    private java.nio.file.Path changelog(String name) throws IOException {
        return Files.write(dir.resolve(name + ".changelog"), name.getBytes(StandardCharsets.UTF_8));
    }
}
