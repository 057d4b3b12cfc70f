package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Function;

import org.apache.hadoop.fs.FileStatus;
import org.junit.jupiter.api.Test;

/**
 * {@link ListingGate} (docs/decisions/105-object-store-puts-and-listings.md): it lists until a
 * complete pass, after a failed write and after an incomplete pass, and otherwise asks the
 * retention plan of what it knows (the last pass's files plus this store's uploads). The plan
 * here is a stand-in that deletes every changelog below the newest manifest; the retention rule
 * itself is the worker's, tested with the gate's runs in tests/test_plans.py.
 */
class ListingGateTest {
    /** Plans the gate's known listing as a stand-in rule; records what it was asked. */
    private static final class Planner implements Function<CheckpointFiles.Listing, Retention> {
        final List<Set<String>> asked = new ArrayList<>();
        boolean complete = true;

        @Override
        public Retention apply(CheckpointFiles.Listing l) {
            asked.add(Listings.names(l.files));
            long newestManifest = 0;
            for (FileStatus f : l.files) {
                String n = f.getPath().getName();
                if (n.endsWith(".manifest")) {
                    newestManifest = Math.max(newestManifest, Long.parseLong(n.substring(0, n.indexOf('.'))));
                }
            }
            List<FileStatus> deletable = new ArrayList<>();
            for (FileStatus f : l.files) {
                String n = f.getPath().getName();
                if (n.endsWith(".changelog") && Long.parseLong(n.substring(0, n.indexOf('.'))) <= newestManifest) {
                    deletable.add(f);
                }
            }
            return new Retention(1, deletable, List.of(), Long.MIN_VALUE, complete);
        }
    }

    @Test
    void aFailedWriteOrAnIncompletePassMakesTheNextPassList() {
        ListingGate gate = new ListingGate();
        Planner plan = new Planner();
        assertTrue(gate.mustList(plan, 0), "the first pass after a load lists");
        assertTrue(plan.asked.isEmpty(), "nothing known to plan yet");
        gate.listed(Listings.of(Listings.status("1.changelog", 1000)), true, 0);
        assertFalse(gate.mustList(plan, 0));
        assertTrue(gate.mustList(plan, 1), "a write failed since: it may have left a temp file");
        gate.listed(Listings.of(Listings.status("1.changelog", 1000)), false, 1);
        assertTrue(gate.mustList(plan, 1), "the last pass left stale versions");
        gate.listed(Listings.of(Listings.status("1.changelog", 1000)), true, 1);
        assertFalse(gate.mustList(plan, 1));
        plan.complete = false;
        assertTrue(gate.mustList(plan, 1), "the plan would leave stale versions");
    }

    @Test
    void itPlansWhatThePassLeftPlusTheStoresUploads() {
        ListingGate gate = new ListingGate();
        Planner plan = new Planner();
        gate.uploaded(Listings.status("1.changelog", 1000)); // before a complete pass: not kept
        gate.listed(Listings.of(Listings.status("1.changelog", 1000), Listings.status("2.changelog", 2000)), true, 0);
        gate.uploaded(Listings.status("3.changelog", 3000));
        assertFalse(gate.mustList(plan, 0));
        assertEquals(Set.of("1.changelog", "2.changelog", "3.changelog"), plan.asked.get(0));
        gate.uploaded(Listings.status("3.changelog", 3100)); // a re-run's upload replaces its own
        gate.uploaded(Listings.status("3.manifest", 3500));
        assertTrue(gate.mustList(plan, 0), "manifest 3 makes changelogs 1-3 stale");
        assertEquals(new TreeSet<>(Set.of("1.changelog", "2.changelog", "3.changelog", "3.manifest")),
                plan.asked.get(1));
        gate.listed(Listings.of(Listings.status("3.manifest", 3500)), true, 0);
        assertFalse(gate.mustList(plan, 0));
    }

    @Test
    void anUploadMadeWhileAPassListsIsKeptForTheNextPlan() {
        // CI21: a cleanup listed, commit 50 uploaded its changelog, the pass ended with a
        // listing without it; the gate then planned retention as if version 49 were the newest,
        // so 45.changelog, stale after commit 50, was never deleted
        ListingGate gate = new ListingGate();
        Planner plan = new Planner();
        gate.listed(Listings.of(Listings.status("1.changelog", 1000)), true, 0);
        gate.listing();
        gate.uploaded(Listings.status("2.manifest", 2000)); // after the pass's listing was taken
        gate.listed(Listings.of(Listings.status("1.changelog", 1000)), true, 0);
        assertTrue(gate.mustList(plan, 0), "manifest 2 makes changelog 1 stale");
        assertEquals(Set.of("1.changelog", "2.manifest"), plan.asked.get(0));

        gate.listing();
        gate.listingEnded(); // a pass that could not plan: later uploads are not kept for it
        gate.listed(Listings.of(Listings.status("2.manifest", 2000)), true, 0);
        gate.uploaded(Listings.status("3.changelog", 3000));
        assertFalse(gate.mustList(plan, 0));
        assertEquals(Set.of("2.manifest", "3.changelog"), plan.asked.get(1));
    }
}
