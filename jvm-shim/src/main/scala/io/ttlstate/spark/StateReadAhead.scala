package io.ttlstate.spark

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.internal.SQLConf

/**
 * A streaming aggregation's read-ahead (docs/DESIGN.md 68). Spark's `StateStoreRestoreExec`
 * reads the state of each key its input holds with one `get` each, and once the state
 * outgrows the JVM's cache nearly every one is a synchronous round trip to a worker. Its
 * input is already materialised (the partial aggregation's hash map), so taking a block of
 * rows ahead costs no latency: `StateReadAheadExec`, placed under the restore by
 * `StateReadAheadRule`, hands the rows on unchanged but first asks the partition's store, in
 * one MULTI_GET per block, for the keys the block holds (`io.ttlstate.spark.store.RestoreReadAhead`).
 *
 * Only the plan changes; what the restore reads is what it would have read. Spark's classes
 * are matched by node name and read by their accessors, so one jar serves Spark 4.0 to 4.3,
 * whose package for them differs.
 */
class StateReadAheadRule(session: SparkSession) extends ColumnarRule {
  override def preColumnarTransitions: Rule[SparkPlan] = StateReadAheadRule.Insert
}

object StateReadAheadRule {
  private val ProviderKey = "spark.sql.streaming.stateStore.providerClass"
  private val Provider = "io.ttlstate.spark.TtlStateStoreProvider"
  private val Restore = "StateStoreRestore"

  object Insert extends Rule[SparkPlan] {
    override def apply(plan: SparkPlan): SparkPlan = {
      if (SQLConf.get.getConfString(ProviderKey, "") != Provider) {
        plan
      } else {
        plan.transformUp {
          case p if p.nodeName == Restore && p.children.size == 1
              && !p.children.head.isInstanceOf[StateReadAheadExec] => insert(p)
        }
      }
    }
  }

  /** The restore with the read-ahead under it; unchanged if its accessors are not the known ones. */
  private def insert(restore: SparkPlan): SparkPlan = {
    def call(o: AnyRef, name: String): AnyRef = o.getClass.getMethod(name).invoke(o)
    Try {
      call(restore, "stateInfo") match {
        case Some(info: AnyRef) =>
          val keys = call(restore, "keyExpressions").asInstanceOf[Seq[Attribute]]
          val location = call(info, "checkpointLocation").asInstanceOf[String]
          val operatorId = call(info, "operatorId").asInstanceOf[java.lang.Long].longValue
          restore.withNewChildren(Seq(StateReadAheadExec(keys, location, operatorId, restore.children.head)))
        case _ => restore
      }
    }.getOrElse(restore) // a Spark whose restore node differs runs without the read-ahead
  }
}

/** Hands its child's rows on unchanged, reading their keys' state ahead a block at a time. */
case class StateReadAheadExec(keyExpressions: Seq[Attribute], checkpointLocation: String, operatorId: Long,
                              child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def doExecute(): RDD[InternalRow] = {
    val keys = keyExpressions
    val input = child.output
    val location = checkpointLocation
    val op = operatorId
    child.execute().mapPartitionsWithIndex({ (partition, rows) =>
      val keyOf = UnsafeProjection.create(keys, input)
      StateReadAhead.source.wrap(rows.asJava, keyOf, location, op, partition).asScala
    }, preservesPartitioning = true)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): StateReadAheadExec = copy(child = newChild)
}

/** What `StateReadAheadExec` runs on each partition (implemented on the Java side). */
trait StateReadAheadSource {
  def wrap(rows: java.util.Iterator[InternalRow], keyOf: UnsafeProjection, checkpointLocation: String,
           operatorId: Long, partition: Int): java.util.Iterator[InternalRow]
}

object StateReadAhead {
  /** The Java implementation, found by name: the Scala classes are compiled before the Java ones. */
  lazy val source: StateReadAheadSource = Class.forName("io.ttlstate.spark.store.RestoreReadAhead")
    .getDeclaredConstructor().newInstance().asInstanceOf[StateReadAheadSource]
}
