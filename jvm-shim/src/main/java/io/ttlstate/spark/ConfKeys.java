package io.ttlstate.spark;

/**
 * The prefix of every ttlstate conf, declared once for the JVM (Python's is
 * {@code ttlstate.confkeys.PREFIX}). Spark forwards every key under it to each provider through
 * {@code StateStoreConf.sqlConfs}; the JVM passes them on to the service, which owns their
 * names, defaults and parsers ({@code ttlstate.conf.REGISTRY}).
 */
public final class ConfKeys {
    private ConfKeys() {}

    public static final String PREFIX = "spark.sql.streaming.stateStore.ttlstate.";
}
