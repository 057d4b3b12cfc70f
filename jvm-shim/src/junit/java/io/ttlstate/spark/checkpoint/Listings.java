package io.ttlstate.spark.checkpoint;

import java.util.List;
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

    static CheckpointFiles.Listing of(FileStatus... files) {
        CheckpointFiles.Listing l = new CheckpointFiles.Listing();
        l.files.addAll(List.of(files));
        return l;
    }

    static TreeSet<String> names(Iterable<FileStatus> files) {
        TreeSet<String> out = new TreeSet<>();
        files.forEach(f -> out.add(f.getPath().getName()));
        return out;
    }
}
