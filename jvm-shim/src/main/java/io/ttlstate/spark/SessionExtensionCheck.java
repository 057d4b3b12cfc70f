package io.ttlstate.spark;

import io.ttlstate.spark.compat.ScalaColls;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.internal.SQLConf;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Catches, on the driver while Spark plans a stateful batch, a session that runs the ttlstate
 * provider without ttlstate's session extensions ({@link TtlStateExtensions}): a session
 * created before the shim jar was on the driver's classpath (for instance a jar added with
 * {@code ADD JAR}). Without them TTL on event time would never expire anything for a query
 * with no watermark, so such a session is refused when any ttlstate setting puts TTL on event
 * time; otherwise the state read-ahead is off, and one warning (the first time, per driver JVM)
 * names the conf that turns it on.
 */
final class SessionExtensionCheck {
    private static final Logger LOG = LoggerFactory.getLogger(SessionExtensionCheck.class);
    private static final AtomicBoolean WARNED = new AtomicBoolean();

    private SessionExtensionCheck() {}

    /** Checks the active session, if this is the driver planning a query (no task running). */
    static void onDriver() {
        if (TaskContext.get() != null) {
            return;
        }
        Object session = activeSession();
        if (session == null) {
            return;
        }
        Object rules = call(call(session, "sessionState"), "columnarRules");
        if (rules == null || rules.toString().contains(StateReadAheadRule.class.getName())) {
            return; // installed, or a Spark whose session we cannot read
        }
        String problem = missing(ScalaColls.javaMap(SQLConf.get().getAllConfs()));
        if (problem.startsWith(ErrorClasses.INVALID_CONF)) {
            throw new InvalidConfException(problem);
        }
        if (WARNED.compareAndSet(false, true)) {
            LOG.warn(problem);
        }
    }

    /**
     * What a session without the extensions gets, for its confs: an error message (starting
     * with {@code TTLSTATE_INVALID_CONF}) if a setting puts TTL on event time, else the warning.
     */
    static String missing(Map<String, String> confs) {
        String fix = "spark.sql.extensions=" + TtlStateExtensions.class.getName()
                + " (or have the shim jar on the driver's classpath, spark.jars or --jars, before the session starts)";
        Map.Entry<String, String> eventTime = TtlStateExtensions.eventTimeSetting(confs);
        if (eventTime != null) {
            return ErrorClasses.INVALID_CONF + ": Invalid value '" + eventTime.getValue() + "' for "
                    + eventTime.getKey() + ": TTL on event time needs ttlstate's session extensions, which"
                    + " check that the query has an event-time watermark, and this session has none; set " + fix;
        }
        return "ttlstate's session extensions are not installed in this session, so the state read-ahead"
                + " of aggregations and stream-stream joins is off (large joins run slower); set " + fix;
    }

    private static Object activeSession() {
        try {
            Object option = Class.forName("org.apache.spark.sql.SparkSession").getMethod("getActiveSession").invoke(null);
            return option instanceof scala.Option && ((scala.Option<?>) option).isDefined()
                    ? ((scala.Option<?>) option).get() : null;
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }

    private static Object call(Object target, String method) {
        if (target == null) {
            return null;
        }
        try {
            return target.getClass().getMethod(method).invoke(target);
        } catch (ReflectiveOperationException | LinkageError e) {
            return null;
        }
    }
}
