package io.ttlstate.spark.compat;

/**
 * Java and Scala collections converted through {@code scala.collection.JavaConverters}, which both
 * Scala lines Spark is built with have (2.13, Spark 4.x; 2.12, Spark 3.5, which lacks
 * {@code scala.jdk.javaapi.CollectionConverters}): the one place the shim's Java code converts
 * (docs/decisions/108-spark-35-plan.md). Each call wraps, nothing is copied but the list.
 */
public final class ScalaColls {
    private ScalaColls() {}

    /** A Java view of a Scala map. */
    public static <K, V> java.util.Map<K, V> javaMap(scala.collection.Map<K, V> map) {
        return scala.collection.JavaConverters.mapAsJavaMapConverter(map).asJava();
    }

    /** An immutable Scala list of a Java list's elements (a Scala {@code Seq}). */
    public static <T> scala.collection.immutable.List<T> scalaList(java.util.List<T> list) {
        return scala.collection.JavaConverters.asScalaBufferConverter(list).asScala().toList();
    }

    /** A Scala view of a Java iterator. */
    public static <T> scala.collection.Iterator<T> scalaIterator(java.util.Iterator<T> iterator) {
        return scala.collection.JavaConverters.asScalaIteratorConverter(iterator).asScala();
    }
}
