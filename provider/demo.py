"""`python -m ttlstate.demo`: a streaming count per user whose state expires (Flink-style TTL).

Writes JSON files of clicks and runs a stateful count per user on the embedded local
Spark (or on the cluster `--master` names), one file per micro-batch, with a TTL on the
state. The first run reads the first files (every user clicks); the demo then waits
longer than the TTL and adds a file in which only half of the users click. The second
run, resumed from the checkpoint, shows their counts starting over: the idle users' state
expired and is gone.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import tempfile
import time


def write_clicks(path: str, rows: int, users: range, rng: random.Random, mtime: int) -> collections.Counter:
    counts: collections.Counter = collections.Counter()
    with open(path, "w") as out:
        for _ in range(rows):
            user = f"user-{rng.choice(users):04d}"
            counts[user] += 1
            out.write(json.dumps({"user": user, "amount": rng.randrange(1, 100)}) + "\n")
    os.utime(path, (mtime, mtime))  # file order = batch order
    return counts


def is_local(master: str) -> bool:
    """True for the driver-only masters (`local`, `local[N]`, `local[N,F]`), not `local-cluster`."""
    return master == "local" or master.startswith("local[")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttlstate.demo", description=__doc__)
    ap.add_argument("--files", type=int, default=3, help="files of the first run")
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--ttl", default="5 seconds")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--master", default="local[2]",
                    help="Spark master URL, e.g. spark://host:7077 (default: local[2])")
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession, functions as F

    import ttlstate
    from ttlstate.ttl.config import TtlConfig, parse_duration

    ttl = TtlConfig.new_builder(args.ttl).build()
    work = tempfile.mkdtemp(prefix="ttlstate-demo-")
    rng = random.Random(7)
    inbox = os.path.join(work, "in")
    os.makedirs(inbox)
    try:
        for f in range(args.files):
            write_clicks(os.path.join(inbox, f"clicks-{f:03d}.json"), args.rows,
                         range(args.users), rng, 1_700_000_000 + f)
        builder = (ttlstate.configure(SparkSession.builder.master(args.master)
                                      .appName("ttlstate-demo"))
                   .config("spark.sql.shuffle.partitions", "4")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false"))
        if not is_local(args.master):  # executors of their own: one core, 1g each
            builder = (builder.config("spark.executor.memory", "1g")
                       .config("spark.executor.cores", "1"))
        for key, value in ttl.to_conf().items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("WARN")
        latest: dict[str, int] = {}
        progress: list[dict] = []

        def run() -> None:
            def sink(batch, _batch_id):
                for row in batch.collect():
                    latest[row.user] = row.clicks
            clicks = (spark.readStream.schema("user STRING, amount INT")
                      .option("maxFilesPerTrigger", 1).json(inbox))
            counts = clicks.groupBy("user").agg(F.count("*").alias("clicks"))
            query = (counts.writeStream.outputMode("update").foreachBatch(sink)
                     .option("checkpointLocation", os.path.join(work, "checkpoint"))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            progress.extend(p for p in query.recentProgress if p["numInputRows"])

        print(f"provider: {spark.conf.get(ttlstate.PROVIDER_CLASS_KEY)}, TTL: {args.ttl} "
              f"(key spark.sql.streaming.stateStore.ttlstate.ttl)")
        run()
        first = dict(latest)
        print(f"run 1: {len(progress)} batches, {len(first)} users, state rows "
              f"{progress[-1]['stateOperators'][0]['numRowsTotal']}")
        wait = parse_duration(args.ttl) / 1000 + 1
        print(f"waiting {wait:.0f} s, longer than the TTL ...")
        time.sleep(wait)
        half = range(args.users // 2)
        fresh = write_clicks(os.path.join(inbox, f"clicks-{args.files:03d}.json"), args.rows,
                             half, rng, 1_700_000_000 + args.files)
        latest.clear()
        run()
        state = progress[-1]["stateOperators"][0]
        print("run 2 (half of the users click again):")
        for user in sorted(fresh)[:5]:
            print(f"  {user}: {first.get(user, 0):3d} clicks before, now {latest[user]:3d} "
                  f"(counted again from 0)")
        print("state metrics of the last batch:")
        for key in ("numRowsTotal", "numRowsUpdated", "memoryUsedBytes"):
            print(f"  {key:28} {state.get(key)}")
        for key, value in sorted(state.get("customMetrics", {}).items()):
            if key.startswith("ttlstate"):
                print(f"  {key:28} {value}")
        ok = latest == dict(fresh) and state["numRowsTotal"] == len(fresh)
        print(f"counts restarted after the TTL: {'yes' if ok else 'NO'} "
              f"({len(fresh)} users with live state, {args.users - len(fresh)} expired)")
        spark.stop()
        return 0 if ok else 1
    finally:
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
