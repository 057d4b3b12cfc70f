/**
 * The JVM's in-memory view of a store's loaded version: a value cache in slabs and a Bloom
 * filter of its keys, under one budget per executor. No I/O: the {@code store} package fills it.
 */
package io.ttlstate.spark.cache;
