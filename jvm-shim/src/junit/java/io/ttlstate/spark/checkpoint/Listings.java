package io.ttlstate.spark.checkpoint;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;

/** Listings of a store's checkpoint directory built in memory, for the checkpoint tests. */
final class Listings {
    static final Path DIR = new Path("/checkpoint/state/0/0");

    private Listings() {}

    static FileStatus status(String name, long mtime) {
        return new FileStatus(10, false, 1, 1, mtime, new Path(DIR, name));
    }

    /** A listing of the vectors' form: {@code name@mtime} items separated by spaces, or {@code -}. */
    static CheckpointFiles.Listing of(String items) {
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        if (!"-".equals(items)) {
            for (String item : items.split(" ")) {
                int at = item.indexOf('@');
                l.add(StateFileName.parse(status(item.substring(0, at), Long.parseLong(item.substring(at + 1)))));
            }
        }
        return l;
    }

    /** Format v1: changelogs 1..{@code last} (mtime 1000 v) and manifests at {@code manifests} (1000 v + 500). */
    static CheckpointFiles.Listing v1(int last, int... manifests) {
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        for (int v = 1; v <= last; v++) {
            l.add(StateFileName.parse(status(v + ".changelog", 1000L * v)));
        }
        for (int v : manifests) {
            l.add(StateFileName.parse(status(v + ".manifest", 1000L * v + 500)));
        }
        return l;
    }

    static CheckpointFiles.Listing without(CheckpointFiles.Listing listing, List<StateFileName> files) {
        Set<String> gone = new HashSet<>();
        files.forEach(f -> gone.add(f.fileName()));
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        for (StateFileName f : listing.files) {
            if (!gone.contains(f.fileName())) {
                l.add(f);
            }
        }
        return l;
    }

    static TreeSet<Long> versions(Iterable<StateFileName> files) {
        TreeSet<Long> out = new TreeSet<>();
        files.forEach(f -> out.add(f.version));
        return out;
    }

    static TreeSet<String> names(Iterable<StateFileName> files) {
        TreeSet<String> out = new TreeSet<>();
        files.forEach(f -> out.add(f.fileName()));
        return out;
    }
}
