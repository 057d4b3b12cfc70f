package io.ttlstate.spark.service;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Local directories of stores: their names, and best-effort deletion (temp files, caches, service dirs). */
public final class LocalFiles {
    private static final Logger LOG = LoggerFactory.getLogger(LocalFiles.class);

    private LocalFiles() {}

    /**
     * {@code <operator>_<partition>_<store name>}, the name made safe for a file name: how a
     * store's local directories (its database, its file cache) begin.
     */
    public static String storeDirStem(StateStoreId id) {
        return id.operatorId() + "_" + id.partitionId() + "_" + id.storeName().replaceAll("[^A-Za-z0-9._-]", "_");
    }

    /** The size of file {@code path} in bytes, 0 if it cannot be read. */
    public static long sizeOrZero(Path path) {
        try {
            return Files.size(path);
        } catch (IOException e) {
            return 0;
        }
    }

    /** Deletes {@code path} (a file, or a directory with everything under it); failures are logged at DEBUG. */
    public static void deleteQuietly(Path path) {
        if (path == null || !Files.exists(path)) {
            return;
        }
        try (Stream<Path> walk = Files.walk(path)) {
            List<Path> all = new ArrayList<>();
            walk.sorted(Comparator.reverseOrder()).forEach(all::add);
            for (Path p : all) {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    LOG.debug("cannot delete {}", p, e);
                }
            }
        } catch (IOException | UncheckedIOException e) {
            LOG.debug("cannot delete {}", path, e);
        }
    }
}
