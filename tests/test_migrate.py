"""`python -m ttlstate migrate` (issue 45): a query of each operator family run on Spark's
HDFS-backed or RocksDB provider, stopped, migrated to ttlstate and restarted (or the other way)
goes on batch for batch as the same stop and restart on its source provider does; Spark's state
data source reads the same rows right before and right after the migration; moved to ttlstate
every entry carries the last batch's timestamp. A migration SIGKILLed at each step (while Spark
reads the source's state, while the target provider writes its files in a temporary directory,
once ttlstate's first SST or the RocksDB provider's is in the checkpoint, at the switch) leaves a
checkpoint that runs on (on its source, or at the switch on either), the command run again
completes it, and the next command removes the killed one's temporary files. One during which
the query writes is refused; the refusals change nothing, of several checkpoints too."""

from __future__ import annotations

import glob
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
import provider_fixtures as fixtures
import state_rows
import streaming as st
import ttl_queries as tq
from offline_tools import cli, cli_json, cli_meanwhile, conf_args, tmpdir_env
from streaming import HDFS, TTLSTATE

ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
NAMES = {HDFS: "hdfs", ROCKSDB: "rocksdb", TTLSTATE: "ttlstate"}
# TTL on a join's state needs skipNulls (ttlstate refuses the join without it): on every run
SKIP_NULLS = {"spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins.enabled": "true"}
CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
TTL = {"spark.sql.streaming.stateStore.ttlstate.ttl": "1h"}
# every operator family: aggregation, dropDuplicatesWithinWatermark, dropDuplicates (with a
# watermark), session windows, applyInPandasWithState, the stream-stream join
FAMILIES = ("agg", "dedup", "dropdup", "session", "pandas", "join")
SOURCES = {  # direction -> (source, its confs, target)
    "hdfs-to-ttlstate": (HDFS, SKIP_NULLS, TTLSTATE),
    "rocksdb-to-ttlstate": (ROCKSDB, {**CHANGELOG, **SKIP_NULLS}, TTLSTATE),
    "ttlstate-to-hdfs": (TTLSTATE, {**TTL, **SKIP_NULLS}, HDFS),
    "ttlstate-to-rocksdb": (TTLSTATE, {**TTL, **SKIP_NULLS, **CHANGELOG}, ROCKSDB),
}
# (source, its confs, target, queries). In every run: each direction with some families, every
# family both into ttlstate and out of it (all of them everywhere took 653 s of test time in a CI
# run, against 394); `make test-thorough` adds the rest of every direction's families.
CASES = {
    "hdfs-to-ttlstate": (*SOURCES["hdfs-to-ttlstate"], ("agg", "join", "pandas")),
    "rocksdb-to-ttlstate": (*SOURCES["rocksdb-to-ttlstate"], ("dedup", "dropdup", "session")),
    # checkpoint format v2: ttlstate's snapshot is named by the id the last commit records
    "rocksdb-v2-to-ttlstate": (ROCKSDB, {**CHANGELOG, "spark.sql.streaming.stateStore.checkpointFormatVersion": "2"},
                               TTLSTATE, ("agg",)),
    "ttlstate-to-hdfs": (*SOURCES["ttlstate-to-hdfs"], ("agg", "session", "pandas")),
    "ttlstate-to-rocksdb": (*SOURCES["ttlstate-to-rocksdb"], ("dedup", "dropdup", "join")),
}
CASES.update({f"{d}-rest": (*SOURCES[d], tuple(f for f in FAMILIES if f not in CASES[d][3])) for d in SOURCES})
THOROUGH = {f"{d}-rest" for d in SOURCES}
N_FILES = 6
PARTS = ((0, N_FILES // 2), (N_FILES // 2, N_FILES))
PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"


def _last_offset(ck: str) -> int:
    return max(int(n) for n in os.listdir(os.path.join(ck, "offsets")) if n.isdigit())


def _offset_conf(ck: str, batch: int) -> dict:
    with open(os.path.join(ck, "offsets", str(batch))) as f:
        return json.loads(f.read().split("\n")[1])["conf"]


@pytest.fixture(scope="module")
def files():
    return st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=91)


TEST_CASES = "test_a_migrated_query_goes_on_as_on_its_source_provider"


@pytest.fixture(scope="module")
def first_parts(request, tmp_path_factory, files):
    """The first part of each case this run selects, in one driver (a driver each took 20 to 30
    CPU-seconds): (the input directory, {case: (its checkpoint root, the output)}). The cases read
    the same files from one directory, the second part's written once the first is processed."""
    selected = dict.fromkeys(item.callspec.params["case"] for item in request.session.items
                             if item.module is request.module and item.originalname == TEST_CASES)
    work = tmp_path_factory.mktemp("migrate-part-1")
    st.write_files(work / "events", files, *PARTS[0])
    cases = {c: (CASES[c][0], str(work / c), CASES[c][3], CASES[c][1]) for c in selected}
    out = pipeline.run_cases(work, "part-1", cases)
    st.write_files(work / "events", files, *PARTS[1])
    return work / "events", {c: (cases[c][1], out[c]) for c in cases}


@pytest.mark.slow
@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.thorough) if c in THOROUGH else c for c in CASES])
def test_a_migrated_query_goes_on_as_on_its_source_provider(tmp_path, first_parts, case):
    source, confs, target, queries = CASES[case]
    to = NAMES[target]
    events, firsts = first_parts
    root, part_1 = firsts[case]
    # the checkpoint to migrate and its copy, the reference
    shutil.copytree(root, tmp_path / "ck")
    shutil.copytree(root, tmp_path / "ck-source")
    runs, reference = {1: part_1}, {1: part_1}
    cks, killed_tmp = [str(tmp_path / "ck" / q) for q in queries], None
    # one driver, after the migration, reads the state and runs the second part three ways
    each = {"source": (str(tmp_path / "ck-source"), queries), "migrated": (str(tmp_path / "ck"), queries)}
    if case == "rocksdb-to-ttlstate":
        # killed once its first SST is in the checkpoint: the query still runs on its source
        # (a copy of it, run on to the end, gives the source's output), then it is run again
        sst_dir = os.path.join(cks[0], "state", "0", "0", "sst")
        killed_tmp = tmp_path / "tmp-killed-sst"  # where the killed command leaves its temporary files
        killed_tmp.mkdir()
        _migrate_killed(cks[0], to, lambda: os.path.isdir(sst_dir) and any(
            n.endswith(".sst") for n in os.listdir(sst_dir)), killed_tmp)
        shutil.copytree(tmp_path / "ck", tmp_path / "ck-killed")
        each["killed"] = (str(tmp_path / "ck-killed"), queries[:1])
        _refused_while_the_query_writes(tmp_path / "tmp-running", cks[0])
    if case == "ttlstate-to-rocksdb":
        # killed once the RocksDB provider's first SST is moved into the checkpoint: it still
        # runs on ttlstate, and the command run again completes
        sst_dir = os.path.join(cks[0], "state", "0", "0", "SSTs")
        killed_tmp = tmp_path / "tmp-killed-move"
        killed_tmp.mkdir()
        _migrate_killed(cks[0], to, lambda: os.path.isdir(sst_dir) and any(
            n.endswith(".sst") for n in os.listdir(sst_dir)), killed_tmp,
            step_from=lambda: any(killed_tmp.glob("ttlstate-migrate-*/provider-0")))
        shutil.copytree(tmp_path / "ck", tmp_path / "ck-killed")
        each["killed"] = (str(tmp_path / "ck-killed"), queries[:1])
    if case == "rocksdb-v2-to-ttlstate":
        # on a copy, killed at the switch: every store's snapshot installed, the offset log
        # rewritten or about to be. Either way the copy runs on (on ttlstate, or on its
        # source until the command, run again, completes) with the source's output
        shutil.copytree(tmp_path / "ck", tmp_path / "ck-switch")
        ck_switch = str(tmp_path / "ck-switch" / queries[0])
        version = _last_offset(ck_switch) + 1
        switched = _migrate_killed(ck_switch, to, lambda: all(
            glob.glob(os.path.join(ck_switch, "state", "0", str(p), f"{version}_*.manifest")) for p in (0, 1)),
            before_switch=False)
        if not switched:
            assert cli_json("migrate", ck_switch, "--to", to)["target"] == to
        assert _offset_conf(ck_switch, version - 1)[PROVIDER_KEY] == TTLSTATE
        each["switch"] = (str(tmp_path / "ck-switch"), queries)
    if case in ("ttlstate-to-hdfs", "hdfs-to-ttlstate"):
        # killed while the target provider writes its stores in a temporary directory, or
        # while Spark reads the source's state into one: the checkpoint is as it was, byte
        # for byte
        tree, killed_tmp = _tree(tmp_path / "ck"), tmp_path / "tmp-killed"
        killed_tmp.mkdir()
        step = "ttlstate-migrate-*/" + ("provider-0" if to != "ttlstate" else "rows-0")
        _migrate_killed(cks[0], to, lambda: any(killed_tmp.glob(step)), killed_tmp)
        assert _tree(tmp_path / "ck") == tree
    dry = None
    if case == "hdfs-to-ttlstate":  # one case: each run of the command starts a JVM
        dry = cli_json("migrate", cks[0], "--to", to, "--dry-run")
        assert dry["dryRun"] and dry["source"] == NAMES[source] and dry["stores"][0]["keys"] > 0, dry
        assert _offset_conf(cks[0], dry["batch"])[PROVIDER_KEY] == source  # nothing changed
    # every query's checkpoint in one command, where the killed one left its temporary
    # files: it removes them
    done = cli_json("migrate", *cks, "--to", to, *(["--ttl", "1h"] if to == "ttlstate" else []),
                    tmp_dir=killed_tmp)
    done = done if isinstance(done, list) else [done]
    assert [r["checkpoint"] for r in done] == cks, done
    assert not killed_tmp or not list(killed_tmp.glob("ttlstate-*")), list(killed_tmp.iterdir())
    for ck, r in zip(cks, done):
        assert (r["source"], r["target"], r["dryRun"]) == (NAMES[source], to, False), r
        assert (r["ttlTimestamp"] is not None) == (to == "ttlstate"), r
        assert _offset_conf(ck, r["batch"])[PROVIDER_KEY] == target
    if dry:
        assert [s["keysPerPartition"] for s in done[0]["stores"]] == [s["keysPerPartition"] for s in dry["stores"]]
    if to == "ttlstate":
        # every entry carries batch L's timestamp: untouched, it expires one TTL after it
        stamp = json.loads(open(os.path.join(cks[0], "offsets", str(done[0]["batch"]))).read().split("\n")[1])
        entries = [e for d in cli_json("dump", cks[0], "--operator", 0) for e in d["entries"]]
        assert entries and {e["ttlTimestampMs"] for e in entries} == {stamp["batchTimestampMs"]}, entries[:3]
    # the state right before the migration: batch L's, read from the copy of the checkpoint
    # taken before it; right after it: the migrated checkpoint's last. Then the second part,
    # on the copy (the source provider's output), on the migrated checkpoint, whose session
    # still says the source provider (the offset log decides), and on the killed one's copy
    sources = [str(tmp_path / "ck-source" / q) for q in queries]
    outs, rows = pipeline.run_each(tmp_path, "part-2", source, each, {**confs, **TTL},
                                   rows=[[c, r["batch"]] for c, r in zip(sources, done)] + cks, input_dir=events)
    for ck, source_ck in zip(cks, sources):
        before, after = rows[source_ck], rows[ck]
        assert after == before and len(before) > 5, (ck, len(before), len(after))
    reference[2], runs[2] = outs["source"], outs["migrated"]
    if "killed" in outs:  # the killed migration left a checkpoint that runs on its source
        assert outs["killed"][queries[0]]["ttlstate_metrics"] == (source == TTLSTATE)
        assert outs["killed"][queries[0]]["batches"] == reference[2][queries[0]]["batches"]
    if "switch" in outs:
        assert outs["switch"][queries[0]]["ttlstate_metrics"]
        assert outs["switch"][queries[0]]["batches"] == reference[2][queries[0]]["batches"]
    for q in queries:
        assert runs[1][q]["ttlstate_metrics"] == reference[2][q]["ttlstate_metrics"] == (source == TTLSTATE), q
        assert runs[2][q]["ttlstate_metrics"] == (target == TTLSTATE), q
        assert len(reference[1][q]["batches"]) >= N_FILES // 2 and len(reference[2][q]["batches"]) >= N_FILES // 2, q
        assert runs[2][q]["batches"] == reference[2][q]["batches"], q
        assert any(reference[2][q]["batches"].values()), q


def _single_cpu_steps(pid: int):
    """Pins `pid` and this process to one CPU, this process under SCHED_FIFO, so that `pid` runs
    only while this process sleeps and is stopped as soon as it wakes; returns the function that
    undoes it, or None where the scheduler refuses (then the slices are as long as the machine's
    load makes them)."""
    cpus = os.sched_getaffinity(0)
    cpu = min(cpus)
    try:
        os.sched_setaffinity(pid, {cpu})
        os.sched_setaffinity(0, {cpu})
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(1))
    except OSError:
        os.sched_setaffinity(0, cpus)
        return None

    def undo():
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.sched_setaffinity(0, cpus)
    return undo


def _migrate_killed(ck: str, to: str, reached, tmp_dir=None, before_switch: bool = True, step_from=None) -> bool:
    """Runs a migration of `ck` to `to` (with TMPDIR=`tmp_dir`, if given) and SIGKILLs it as soon
    as `reached()`; asserts the offset log still names the source (unless not `before_switch`)
    and that no process it started (its Spark JVM) outlives it. Returns whether it switched.
    Once `step_from()` (if given), the command runs in slices of tens of microseconds, stopped while
    `reached()` is checked: moving a few small files and switching took less than one check of 2 ms
    and less than a slice of one. The slices are bounded by the scheduler (`_single_cpu_steps`):
    on a loaded machine this process was preempted between SIGCONT and the next SIGSTOP, and the
    command ran for a whole time slice (CI20: "the kill came after the switch")."""
    last = _last_offset(ck)
    provider = _offset_conf(ck, last)[PROVIDER_KEY]
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate", "migrate", ck, "--to", to],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=tmpdir_env(tmp_dir))
    deadline = time.monotonic() + 300
    stepping = False
    steps = None
    try:
        while True:
            if step_from is not None and not stepping and step_from():
                stepping = True
                steps = _single_cpu_steps(proc.pid)
            if stepping:
                proc.send_signal(signal.SIGSTOP)
            if reached():
                break
            assert proc.poll() is None and time.monotonic() < deadline, f"migrate ended first ({proc.returncode})"
            if stepping:
                proc.send_signal(signal.SIGCONT)  # and stopped again at the top: a slice of tens of µs
                if steps is not None:
                    time.sleep(50e-6)  # the command runs on this CPU until this process wakes
            else:
                time.sleep(0.002)
        proc.send_signal(signal.SIGSTOP)  # at once: reading /proc for its children takes a while
    finally:
        if steps is not None:
            steps()
    children = [pid for pid, ppid, _ in cluster._processes() if ppid == proc.pid]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    switched = _offset_conf(ck, last)[PROVIDER_KEY] != provider
    assert not (switched and before_switch), "the kill came after the switch"
    assert not tmp_dir or list(tmp_dir.glob("ttlstate-migrate-*")), "the killed command removed its files"
    deadline = time.monotonic() + 60
    while any(cluster.alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert children and not any(cluster.alive(pid) for pid in children), children
    return switched


def _refused_while_the_query_writes(tmp_dir, ck: str):
    """A migration during which offsets/L+1 appears (a restarted query's first write) is refused
    with TTLSTATE_MIGRATE_RUNNING and exit code 2, switches nothing and leaves no temporary
    files; the entry is then removed (the query stopped again)."""
    last = _last_offset(ck)
    provider = _offset_conf(ck, last)[PROVIDER_KEY]
    entry = os.path.join(ck, "offsets", str(last + 1))
    proc = cli_meanwhile("migrate", ck, "--to", "ttlstate", tmp_dir=tmp_dir, step="ttlstate-migrate-*",
                         action=lambda: shutil.copyfile(os.path.join(ck, "offsets", str(last)), entry))
    assert proc.returncode == 2 and "TTLSTATE_MIGRATE_RUNNING" in proc.stderr, proc.stderr[-3000:]
    assert _offset_conf(ck, last)[PROVIDER_KEY] == provider
    assert not list(tmp_dir.glob("ttlstate-*")), list(tmp_dir.iterdir())
    os.remove(entry)


@pytest.mark.slow
def test_checkpoints_spark_wrote_migrate_to_ttlstate(tmp_path):
    """The checkpoints of Spark's providers kept on disk (tests/provider_fixtures.py: the
    HDFS-backed provider, the RocksDB provider with changelogs, without, and in checkpoint
    format v2), each migrated to ttlstate, hold the rows Spark's state data source read from
    them when they were made."""
    cks = {}
    for name, (provider, _, query) in fixtures.FIXTURES.items():
        shutil.copytree(fixtures.DATA / name / "ck", tmp_path / name)
        cks[name] = str(tmp_path / name / query)
    # one command, one session, its confs set for each (the provider, format v2 or not)
    done = cli_json("migrate", *cks.values(), "--to", "ttlstate")
    for (name, ck), r in zip(cks.items(), done):
        assert (r["checkpoint"], r["source"], r["target"], r["partitions"]) == (
            ck, NAMES[fixtures.FIXTURES[name][0]], "ttlstate", 2), r
        assert _offset_conf(ck, r["batch"])[PROVIDER_KEY] == TTLSTATE
    read = state_rows.read(tmp_path, "rows", [[ck, None, fixtures.FIXTURES[name][1]] for name, ck in cks.items()], {})
    for name, ck in cks.items():
        assert read[ck] == fixtures.rows(name) and len(read[ck]) > 5, (name, len(read[ck]), len(fixtures.rows(name)))


# -- TTL on the way in: migrated entries expire one TTL after the migration's batch -------------

# (key, value, event time in hours after BASE_TS) per batch of a count per key with a 1-minute
# watermark; the first two files on the HDFS-backed provider, then migrated to ttlstate with a
# TTL of one day on event time: every entry (a 2, b 1, c 1, d 1) gets batch L's watermark, at
# most 10 h less a minute. The watermark of each later batch is the largest event time before it
# less a minute.
EVENT_COUNTS = [
    [("a", 0, 0), ("b", 0, 0), ("c", 0, 0)],
    [("a", 1, 10), ("d", 1, 10)],
    [("e", 2, 20)],                               # W 10h: a migrated entry is live
    [("a", 3, 30)],                               # W 20h: a, touched, goes on (3) and is stamped 20h
    [("e", 4, 40)],                               # W 30h
    [("a", 5, 41), ("b", 5, 41), ("c", 5, 41)],   # W 40h: a (stamped 20h) live; b and c, untouched
]                                                 # since the migration, expired a day after it
EVENT_COUNTS_AFTER = [[("e", 1)], [("a", 3)], [("e", 2)], [("a", 4), ("b", 1), ("c", 1)]]


@pytest.mark.slow
def test_migrated_entries_expire_one_ttl_after_the_migration_unless_touched(spark, tmp_path):
    """Event time, so the test is a backfill (no waiting): a key touched after the migration goes
    on with its migrated count and outlives the others; the keys not touched expire one TTL
    (a day of event time) after the watermark of the migration's batch, and count from 1 again."""
    ck, inputs = str(tmp_path / "ck"), str(tmp_path / "in")

    def run(provider: str, confs: dict) -> tq.Outcome:
        spec = tq.QuerySpec(name=f"migrate_ttl_{NAMES[provider]}", query="count_by_key_wm", inputs=[inputs],
                            checkpoint=ck, confs=confs, provider=provider)
        [outcome] = tq.run_side_by_side(spark, [spec])
        return outcome.check()

    tq.write_event_batches(inputs, EVENT_COUNTS, 0, 2)
    first = run(HDFS, {})
    assert [sorted(map(tuple, rows)) for _, rows in sorted(first.batches.items()) if rows] == [
        [("a", 1), ("b", 1), ("c", 1)], [("a", 2), ("d", 1)]]
    event_time = {tq.key("timeCharacteristic"): "EventTime"}
    r = cli_json("migrate", ck, "--to", "ttlstate", "--ttl", "1d", *conf_args(event_time))
    watermark = tq.batch_watermarks(ck)[r["batch"]]
    assert r["ttlTimestamp"] == watermark and 0 < watermark <= tq.event_ms(10) - 60_000, (r, watermark)

    tq.write_event_batches(inputs, EVENT_COUNTS, 2)
    second = run(TTLSTATE, {tq.key("ttl"): "1d", **event_time})
    assert min(second.batches) == r["batch"] + 1, sorted(second.batches)
    assert [sorted(map(tuple, rows)) for _, rows in sorted(second.batches.items()) if rows] == EVENT_COUNTS_AFTER
    assert second.metric("ttlstateTtlEventTime") and set(second.metric("ttlstateTtlEventTime").values()) == {1}


# -- refusals: a checkpoint made by hand, as far as each check reads it -------------------------

def _checkpoint(root, provider=HDFS, batches=1, committed=1, operator="stateStoreSave", commit_extra=None,
                conf=None):
    os.makedirs(root / "offsets")
    os.makedirs(root / "commits")
    for b in range(batches):
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_700_000_000_000 + b,
                "conf": {PROVIDER_KEY: provider, "spark.sql.shuffle.partitions": "2", **(conf or {})}}
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
    ("join state format 3", dict(operator="symmetricHashJoin", conf={"spark.sql.streaming.join.stateFormatVersion": "3"}),
     "TTLSTATE_MIGRATE_UNSUPPORTED"),
    ("a store without a state schema", dict(), "TTLSTATE_MIGRATE_UNSUPPORTED"),
])
def test_a_refused_migration_names_its_reason_and_changes_nothing(tmp_path, case, made, error_class):
    ck = _checkpoint(tmp_path / "ck", **made)
    before = _tree(ck)
    r = cli("migrate", str(ck), "--to", "ttlstate", rc=2)
    assert f"[{error_class}]" in r.stderr, (case, r.stderr)
    assert case != "join state format 3" or "join state format 3" in r.stderr, r.stderr
    assert _tree(ck) == before, case


def test_a_checkpoint_it_cannot_write_is_refused(tmp_path):
    """The state directory read-only, and the command run without the capability that lets root
    write anyway (CAP_DAC_OVERRIDE: the tests run as root): TTLSTATE_MIGRATE_NOT_WRITABLE, exit
    2, nothing changed."""
    ck = _checkpoint(tmp_path / "ck")
    before = _tree(ck)
    os.chmod(ck / "state", 0o555)
    try:
        caps = "-dac_override,-dac_read_search"
        proc = subprocess.run(["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", sys.executable, "-m",
                               "ttlstate", "migrate", str(ck), "--to", "ttlstate"], capture_output=True, text=True,
                              timeout=300)
    finally:
        os.chmod(ck / "state", 0o755)
    assert proc.returncode == 2 and "[TTLSTATE_MIGRATE_NOT_WRITABLE]" in proc.stderr, proc.stderr
    assert f"{ck / 'state'} cannot be written" in proc.stderr, proc.stderr
    assert _tree(ck) == before


def test_several_checkpoints_are_all_checked_before_any_changes(tmp_path):
    """One refused checkpoint of several (the second, already on ttlstate): exit 2, and the
    first, which could be migrated, is not; a location named twice is refused too."""
    name, (_, _, query) = next(iter(fixtures.FIXTURES.items()))
    shutil.copytree(fixtures.DATA / name / "ck", tmp_path / name)
    first, second = tmp_path / name / query, _checkpoint(tmp_path / "second", provider=TTLSTATE)
    before = _tree(first)
    r = cli("migrate", first, second, "--to", "ttlstate", rc=2)
    assert "[TTLSTATE_MIGRATE_SAME_PROVIDER]" in r.stderr and str(second) in r.stderr, r.stderr
    assert "migrated before the failure" not in r.stderr and _tree(first) == before
    r = cli("migrate", first, first, "--to", "ttlstate", rc=2)
    assert "named twice" in r.stderr and _tree(first) == before, r.stderr


def test_an_unknown_target_is_a_usage_error(tmp_path):
    ck = _checkpoint(tmp_path / "ck")
    r = cli("migrate", str(ck), "--to", "cassandra", rc=2)
    assert "--to" in r.stderr and "ttlstate" in r.stderr, r.stderr
