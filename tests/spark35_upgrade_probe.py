"""Probe, not a test: do Spark's own providers continue a Spark 3.5 checkpoint on 4.x? (issue 46,
item 3 asks to measure 3.5 -> 4.x on the HDFS-backed provider first; docs/decisions/108-spark-35-plan.md
has the result). Run by hand, each phase in the venv of its line:

    python tests/spark35_upgrade_probe.py write ROOT PROVIDER            # on pyspark 3.5
    cp -r ROOT/work ROOT/pristine
    python tests/spark35_upgrade_probe.py continue ROOT PROVIDER 4.0     # on pyspark 4.0, then 4.3
    python tests/spark35_upgrade_probe.py compare ROOT 4.0

PROVIDER is hdfs, rocksdb or rocksdb-changelog. `write` runs the first 3 input files of each case
into a checkpoint and, on all 6 files, an uninterrupted 3.5 run. `continue` restores the checkpoint
at the same paths (the file source's log names its files by path), adds files 3..5 and resumes, and
runs an uninterrupted run on its own line. `compare` checks that the rows of the first and the
resumed run together are those of the uninterrupted run on that line, and those of the 3.5 run (as
multisets: the first run's trailing no-data batch shifts the resumed run's batch ids).
"""
import collections
import json
import pathlib
import random
import shutil
import sys
import traceback

PROVIDERS = {
    "hdfs": ("org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider", {}),
    "rocksdb": ("org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider", {}),
    "rocksdb-changelog": ("org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
                          {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}),
}
FILES, FIRST = 6, 3
T0 = 1_700_000_000


def write_inputs(d: pathlib.Path, lo: int, hi: int):
    for b in range(lo, hi):
        rng = random.Random(b)
        for side in ("l", "r"):
            p = d / side / f"part-{b:03d}.json"
            p.parent.mkdir(parents=True, exist_ok=True)
            with open(p, "w") as f:
                for j in range(1500):
                    k = rng.randrange(300)
                    ts = T0 + 60 * b + rng.randrange(60)
                    f.write(json.dumps({"k": k, "id": b * 1500 + j if side == "l" else b * 1500 + rng.randrange(1500),
                                        "v": rng.randrange(10), "ts": ts}) + "\n")


def query(spark, case, d):
    from pyspark.sql import functions as F
    def src(side):
        return (spark.readStream.schema("k LONG, id LONG, v LONG, ts LONG").option("maxFilesPerTrigger", 1)
                .json(str(d / side)).withColumn("ts", F.col("ts").cast("timestamp")))
    if case == "agg":
        return src("l").groupBy("k").agg(F.count("*").alias("c"), F.sum("v").alias("s")), "update"
    if case == "dedup":
        return src("l").withWatermark("ts", "2 minutes").dropDuplicates(["k", "v", "ts"]), "append"
    if case == "dedup-within":
        return src("l").withWatermark("ts", "2 minutes").dropDuplicatesWithinWatermark(["k", "v"]), "append"
    if case == "join":
        l = src("l").withWatermark("ts", "1 minute").select(F.col("id").alias("lid"), F.col("ts").alias("lts"), F.col("v").alias("lv"))
        r = src("r").withWatermark("ts", "1 minute").select(F.col("id").alias("rid"), F.col("ts").alias("rts"))
        return l.join(r, F.expr("lid = rid AND rts >= lts AND rts <= lts + interval 2 minutes")), "append"
    if case == "session":
        return (src("l").withWatermark("ts", "1 minute").groupBy(F.session_window("ts", "20 seconds"), "k").count()
                .select(F.col("session_window.start").cast("long").alias("st"), F.col("session_window.end").cast("long").alias("en"), "k", "count")), "append"
    if case == "window":
        return (src("l").withWatermark("ts", "1 minute").groupBy(F.window("ts", "1 minute"), "k").count()
                .select(F.col("window.start").cast("long").alias("st"), "k", "count")), "append"
    raise ValueError(case)


CASES = ["agg", "dedup", "dedup-within", "join", "session", "window"]


def run(spark, case, d, ck, out):
    df, mode = query(spark, case, d)
    out.mkdir(parents=True, exist_ok=True)
    def sink(batch, bid):
        rows = sorted(json.dumps(r.asDict(), default=str, sort_keys=True) for r in batch.collect())
        (out / f"batch-{bid:03d}.json").write_text("\n".join(rows))
    q = df.writeStream.outputMode(mode).foreachBatch(sink).option("checkpointLocation", str(ck)).trigger(availableNow=True).start()
    q.awaitTermination()


def session(provider):
    from pyspark.sql import SparkSession
    cls, confs = PROVIDERS[provider]
    b = (SparkSession.builder.master("local[2]").config("spark.sql.shuffle.partitions", 2)
         .config("spark.ui.enabled", "false").config("spark.sql.streaming.stateStore.providerClass", cls))
    for k, v in confs.items():
        b = b.config(k, v)
    s = b.getOrCreate()
    s.sparkContext.setLogLevel("ERROR")
    return s


def outputs(out):
    return {p.name: p.read_text() for p in sorted(out.glob("batch-*.json"))}


def _rows(out: pathlib.Path) -> collections.Counter:
    c = collections.Counter()
    for p in sorted(out.glob("batch-*.json")):
        c.update(line for line in p.read_text().splitlines() if line)
    return c


def compare(root: pathlib.Path, label: str) -> None:
    for provider in PROVIDERS:
        for case in CASES:
            resumed = root / "work" / provider / case / "out"
            if not resumed.exists():
                continue
            got = _rows(resumed)
            want = _rows(root / f"ref-{label}" / provider / case / "out")
            want35 = _rows(root / "ref-3.5" / provider / case / "out")
            verdict = "SAME" if got == want else "DIFFER (%d missing, %d extra)" % (
                sum((want - got).values()), sum((got - want).values()))
            print(f"{label} {provider:18} {case:13} rows {sum(got.values()):6} vs uninterrupted "
                  f"{sum(want.values()):6}: {verdict}; uninterrupted 3.5 {'same' if want35 == want else 'DIFFERS'}")


def main():
    phase, root = sys.argv[1], pathlib.Path(sys.argv[2])
    if phase == "compare":
        compare(root, sys.argv[3])
        return
    provider = sys.argv[3]
    import pyspark
    spark = session(provider)
    report = {}
    for case in CASES:
        w = root / "work" / provider / case
        try:
            if phase == "write":
                shutil.rmtree(w, ignore_errors=True)
                write_inputs(w / "in", 0, FIRST)
                run(spark, case, w / "in", w / "ck", w / "out")
                ref = root / "ref-3.5" / provider / case
                shutil.rmtree(ref, ignore_errors=True)
                write_inputs(ref / "in", 0, FILES)
                run(spark, case, ref / "in", ref / "ck", ref / "out")
                report[case] = f"written, {len(outputs(w / 'out'))} batches"
            else:
                label = sys.argv[4]
                pristine = root / "pristine" / provider / case
                shutil.rmtree(w, ignore_errors=True)
                shutil.copytree(pristine, w)
                write_inputs(w / "in", FIRST, FILES)
                ref = root / f"ref-{label}" / provider / case
                shutil.rmtree(ref, ignore_errors=True)
                write_inputs(ref / "in", 0, FILES)
                run(spark, case, ref / "in", ref / "ck", ref / "out")
                try:
                    run(spark, case, w / "in", w / "ck", w / "out")
                except Exception as e:
                    msg = str(e).strip().splitlines()
                    report[case] = "REFUSED: " + " | ".join(msg[:3])[:600]
                    continue
                report[case] = "resumed"
        except Exception as e:
            report[case] = "ERROR: " + (str(e).strip().splitlines() or [repr(e)])[0][:400]
            traceback.print_exc()
    spark.stop()
    print("REPORT", pyspark.__version__, provider, json.dumps(report, indent=1), flush=True)


if __name__ == "__main__":
    main()
