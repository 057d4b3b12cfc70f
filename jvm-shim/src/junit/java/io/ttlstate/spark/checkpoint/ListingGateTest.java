package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

/**
 * {@link ListingGate} (docs/decisions/105-object-store-puts-and-listings.md) against {@link
 * Retention} on listings built in memory: a
 * store commits a changelog per version and a manifest every few versions, and a maintenance
 * pass runs after every commit. Whenever the gate skips the listing, a pass over the real
 * listing would have deleted nothing; and it skips most passes.
 */
class ListingGateTest {
    /** Runs {@code commits} commits with a pass after each; returns how many passes listed. */
    private static int run(int commits, int snapshotEvery, int retain, long minDelete, int maxDelete) {
        ListingGate gate = new ListingGate(Listings.DIR, false);
        CheckpointFiles.Listing files = new CheckpointFiles.Listing();
        int listed = 0;
        for (int v = 1; v <= commits; v++) {
            files.add(StateFileName.parse(Listings.status(v + ".changelog", 1000L * v)));
            gate.uploaded(Listings.status(v + ".changelog", 1000L * v));
            if (v % snapshotEvery == 0) {
                files.add(StateFileName.parse(Listings.status(v + ".manifest", 1000L * v + 500)));
                gate.uploaded(Listings.status(v + ".manifest", 1000L * v + 500));
            }
            Retention r = Retention.of(files, Listings.DIR, false, retain, minDelete, maxDelete);
            if (!gate.mustList(retain, minDelete, 0)) {
                assertTrue(r.deletable.isEmpty(), "skipped a pass that deletes " + Listings.versions(r.deletable)
                        + " after version " + v);
                continue;
            }
            listed++;
            files = Listings.without(files, r.deletable);
            gate.listed(Listings.without(files, List.of()), r.complete, 0); // a copy, as a listing is
        }
        return listed;
    }

    @Test
    void skipsOnlyPassesThatDeleteNothing() {
        for (int snapshotEvery : new int[] {1, 3, 10, 1000}) {
            for (int retain : new int[] {1, 2, 10, 100}) {
                for (long minDelete : new long[] {0, 1, 5, 30}) {
                    for (int maxDelete : new int[] {-1, 3}) {
                        run(400, snapshotEvery, retain, minDelete, maxDelete);
                    }
                }
            }
        }
    }

    @Test
    void listsOncePerRunWhileNothingCanBeStale() {
        // Spark's defaults (minBatchesToRetain 100), 12 batches: the first pass only
        assertEquals(1, run(12, 2, 100, 0, -1));
        // changelogs only: every version replays from the start, nothing is ever stale
        assertEquals(1, run(300, 1000, 10, 0, -1));
        // steady state with minVersionsToDelete 30: one listing per 30 versions or so
        int listed = run(400, 10, 10, 30, -1);
        assertTrue(listed <= 400 / 30 + 3, "listed " + listed + " times in 400 commits");
    }

    @Test
    void aFailedWriteOrAnIncompletePassMakesTheNextPassList() {
        ListingGate gate = new ListingGate(Listings.DIR, false);
        assertTrue(gate.mustList(100, 0, 0), "the first pass after a load lists");
        gate.listed(Listings.v1(5, 2), true, 0);
        assertFalse(gate.mustList(100, 0, 0));
        assertTrue(gate.mustList(100, 0, 1), "a write failed since: it may have left a temp file");
        gate.listed(Listings.v1(5, 2), false, 1);
        assertTrue(gate.mustList(100, 0, 1), "the last pass left stale versions");
        gate.listed(Listings.v1(5, 2), true, 1);
        assertFalse(gate.mustList(100, 0, 1));
        // with 2 versions retained, versions 1 and 2 (its changelog) are stale below manifest 2
        assertTrue(gate.mustList(2, 0, 1));
        List<StateFileName> stale = Retention.of(Listings.v1(5, 2), Listings.DIR, false, 2, 0, -1).deletable;
        assertEquals(Set.of(1L, 2L), Listings.versions(stale));
        gate.listed(Listings.without(Listings.v1(5, 2), stale), true, 1);
        assertFalse(gate.mustList(2, 0, 1));
        gate.uploaded(Listings.status("6.changelog", 6000));
        assertFalse(gate.mustList(2, 0, 1), "manifest 2 is still the base of version 5's plan");
        gate.uploaded(Listings.status("6.manifest", 6500));
        gate.uploaded(Listings.status("7.changelog", 7000));
        assertTrue(gate.mustList(2, 0, 1), "manifest 6 is now the base: 2 to 5 are stale");
    }
}
