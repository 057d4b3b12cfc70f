package io.ttlstate.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.execution.streaming.state.KeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.NoPrefixKeyStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.PrefixKeyScanStateEncoderSpec;
import org.apache.spark.sql.execution.streaming.state.StateStore;
import org.apache.spark.sql.execution.streaming.state.StateStoreConf;
import org.apache.spark.sql.execution.streaming.state.StateStoreId;
import org.apache.spark.sql.execution.streaming.state.StateStoreIterator;
import org.apache.spark.sql.execution.streaming.state.StateStoreProvider;
import org.apache.spark.sql.execution.streaming.state.StateStoreProviderId;
import org.apache.spark.sql.execution.streaming.state.UnsafeRowPair;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.types.StructType;
import scala.Option;

/**
 * Provider-level operations timed in the JVM, through Spark's StateStoreProvider API, so that
 * every provider pays the same (no py4j per call). Called once per provider from
 * {@code benchmarks/test_provider_ops.py} in a fresh JVM; returns nanoseconds per operation.
 *
 * <p>Keys are {@code (k BIGINT)}, values {@code (count BIGINT, sum BIGINT)}: an aggregation's
 * rows. Prefix scans use keys {@code (p INT, k BIGINT)} with one prefix column.
 */
public final class ProviderBench {
    private static final StructType KEY = StructType.fromDDL("k BIGINT");
    private static final StructType VALUE = StructType.fromDDL("count BIGINT, sum BIGINT");
    private static final StructType PREFIXED_KEY = StructType.fromDDL("p INT, k BIGINT");
    private static final String CF = StateStore.DEFAULT_COL_FAMILY_NAME();

    private ProviderBench() {}

    /**
     * Runs every operation on {@code providerClass} with {@code keys} keys under {@code root}:
     * {@code warmups} passes whose times are dropped (the JIT compiles both the provider's and
     * Spark's code paths in them), then {@code passes} timed passes, each on fresh providers and
     * directories. {@code confs} are SQL confs ({@code k=v} lines). Returns {@code
     * name=nanosPerOp} lines, each the median over the timed passes.
     */
    public static String run(String providerClass, String root, int keys, String confs, Configuration hadoop,
                             int warmups, int passes) {
        SQLConf sql = new SQLConf();
        for (String line : confs.split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0) {
                sql.setConfString(line.substring(0, eq), line.substring(eq + 1));
            }
        }
        // createAndInit instantiates the class StateStoreConf names, not one it is given
        sql.setConfString(SQLConf.STATE_STORE_PROVIDER_CLASS().key(), providerClass);
        StateStoreConf conf = StateStoreConf.apply(sql);
        for (int w = 0; w < warmups; w++) {
            pass(providerClass, root + "/warmup-" + w, keys, conf, hadoop);
        }
        Map<String, List<Long>> timed = new LinkedHashMap<>();
        for (int i = 0; i < Math.max(1, passes); i++) {
            pass(providerClass, root + "/pass-" + i, keys, conf, hadoop)
                    .forEach((op, ns) -> timed.computeIfAbsent(op, k -> new ArrayList<>()).add(Math.round(ns)));
        }
        StringBuilder sb = new StringBuilder();
        timed.forEach((op, ns) -> sb.append(op).append('=').append(median(ns)).append('\n'));
        return sb.toString();
    }

    /** One pass of every operation on fresh providers under {@code root}: nanoseconds per operation. */
    private static Map<String, Double> pass(String providerClass, String root, int keys, StateStoreConf conf,
                                            Configuration hadoop) {
        Map<String, Double> out = new LinkedHashMap<>();
        Random rnd = new Random(7);
        long[] order = shuffled(keys, rnd);

        StateStoreProvider p = provider(providerClass, root, KEY, new NoPrefixKeyStateEncoderSpec(KEY), conf, hadoop);
        StateStore s = p.getStore(0, Option.empty(), false, false);
        UnsafeRow value = value(1, 2);
        long t = System.nanoTime();
        for (long k : order) {
            s.put(key(k), value, CF);
        }
        out.put("put", per(t, keys));
        t = System.nanoTime();
        s.commit();
        out.put("commit of all puts (per key)", per(t, keys));

        s = p.getStore(1, Option.empty(), false, false);
        t = System.nanoTime();
        for (long k : order) {
            require(s.get(key(k), CF) != null, "missing key");
        }
        out.put("get present (first read of the version)", per(t, keys));
        t = System.nanoTime();
        for (long k : order) {
            require(s.get(key(k), CF) != null, "missing key");
        }
        out.put("get present (read again)", per(t, keys));
        t = System.nanoTime();
        for (long k : order) {
            require(s.get(key(keys + k), CF) == null, "unexpected key");
        }
        out.put("get absent", per(t, keys));
        int removes = Math.max(1, keys / 10);
        t = System.nanoTime();
        for (int i = 0; i < removes; i++) {
            s.remove(key(order[i]), CF);
        }
        out.put("remove", per(t, removes));
        t = System.nanoTime();
        long seen = count(s.iterator(CF));
        out.put("iterate (per entry)", per(t, seen));
        require(seen == keys - removes, "iterated " + seen + " entries");
        s.commit();

        // commits of 1% updates, each after its gets (an aggregation's batch)
        int batch = Math.max(1, keys / 100);
        List<Long> commits = new ArrayList<>();
        long version = 2;
        for (int c = 0; c < 10; c++, version++) {
            s = p.getStore(version, Option.empty(), false, false);
            for (int i = 0; i < batch; i++) {
                long k = order[removes + rnd.nextInt(keys - removes)];
                UnsafeRow old = s.get(key(k), CF);
                s.put(key(k), value(old.getLong(0) + 1, old.getLong(1) + c), CF);
            }
            t = System.nanoTime();
            s.commit();
            commits.add(System.nanoTime() - t);
        }
        out.put("commit of a 1% update (median, per commit)", median(commits));

        StateStoreProvider fresh = provider(providerClass, root, KEY, new NoPrefixKeyStateEncoderSpec(KEY), conf,
                hadoop);
        t = System.nanoTime();
        s = fresh.getStore(version, Option.empty(), false, false);
        require(s.get(key(order[keys - 1]), CF) != null, "missing key after load");
        out.put("load from checkpoint (per store, a fresh provider)", (double) (System.nanoTime() - t));
        s.abort();
        fresh.close();
        p.close();

        // prefix scans: 100 keys under each of keys/100 prefixes
        int prefixes = Math.max(1, keys / 100);
        StateStoreProvider pp = provider(providerClass, root + "-prefix", PREFIXED_KEY,
                new PrefixKeyScanStateEncoderSpec(PREFIXED_KEY, 1), conf, hadoop);
        s = pp.getStore(0, Option.empty(), false, false);
        for (int pr = 0; pr < prefixes; pr++) {
            for (int k = 0; k < 100; k++) {
                s.put(prefixedKey(pr, k), value, CF);
            }
        }
        s.commit();
        s = pp.getStore(1, Option.empty(), false, false);
        t = System.nanoTime();
        long found = 0;
        for (int pr = 0; pr < prefixes; pr++) {
            found += count(s.prefixScan(prefix(pr), CF));
        }
        out.put("prefix scan of 100 entries (per scan)", per(t, prefixes));
        require(found == 100L * prefixes, "prefix scans found " + found);
        s.abort();
        pp.close();

        return out;
    }

    private static StateStoreProvider provider(String cls, String root, StructType keySchema, KeyStateEncoderSpec spec,
                                               StateStoreConf conf, Configuration hadoop) {
        StateStoreProviderId id = new StateStoreProviderId(new StateStoreId(root, 0, 0, "default"), UUID.randomUUID());
        Configuration h = new Configuration(hadoop);
        StateStoreProvider p = StateStoreProvider.createAndInit(id, keySchema, VALUE, spec, false, conf, h, false,
                Option.empty());
        require(p.getClass().getName().equals(cls), "created " + p.getClass().getName() + ", not " + cls);
        return p;
    }

    private static long[] shuffled(int n, Random rnd) {
        long[] a = new long[n];
        for (int i = 0; i < n; i++) {
            a[i] = i;
        }
        for (int i = n - 1; i > 0; i--) {
            int j = rnd.nextInt(i + 1);
            long x = a[i];
            a[i] = a[j];
            a[j] = x;
        }
        return a;
    }

    private static UnsafeRow key(long k) {
        UnsafeRow r = new UnsafeRow(1);
        r.pointTo(new byte[16], 16);
        r.setLong(0, k);
        return r;
    }

    private static UnsafeRow prefixedKey(int p, long k) {
        UnsafeRow r = new UnsafeRow(2);
        r.pointTo(new byte[24], 24);
        r.setInt(0, p);
        r.setLong(1, k);
        return r;
    }

    private static UnsafeRow prefix(int p) {
        UnsafeRow r = new UnsafeRow(1);
        r.pointTo(new byte[16], 16);
        r.setInt(0, p);
        return r;
    }

    private static UnsafeRow value(long count, long sum) {
        UnsafeRow r = new UnsafeRow(2);
        r.pointTo(new byte[24], 24);
        r.setLong(0, count);
        r.setLong(1, sum);
        return r;
    }

    private static long count(StateStoreIterator<UnsafeRowPair> it) {
        long n = 0;
        while (it.hasNext()) {
            it.next();
            n++;
        }
        it.close();
        return n;
    }

    private static double per(long startNanos, long n) {
        return (System.nanoTime() - startNanos) / (double) Math.max(1, n);
    }

    private static double median(List<Long> xs) {
        long[] a = xs.stream().mapToLong(Long::longValue).toArray();
        Arrays.sort(a);
        return a.length % 2 == 1 ? a[a.length / 2] : (a[a.length / 2 - 1] + a[a.length / 2]) / 2.0;
    }

    private static void require(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("benchmark check failed: " + what);
        }
    }
}
