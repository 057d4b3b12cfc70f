"""A streaming query with TTL through Spark Connect (issue 19, item 4): a Connect client
(`SparkSession.builder.remote("local[2]")`, which starts a local Spark Connect server) with
`ttlstate.configure` on its builder; the server runs the state in ttlstate's stores, the TTL
set from the client holds, and no store service outlives the client."""

from __future__ import annotations

import json
import subprocess
import sys


import psutil
import pytest

pytestmark = pytest.mark.slow

CLIENT = r'''
import json, sys
import ttlstate
from pyspark.sql import SparkSession

source, checkpoint = sys.argv[1], sys.argv[2]
builder = ttlstate.configure(SparkSession.builder.remote("local[2]"))
spark = builder.config("spark.sql.shuffle.partitions", "2").getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
# a ttlstate key is a SQL conf: a Connect client sets it on its session
spark.conf.set("spark.sql.streaming.stateStore.ttlstate.ttl", "10m")
counts = spark.readStream.schema("key STRING").json(source).groupBy("key").count()
query = (counts.writeStream.outputMode("complete").format("memory").queryName("counts")
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
query.awaitTermination()
rows = sorted(tuple(r) for r in spark.sql("SELECT key, count FROM counts").collect())
metrics = query.lastProgress["stateOperators"][0]["customMetrics"]
import os, psutil
def cmdline(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # exited (or a zombie) since it was listed
        return ""
services = [p.pid for p in psutil.Process(os.getpid()).children(recursive=True)
            if "ttlstate.service" in cmdline(p)]  # the local server's store service
print("RESULT " + json.dumps({"rows": rows, "metrics": metrics, "services": services}))
spark.stop()
'''


def _cmdline(pid: int) -> str:
    """The command line of a live process; "" when it is gone or a zombie."""
    try:
        p = psutil.Process(pid)
        return "" if p.status() == psutil.STATUS_ZOMBIE else " ".join(p.cmdline())
    except psutil.Error:
        return ""


def test_a_query_with_ttl_runs_through_spark_connect(tmp_path):
    source = tmp_path / "events"
    source.mkdir()
    for i, keys in enumerate(["aba", "ca"]):
        (source / f"part-{i}.json").write_text("".join(json.dumps({"key": k}) + "\n" for k in keys))
    (tmp_path / "client.py").write_text(CLIENT)
    checkpoint = tmp_path / "ck"
    run = subprocess.run([sys.executable, str(tmp_path / "client.py"), str(source), str(checkpoint)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(next(l for l in run.stdout.splitlines() if l.startswith("RESULT "))[7:])
    assert [tuple(r) for r in result["rows"]] == [("a", 3), ("b", 1), ("c", 1)]
    assert "ttlstateRoundTrips" in result["metrics"], sorted(result["metrics"])
    assert result["metrics"]["ttlstateTtlMs"] == 600_000
    inspect = subprocess.run([sys.executable, "-m", "ttlstate", "inspect", str(checkpoint)],
                             capture_output=True, text=True, timeout=300)
    assert inspect.returncode == 0, inspect.stderr
    assert result["services"], "no store service ran under the client's Connect server"
    alive = [pid for pid in result["services"] if "ttlstate.service" in _cmdline(pid)]
    assert not alive, f"store services {alive} outlived the Connect client"
