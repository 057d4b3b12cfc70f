"""ttlstate on Spark 3.5, by hand (issue 46, docs/decisions/108-spark-35-plan.md): the shim jar
of the spark35 overlay against pyspark 3.5's jars, in a venv with pyspark 3.5 and ttlstate
installed, through an aggregation (read store upgraded to the write store), dropDuplicates, a
session window (prefix scans) and a stream-stream join, each batch for batch against the
HDFS-backed provider, then again after a restart from the checkpoints; then TTL 1 ms on the
aggregation, where each batch's rows must be its own file's aggregation alone. Prints one line
per check and `SMOKE PASSED` or `SMOKE FAILED` (exit 1).

    python buildsys/ttlstate_build.py --overlay spark35 --jars <pyspark 3.5>/jars --out /tmp/ttlstate-35.jar
    <venv with pyspark 3.5>/bin/python tests/spark35_smoke.py /tmp/ttlstate-35.jar /tmp/spark35-smoke
"""
import json, os, random, shutil, sys, pathlib
from pyspark.sql import SparkSession, functions as F

JAR, WORK = sys.argv[1], pathlib.Path(sys.argv[2])
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
TTL = "io.ttlstate.spark.TtlStateStoreProvider"
shutil.rmtree(WORK, ignore_errors=True); WORK.mkdir(parents=True)
spark = (SparkSession.builder.master("local[2]").config("spark.jars", JAR)
         .config("spark.sql.shuffle.partitions", "3").config("spark.ui.enabled", "false")
         .config("spark.pyspark.python", sys.executable).getOrCreate())
spark.sparkContext.setLogLevel("WARN")
print("spark", spark.version)
rnd = random.Random(7)
def write_batch(d, i, n=300):
    d.mkdir(parents=True, exist_ok=True)
    with open(d / f"part-{i:03d}.json", "w") as f:
        for j in range(n):
            f.write(json.dumps({"k": f"k{rnd.randrange(40)}", "v": rnd.randrange(10), "id": rnd.randrange(600),
                                "ts": f"2024-01-01 00:{i:02d}:{rnd.randrange(60):02d}"}) + "\n")
schema = "k string, v int, id int, ts timestamp"
def queries(src):
    e = spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(src))
    agg = e.groupBy("k").agg(F.sum("v").alias("s"), F.count("*").alias("c")), "update"
    dedup = e.withWatermark("ts", "2 minutes").dropDuplicates(["id"]), "append"
    sess = e.withWatermark("ts", "1 minute").groupBy(F.session_window("ts", "20 seconds"), "k").count(), "append"
    left = e.select(F.col("id").alias("lid"), F.col("ts").alias("lts")).withWatermark("lts", "1 minute")
    right = e.select(F.col("id").alias("rid"), F.col("ts").alias("rts"), "v").withWatermark("rts", "1 minute")
    join = left.join(right, F.expr("lid = rid AND rts BETWEEN lts AND lts + interval 30 seconds")), "append"
    return {"agg": agg, "dedup": dedup, "session": sess, "join": join}
def run(provider, tag, src, confs=None, only=None):
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider)
    for k, v in (confs or {}).items():
        spark.conf.set(k, v)
    out = {}
    for name, (df, mode) in queries(src).items():
        if only and name not in only:
            continue
        rows = {}
        def sink(b, bid, rows=rows):
            rows[bid] = sorted(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in b.collect())
        q = (df.writeStream.outputMode(mode).foreachBatch(sink).trigger(availableNow=True)
             .option("checkpointLocation", str(WORK / f"ck-{tag}-{name}")).start())
        q.awaitTermination()
        out[name] = rows
    for k in (confs or {}):
        spark.conf.unset(k)
    return out
src = WORK / "events"
for i in range(3):
    write_batch(src, i)
first = {p: run(p, t, src) for p, t in ((HDFS, "hdfs"), (TTL, "ttl"))}
for i in range(3, 6):
    write_batch(src, i)
second = {p: run(p, t, src) for p, t in ((HDFS, "hdfs"), (TTL, "ttl"))}
ok = True
for part, res in (("first", first), ("after restart", second)):
    for name in res[HDFS]:
        same = res[HDFS][name] == res[TTL][name]
        n = sum(len(v) for v in res[TTL][name].values())
        print(f"{part:14} {name:8} batches {len(res[TTL][name])} rows {n} same as HDFS: {same}")
        ok &= same and n > 0
# TTL on the aggregation: the state of keys idle beyond a 1 ms TTL expires (processing time)
ttl_out = run(TTL, "ttl-on", src, {"spark.sql.streaming.stateStore.ttlstate.ttl": "1ms"}, only=("agg",))
# each batch's state expired before the next (1 ms): batch i's rows are file i's aggregation alone
files = sorted(src.glob("part-*.json"))
for bid, f in enumerate(files):
    alone = spark.read.schema(schema).json(str(f)).groupBy("k").agg(F.sum("v").alias("s"), F.count("*").alias("c"))
    want = sorted(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True) for r in alone.collect())
    same = ttl_out["agg"].get(bid) == want
    ok &= same
    print(f"TTL 1ms        agg      batch {bid} rows {len(want)} = that file's aggregation alone: {same}")
print("SMOKE", "PASSED" if ok else "FAILED")
spark.stop()
sys.exit(0 if ok else 1)
