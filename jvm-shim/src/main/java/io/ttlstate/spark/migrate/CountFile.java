package io.ttlstate.spark.migrate;

import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;

/** How many rows a task wrote, in a file of its own beside its output (read by the driver and by Python). */
final class CountFile {
    private CountFile() {
    }

    static void write(File f, long n) {
        try {
            Files.write(f.toPath(), Long.toString(n).getBytes(StandardCharsets.US_ASCII));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    static long read(File f) {
        try {
            return Long.parseLong(new String(Files.readAllBytes(f.toPath()), StandardCharsets.US_ASCII).trim());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
