package io.ttlstate.spark.store;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;

/**
 * Sorts each line of a file of key sets (keys in hex, space-separated; an empty key is {@code -})
 * with {@link BytewiseSort} and prints each sorted line the same way, for
 * {@code tests/test_bytewise_sort.py}, which compares them with Python's order of bytes.
 *
 * <p>Usage: {@code java -cp ttlstate-shim.jar:ttlstate-testfs.jar io.ttlstate.spark.store.SortCheck keys.txt}
 */
public final class SortCheck {
    private SortCheck() {}

    public static void main(String[] args) throws IOException {
        HexFormat hex = HexFormat.of();
        StringBuilder out = new StringBuilder();
        for (String line : Files.readAllLines(Paths.get(args[0]), StandardCharsets.US_ASCII)) {
            List<byte[]> keys = new ArrayList<>();
            for (String k : line.isEmpty() ? new String[0] : line.split(" ")) {
                keys.add(k.equals("-") ? new byte[0] : hex.parseHex(k));
            }
            byte[][] sorted = BytewiseSort.sorted(keys.toArray(new byte[0][]), keys.size());
            for (int i = 0; i < sorted.length; i++) {
                out.append(i == 0 ? "" : " ").append(sorted[i].length == 0 ? "-" : hex.formatHex(sorted[i]));
            }
            out.append('\n');
        }
        System.out.print(out);
    }
}
