/**
 * What differs between the Spark lines the one shim jar runs on (4.0 to 4.3;
 * docs/decisions/055-one-package-for-spark-4-0-to-4-3.md): the jar
 * is compiled against Spark 4.3's jars, and every call whose target an earlier line lacks or
 * declares differently goes through {@link io.ttlstate.spark.compat.SparkCompat}, which picks
 * the line's form once (method handles looked up at class initialisation). Features a line lacks
 * are refused with an error naming the Spark version ({@link io.ttlstate.spark.compat.SparkCompat#require}).
 */
package io.ttlstate.spark.compat;
