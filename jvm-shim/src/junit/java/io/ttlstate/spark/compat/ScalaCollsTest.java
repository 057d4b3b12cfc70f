package io.ttlstate.spark.compat;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.junit.jupiter.api.Test;

class ScalaCollsTest {
    @Test
    void aScalaMapReadsAsTheSameJavaMap() {
        scala.collection.immutable.Map<String, String> empty = scala.collection.immutable.Map$.MODULE$.empty();
        @SuppressWarnings("unchecked")
        scala.collection.immutable.Map<String, String> one = (scala.collection.immutable.Map<String, String>) empty.updated("a", "1");
        @SuppressWarnings("unchecked")
        scala.collection.immutable.Map<String, String> map = (scala.collection.immutable.Map<String, String>) one.updated("b", "2");
        assertEquals(Map.of("a", "1", "b", "2"), new TreeMap<>(ScalaColls.javaMap(map)));
    }

    @Test
    void aJavaListBecomesAScalaListInItsOrder() {
        scala.collection.immutable.List<Integer> list = ScalaColls.scalaList(List.of(3, 1, 2));
        assertEquals(3, list.size());
        assertEquals(List.of(3, 1, 2), List.of(list.apply(0), list.apply(1), list.apply(2)));
    }

    @Test
    void aJavaIteratorIsIteratedOnceThroughItsScalaView() {
        scala.collection.Iterator<String> it = ScalaColls.scalaIterator(List.of("x", "y").iterator());
        List<String> seen = new ArrayList<>();
        while (it.hasNext()) {
            seen.add(it.next());
        }
        assertEquals(List.of("x", "y"), seen);
        assertFalse(it.hasNext());
    }
}
