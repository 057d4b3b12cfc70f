package io.ttlstate.junit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;

/**
 * The vectors shared with the Python tests (tests/vectors), found through the system property
 * {@code ttlstate.vectors} that the {@code javaTest} task sets (else relative to the working directory).
 */
public final class Vectors {
    private Vectors() {}

    public static Path file(String name) {
        return Paths.get(System.getProperty("ttlstate.vectors", "tests/vectors"), name);
    }

    /** The tab-separated columns of each line, skipping empty lines and {@code #} comments. */
    public static List<String[]> rows(String name) {
        try {
            List<String[]> out = new ArrayList<>();
            for (String line : Files.readAllLines(file(name), StandardCharsets.UTF_8)) {
                if (!line.isEmpty() && !line.startsWith("#")) {
                    out.add(line.split("\t", -1));
                }
            }
            return out;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * {@link #rows(String)} of a file that must hold at least {@code atLeast} vectors of
     * {@code columns} columns each (a JUnit failure otherwise).
     */
    public static List<String[]> rows(String name, int atLeast, int columns) {
        List<String[]> rows = rows(name);
        org.junit.jupiter.api.Assertions.assertTrue(rows.size() >= atLeast, name + " has " + rows.size() + " vectors");
        for (String[] r : rows) {
            org.junit.jupiter.api.Assertions.assertEquals(columns, r.length, "malformed vector line: " + String.join("\t", r));
        }
        return rows;
    }

    /** {@code "-"} means none. */
    public static String opt(String s) {
        return "-".equals(s) ? null : s;
    }
}
