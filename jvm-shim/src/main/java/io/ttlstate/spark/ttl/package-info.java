/** The TTL rule of the JVM side (Python's twin is {@code ttlstate.ttl}). */
package io.ttlstate.spark.ttl;
