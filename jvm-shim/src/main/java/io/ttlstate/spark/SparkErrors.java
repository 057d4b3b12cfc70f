package io.ttlstate.spark;

/**
 * Throws Spark's error helpers' results from Java. Many of them return a checked
 * {@code SparkException} that Scala throws undeclared; Java must do the same to keep
 * Spark's error classes intact.
 */
final class SparkErrors {
    private SparkErrors() {}

    /** Use as {@code throw SparkErrors.sneaky(QueryExecutionErrors.x(...))}. */
    static RuntimeException sneaky(Throwable t) {
        SparkErrors.<RuntimeException>throwAs(t);
        return new IllegalStateException("unreachable", t);
    }

    @SuppressWarnings("unchecked")
    private static <E extends Throwable> void throwAs(Throwable t) throws E {
        throw (E) t;
    }
}
