package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * {@link StateFileName} parses and builds every name of the layout's shared vectors
 * (tests/vectors/layout_names.tsv) as Python's {@code ttlstate.layout} does
 * (docs/decisions/052-checkpoint-layout-vectors.md).
 */
class StateFileNameTest {
    static Stream<String[]> names() {
        List<String[]> rows = Vectors.rows("layout_names.tsv");
        assertTrue(rows.size() >= 10, "layout_names.tsv has " + rows.size() + " vectors");
        return rows.stream();
    }

    /** Columns: name, version, kind, id, baseId ({@code -}: none; version {@code -}: no state file). */
    @ParameterizedTest(name = "{0}")
    @MethodSource("names")
    void parsesAndBuildsTheNameAsTheVectorSays(String name, String version, String kind, String id, String baseId) {
        StateFileName f = StateFileName.parse(Listings.status(name, 0));
        if ("-".equals(version)) {
            assertNull(f, name + " parsed as a state file");
            return;
        }
        assertNotNull(f, name + " not parsed");
        assertEquals(Long.parseLong(version), f.version);
        assertEquals(kind, f.kind.suffix);
        assertEquals(Vectors.opt(id), f.id);
        assertEquals(Vectors.opt(baseId), f.baseId);
        assertEquals(name, f.fileName());
        assertEquals(name, StateFileName.name(f.version, f.kind, f.id, f.baseId), "built back");
    }

    @Test
    void aV2ChangelogWithoutBaseIdIsBuiltOnTheEmptyVersion() {
        assertEquals("1_a_0.changelog", StateFileName.name(1, StateFileName.Kind.CHANGELOG, "a", null));
        assertEquals("4_a.manifest", StateFileName.name(4, StateFileName.Kind.MANIFEST, "a", "ignored"));
    }

    @Test
    void newerMeansTheLaterTimeThenTheGreaterName() {
        StateFileName early = StateFileName.parse(Listings.status("2_x_a.changelog", 5));
        StateFileName late = StateFileName.parse(Listings.status("2_b_a.changelog", 9));
        StateFileName tie = StateFileName.parse(Listings.status("2_y_a.changelog", 5));
        assertTrue(late.newerThan(early));
        assertFalse(early.newerThan(late));
        assertTrue(tie.newerThan(early));
        assertFalse(early.newerThan(tie));
        assertFalse(early.newerThan(early));
    }
}
