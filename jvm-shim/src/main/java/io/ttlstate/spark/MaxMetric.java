package io.ttlstate.spark;

import java.util.Arrays;

import org.apache.spark.SparkContext;
import org.apache.spark.sql.connector.metric.CustomMetric;
import org.apache.spark.sql.execution.metric.CustomMetrics;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import scala.Option;

/**
 * A custom state-store metric reported as the maximum over stores and tasks instead of Spark's
 * sum (for values that are the same setting everywhere, like the TTL in force).
 *
 * <p>Spark adds each store's value into the operator's {@link SQLMetric} with {@code +=} on the
 * task, and the driver merges the task copies with {@code merge}; {@link MaxSQLMetric} (Scala)
 * takes the max in both. Equality is identity and every store reports its own instance
 * ({@link #forStore()}), so {@code StateStoreMetrics.combine} (stream-stream join) does not sum
 * the stores of a task first. The SQL UI aggregates task values by metric type; the type names
 * {@link UiMax} (Spark's DSv2 custom-metric hook), so the UI shows the max too, or "N/A" where
 * the class cannot be loaded (e.g. a history server without the jar).
 */
public final class MaxMetric implements StateStoreCustomMetric, java.io.Serializable {
    private static final long serialVersionUID = 1L;
    /** The SQLMetric type: Spark's DSv2 custom-metric type naming {@link UiMax}. */
    private static final String TYPE = CustomMetrics.buildV2CustomMetricTypeName(new UiMax());

    private final String name;
    private final String desc;

    public MaxMetric(String name, String desc) {
        this.name = name;
        this.desc = desc;
    }

    @Override
    public String name() {
        return name;
    }

    @Override
    public String desc() {
        return desc;
    }

    @Override
    public StateStoreCustomMetric withNewDesc(String newDesc) {
        return new MaxMetric(name, newDesc);
    }

    /** A distinct instance for one store's metrics map. */
    public MaxMetric forStore() {
        return new MaxMetric(name, desc);
    }

    @Override
    public SQLMetric createSQLMetric(SparkContext sc) {
        SQLMetric metric = new MaxSQLMetric(TYPE);
        metric.register(sc, Option.apply(desc), false);
        return metric;
    }

    @Override
    public String toString() {
        return "MaxMetric(" + name + ")";
    }

    /** Renders the task values of a {@link MaxSQLMetric} in the SQL UI: their maximum. */
    public static final class UiMax implements CustomMetric {
        public UiMax() {}

        @Override
        public String name() {
            return "max";
        }

        @Override
        public String description() {
            return "maximum over tasks";
        }

        @Override
        public String aggregateTaskMetrics(long[] taskMetrics) {
            return Long.toString(Arrays.stream(taskMetrics).max().orElse(0L));
        }
    }
}
