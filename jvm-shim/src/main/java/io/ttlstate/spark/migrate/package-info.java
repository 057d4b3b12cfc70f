/**
 * The JVM half of {@code python -m ttlstate migrate}: the entries of a store as Spark's state
 * data source reads them from any provider's files, written out as ttlstate's stored keys and
 * the value rows' bytes (docs/decisions/107-migrate-between-providers.md).
 */
package io.ttlstate.spark.migrate;
