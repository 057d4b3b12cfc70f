"""`python -m ttlstate migrate` (issue 45): a query run on Spark's HDFS-backed or RocksDB
provider, stopped, migrated to ttlstate and restarted (or the other way) goes on batch for batch
as the same stop and restart on its source provider does; Spark's state data source reads the same rows right
before and right after the migration; moved to ttlstate every entry carries the last batch's
timestamp; a
migration SIGKILLed midway leaves a checkpoint that runs on its source, and runs again; one
during which the query writes is refused; the refusals change nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

import checkpoint_pipeline as pipeline
import cluster
import streaming as st
from offline_tools import cli, cli_json, cli_meanwhile
from streaming import HDFS, TTLSTATE

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
NAMES = {HDFS: "hdfs", ROCKSDB: "rocksdb", TTLSTATE: "ttlstate"}
# TTL on a join's state needs skipNulls (ttlstate refuses the join without it): on every run
SKIP_NULLS = {"spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled": "true"}
CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
TTL = {"spark.sql.streaming.stateStore.ttlstate.ttl": "1h"}
# (source, its confs, target, queries): each direction with some of the operator families (all
# of them everywhere would take several times as long)
CASES = {
    "hdfs-to-ttlstate": (HDFS, SKIP_NULLS, TTLSTATE, ("agg", "join", "pandas")),
    "rocksdb-to-ttlstate": (ROCKSDB, CHANGELOG, TTLSTATE, ("dedup", "session")),
    # checkpoint format v2: ttlstate's snapshot is named by the id the last commit records
    "rocksdb-v2-to-ttlstate": (ROCKSDB, {**CHANGELOG, "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"},
                               TTLSTATE, ("agg",)),
    "ttlstate-to-hdfs": (TTLSTATE, {**TTL, **SKIP_NULLS}, HDFS, ("agg", "session")),
    "ttlstate-to-rocksdb": (TTLSTATE, {**TTL, **SKIP_NULLS, **CHANGELOG}, ROCKSDB, ("dedup", "join")),
}
N_FILES = 6
PARTS = ((0, N_FILES // 2), (N_FILES // 2, N_FILES))
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


def _state_rows(work, tag: str, checkpoints: list[str], confs: dict) -> dict:
    spec = dict(checkpoints=checkpoints, out_file=str(work / f"{tag}.json"), confs=confs)
    proc, log, log_path = st.spawn_spec_process(str(pipeline.HERE / "state_rows.py"), spec, work, tag)
    code = st.wait_or_kill(proc, 600)
    log.close()
    assert code == 0, log_path.read_text(errors="replace")[-4000:]
    return json.loads((work / f"{tag}.json").read_text())


def _offset_conf(ck: str, batch: int) -> dict:
    with open(os.path.join(ck, "offsets", str(batch))) as f:
        return json.loads(f.read().split("\n")[1])["conf"]


@pytest.fixture(scope="module")
def files():
    return st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=91)


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_migrated_query_goes_on_as_on_its_source_provider(tmp_path, files, case):
    source, confs, target, queries = CASES[case]
    to = NAMES[target]
    runs, reference = {}, {}
    for part, (start, stop) in enumerate(PARTS, start=1):
        st.write_files(tmp_path / "events", files, start, stop)
        if part == 1:  # one run, two checkpoints: the one to migrate and its copy, the reference
            runs[1] = reference[1] = pipeline.run(tmp_path, "part-1", source, str(tmp_path / "ck"), confs,
                                                  queries=queries)
            shutil.copytree(tmp_path / "ck", tmp_path / "ck-source")
            continue
        reference[2] = pipeline.run(tmp_path, "source-2", source, str(tmp_path / "ck-source"), confs, queries=queries)
        cks = [str(tmp_path / "ck" / q) for q in queries]
        if case == "rocksdb-to-ttlstate":
            # killed once its first SST is in the checkpoint: the query still runs on its source
            # (a copy of it, run on to the end, gives the source's output), then it is run again
            _migrate_killed_midway(cks[0])
            shutil.copytree(tmp_path / "ck", tmp_path / "ck-killed")
            killed = pipeline.run(tmp_path, "killed-2", source, str(tmp_path / "ck-killed"), confs,
                                  queries=queries[:1])
            assert not killed[queries[0]]["ttlstate_metrics"]
            assert killed[queries[0]]["batches"] == reference[2][queries[0]]["batches"]
            _refused_while_the_query_writes(tmp_path / "tmp-running", cks[0])
        dry = None
        if case == "hdfs-to-ttlstate":  # one case: each run of the command starts a JVM
            dry = cli_json("migrate", cks[0], "--to", to, "--dry-run")
            assert dry["dryRun"] and dry["source"] == NAMES[source] and dry["stores"][0]["keys"] > 0, dry
            assert _offset_conf(cks[0], dry["batch"])[PROVIDER_KEY] == source  # nothing changed
        done = [cli_json("migrate", ck, "--to", to, *(["--ttl", "1h"] if to == "ttlstate" else [])) for ck in cks]
        for ck, r in zip(cks, done):
            assert (r["source"], r["target"], r["dryRun"]) == (NAMES[source], to, False), r
            assert (r["ttlTimestamp"] is not None) == (to == "ttlstate"), r
            assert _offset_conf(ck, r["batch"])[PROVIDER_KEY] == target
        if dry:
            assert [s["keysPerPartition"] for s in done[0]["stores"]] == [s["keysPerPartition"] for s in dry["stores"]]
        if to == "ttlstate":
            # every entry carries batch L's timestamp: untouched, it expires one TTL after it
            stamp = json.loads(open(os.path.join(cks[0], "offsets", str(done[0]["batch"]))).read().split("\n")[1])
            entries = [e for p in (0, 1) for e in cli_json("dump", cks[0], "--operator", 0, "--partition", p)["entries"]]
            assert entries and {e["ttlTimestampMs"] for e in entries} == {stamp["batchTimestampMs"]}, entries[:3]
        # the state right before the migration: batch L's, read from the copy of the
        # checkpoint taken before it (its provider keeps the versions the second part passed)
        sources = [str(tmp_path / "ck-source" / q) for q in queries]
        rows = _state_rows(tmp_path, "rows", [[c, r["batch"]] for c, r in zip(sources, done)] + cks, confs)
        for ck, source_ck in zip(cks, sources):
            before, after = rows[source_ck], rows[ck]
            assert after == before and len(before) > 5, (ck, len(before), len(after))
        # the second part's session still says the source provider: the offset log decides
        runs[part] = pipeline.run(tmp_path, "migrated-2", source, str(tmp_path / "ck"), {**confs, **TTL},
                                  queries=queries)
    for q in queries:
        assert runs[1][q]["ttlstate_metrics"] == reference[2][q]["ttlstate_metrics"] == (source == TTLSTATE), q
        assert runs[2][q]["ttlstate_metrics"] == (target == TTLSTATE), q
        assert len(reference[1][q]["batches"]) >= N_FILES // 2 and len(reference[2][q]["batches"]) >= N_FILES // 2, q
        assert runs[2][q]["batches"] == reference[2][q]["batches"], q
        assert any(reference[2][q]["batches"].values()), q


def _migrate_killed_midway(ck: str):
    """Runs a migration of `ck` and SIGKILLs it as soon as an SST of partition 0 is in the
    checkpoint (written beside the source's files, before the switch); asserts the offset log
    still names the source and that no process it started (its Spark JVM) outlives it."""
    last = max(int(n) for n in os.listdir(os.path.join(ck, "offsets")) if n.isdigit())
    provider = _offset_conf(ck, last)[PROVIDER_KEY]
    sst_dir = os.path.join(ck, "state", "0", "0", "sst")
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate", "migrate", ck, "--to", "ttlstate"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (os.path.isdir(sst_dir) and any(n.endswith(".sst") for n in os.listdir(sst_dir))):
        assert proc.poll() is None and time.monotonic() < deadline, f"migrate ended first ({proc.returncode})"
        time.sleep(0.002)
    proc.send_signal(signal.SIGSTOP)  # at once: reading /proc for its children takes a while
    children = [pid for pid, ppid, _ in cluster._processes() if ppid == proc.pid]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _offset_conf(ck, last)[PROVIDER_KEY] == provider, "the kill came after the switch"
    deadline = time.monotonic() + 60
    while any(cluster.alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children and not any(cluster.alive(pid) for pid in children), children


def _refused_while_the_query_writes(tmp_dir, ck: str):
    """A migration during which offsets/L+1 appears (a restarted query's first write) is refused
    with TTLSTATE_MIGRATE_RUNNING and exit code 2, switches nothing and leaves no temporary
    files; the entry is then removed (the query stopped again)."""
    last = max(int(n) for n in os.listdir(os.path.join(ck, "offsets")) if n.isdigit())
    provider = _offset_conf(ck, last)[PROVIDER_KEY]
    entry = os.path.join(ck, "offsets", str(last + 1))
    proc = cli_meanwhile("migrate", ck, "--to", "ttlstate", tmp_dir=tmp_dir, step="ttlstate-migrate-*",
                         action=lambda: shutil.copyfile(os.path.join(ck, "offsets", str(last)), entry))
    assert proc.returncode == 2 and "TTLSTATE_MIGRATE_RUNNING" in proc.stderr, proc.stderr[-3000:]
    assert _offset_conf(ck, last)[PROVIDER_KEY] == provider
    assert not list(tmp_dir.glob("ttlstate-*")), list(tmp_dir.iterdir())
    os.remove(entry)


# -- refusals: a checkpoint made by hand, as far as each check reads it -------------------------

def _checkpoint(root, provider=HDFS, batches=1, committed=1, operator="stateStoreSave", commit_extra=None):
    os.makedirs(root / "offsets")
    os.makedirs(root / "commits")
    for b in range(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000 + b,
                "conf": {PROVIDER_KEY: provider, "spark.sql.shuffle.partitions": "2"}}
        (root / "offsets" / str(b)).write_text(f"v1\n{json.dumps(meta)}\n{{\"logOffset\":{b}}}")
    for b in range(committed):
        (root / "commits" / str(b)).write_text("v1\n" + json.dumps({"nextBatchWatermarkMs": 0, **(commit_extra or {})}))
    meta_dir = root / "state" / "0" / "_metadata"
    os.makedirs(meta_dir)
    (meta_dir / "metadata").write_text("v1\n" + json.dumps({
        "operatorInfo": {"operatorId": 0, "operatorName": operator},
        "stateStoreInfo": [{"storeName": "default", "numColsPrefixKey": 0, "numPartitions": 2}]}))
    for p in (0, 1):
        os.makedirs(root / "state" / "0" / str(p))
    return root


def _tree(root) -> dict:
    out = {}
    for d, _, names in os.walk(root):
        for n in names:
            p = os.path.join(d, n)
            with open(p, "rb") as f:
                out[os.path.relpath(p, root)] = f.read()
    return out


@pytest.mark.parametrize("case, made, error_class", [
    ("no commit", dict(committed=0), "TTLSTATE_MIGRATE_NOT_STOPPED"),
    ("a batch that did not commit", dict(batches=2, committed=1), "TTLSTATE_MIGRATE_NOT_STOPPED"),
    ("already on ttlstate", dict(provider=TTLSTATE), "TTLSTATE_MIGRATE_SAME_PROVIDER"),
    ("a provider of its own", dict(provider="com.example.MyStateStoreProvider"), "TTLSTATE_MIGRATE_UNKNOWN_PROVIDER"),
    ("transformWithState", dict(operator="transformWithStateExec"), "TTLSTATE_MIGRATE_UNSUPPORTED"),
    ("a store without a state schema", dict(), "TTLSTATE_MIGRATE_UNSUPPORTED"),
])
def test_a_refused_migration_names_its_reason_and_changes_nothing(tmp_path, case, made, error_class):
    ck = _checkpoint(tmp_path / "ck", **made)
    before = _tree(ck)
    r = cli("migrate", str(ck), "--to", "ttlstate", rc=2)
    assert f"[{error_class}]" in r.stderr, (case, r.stderr)
    assert _tree(ck) == before, case


def test_an_unknown_target_is_a_usage_error(tmp_path):
    ck = _checkpoint(tmp_path / "ck")
    r = cli("migrate", str(ck), "--to", "cassandra", rc=2)
    assert "--to" in r.stderr and "ttlstate" in r.stderr, r.stderr
