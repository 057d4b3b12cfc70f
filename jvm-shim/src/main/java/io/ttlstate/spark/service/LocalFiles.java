package io.ttlstate.spark.service;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** Best-effort deletion of local files and directories (temp files, caches, service dirs). */
public final class LocalFiles {
    private static final Logger LOG = LoggerFactory.getLogger(LocalFiles.class);

    private LocalFiles() {}

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
