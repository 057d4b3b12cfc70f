package io.ttlstate.spark;

import io.ttlstate.spark.compat.ScalaColls;
import java.util.Collections;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.WeakHashMap;

import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.internal.SQLConf;
import scala.Function1;
import scala.runtime.AbstractFunction1;
import scala.runtime.BoxedUnit;

/**
 * ttlstate's Spark session extensions. Spark installs them by itself in every session created while
 * the shim jar is on the driver's classpath ({@code spark.jars}, {@code --jars}): the jar declares
 * this class a {@code SparkSessionExtensionsProvider} (META-INF/services), so a session set up
 * with only the provider class and the jar gets them too. {@code spark.sql.extensions}
 * naming this class as well ({@code ttlstate.configure} sets it too) installs them once, not
 * twice; a session without them is caught by {@link SessionExtensionCheck}. They are a streaming aggregation's and a
 * stream-stream join's read-ahead
 * ({@link StateReadAheadRule}, docs/decisions/068-aggregation-read-ahead.md), and one check rule,
 * which refuses a streaming query whose
 * ttlstate TTL runs on event time ({@code ...ttlstate.[operator.<id>.[store.<name>.]]timeCharacteristic=EventTime})
 * but which has no event-time watermark ({@code withWatermark}): its TTL clock would stay at 0
 * and nothing would ever expire. Spark runs check rules when it analyses a plan, so the query
 * fails before it starts, with {@code TTLSTATE_INVALID_CONF} naming the key, the value and
 * the reason. Only streaming plans with a stateful operator that run with the ttlstate
 * provider are checked.
 */
public final class TtlStateExtensions extends AbstractFunction1<SparkSessionExtensions, BoxedUnit>
        implements SparkSessionExtensionsProvider {
    private static final String PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass";
    /** Logical operators Spark runs with state when their input is a stream (and Join, stream-stream). */
    private static final Set<String> STATEFUL = Set.of("Aggregate", "Deduplicate", "DeduplicateWithinWatermark",
            "FlatMapGroupsWithState", "FlatMapGroupsInPandasWithState");

    /** The extension sets ours were injected into (the service loader and spark.sql.extensions may both name us). */
    private static final Set<SparkSessionExtensions> INSTALLED = Collections.synchronizedSet(
            Collections.newSetFromMap(new WeakHashMap<>()));

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        if (!INSTALLED.add(extensions)) {
            return BoxedUnit.UNIT;
        }
        extensions.injectCheckRule(fn(session -> fn(plan -> {
            check(plan);
            return BoxedUnit.UNIT;
        })));
        extensions.injectColumnar(fn(StateReadAheadRule::new));
        return BoxedUnit.UNIT;
    }

    /** Throws {@link InvalidConfException} if {@code plan} is a stateful stream with EventTime TTL and no watermark. */
    static void check(LogicalPlan plan) {
        if (!plan.isStreaming()) {
            return;
        }
        SQLConf conf = SQLConf.get();
        if (!TtlStateStoreProvider.class.getName().equals(conf.getConfString(PROVIDER_KEY, ""))) {
            return;
        }
        Map.Entry<String, String> eventTime = eventTimeSetting(
                ScalaColls.javaMap(conf.getAllConfs()));
        if (eventTime == null || plan.find(fn(p -> p instanceof EventTimeWatermark)).isDefined()) {
            return;
        }
        scala.Option<LogicalPlan> op = plan.find(fn(TtlStateExtensions::stateful));
        if (op.isDefined()) {
            throw new InvalidConfException(ErrorClasses.INVALID_CONF + ": Invalid value '" + eventTime.getValue()
                    + "' for " + eventTime.getKey() + ": TTL on event time needs the query's event-time"
                    + " watermark, and this streaming query has none (its stateful operator "
                    + op.get().nodeName() + " would keep a TTL clock of 0, so nothing would ever expire);"
                    + " add one with withWatermark(eventTimeColumn, delay), or use BatchTimestamp or ProcessingTime");
        }
    }

    /**
     * The first (by key) ttlstate setting of {@code confs} that puts TTL on event time, global or
     * an override of any operator or store ({@link ConfKeys#split}), or null.
     */
    static Map.Entry<String, String> eventTimeSetting(Map<String, String> confs) {
        for (Map.Entry<String, String> e : new TreeMap<>(confs).entrySet()) {
            ConfKeys.Scoped k = ConfKeys.split(e.getKey());
            if (k != null && ConfKeys.TIME_CHARACTERISTIC.equals(k.name)
                    && e.getValue().trim().equalsIgnoreCase(ConfKeys.EVENT_TIME)) {
                return e;
            }
        }
        return null;
    }

    private static boolean stateful(LogicalPlan p) {
        if (!p.isStreaming()) {
            return false;
        }
        if (p.nodeName().equals("Join")) { // stream-stream: both sides are buffered in state
            return p.children().forall(fn(LogicalPlan::isStreaming));
        }
        return STATEFUL.contains(p.nodeName());
    }

    /** A Scala function from a Java one. */
    private static <A, B> Function1<A, B> fn(java.util.function.Function<A, B> f) {
        return new AbstractFunction1<A, B>() {
            @Override
            public B apply(A a) {
                return f.apply(a);
            }
        };
    }
}
