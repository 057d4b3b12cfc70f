package io.ttlstate.spark.checkpoint;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.stream.Stream;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

import io.ttlstate.junit.Vectors;

/**
 * {@link StateFileName} builds every name of the layout's shared vectors
 * (tests/vectors/layout_names.tsv) from its fields as Python's {@code ttlstate.layout} does
 * (docs/decisions/052-checkpoint-layout-vectors.md); reading names is the worker's.
 */
class StateFileNameTest {
    static Stream<String[]> names() {
        List<String[]> rows = Vectors.rows("layout_names.tsv");
        assertTrue(rows.size() >= 10, "layout_names.tsv has " + rows.size() + " vectors");
        return rows.stream().filter(r -> !"-".equals(r[1]));
    }

    /** Columns: name, version, kind, id, baseId ({@code -}: none; version {@code -}: no state file). */
    @ParameterizedTest(name = "{0}")
    @MethodSource("names")
    void buildsTheNameTheVectorSays(String name, String version, String kind, String id, String baseId) {
        StateFileName.Kind k = "manifest".equals(kind) ? StateFileName.Kind.MANIFEST : StateFileName.Kind.CHANGELOG;
        assertEquals(kind, k.suffix);
        assertEquals(name, StateFileName.name(Long.parseLong(version), k, Vectors.opt(id), Vectors.opt(baseId)));
    }

    @Test
    void aV2ChangelogWithoutBaseIdIsBuiltOnTheEmptyVersion() {
        assertEquals("1_a_0.changelog", StateFileName.name(1, StateFileName.Kind.CHANGELOG, "a", null));
        assertEquals("4_a.manifest", StateFileName.name(4, StateFileName.Kind.MANIFEST, "a", "ignored"));
    }
}
