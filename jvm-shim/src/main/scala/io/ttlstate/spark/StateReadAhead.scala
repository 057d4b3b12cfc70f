package io.ttlstate.spark

import scala.jdk.CollectionConverters._
import scala.util.Try

import org.apache.spark.rdd.RDD
import org.apache.spark.sql.SparkSession
import org.apache.spark.sql.catalyst.InternalRow
import org.apache.spark.sql.catalyst.expressions.{Attribute, Expression, SortOrder, UnsafeProjection}
import org.apache.spark.sql.catalyst.plans.physical.Partitioning
import org.apache.spark.sql.catalyst.rules.Rule
import org.apache.spark.sql.execution.{ColumnarRule, SparkPlan, UnaryExecNode}
import org.apache.spark.sql.internal.SQLConf

/**
 * Reading the state of a stateful operator's input ahead
 * (docs/decisions/068-aggregation-read-ahead.md, docs/decisions/072-join-input-read-ahead.md). Spark's
 * `StateStoreRestoreExec` reads the state of each key its input holds with one `get` each, and
 * a stream-stream join reads, for each input row, the other side's count and values of its key
 * and its own side's count; once the state outgrows the JVM's cache nearly every one is a
 * synchronous round trip to a worker. The input is already at hand (the partial aggregation's
 * hash map, the shuffle's blocks), so taking a block of rows ahead costs no latency:
 * `StateReadAheadExec`, placed by `StateReadAheadRule` under the restore and under each of the
 * join's children, hands the rows on unchanged but first asks the partition's stores, in one
 * MULTI_GET per store and block, for what the block's keys will read
 * (`io.ttlstate.spark.store.ReadAheads`).
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
  private val Join = "StreamingSymmetricHashJoin"

  object Insert extends Rule[SparkPlan] {
    override def apply(plan: SparkPlan): SparkPlan = {
      if (SQLConf.get.getConfString(ProviderKey, "") != Provider) {
        plan
      } else {
        plan.transformUp {
          case p if p.nodeName == Restore && p.children.size == 1
              && !p.children.head.isInstanceOf[StateReadAheadExec] => insert(p)
          case p if p.nodeName == Join && p.children.size == 2
              && !p.children.exists(_.isInstanceOf[StateReadAheadExec]) => insertUnderJoin(p)
        }
      }
    }
  }

  private def call(o: AnyRef, name: String): AnyRef = o.getClass.getMethod(name).invoke(o)

  /** The operator's checkpoint location and id, if its state info is set. */
  private def stateOf(node: SparkPlan): Option[(String, Long)] = call(node, "stateInfo") match {
    case Some(info: AnyRef) => Some((call(info, "checkpointLocation").asInstanceOf[String],
      call(info, "operatorId").asInstanceOf[java.lang.Long].longValue))
    case _ => None
  }

  /** The restore with the read-ahead under it; unchanged if its accessors are not the known ones. */
  private def insert(restore: SparkPlan): SparkPlan = Try {
    stateOf(restore) match {
      case Some((location, operatorId)) =>
        val keys = call(restore, "keyExpressions").asInstanceOf[Seq[Expression]]
        restore.withNewChildren(Seq(
          StateReadAheadExec(keys, location, operatorId, StateReadAheadExec.Aggregation, restore.children.head)))
      case None => restore
    }
  }.getOrElse(restore) // a Spark whose restore node differs runs without the read-ahead

  /** The join with a read-ahead under each side; unchanged if its accessors are not the known ones. */
  private def insertUnderJoin(join: SparkPlan): SparkPlan = Try {
    stateOf(join) match {
      case Some((location, operatorId)) =>
        val leftKeys = call(join, "leftKeys").asInstanceOf[Seq[Expression]]
        val rightKeys = call(join, "rightKeys").asInstanceOf[Seq[Expression]]
        val Seq(left, right) = join.children
        join.withNewChildren(Seq(
          StateReadAheadExec(leftKeys, location, operatorId, StateReadAheadExec.JoinLeft, left),
          StateReadAheadExec(rightKeys, location, operatorId, StateReadAheadExec.JoinRight, right)))
      case None => join
    }
  }.getOrElse(join) // a Spark whose join node differs runs without the read-ahead
}

/**
 * Hands its child's rows on unchanged, reading their keys' state ahead a block at a time, for
 * the operator above it: `Aggregation` (a restore), `JoinLeft` or `JoinRight` (that side of a
 * stream-stream join).
 */
case class StateReadAheadExec(keyExpressions: Seq[Expression], checkpointLocation: String, operatorId: Long,
                              reader: String, child: SparkPlan) extends UnaryExecNode {
  override def output: Seq[Attribute] = child.output
  override def outputPartitioning: Partitioning = child.outputPartitioning
  override def outputOrdering: Seq[SortOrder] = child.outputOrdering

  override protected def doExecute(): RDD[InternalRow] = {
    val keys = keyExpressions
    val input = child.output
    val location = checkpointLocation
    val op = operatorId
    val forWhom = reader
    child.execute().mapPartitionsWithIndex({ (partition, rows) =>
      val keyOf = UnsafeProjection.create(keys, input)
      StateReadAhead.source.wrap(rows.asJava, keyOf, location, op, partition, forWhom).asScala
    }, preservesPartitioning = true)
  }

  override protected def withNewChildInternal(newChild: SparkPlan): StateReadAheadExec = copy(child = newChild)
}

object StateReadAheadExec {
  val Aggregation = "aggregation"
  /** A join's sides, named as Spark names its state stores' (`left-keyToNumValues`, ...). */
  val JoinLeft = "left"
  val JoinRight = "right"
}

/** What `StateReadAheadExec` runs on each partition (implemented on the Java side). */
trait StateReadAheadSource {
  /** `rows` unchanged, their state read ahead for `reader` (one of `StateReadAheadExec`'s names). */
  def wrap(rows: java.util.Iterator[InternalRow], keyOf: UnsafeProjection, checkpointLocation: String,
           operatorId: Long, partition: Int, reader: String): java.util.Iterator[InternalRow]
}

object StateReadAhead {
  /** The Java implementation, found by name: the Scala classes are compiled before the Java ones. */
  lazy val source: StateReadAheadSource = Class.forName("io.ttlstate.spark.store.ReadAheads")
    .getDeclaredConstructor().newInstance().asInstanceOf[StateReadAheadSource]
}
