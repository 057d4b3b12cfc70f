package io.ttlstate.spark;

/**
 * What this jar is, for a client that cannot see the server's JVM (a Spark Connect client):
 * {@code SELECT reflect('io.ttlstate.spark.ShimInfo', 'describe')} answers it, and
 * {@code ttlstate.check_server(spark)} compares it with the client's ttlstate
 * (docs/decisions/058-spark-connect-server-check.md).
 * The version is the package's, stamped into the jar's manifest ({@code Implementation-Version})
 * by both builds (gradle and {@code buildsys/ttlstate_build.py}).
 */
public final class ShimInfo {
    private ShimInfo() {}

    /** The ttlstate version the jar was built as, or {@code unknown} (a jar without the stamp). */
    public static String version() {
        String v = ShimInfo.class.getPackage().getImplementationVersion();
        return v == null || v.isEmpty() ? "unknown" : v;
    }

    /** Where the jar was loaded from (a path or URL), or {@code unknown}. */
    public static String location() {
        try {
            java.security.CodeSource cs = ShimInfo.class.getProtectionDomain().getCodeSource();
            return cs == null || cs.getLocation() == null ? "unknown" : cs.getLocation().toString();
        } catch (SecurityException e) {
            return "unknown";
        }
    }

    /** {@code ttlstate=<version> spark=<running Spark> jar=<location>}: one line, fields separated by spaces. */
    public static String describe() {
        return "ttlstate=" + version() + " spark=" + org.apache.spark.package$.MODULE$.SPARK_VERSION()
                + " jar=" + location().replace(' ', '+');
    }
}
