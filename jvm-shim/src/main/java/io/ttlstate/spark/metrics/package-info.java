/** The provider's custom metrics and the counters of one store version. */
package io.ttlstate.spark.metrics;
