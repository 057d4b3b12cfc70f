package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * {@link LoadPlan} plans loads (tests/vectors/layout_plans.tsv), replays from a snapshot and
 * change-feed ranges (layout_replays.tsv) as Python's {@code ttlstate.layout} does
 * (docs/decisions/052-checkpoint-layout-vectors.md).
 * Outcomes are written as in the vectors: {@code <manifest or ->|<changelogs>} or {@code MISSING <name>}.
 */
class LoadPlanTest {
    static Stream<String[]> plans() {
        List<String[]> rows = Vectors.rows("layout_plans.tsv");
        assertTrue(rows.size() >= 15, "layout_plans.tsv has " + rows.size() + " vectors");
        return rows.stream();
    }

    static Stream<String[]> replays() {
        List<String[]> rows = Vectors.rows("layout_replays.tsv");
        assertTrue(rows.size() >= 10, "layout_replays.tsv has " + rows.size() + " vectors");
        return rows.stream();
    }

    private interface Planned {
        String get() throws MissingCheckpointFileException;
    }

    private static String outcome(Planned plan) {
        try {
            return plan.get();
        } catch (MissingCheckpointFileException e) {
            return "MISSING " + e.path().getName();
        }
    }

    private static String render(StateFileName manifest, List<StateFileName> changelogs) {
        return (manifest == null ? "-" : manifest.fileName()) + "|"
                + changelogs.stream().map(StateFileName::fileName).collect(Collectors.joining(","));
    }

    /** Columns: case, format, listing, version, id, expected. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("plans")
    void plansTheLoadAsTheVectorSays(String name, String format, String listing, String version, String id,
                                     String expected) {
        assertEquals(expected, outcome(() -> {
            LoadPlan p = LoadPlan.of(Listings.of(listing), Listings.DIR, Long.parseLong(version), Vectors.opt(id),
                    "v2".equals(format));
            return render(p.manifest, p.changelogs);
        }), name);
    }

    /** Columns: case, format, listing, kind (snapshot|changes), from, version, id, expected. */
    @ParameterizedTest(name = "{0}")
    @MethodSource("replays")
    void replaysAsTheVectorSays(String name, String format, String listing, String kind, String from,
                                String version, String id, String expected) {
        CheckpointFiles.Listing l = Listings.of(listing);
        boolean v2 = "v2".equals(format);
        long first = Long.parseLong(from);
        long last = Long.parseLong(version);
        assertEquals(expected, outcome(() -> {
            if ("snapshot".equals(kind)) {
                LoadPlan p = LoadPlan.fromSnapshot(l, Listings.DIR, first, last, Vectors.opt(id), v2);
                return render(p.manifest, p.changelogs);
            }
            return render(null, LoadPlan.changelogs(l, Listings.DIR, first, last, Vectors.opt(id), v2).files);
        }), name);
    }

    @Test
    void refusesAReplayFromASnapshotAfterTheVersionOrBeforeZero() {
        CheckpointFiles.Listing l = Listings.v1(3, 2);
        assertThrows(IllegalArgumentException.class, () -> LoadPlan.fromSnapshot(l, Listings.DIR, 4, 3, null, false));
        assertThrows(IllegalArgumentException.class, () -> LoadPlan.fromSnapshot(l, Listings.DIR, -1, 3, null, false));
    }

    @Test
    void aPlanListsItsManifestFirstThenItsChangelogs() throws MissingCheckpointFileException {
        LoadPlan p = LoadPlan.of(Listings.v1(5, 2, 4), Listings.DIR, 5, null, false);
        assertEquals(4, p.manifestVersion());
        assertEquals(List.of("4.manifest", "5.changelog"),
                p.files().stream().map(StateFileName::fileName).collect(Collectors.toList()));
        assertEquals(0, LoadPlan.of(Listings.v1(5), Listings.DIR, 0, null, false).manifestVersion());
    }
}
