package io.ttlstate.spark.store;

/**
 * Throws Spark's error helpers' results from Java. Many of them return a checked
 * {@code SparkException} that Scala throws undeclared; Java must do the same to keep
 * Spark's error classes intact.
 */
public final class SparkErrors {
    /** The provider's name in Spark's error messages. */
    public static final String PROVIDER_NAME = "TtlStateStoreProvider";

    private SparkErrors() {}

    /** Use as {@code throw SparkErrors.sneaky(QueryExecutionErrors.x(...))}. */
    public static RuntimeException sneaky(Throwable t) {
        SparkErrors.<RuntimeException>throwAs(t);
        return new IllegalStateException("unreachable", t);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> void throwAs(Throwable t) throws E {
        throw (E) t;
    }
}
