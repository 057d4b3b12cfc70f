package io.ttlstate.spark.checkpoint;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Collectors;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * Names and plans every line of {@code tests/vectors/layout_names.tsv} and
 * {@code layout_plans.tsv} with the JVM's {@link StateFileName} and {@link LoadPlan}, as
 * {@code ttlstate.layout} does in Python. Exits 1 listing any mismatch.
 *
 * <p>Usage: {@code java -cp <shim jar>:<test jar>:<pyspark jars>/* io.ttlstate.spark.checkpoint.LayoutCheck
 * layout_names.tsv layout_plans.tsv}
 */
public final class LayoutCheck {
    private static final Path DIR = new Path("/checkpoint/state/0/0");

    private LayoutCheck() {}

    public static void main(String[] args) throws IOException {
        if (args.length != 2 && args.length != 3) {
            System.err.println("usage: LayoutCheck <layout_names.tsv> <layout_plans.tsv> [layout_replays.tsv]");
            System.exit(2);
        }
        int passed = 0;
        List<String> failures = new ArrayList<>();
        for (String[] row : rows(args[0])) {
            String actual = named(row[0], row);
            if (actual == null) {
                passed++;
            } else {
                failures.add("name " + row[0] + ": " + actual);
            }
        }
        for (String[] row : rows(args[1])) {
            String actual = planned(row[1], row[2], Long.parseLong(row[3]), opt(row[4]));
            if (actual.equals(row[5])) {
                passed++;
            } else {
                failures.add("plan '" + row[0] + "': expected " + row[5] + ", got " + actual);
            }
        }
        for (String[] row : args.length > 2 ? rows(args[2]) : List.<String[]>of()) {
            String actual = replayed(row[1], row[2], row[3], Long.parseLong(row[4]), Long.parseLong(row[5]), opt(row[6]));
            if (actual.equals(row[7])) {
                passed++;
            } else {
                failures.add("replay '" + row[0] + "': expected " + row[7] + ", got " + actual);
            }
        }
        failures.forEach(System.out::println);
        System.out.println(passed + " passed, " + failures.size() + " failed");
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    private static List<String[]> rows(String path) throws IOException {
        List<String[]> out = new ArrayList<>();
        for (String line : Files.readAllLines(Paths.get(path), StandardCharsets.UTF_8)) {
            if (!line.isEmpty() && !line.startsWith("#")) {
                out.add(line.split("\t", -1));
            }
        }
        return out;
    }

    private static String opt(String s) {
        return "-".equals(s) ? null : s;
    }

    private static FileStatus status(String name, long mtime) {
        return new FileStatus(0, false, 1, 0, mtime, new Path(DIR, name));
    }

    /** Null if {@code name} parses and is built back as the row says, else what differs. */
    private static String named(String name, String[] row) {
        StateFileName f = StateFileName.parse(status(name, 0));
        if ("-".equals(row[1])) {
            return f == null ? null : "parsed as a state file";
        }
        if (f == null) {
            return "not parsed";
        }
        String got = f.version + " " + f.kind.suffix + " " + f.id + " " + f.baseId;
        String want = row[1] + " " + row[2] + " " + opt(row[3]) + " " + opt(row[4]);
        if (!got.equals(want)) {
            return "parsed as " + got + ", expected " + want;
        }
        String built = StateFileName.name(f.version, f.kind, f.id, f.baseId);
        return built.equals(name) ? null : "built back as " + built;
    }

    private static CheckpointFiles.Listing listing(String listing) {
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        if (!"-".equals(listing)) {
            for (String item : listing.split(" ")) {
                int at = item.indexOf('@');
                l.add(StateFileName.parse(status(item.substring(0, at), Long.parseLong(item.substring(at + 1)))));
            }
        }
        return l;
    }

    private static String replayed(String format, String listing, String kind, long from, long version, String id) {
        CheckpointFiles.Listing l = listing(listing);
        boolean v2 = "v2".equals(format);
        try {
            StateFileName manifest = null;
            List<StateFileName> logs;
            if ("snapshot".equals(kind)) {
                LoadPlan p = LoadPlan.fromSnapshot(l, DIR, from, version, id, v2);
                manifest = p.manifest;
                logs = p.changelogs;
            } else {
                logs = LoadPlan.changelogs(l, DIR, from, version, id, v2).files;
            }
            return (manifest == null ? "-" : manifest.fileName()) + "|"
                    + logs.stream().map(StateFileName::fileName).collect(Collectors.joining(","));
        } catch (MissingCheckpointFileException e) {
            return "MISSING " + e.path().getName();
        }
    }

    private static String planned(String format, String listing, long version, String id) {
        CheckpointFiles.Listing l = listing(listing);
        try {
            LoadPlan p = LoadPlan.of(l, DIR, version, id, "v2".equals(format));
            return (p.manifest == null ? "-" : p.manifest.fileName()) + "|"
                    + p.changelogs.stream().map(StateFileName::fileName).collect(Collectors.joining(","));
        } catch (MissingCheckpointFileException e) {
            return "MISSING " + e.path().getName();
        }
    }
}
