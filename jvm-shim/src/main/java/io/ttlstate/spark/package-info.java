/**
 * The names ttlstate's JVM side shows outside its jar: the provider users configure and
 * checkpoints record ({@link io.ttlstate.spark.TtlStateStoreProvider}), the public exceptions
 * queries fail with and the error classes they carry, and {@link io.ttlstate.spark.MaxMetric}, whose UI class
 * name is the SQL metric type Spark's event logs record. The provider only wires the
 * subpackages: {@code store} (stores, transactions, the store on its worker), {@code cache}
 * (the JVM's value cache and key filter), {@code checkpoint} (checkpoint files), {@code service}
 * (the Python store service and worker connections), {@code metrics}, {@code ttl} (the TTL
 * rule) and {@code protocol} (the wire format).
 */
package io.ttlstate.spark;
