"""Spark Connect against a separately started server (issue 19, item 4): the documented server
command line (docs/guide/connect.md), run as its own process on a free port, serves a streaming query with TTL from a
Connect client (`SparkSession.builder.remote("sc://localhost:PORT")`); the rows match Spark's
HDFS provider through the same server and a plain model of the TTL; stopping the server leaves
no process behind. A server without the jar, with a jar of another ttlstate version, or without
the provider conf is found by `ttlstate.check_server`, which names the flags to add; what the
query itself reports there is checked too."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import zipfile

import pytest

import ttlstate
from connect_server import ConnectServer, env, readme_command

pytestmark = pytest.mark.slow

HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
BATCHES = ["aba", "ca", "bbc"]  # one file per micro-batch, a key per character

CLIENT = r'''
import json, sys, time
import ttlstate
from ttlstate.errors import TtlstateError
from pyspark.sql import SparkSession

url, source, work, runs = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
spark = SparkSession.builder.remote(url).getOrCreate()
assert type(spark).__module__.startswith("pyspark.sql.connect"), type(spark)
out = {}
try:
    info = ttlstate.check_server(spark)
    out["check"] = {"ttlstate": info.ttlstate, "spark": info.spark, "jar": info.jar}
except TtlstateError as e:
    out["check"] = {"error_class": e.error_class, "message": str(e)}
spark.conf.set("spark.sql.shuffle.partitions", "2")
for name, confs in runs.items():
    for k, v in confs.items():
        spark.conf.set(k, v)
    counts = (spark.readStream.schema("key STRING").option("maxFilesPerTrigger", 1).json(source)
              .groupBy("key").count())
    try:
        query = (counts.writeStream.outputMode("update").format("memory").queryName(name)
                 .option("checkpointLocation", f"{work}/ck-{name}").trigger(availableNow=True).start())
        query.awaitTermination()
        rows = [tuple(r) for r in spark.sql(f"SELECT key, count FROM {name}").collect()]
        ops = query.lastProgress["stateOperators"]
        out[name] = {"rows": rows, "metrics": ops[0]["customMetrics"], "batches": query.lastProgress["batchId"] + 1}
    except Exception as e:
        out[name] = {"error": f"{type(e).__name__}: {e}"[:3000]}
    for k in confs:
        spark.conf.unset(k)
print("RESULT " + json.dumps(out))
spark.stop()
'''


def _source(tmp_path):
    source = tmp_path / "events"
    source.mkdir()
    for i, keys in enumerate(BATCHES):
        f = source / f"part-{i}.json"
        f.write_text("".join(json.dumps({"key": k}) + "\n" for k in keys))
        os.utime(f, (1_700_000_000 + 10 * i,) * 2)  # file order = batch order
    return source


def _client(server: ConnectServer, tmp_path, runs: dict) -> dict:
    (tmp_path / "client.py").write_text(CLIENT)
    run = subprocess.run([sys.executable, str(tmp_path / "client.py"), server.url, str(_source(tmp_path)),
                          str(tmp_path), json.dumps(runs)],
                         capture_output=True, text=True, timeout=900, env=env(), cwd=tmp_path)
    assert run.returncode == 0, f"{run.stderr[-3000:]}\nserver:\n{server.log_tail()}"
    return json.loads(next(l for l in run.stdout.splitlines() if l.startswith("RESULT "))[7:])


def _model(ttl_expires_every_batch: bool) -> collections.Counter:
    """The update-mode rows (key, count) of all batches: counts over all batches so far, or,
    with a TTL shorter than a batch, over the batch alone (Flink's rule: written in the batch
    at T, expired in the batch at N iff T + ttl <= N; the batches' timestamps differ)."""
    rows, total = collections.Counter(), collections.Counter()
    for keys in BATCHES:
        if ttl_expires_every_batch:
            total = collections.Counter()
        total.update(keys)
        rows.update((k, total[k]) for k in set(keys))
    return rows


def test_a_query_with_ttl_runs_through_a_separately_started_connect_server(tmp_path):
    command = readme_command()
    assert "SparkConnectServer" in command and "--jars" in command and ttlstate.PROVIDER_CLASS in command
    runs = {
        "ttl_1ms": {"spark.sql.streaming.stateStore.ttlstate.ttl": "1"},
        "ttl_off": {},
        "hdfs": {ttlstate.PROVIDER_CLASS_KEY: HDFS},
    }
    with ConnectServer(command, tmp_path / "server.log") as server:
        result = _client(server, tmp_path, runs)
        services = server.store_services()
    assert result["check"]["ttlstate"] == ttlstate.__version__, result["check"]
    assert result["check"]["jar"].endswith("ttlstate-shim.jar"), result["check"]
    for name in runs:
        assert "error" not in result[name], result[name]["error"]
        assert result[name]["batches"] == len(BATCHES), result[name]
    rows = {name: collections.Counter(tuple(r) for r in result[name]["rows"]) for name in runs}
    assert rows["hdfs"] == _model(False)
    assert rows["ttl_off"] == rows["hdfs"]
    assert rows["ttl_1ms"] == _model(True)
    assert rows["ttl_1ms"] != rows["hdfs"]  # the TTL did change the answer
    assert result["ttl_1ms"]["metrics"]["ttlstateTtlMs"] == 1
    assert "ttlstateRoundTrips" in result["ttl_off"]["metrics"]
    assert not any(k.startswith("ttlstate") for k in result["hdfs"]["metrics"])
    assert services, f"no store service ran under the Connect server:\n{server.log_tail()}"
    assert not server.survivors(), f"processes of the stopped server still run: {server.survivors()}"
    inspect = subprocess.run([sys.executable, "-m", "ttlstate", "inspect", str(tmp_path / "ck-ttl_1ms")],
                             capture_output=True, text=True, timeout=300)
    assert inspect.returncode == 0, inspect.stderr


def _jar_of_version(tmp_path, version: str) -> str:
    """A copy of ttlstate's jar stamped as another ttlstate version."""
    out = tmp_path / f"ttlstate-shim-{version}.jar"
    with zipfile.ZipFile(ttlstate.jar_path()) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == "META-INF/MANIFEST.MF":
                data = data.replace(f"Implementation-Version: {ttlstate.__version__}".encode(),
                                    f"Implementation-Version: {version}".encode())
                assert version.encode() in data
            dst.writestr(item, data)
    return str(out)


JAR_LINE = "  --jars \"$(python -c 'import ttlstate; print(ttlstate.jar_path())')\" \\\n"
PROVIDER_LINE = f"  --conf {ttlstate.PROVIDER_CLASS_KEY}={ttlstate.PROVIDER_CLASS} \\\n"


@pytest.mark.parametrize("case", ["jar missing", "other jar version", "provider not set"])
def test_a_server_not_set_up_for_ttlstate_is_named_with_the_fix(tmp_path, case):
    command = readme_command() + "\n"
    assert JAR_LINE in command and PROVIDER_LINE in command, command
    if case == "jar missing":
        command = command.replace(JAR_LINE, "")
    elif case == "other jar version":
        command = command.replace(JAR_LINE, f"  --jars {_jar_of_version(tmp_path, '0.0.1+other')} \\\n")
    else:
        command = command.replace(PROVIDER_LINE, "")
    with ConnectServer(command.strip(), tmp_path / "server.log") as server:
        result = _client(server, tmp_path, {"counts": {"spark.sql.streaming.stateStore.ttlstate.ttl": "10m"}})
    assert not server.survivors(), server.survivors()
    check, query = result["check"], result["counts"]
    message = check.get("message", "")
    if case == "jar missing":
        assert check.get("error_class") == "TTLSTATE_SERVER_JAR_MISSING", check
        assert "--jars" in message and "ttlstate.jar_path()" in message and ttlstate.PROVIDER_CLASS in message
        # what the server itself says: Spark cannot load the provider the conf names
        assert "ClassNotFoundException" in query.get("error", "") and ttlstate.PROVIDER_CLASS in query["error"], query
    elif case == "other jar version":
        assert check.get("error_class") == "TTLSTATE_SERVER_JAR_MISMATCH", check
        assert "0.0.1+other" in message and ttlstate.__version__ in message and "--jars" in message, message
        assert "error" not in query  # the server itself runs the query with its jar, unaware
    else:
        assert check.get("error_class") == "TTLSTATE_SERVER_NOT_CONFIGURED", check
        assert f"--conf {ttlstate.PROVIDER_CLASS_KEY}={ttlstate.PROVIDER_CLASS}" in message, message
        # what the server itself does: Spark's default provider keeps the state, the TTL is ignored
        assert "error" not in query and not any(k.startswith("ttlstate") for k in query["metrics"]), query
