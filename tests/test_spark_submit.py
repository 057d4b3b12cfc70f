"""The documented spark-submit example, run exactly as written (issue 19): the script and the
command are taken from docs/guide/spark-submit.md, only the two data paths change."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
PAGE = (ROOT / "docs" / "guide" / "spark-submit.md").read_text()


def _example():
    section = PAGE
    script = textwrap.dedent(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    command = textwrap.dedent(re.search(r"```bash\n(.*?)```", section, re.S).group(1)).strip()
    return script, command


def test_the_readme_spark_submit_example_runs_with_ttlstate(tmp_path):
    script, command = _example()
    assert "--jars" in command and "TtlStateStoreProvider" in command and "ttlstate.ttl=10m" in command
    (tmp_path / "ttl_counts.py").write_text(script)
    events = tmp_path / "events"
    events.mkdir()
    (events / "part-0.json").write_text("".join(json.dumps({"key": k}) + "\n" for k in "abcab"))
    checkpoint = tmp_path / "checkpoints" / "ttl-counts"
    command = command.replace("/data/events", str(events)).replace("/data/checkpoints/ttl-counts", str(checkpoint))
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = dict(re.findall(r"^\|\s*(\w)\s*\|\s*(\d+)\s*\|$", run.stdout, re.M))
    assert rows == {"a": "2", "b": "2", "c": "1"}, run.stdout[-2000:]
    # the state is ttlstate's, with the TTL of the command
    inspect = subprocess.run([sys.executable, "-m", "ttlstate", "inspect", str(checkpoint)],
                             capture_output=True, text=True, timeout=300)
    assert inspect.returncode == 0, inspect.stderr
    assert "10m" in inspect.stdout or "600000" in inspect.stdout or "600 s" in inspect.stdout, inspect.stdout


PLAN_SCRIPT = """
import sys
from pyspark.sql import SparkSession

spark = (SparkSession.builder.appName("plain-join").config("spark.sql.shuffle.partitions", "2")
         .getOrCreate())
source, checkpoint = sys.argv[1], sys.argv[2]
left = spark.readStream.schema("key STRING").json(source).withColumnRenamed("key", "l")
right = spark.readStream.schema("key STRING").json(source).withColumnRenamed("key", "r")
counts = spark.readStream.schema("key STRING").json(source).groupBy("key").count()
joined = left.join(right, left.l == right.r)
for name, df, mode in (("join", joined, "append"), ("aggregation", counts, "update")):
    q = (df.writeStream.outputMode(mode).format("noop")
         .option("checkpointLocation", checkpoint + "/" + name).trigger(availableNow=True).start())
    q.awaitTermination()
    plan = q._jsq.streamingQuery().lastExecution().executedPlan().toString()
    print("PLAN", name, plan.count("StateReadAhead"))
"""


def test_a_session_set_up_with_only_the_jar_and_the_provider_reads_state_ahead(tmp_path):
    """The documented spark-submit command (only `--jars` and the provider class, no
    `ttlstate.configure`, no spark.sql.extensions) runs with ttlstate's session extensions:
    Spark loads them from the jar (META-INF/services), so the plans carry the read-ahead,
    one under each side of a join and one under an aggregation's restore."""
    _, command = _example()
    (tmp_path / "plain_join.py").write_text(PLAN_SCRIPT)
    events = tmp_path / "events"
    events.mkdir()
    (events / "part-0.json").write_text("".join(json.dumps({"key": k}) + "\n" for k in "abcab"))
    command = (command.replace("ttl_counts.py", "plain_join.py").replace("/data/events", str(events))
               .replace("/data/checkpoints/ttl-counts", str(tmp_path / "ck")))
    # without TTL: TTL on a join's state also needs skipNullsForStreamStreamJoins (its own error)
    command = re.sub(r"\s*--conf spark\.sql\.streaming\.stateStore\.ttlstate\.ttl=\S+ \\\n", "\n", command)
    assert "spark.sql.extensions" not in command and "ttlstate.ttl" not in command, command
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-8000:]
    assert dict(re.findall(r"^PLAN (\w+) (\d+)$", run.stdout, re.M)) == {"join": "2", "aggregation": "1"}, \
        run.stdout[-2000:] + run.stderr[-3000:]
    assert "session extensions are not installed" not in run.stderr, run.stderr[-3000:]
