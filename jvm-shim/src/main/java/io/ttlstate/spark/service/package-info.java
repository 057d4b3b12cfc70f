/** The Python store service of this JVM and the connections to its workers. */
package io.ttlstate.spark.service;
