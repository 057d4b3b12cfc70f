package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.stream.Collectors;
import java.util.stream.LongStream;

import org.apache.hadoop.fs.FileStatus;
import org.junit.jupiter.api.Test;

/** {@link Retention} in format v1 changelog mode, on listings built in memory
 * (docs/decisions/023-retention.md, docs/decisions/057-cleanup-pass-limits.md,
 * docs/decisions/094-state-rules-audit.md). */
class RetentionTest {
    private static TreeSet<Long> range(long from, long to) {
        return LongStream.rangeClosed(from, to).boxed().collect(Collectors.toCollection(TreeSet::new));
    }

    /**
     * Changelogs 1-100, manifests at 50 and 95, 10 versions to retain: one pass without a limit
     * deletes versions 1-50; with {@code maxVersionsToDeletePerMaintenance} 5 each pass deletes
     * the 5 oldest stale versions, and the passes end where the unlimited one does. (Lowering
     * keepFrom instead made the lower versions' plans reach back to their snapshots, so nothing
     * was ever deleted: docs/decisions/094-state-rules-audit.md (f).)
     */
    @Test
    void deletesAtMostMaxVersionsAPassOldestFirst() {
        CheckpointFiles.Listing listing = Listings.v1(100, 50, 95);
        assertEquals(range(1, 50), Listings.versions(Retention.of(listing, Listings.DIR, false, 10, 0, -1).deletable));
        TreeSet<Long> deleted = new TreeSet<>();
        int passes = 0;
        for (List<StateFileName> files; !(files = Retention.of(listing, Listings.DIR, false, 10, 0, 5).deletable)
                .isEmpty(); passes++) {
            TreeSet<Long> now = Listings.versions(files);
            assertTrue(now.size() <= 5, "pass " + passes + " deletes versions " + now);
            assertTrue(deleted.isEmpty() || now.first() > deleted.last(), "pass " + passes + " deletes " + now);
            assertTrue(passes < 20, "passes do not end");
            deleted.addAll(now);
            listing = Listings.without(listing, files);
        }
        assertEquals(range(1, 50), deleted);
        assertEquals(10, passes);
        // a pass that leaves stale versions is not complete: the next one runs without a new file
        assertTrue(!Retention.of(Listings.v1(100, 50, 95), Listings.DIR, false, 10, 0, 5).complete);
        assertTrue(Retention.of(Listings.v1(100, 50, 95), Listings.DIR, false, 10, 0, -1).complete);
    }

    /**
     * Changelogs 1-20, a manifest at 16, 5 versions to retain (keepFrom 16): 16.changelog stays,
     * so the change feed of versions 16-20 still reads (it went when version 16 also had a
     * manifest: docs/decisions/094-state-rules-audit.md (g)).
     */
    @Test
    void keepsTheChangelogsOfRetainedVersions() {
        CheckpointFiles.Listing listing = Listings.v1(20, 16);
        Retention r = Retention.of(listing, Listings.DIR, false, 5, 0, -1);
        assertEquals(16, r.keepFrom);
        assertEquals(range(1, 15), Listings.versions(r.deletable));
        assertTrue(r.deletable.stream().allMatch(f -> !f.isManifest()), r.deletable::toString);
        CheckpointFiles.Listing after = Listings.without(listing, r.deletable);
        NoChangelogException.check(after, 16, 20, "read the change feed of versions 16..20");
        assertEquals(List.of("16.manifest"), Listings.names(r.retainedManifests()).stream().collect(Collectors.toList()));
    }

    @Test
    void deletesNothingBelowMinVersionsToDelete() {
        CheckpointFiles.Listing listing = Listings.v1(20, 16);
        assertEquals(List.of(), Retention.of(listing, Listings.DIR, false, 5, 16, -1).deletable);
        // nothing more turns stale until a new version is written
        assertTrue(Retention.of(listing, Listings.DIR, false, 5, 16, -1).complete);
        assertEquals(range(1, 15), Listings.versions(Retention.of(listing, Listings.DIR, false, 5, 15, -1).deletable));
    }

    @Test
    void deletesNothingWhenARetainedVersionCannotBeLoaded() {
        CheckpointFiles.Listing listing = Listings.without(Listings.v1(20),
                List.of(StateFileName.parse(Listings.status("18.changelog", 0))));
        Retention r = Retention.of(listing, Listings.DIR, false, 5, 0, -1);
        assertEquals(List.of(), r.deletable);
        assertEquals(listing.files.size(), r.retained.size());
        assertTrue(!r.complete); // planned again at the next maintenance
    }

    @Test
    void leavesTheOtherFormatsFilesAlone() {
        CheckpointFiles.Listing listing = Listings.v1(20, 16);
        listing.add(StateFileName.parse(Listings.status("1_a_0.changelog", 1)));
        Retention r = Retention.of(listing, Listings.DIR, false, 5, 0, -1);
        assertTrue(r.deletable.stream().allMatch(f -> f.id == null), r.deletable::toString);
        assertEquals(range(1, 15), Listings.versions(r.deletable));
    }

    /** An SST goes when no retained manifest references it and it is older than every retained file; temps by age. */
    @Test
    void deletesOnlyUnreferencedSstsAndTempsOlderThanEveryRetainedFile() {
        Retention r = Retention.of(Listings.v1(20, 16), Listings.DIR, false, 5, 0, -1);
        assertEquals(16_500, r.oldestRetainedMtime); // 16.manifest
        CheckpointFiles.SstListing ssts = new CheckpointFiles.SstListing();
        for (String name : List.of("old.sst", "referenced.sst")) {
            ssts.ssts.put(name, Listings.status(name, 100));
        }
        ssts.ssts.put("young.sst", Listings.status("young.sst", 16_500));
        List<String> gone = r.deletableSsts(ssts, Set.of("referenced.sst")).stream()
                .map(st -> st.getPath().getName()).collect(Collectors.toList());
        assertEquals(List.of("old.sst"), gone);
        FileStatus oldTemp = Listings.status(".x.tmp", 100);
        assertEquals(List.of(oldTemp), r.deletableTemps(List.of(oldTemp, Listings.status(".y.tmp", 17_000))));
    }
}
