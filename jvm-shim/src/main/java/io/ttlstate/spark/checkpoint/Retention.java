package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;

/**
 * What a cleanup pass deletes, as a worker's PLAN chose it from a listing ({@link CheckpointPlans};
 * the rule is {@code ttlstate.retention}'s, docs/decisions/023-retention.md): the manifests and
 * changelogs no retained version needs, the manifests whose SSTs stay, and the age below which
 * an SST no retained manifest references, or a temp file, goes (a younger one may belong to a
 * snapshot still being written).
 */
final class Retention {
    final long keepFrom;
    final List<FileStatus> deletable;
    final List<StateFile> retainedManifests;
    /** Modification time of the oldest retained file ({@code Long.MIN_VALUE}: none); nothing younger is deleted. */
    final long oldestRetainedMtime;
    /**
     * False when this pass leaves stale versions for a later one ({@code maxVersionsToDelete})
     * or could not plan (a file missing): only then can a pass find more to delete without a
     * new file written in between.
     */
    final boolean complete;

    Retention(long keepFrom, List<FileStatus> deletable, List<StateFile> retainedManifests, long oldestRetainedMtime,
              boolean complete) {
        this.keepFrom = keepFrom;
        this.deletable = deletable;
        this.retainedManifests = retainedManifests;
        this.oldestRetainedMtime = oldestRetainedMtime;
        this.complete = complete;
    }

    /** The SSTs of {@code ssts} that no retained manifest references ({@code referenced}) and that are old enough. */
    List<FileStatus> deletableSsts(CheckpointFiles.SstListing ssts, Set<String> referenced) {
        Objects.requireNonNull(referenced);
        List<FileStatus> out = new ArrayList<>();
        ssts.ssts.forEach((name, st) -> {
            if (!referenced.contains(name) && olderThanRetained(st)) {
                out.add(st);
            }
        });
        return out;
    }

    /** The temp files of {@code temps} older than every retained file. */
    List<FileStatus> deletableTemps(List<FileStatus> temps) {
        List<FileStatus> out = new ArrayList<>();
        for (FileStatus st : temps) {
            if (olderThanRetained(st)) {
                out.add(st);
            }
        }
        return out;
    }

    private boolean olderThanRetained(FileStatus st) {
        return st.getModificationTime() < oldestRetainedMtime;
    }
}
