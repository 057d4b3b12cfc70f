/**
 * Spark's read and write stores and what serves them: the store as its worker holds it
 * ({@link io.ttlstate.spark.store.RemoteStore}), worker transactions with the JVM's write
 * buffer, iterators, key encoding, the TTL batch clock, the cache warm-up and the
 * read-aheads (a join's eviction, an operator's input).
 */
package io.ttlstate.spark.store;
