package io.ttlstate.spark.checkpoint;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Objects;
import java.util.Set;

import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.Path;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What cleanup keeps (docs/decisions/023-retention.md): the files of every version at or above
 * {@code keepFrom = latest - minVersionsToRetain + 1} (in format v2 of every id) and every
 * file their load plans need. In format v1 that is the newest manifest at or below
 * {@code keepFrom} (the base) and all files of later versions; older manifests and
 * changelogs at or below the base go. A manifest or changelog no plan needs goes when it is
 * older than {@code keepFrom}, and a manifest also when it is not newer than the oldest plan's
 * manifest; a changelog of a retained version stays, as Spark's change feed of that version
 * reads it. An SST goes when
 * no retained manifest references it and it is older than every retained file (a younger
 * one may belong to a snapshot still being written); temp files likewise by age. A plan
 * that cannot be made (a file missing) keeps everything.
 *
 * <p>Spark's own limits on one maintenance pass apply on top
 * (docs/decisions/057-cleanup-pass-limits.md, docs/decisions/094-state-rules-audit.md): of the stale
 * versions, a pass deletes the oldest {@code maxVersionsToDeletePerMaintenance} and keeps the
 * others (and the SSTs their manifests reference) for the next pass; a pass that would delete
 * fewer than {@code minVersionsToDelete} versions deletes nothing.
 */
final class Retention {
    private static final Logger LOG = LoggerFactory.getLogger(Retention.class);

    final long keepFrom;
    final Set<StateFileName> retained;
    final List<StateFileName> deletable;
    /** Modification time of the oldest retained file; nothing younger is deleted. */
    final long oldestRetainedMtime;
    /**
     * False when this pass leaves stale versions for a later one ({@code maxVersionsToDelete})
     * or could not plan (a file missing): only then can a pass find more to delete without a
     * new file written in between.
     */
    final boolean complete;

    private Retention(long keepFrom, Set<StateFileName> retained, List<StateFileName> deletable, long oldestRetainedMtime,
                      boolean complete) {
        this.keepFrom = keepFrom;
        this.retained = retained;
        this.deletable = deletable;
        this.oldestRetainedMtime = oldestRetainedMtime;
        this.complete = complete;
    }

    /**
     * @param minVersionsToDelete      delete nothing unless at least this many versions go
     * @param maxVersionsToDelete      delete at most this many (the oldest) versions; -1 or 0: no limit
     */
    static Retention of(CheckpointFiles.Listing listing, Path dir, boolean v2, int minVersionsToRetain,
                        long minVersionsToDelete, int maxVersionsToDelete) {
        long keepFrom = listing.latest() - Math.max(1, minVersionsToRetain) + 1;
        Set<StateFileName> retained = new LinkedHashSet<>();
        Set<String> heads = new LinkedHashSet<>();
        long oldestStart = Long.MAX_VALUE;
        for (StateFileName f : listing.files) {
            if ((f.id != null) == v2 && f.version >= keepFrom && heads.add(f.version + "_" + f.id)) {
                try {
                    LoadPlan plan = LoadPlan.of(listing, dir, f.version, f.id, v2);
                    retained.addAll(plan.files());
                    oldestStart = Math.min(oldestStart, plan.manifestVersion());
                } catch (MissingCheckpointFileException e) {
                    LOG.warn("Cleanup deletes nothing in {}: version {} cannot be loaded ({})",
                            dir, f.version, e.getMessage());
                    return new Retention(keepFrom, new LinkedHashSet<>(listing.files), List.of(), Long.MIN_VALUE, false);
                }
            }
        }
        List<StateFileName> deletable = new ArrayList<>();
        for (StateFileName f : listing.files) {
            if ((f.id != null) == v2 && !retained.contains(f)
                    && (f.version < keepFrom || f.isManifest() && f.version <= oldestStart)) {
                deletable.add(f);
            }
        }
        long versions = deletable.stream().mapToLong(f -> f.version).distinct().count();
        if (versions > 0 && versions < minVersionsToDelete) {
            LOG.debug("Cleanup deletes nothing in {}: {} stale versions, fewer than minVersionsToDelete {}",
                    dir, versions, minVersionsToDelete);
            return new Retention(keepFrom, new LinkedHashSet<>(listing.files), List.of(), Long.MIN_VALUE, true);
        }
        boolean complete = true;
        if (maxVersionsToDelete > 0 && versions > maxVersionsToDelete) {
            complete = false;
            // Lowering keepFrom instead kept every file in changelog mode: the plans of the
            // lower versions reach back to their snapshots, and nothing was ever stale again.
            long lastDeleted = deletable.stream().mapToLong(f -> f.version).distinct().sorted()
                    .skip(maxVersionsToDelete - 1).findFirst().getAsLong();
            List<StateFileName> now = new ArrayList<>();
            for (StateFileName f : deletable) {
                if (f.version <= lastDeleted) {
                    now.add(f);
                } else {
                    retained.add(f); // for the next pass: its SSTs stay with it
                }
            }
            deletable = now;
        }
        long oldest = retained.stream().mapToLong(f -> f.status.getModificationTime()).min().orElse(Long.MIN_VALUE);
        return new Retention(keepFrom, retained, deletable, oldest, complete);
    }

    List<StateFileName> retainedManifests() {
        List<StateFileName> out = new ArrayList<>();
        for (StateFileName f : retained) {
            if (f.isManifest()) {
                out.add(f);
            }
        }
        return out;
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
        return !retained.isEmpty() && st.getModificationTime() < oldestRetainedMtime;
    }
}
