/**
 * Spark's read and write stores and what serves them: the store as its worker holds it
 * ({@link io.ttlstate.spark.store.RemoteStore}, which {@link io.ttlstate.spark.store.StoreLoad}
 * opens and loads, {@link io.ttlstate.spark.store.StoreMaintenance} snapshots and maintains,
 * {@link io.ttlstate.spark.store.StoreUsers} tracks the users of), worker transactions with the
 * JVM's write buffer ({@link io.ttlstate.spark.store.RemoteTxn}; the reads the JVM answers
 * itself, {@link io.ttlstate.spark.store.JvmAnswers}, and its read-ahead,
 * {@link io.ttlstate.spark.store.TxnReadAhead}), iterators, key encoding, the TTL batch clock,
 * the cache warm-up and the read-aheads (a join's eviction, an operator's input).
 */
package io.ttlstate.spark.store;
