package io.ttlstate.spark.compat;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

import org.apache.spark.SparkConf;
import org.apache.spark.sql.execution.streaming.state.ReadStateStore;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreCustomSizeMetric;
import org.apache.spark.sql.execution.streaming.state.StateStoreMetrics;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;

/**
 * The version adapters: one static method per Spark API that changed between 4.0 and 4.3, each
 * saying which lines have which form. Everything else in the jar calls Spark directly (the
 * forms all four lines share); `buildsys/linkcheck.py` lists what a line's jars lack.
 */
public final class SparkCompat {
    private static final MethodHandles.Lookup LOOKUP = MethodHandles.publicLookup();

    /** The running Spark's version, e.g. {@code 4.2.1}. */
    public static final String SPARK_VERSION = org.apache.spark.package$.MODULE$.SPARK_VERSION();
    /** The running Spark's line as {@code major * 100 + minor}, e.g. 402 for 4.2.x. */
    public static final int LINE = line(SPARK_VERSION);

    /** {@code new StateStoreCustomSizeMetric(name, desc, isSnapshot)} (4.3) or {@code (name, desc)} (4.0-4.2). */
    private static final MethodHandle SIZE_METRIC_3 = constructor(StateStoreCustomSizeMetric.class,
            String.class, String.class, boolean.class);
    private static final MethodHandle SIZE_METRIC_2 = constructor(StateStoreCustomSizeMetric.class,
            String.class, String.class);
    /** The traits' initialisers: {@code ReadStateStore.$init$} from 4.2, {@code StateStore.$init$} from 4.1. */
    private static final MethodHandle READ_STORE_INIT = traitInit(ReadStateStore.class);
    private static final MethodHandle STORE_INIT = traitInit(StateStore.class);

    /** {@code new StateStoreMetrics(numKeys, memory, custom, instanceMetrics)} (4.1+) or {@code (numKeys, memory, custom)} (4.0). */
    private static final MethodHandle STORE_METRICS_4 = constructor(StateStoreMetrics.class,
            long.class, long.class, scala.collection.immutable.Map.class, scala.collection.immutable.Map.class);
    private static final MethodHandle STORE_METRICS_3 = constructor(StateStoreMetrics.class,
            long.class, long.class, scala.collection.immutable.Map.class);
    /** {@code Utils.getLocalDir(ReadOnlySparkConf)} (4.1+) or {@code (SparkConf)} (4.0). */
    private static final MethodHandle LOCAL_DIR = localDirHandle();
    /** {@code provider.getStore(version, uniqueId, forceSnapshotOnCommit, loadEmpty)} (4.2+) or {@code (version, uniqueId)} (4.0-4.1). */
    private static final MethodHandle GET_STORE_4 = virtual(StateStoreProvider.class, "getStore", StateStore.class,
            long.class, scala.Option.class, boolean.class, boolean.class);
    private static final MethodHandle GET_STORE_2 = virtual(StateStoreProvider.class, "getStore", StateStore.class,
            long.class, scala.Option.class);
    /**
     * The Hadoop conf key of a query run's id: {@code StreamExecution.RUN_ID_KEY} (its class moved
     * in 4.1); null on a Spark without it (3.5), where {@link #runId} reads the task's job group.
     */
    public static final String RUN_ID_KEY = runIdKey();

    private SparkCompat() {}

    /** The first of {@code names} this Spark has. */
    static Class<?> firstClass(String... names) {
        for (String n : names) {
            try {
                return Class.forName(n, false, SparkCompat.class.getClassLoader());
            } catch (ClassNotFoundException e) {
                // the next
            }
        }
        throw new NoClassDefFoundError("ttlstate: Spark " + SPARK_VERSION + " has none of " + String.join(", ", names));
    }

    private static MethodHandle localDirHandle() {
        Class<?> utils = firstClass("org.apache.spark.util.Utils");
        for (java.lang.reflect.Method m : utils.getMethods()) {
            if (m.getName().equals("getLocalDir") && m.getParameterCount() == 1
                    && m.getParameterTypes()[0].isAssignableFrom(SparkConf.class)
                    && java.lang.reflect.Modifier.isStatic(m.getModifiers())) {
                try {
                    return LOOKUP.unreflect(m);
                } catch (IllegalAccessException e) {
                    return null;
                }
            }
        }
        return null;
    }

    private static String runIdKey() {
        Class<?> c = firstClass("org.apache.spark.sql.execution.streaming.runtime.StreamExecution",
                "org.apache.spark.sql.execution.streaming.StreamExecution");
        try {
            return (String) c.getMethod("RUN_ID_KEY").invoke(null);
        } catch (NoSuchMethodException e) {
            return null; // Spark 3.5: the run id travels as the job group only
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("ttlstate: Spark " + SPARK_VERSION + " has no readable StreamExecution.RUN_ID_KEY", e);
        }
    }

    /**
     * The id of the query run a task's {@code hadoopConf} belongs to: its {@link #RUN_ID_KEY}; on a
     * Spark without that key, the task's job group, which StreamExecution sets to the run id; ""
     * when neither is known.
     */
    public static String runId(org.apache.hadoop.conf.Configuration hadoopConf) {
        if (RUN_ID_KEY != null) {
            return hadoopConf.get(RUN_ID_KEY, "");
        }
        org.apache.spark.TaskContext task = org.apache.spark.TaskContext.get();
        String group = task == null ? null : task.getLocalProperty("spark.jobGroup.id");
        return group == null ? "" : group;
    }

    static int line(String version) {
        String[] parts = version.split("[.-]");
        try {
            return Integer.parseInt(parts[0]) * 100 + Integer.parseInt(parts[1]);
        } catch (RuntimeException e) {
            return 0;
        }
    }

    /** True on Spark {@code major.minor} or later. */
    public static boolean atLeast(int major, int minor) {
        return LINE >= major * 100 + minor;
    }

    /** Refuses {@code feature} unless Spark is {@code major.minor} or later, naming both versions. */
    public static void require(String feature, int major, int minor) {
        if (!atLeast(major, minor)) {
            throw new UnsupportedOperationException("ttlstate: " + feature + " needs Spark " + major + "." + minor
                    + " or later; this is Spark " + SPARK_VERSION);
        }
    }

    private static MethodHandle constructor(Class<?> c, Class<?>... args) {
        try {
            return LOOKUP.findConstructor(c, MethodType.methodType(void.class, args));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    private static MethodHandle virtual(Class<?> c, String name, Class<?> returns, Class<?>... args) {
        try {
            return LOOKUP.findVirtual(c, name, MethodType.methodType(returns, args));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    private static MethodHandle traitInit(Class<?> trait) {
        try {
            return LOOKUP.findStatic(trait, "$init$", MethodType.methodType(void.class, trait));
        } catch (NoSuchMethodException | IllegalAccessException e) {
            return null;
        }
    }

    /**
     * What a method handle threw, to be thrown by the caller: unchecked as it is, an Error
     * thrown here, anything else (a checked exception Scala threw undeclared) wrapped.
     */
    static RuntimeException rethrow(Throwable t) {
        if (t instanceof RuntimeException) {
            return (RuntimeException) t;
        }
        if (t instanceof Error) {
            throw (Error) t;
        }
        return new IllegalStateException(t);
    }

    /** Spark's metrics of a store version, without instance metrics. */
    public static StateStoreMetrics storeMetrics(long numKeys, long memoryBytes,
            scala.collection.immutable.Map<StateStoreCustomMetric, Object> custom) {
        try {
            return STORE_METRICS_4 != null
                    ? (StateStoreMetrics) STORE_METRICS_4.invoke(numKeys, memoryBytes, custom,
                            scala.collection.immutable.Map$.MODULE$.empty())
                    : (StateStoreMetrics) STORE_METRICS_3.invoke(numKeys, memoryBytes, custom);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /**
     * A provider's store of {@code version} to write, with no checkpoint id; a snapshot at its
     * commit where this Spark can ask for one (4.2+: {@code forceSnapshotOnCommit}).
     */
    public static StateStore writableStore(StateStoreProvider provider, long version) {
        try {
            return GET_STORE_4 != null
                    ? (StateStore) GET_STORE_4.invoke(provider, version, scala.Option.empty(), true, false)
                    : (StateStore) GET_STORE_2.invoke(provider, version, scala.Option.empty());
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** One of Spark's local directories ({@code Utils.getLocalDir}), or null if this Spark has no such call. */
    public static String localDir(SparkConf conf) {
        if (LOCAL_DIR == null) {
            return null;
        }
        try {
            return (String) LOCAL_DIR.invoke(conf);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** A size metric (Spark shows bytes), not a snapshot metric. */
    public static StateStoreCustomMetric sizeMetric(String name, String desc) {
        try {
            return SIZE_METRIC_3 != null ? (StateStoreCustomMetric) SIZE_METRIC_3.invoke(name, desc, false)
                    : (StateStoreCustomMetric) SIZE_METRIC_2.invoke(name, desc);
        } catch (Throwable t) {
            throw rethrow(t);
        }
    }

    /** Runs {@code ReadStateStore}'s trait initialiser where the line has one (4.2+). */
    public static void initReadStore(ReadStateStore store) {
        invokeInit(READ_STORE_INIT, store);
    }

    /** Runs {@code StateStore}'s trait initialiser where the line has one (4.1+). */
    public static void initStore(StateStore store) {
        invokeInit(STORE_INIT, store);
    }

    private static void invokeInit(MethodHandle init, Object store) {
        if (init != null) {
            try {
                init.invoke(store);
            } catch (Throwable t) {
                throw rethrow(t);
            }
        }
    }

    /**
     * True for the timestamp key encoders of transformWithState's timers
     * ({@code TimestampAsPrefixKeyStateEncoderSpec}, {@code TimestampAsPostfixKeyStateEncoderSpec}, 4.2+),
     * by name: an {@code instanceof} would fail to link on lines without these classes, and an
     * {@code Object} parameter, as {@code KeyStateEncoderSpec} itself is missing from 3.5.
     */
    public static boolean isTimestampKeySpec(Object spec) {
        String n = spec.getClass().getSimpleName();
        return n.equals("TimestampAsPrefixKeyStateEncoderSpec") || n.equals("TimestampAsPostfixKeyStateEncoderSpec");
    }
}
