"""Benchmarks run real Spark queries: `python -m pytest benchmarks/ --benchmark-only`."""

import json
import os
import random

import pytest
from pyspark.sql import SparkSession, functions as F

import ttlstate

PROVIDERS = {
    "ttlstate": ttlstate.PROVIDER_CLASS,
    "hdfs": "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider",
    "rocksdb": "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider",
}


@pytest.fixture(scope="session")
def spark():
    session = (ttlstate.configure(SparkSession.builder.master("local[2]").appName("ttlstate-bench"))
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.ui.enabled", "false")
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


FILES = int(os.environ.get("BENCH_FILES", "10"))
ROWS = int(os.environ.get("BENCH_ROWS", "100000"))
KEYS = int(os.environ.get("BENCH_KEYS", "200000"))


@pytest.fixture(scope="session")
def input_dir(tmp_path_factory):
    """FILES JSON files of ROWS rows `{k, v}` over KEYS keys (one file per micro-batch)."""
    d = tmp_path_factory.mktemp("agg-input")
    rng = random.Random(1)
    for f in range(FILES):
        with open(d / f"part-{f:03d}.json", "w") as out:
            for _ in range(ROWS):
                out.write(json.dumps({"k": rng.randrange(KEYS), "v": rng.randrange(100)}) + "\n")
    return str(d)


def run_aggregation(spark, provider_class, input_dir, checkpoint, confs=None):
    """A sum and count per key over the input, update mode, noop sink; returns the progress."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider_class)
    for k, v in (confs or {}).items():
        spark.conf.set(k, v)
    try:
        df = (spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 1).json(input_dir)
              .groupBy("k").agg(F.sum("v").alias("s"), F.count("*").alias("c")))
        q = (df.writeStream.outputMode("update").format("noop")
             .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        q.awaitTermination()
    finally:
        for k in confs or {}:
            spark.conf.unset(k)
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    assert sum(p["numInputRows"] for p in progress) == FILES * ROWS
    return progress


def summarize(progress, elapsed_s):
    batch_ms = sorted(p["batchDuration"] for p in progress)
    commit_ms = sorted(p["stateOperators"][0]["commitTimeMs"] for p in progress)
    return {
        "rows_per_s": FILES * ROWS / elapsed_s,
        "median_batch_ms": batch_ms[len(batch_ms) // 2],
        "median_commit_ms": commit_ms[len(commit_ms) // 2],
        "state_rows": progress[-1]["stateOperators"][0]["numRowsTotal"],
    }


def file_states(root):
    """{relative path: (size, mtime_ns)} of every file under `root` (empty if it is missing)."""
    states = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = os.path.join(dirpath, name)
            try:
                st = os.stat(path)
            except FileNotFoundError:  # deleted by maintenance while we walk
                continue
            states[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return states


def files_added(before, after):
    """{path: size} of the files of `after` that are new or whose size or mtime changed."""
    return {p: s[0] for p, s in after.items() if before.get(p) != s}


def median(values):
    values = sorted(values)
    n = len(values)
    return (values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2) if n else None
