"""ttlstate with its checkpoint on HDFS (issue 44): a MiniDFSCluster of 3 datanodes (Hadoop's
minicluster, resolved by `make servers`; tests/hdfs_cluster.py) in a JVM of its own, each driver
a process of its own, the Hadoop client pyspark's. The aggregation and dropDuplicatesWithinWatermark
with TTL, their checkpoints at `hdfs://`, give batch for batch the output of the HDFS-backed
provider with a local checkpoint, across a driver restart, with a datanode shut down while the
second driver commits; the state files are in HDFS."""

from __future__ import annotations

import json
import threading
import time

import pytest

import checkpoint_pipeline as pipeline
import streaming as st
from hdfs_cluster import running_hdfs
from offline_tools import cli_json
from streaming import HDFS, TTLSTATE

pytestmark = [pytest.mark.hdfs, pytest.mark.slow]

N_FILES = 8
CK = "/checkpoints/plain"
PARTS = ((0, N_FILES // 2), (N_FILES // 2, N_FILES))  # each part a driver of its own


@pytest.fixture(scope="module")
def hdfs(tmp_path_factory):
    with running_hdfs(tmp_path_factory.mktemp("hdfs"), datanodes=3) as cluster:
        yield cluster


def _commits(hdfs, checkpoint_path: str) -> int:
    """The aggregation's committed batches."""
    return sum(1 for p in hdfs.list(f"{checkpoint_path}/agg/commits") if p.rsplit("/", 1)[-1].isdigit())


@pytest.fixture(scope="module")
def on_hdfs(hdfs, tmp_path_factory):
    """The HDFS provider's output of each part (a local checkpoint) and ttlstate's (its
    checkpoint at CK on HDFS), datanode 0 shut down once the second part's driver has committed
    its first batch: (expected, actual, the second driver's log)."""
    work = tmp_path_factory.mktemp("hdfs-run")
    files = st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=83)
    actual = {}
    killed = threading.Event()

    def kill_a_datanode_after_the_first_commit(proc):
        """Shut datanode 0 down while the driver runs on (the rest of the aggregation and all
        of the dedup)."""
        before = _commits(hdfs, CK)
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if _commits(hdfs, CK) > before:
                hdfs.stop_datanode(0)
                killed.set()
                return
            time.sleep(0.2)

    reference = work / "reference"
    expected = pipeline.run_parts(reference, "hdfs-provider", HDFS, str(reference / "ck-hdfs"), {}, files, PARTS)
    for part, (start, stop) in enumerate(PARTS, start=1):
        st.write_files(work / "events", files, start, stop)
        actual[part] = pipeline.run(work, f"ttlstate-{part}", TTLSTATE, hdfs.uri + CK, pipeline.TTLSTATE_CONFS,
                                    while_running=kill_a_datanode_after_the_first_commit if part == 2 else None,
                                    log_level="WARN" if part == 2 else "ERROR")
    assert killed.is_set(), "the second driver ended before its first commit was seen"
    return expected, actual, (work / "ttlstate-2.log").read_text(errors="replace")


def test_checkpoints_on_hdfs_survive_a_restart_and_a_dead_datanode(hdfs, on_hdfs):
    expected, actual, log = on_hdfs
    # the dead datanode was in write pipelines the client then rebuilt without it (HDFS client's log)
    assert "Excluding datanode" in log
    pipeline.assert_same_batches(expected, actual, min_batches=N_FILES // 2, min_rows=200)
    # the state is in HDFS: changelogs, and snapshots with their SSTs, of both queries
    state = hdfs.list(CK)
    for q in ("agg", "dedup"):
        files_of_q = [p for p in state if p.startswith(f"{CK}/{q}/state/")]
        assert any(p.endswith(".changelog") for p in files_of_q), files_of_q[:20]
        assert any(p.endswith(".manifest") for p in files_of_q) and any(p.endswith(".sst") for p in files_of_q), \
            files_of_q[:40]


def test_the_offline_tools_on_hdfs(hdfs, on_hdfs):
    """inspect, dump, verify and repartition on the aggregation's checkpoint in HDFS (a datanode
    still down), through the Hadoop client as the query used it."""
    expected, _, _ = on_hdfs
    agg = hdfs.uri + CK + "/agg"
    keys = {json.loads(row)[0] for part in expected.values() for rows in part["agg"]["batches"].values()
            for row in rows}
    doc = cli_json("inspect", agg)
    assert doc["checkpoint"] == agg and doc["keys"] == len(keys) >= 40, doc
    assert all(s["path"].startswith(agg + "/state/") for o in doc["operators"] for s in o["stores"]), doc
    dumped = cli_json("dump", agg, "--operator", 0)  # every partition, one copy
    assert [d["partition"] for d in dumped] == [0, 1], dumped
    assert {e["key"]["key"] for d in dumped for e in d["entries"]} == keys
    report = cli_json("verify", agg)
    assert report["ok"] and report["filesChecked"] > 10, report
    commits = _commits(hdfs, CK)
    r = cli_json("repartition", agg, "--partitions", 3)
    assert (r["checkpoint"], r["oldPartitions"], r["newPartitions"]) == (agg, 2, 3), r
    assert _commits(hdfs, CK) == commits + 1  # the rescale's batch, in HDFS's commit log
    doc = cli_json("inspect", agg)
    assert doc["operators"][0]["partitions"] == [0, 1, 2] and doc["keys"] == len(keys), doc
    assert cli_json("verify", agg)["ok"]


def test_migrate_on_hdfs(hdfs, on_hdfs, tmp_path):
    """`migrate` on a checkpoint in HDFS (issue 45 through issue 44's copy): the dedup run on
    ttlstate for the first part, migrated to Spark's RocksDB provider, runs the second part on it
    (the driver still sets ttlstate's provider class; the offset log overrides it) with the HDFS
    provider's output batch for batch."""
    expected, _, _ = on_hdfs
    files = st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=83)
    ck, runs = hdfs.uri + "/checkpoints/migrate", {}
    (start, stop), second = PARTS
    st.write_files(tmp_path / "events", files, start, stop)
    runs[1] = pipeline.run(tmp_path, "ttlstate-1", TTLSTATE, ck, pipeline.TTLSTATE_CONFS, queries=["dedup"])
    pipeline.assert_same_batches({1: expected[1]}, runs, queries=["dedup"], min_batches=N_FILES // 2)

    r = cli_json("migrate", ck + "/dedup", "--to", "rocksdb")
    assert (r["checkpoint"], r["source"], r["target"]) == (ck + "/dedup", "ttlstate", "rocksdb"), r
    assert r["stores"][0]["keys"] > 0 and r["stores"][0]["keys"] == sum(r["stores"][0]["keysPerPartition"]), r

    st.write_files(tmp_path / "events", files, *second)
    runs[2] = pipeline.run(tmp_path, "migrated-2", TTLSTATE, ck, pipeline.TTLSTATE_CONFS, queries=["dedup"])
    assert not runs[2]["dedup"]["ttlstate_metrics"], "the migrated query ran on ttlstate"
    assert runs[2]["dedup"]["batches"] == expected[2]["dedup"]["batches"]
    state = hdfs.list("/checkpoints/migrate/dedup/state/0/0")
    assert any(p.endswith(f"/{r['stateVersion']}.zip") for p in state), state  # the RocksDB provider's snapshot
