"""First rough throughput of a streaming aggregation: ttlstate vs Spark's built-in providers.

Same generated input for every provider (JSON files, one per micro-batch, Trigger.AvailableNow,
local[2], 4 shuffle partitions). Reports rows/s per provider and the ratios to ttlstate in
the benchmark's extra_info, and prints a small table.
"""

import json
import os
import random
import time

import pytest
from pyspark.sql import functions as F

from conftest import PROVIDERS

FILES = int(os.environ.get("BENCH_FILES", "10"))
ROWS = int(os.environ.get("BENCH_ROWS", "100000"))
KEYS = int(os.environ.get("BENCH_KEYS", "200000"))
RESULTS = {}


@pytest.fixture(scope="module")
def input_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("agg-input")
    rng = random.Random(1)
    for f in range(FILES):
        with open(d / f"part-{f:03d}.json", "w") as out:
            for _ in range(ROWS):
                out.write(json.dumps({"k": rng.randrange(KEYS), "v": rng.randrange(100)}) + "\n")
    return str(d)


def run_once(spark, provider_class, input_dir, checkpoint):
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider_class)
    df = (spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 1).json(input_dir)
          .groupBy("k").agg(F.sum("v").alias("s"), F.count("*").alias("c")))
    q = (df.writeStream.outputMode("update").format("noop")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
    q.awaitTermination()
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert sum(p["numInputRows"] for p in progress) == FILES * ROWS
    return progress


@pytest.fixture(scope="module")
def warmed_up(spark, input_dir, tmp_path_factory):
    """One untimed run per provider, so no provider pays the JVM's JIT warm-up alone."""
    for name, cls in PROVIDERS.items():
        run_once(spark, cls, input_dir, str(tmp_path_factory.mktemp(f"warmup-{name}")))


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_aggregation(benchmark, spark, input_dir, warmed_up, tmp_path, name):
    runs = iter(range(100))

    def target():
        return run_once(spark, PROVIDERS[name], input_dir, str(tmp_path / f"cp-{next(runs)}"))

    start = time.perf_counter()
    progress = benchmark.pedantic(target, rounds=1, iterations=1)
    elapsed = time.perf_counter() - start
    batch_ms = sorted(p["batchDuration"] for p in progress)
    commit_ms = sorted(p["stateOperators"][0]["commitTimeMs"] for p in progress)
    RESULTS[name] = {
        "rows_per_s": FILES * ROWS / elapsed,
        "median_batch_ms": batch_ms[len(batch_ms) // 2],
        "median_commit_ms": commit_ms[len(commit_ms) // 2],
        "state_rows": progress[-1]["stateOperators"][0]["numRowsTotal"],
    }
    benchmark.extra_info.update(RESULTS[name])
    if len(RESULTS) == len(PROVIDERS):
        base = RESULTS["ttlstate"]["rows_per_s"]
        print("\nprovider   rows/s   ttlstate/provider  median batch ms  median commit ms  state rows")
        for n, r in RESULTS.items():
            print(f"{n:9} {r['rows_per_s']:8.0f}   {base / r['rows_per_s']:8.2f}x   "
                  f"{r['median_batch_ms']:14}  {r['median_commit_ms']:15}  {r['state_rows']}")
