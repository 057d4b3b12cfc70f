package io.ttlstate.spark

import org.apache.spark.sql.execution.metric.SQLMetric
import org.apache.spark.util.AccumulatorV2

/**
 * An SQLMetric whose `add` (task side) and `merge` (driver side, one task's copy at a time)
 * keep the maximum instead of the sum; see MaxMetric. In Scala because javac cannot subclass
 * SQLMetric: its `long value()` clashes with AccumulatorV2's generic `OUT value()`.
 */
class MaxSQLMetric(metricType: String) extends SQLMetric(metricType, 0L) {
  override def add(v: Long): Unit = if (v > value) set(v)

  override def merge(other: AccumulatorV2[Long, Long]): Unit = other match {
    case o: SQLMetric => add(o.value)
    case _ => super.merge(other) // Spark's error for a foreign accumulator
  }

  override def copy(): MaxSQLMetric = {
    val c = new MaxSQLMetric(metricType)
    c.set(value)
    c
  }
}
