package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/**
 * {@link Retention} in format v1 changelog mode, on listings built in memory. Prints
 * {@code ok <case>} per case and exits 1 on any failure.
 * <ul>
 * <li>{@code max-per-pass}: changelogs 1-100, manifests at 50 and 95, 10 versions to retain:
 * with {@code maxVersionsToDeletePerMaintenance} 5 each pass deletes the 5 oldest stale
 * versions, and passes end where one pass without the limit does (versions 1-50 gone);</li>
 * <li>{@code retained-changelog}: changelogs 1-20, a manifest at 16, 5 versions to retain
 * (keepFrom 16): cleanup keeps 16.changelog, so the change feed of versions 16-20 reads.</li>
 * </ul>
 *
 * <p>Usage: {@code java -cp <shim jar>:<test jar>:<pyspark jars>/* io.ttlstate.spark.checkpoint.RetentionCheck}
 */
public final class RetentionCheck {
    private static final Path DIR = new Path("/checkpoint/state/0/0");

    private RetentionCheck() {}

    public static void main(String[] args) throws Exception {
        int failed = 0;
        failed += report("max-per-pass", maxPerPass());
        failed += report("retained-changelog", retainedChangelog());
        System.exit(failed == 0 ? 0 : 1);
    }

    private static int report(String name, String error) {
        System.out.println((error == null ? "ok " : "FAILED ") + name + (error == null ? "" : ": " + error));
        return error == null ? 0 : 1;
    }

    private static String maxPerPass() {
        CheckpointFiles.Listing listing = listing(100, 50, 95);
        TreeSet<Long> unlimited = versions(Retention.of(listing, DIR, false, 10, 0, -1).deletable);
        TreeSet<Long> deleted = new TreeSet<>();
        for (int pass = 0; pass < 20; pass++) {
            List<StateFileName> files = Retention.of(listing, DIR, false, 10, 0, 5).deletable;
            TreeSet<Long> now = versions(files);
            if (now.isEmpty()) {
                break;
            }
            if (now.size() > 5 || !deleted.isEmpty() && now.first() <= deleted.last()) {
                return "pass " + pass + " deletes versions " + now;
            }
            deleted.addAll(now);
            listing = without(listing, files);
        }
        return deleted.equals(unlimited) ? null : "passes deleted " + deleted + ", one unlimited pass " + unlimited;
    }

    private static String retainedChangelog() throws Exception {
        CheckpointFiles.Listing listing = listing(20, 16);
        Retention r = Retention.of(listing, DIR, false, 5, 0, -1);
        for (StateFileName f : r.deletable) {
            if (f.version >= r.keepFrom) {
                return "deletes " + f.fileName() + " of a retained version (keepFrom " + r.keepFrom + ")";
            }
        }
        CheckpointFiles.Listing after = without(listing, r.deletable);
        NoChangelogException.check(after, 16, 20, "read the change feed of versions 16..20");
        return null;
    }

    /** Changelogs 1..{@code last} and manifests at {@code manifests}. */
    private static CheckpointFiles.Listing listing(int last, int... manifests) {
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        for (int v = 1; v <= last; v++) {
            l.add(StateFileName.parse(new FileStatus(10, false, 1, 1, 1000L * v, new Path(DIR, v + ".changelog"))));
        }
        for (int v : manifests) {
            l.add(StateFileName.parse(new FileStatus(10, false, 1, 1, 1000L * v + 500, new Path(DIR, v + ".manifest"))));
        }
        return l;
    }

    private static CheckpointFiles.Listing without(CheckpointFiles.Listing listing, List<StateFileName> files) {
        java.util.Set<String> gone = new java.util.HashSet<>();
        files.forEach(f -> gone.add(f.fileName()));
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        for (StateFileName f : listing.files) {
            if (!gone.contains(f.fileName())) {
                l.add(f);
            }
        }
        return l;
    }

    private static TreeSet<Long> versions(List<StateFileName> files) {
        TreeSet<Long> out = new TreeSet<>();
        for (StateFileName f : new ArrayList<>(files)) {
            out.add(f.version);
        }
        return out;
    }
}
