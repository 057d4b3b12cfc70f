"""`python -m ttlstate.demo`: a streaming aggregation whose state lives in ttlstate.

Writes a few JSON files of clicks, runs a stateful count per user over them on the
embedded local Spark (one file per micro-batch), then prints the result and the state
operator's metrics from the last progress report.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile


def write_input(directory: str, files: int, rows: int, users: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for f in range(files):
        with open(os.path.join(directory, f"clicks-{f:03d}.json"), "w") as out:
            for _ in range(rows):
                out.write(json.dumps({"user": f"user-{rng.randrange(users):04d}",
                                      "amount": rng.randrange(1, 100)}) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttlstate.demo", description=__doc__)
    ap.add_argument("--files", type=int, default=5)
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--users", type=int, default=500)
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    args = ap.parse_args(argv)

    from pyspark.sql import SparkSession, functions as F

    import ttlstate

    work = tempfile.mkdtemp(prefix="ttlstate-demo-")
    try:
        write_input(os.path.join(work, "in"), args.files, args.rows, args.users)
        spark = (ttlstate.configure(SparkSession.builder.master("local[2]").appName("ttlstate-demo"))
                 .config("spark.sql.shuffle.partitions", "4")
                 .config("spark.ui.enabled", "false")
                 .config("spark.ui.showConsoleProgress", "false")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("WARN")
        clicks = (spark.readStream.schema("user STRING, amount INT")
                  .option("maxFilesPerTrigger", 1).json(os.path.join(work, "in")))
        totals = clicks.groupBy("user").agg(F.count("*").alias("clicks"), F.sum("amount").alias("spent"))
        query = (totals.writeStream.outputMode("complete").format("memory").queryName("totals")
                 .option("checkpointLocation", os.path.join(work, "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        print(f"provider: {spark.conf.get(ttlstate.PROVIDER_CLASS_KEY)}")
        print(f"batches: {len(query.recentProgress)}")
        print("top users by spend:")
        spark.sql("SELECT * FROM totals ORDER BY spent DESC, user LIMIT 5").show(truncate=False)
        state = query.lastProgress["stateOperators"][0]
        print("state metrics of the last batch:")
        for key in ("numRowsTotal", "numRowsUpdated", "memoryUsedBytes", "commitTimeMs"):
            print(f"  {key:24} {state.get(key)}")
        for key, value in sorted(state.get("customMetrics", {}).items()):
            if key.startswith("ttlstate"):
                print(f"  {key:24} {value}")
        rows = spark.sql("SELECT count(*) AS users, sum(clicks) AS clicks FROM totals").first()
        print(f"users with state: {rows.users}, clicks counted: {rows.clicks} "
              f"(input rows: {args.files * args.rows})")
        spark.stop()
        return 0 if rows.clicks == args.files * args.rows else 1
    finally:
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
