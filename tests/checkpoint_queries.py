"""Helpers of the checkpoint tests (issue 4): the test FileSystem, a subprocess runner,
an exact model of the test aggregation, and what a store's checkpoint directory holds.

The test FileSystem (`io.ttlstate.testfs.FaultyFileSystem`, jvm-shim/src/test/java, built
into jvm-shim/build/libs/ttlstate-testfs.jar by `make jar`) is the local file system under
the scheme `faulty:` (`faulty:///tmp/x` is `/tmp/x`); it counts bytes and files and fails
creates, writes, opens, renames or loses renames on request (static controls reached
through py4j). A JVM's classpath is fixed when it starts, and the pytest process's JVM is
the shared session of conftest.py, so every query that uses `faulty:` runs here in a
subprocess: `python checkpoint_queries.py spec.json` builds its own SparkSession with both
jars (and its own maintenance interval, which Spark fixes per JVM), runs the spec's steps in
order and writes a JSON result. The same subprocess is the "fresh JVM" of the recovery
tests.

Steps (dicts, `"do"` names the kind):
- `run`: one query (Trigger.AvailableNow, one input file per batch, foreachBatch sink),
  with optional faults set on the test FileSystem first; records the sink rows of every
  batch, the progress, the error (message and JVM stack trace), the FileSystem counters and
  the files of the store directories right after the query ended (`store_files`).
  `settle` waits after the run until the store directories hold exactly what retention
  must keep (`retention_report`), then records that report.
- `read_state`: the aggregation state of given batch ids through Spark's `statestore` data
  source (a new provider instance per read, each with an empty local cache directory).
- `rmtree`: deletes a directory (the local cache) between steps.
- `copytree`: copies a directory (a checkpoint) between steps.
- `parallel`: runs its `steps` at once, each in a thread (independent queries in one JVM).
- `write_batches`: adds input files (batches `start..stop-1`) between runs.
- `sleep`: gives background maintenance time between steps.
- `wait_unloaded`: waits until no store of a checkpoint is loaded in the JVM any more (a
  stopped query's stores are unloaded, after their last maintenance, by Spark's maintenance).
- `list_stores`: the files (and sizes) of a checkpoint's store directories at that moment.
- `call`: calls a function of this module with the session (the FileSystem self-test).
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import pathlib
import random
import re
import shutil
import sys
import threading
import time
import traceback
import uuid
from typing import Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jvm_state  # noqa: E402
import streaming as st  # noqa: E402

REPO = pathlib.Path(__file__).resolve().parent.parent
TESTFS_JAR = REPO / "jvm-shim" / "build" / "libs" / "ttlstate-testfs.jar"
TESTFS_CLASS = "io.ttlstate.testfs.FaultyFileSystem"
TESTFS_SCHEME = "faulty"

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
MODE = jvm_state.MODE_KEY
CACHE_DIR = jvm_state.CACHE_DIR_KEY
TRANSFER_THREADS = PREFIX + "checkpoint.transferThreads"
MIN_BATCHES = "spark.sql.streaming.minBatchesToRetain"
# minVersionsToDelete = round(minBatchesToRetain x this): fewer stale versions are kept for later
RATIO_EXTRA_SPACE = "spark.sql.streaming.ratioExtraSpaceAllowedInCheckpoint"
MIN_DELTAS = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
MAINTENANCE_INTERVAL = "spark.sql.streaming.stateStore.maintenanceInterval"
FORMAT_VERSION = jvm_state.FORMAT_KEY

DOWNLOADED = "ttlstateDownloadedBytes"
REUSED = "ttlstateReusedFiles"
UPLOADED = "ttlstateUploadedBytes"

# files of a store's checkpoint directory (PROTOCOL.md, "Checkpoint layout of a store")
V1_FILE = re.compile(r"^(\d+)\.(manifest|changelog)$")
V2_MANIFEST = re.compile(r"^(\d+)_([0-9A-Za-z-]+)\.manifest$")
V2_CHANGELOG = re.compile(r"^(\d+)_([0-9A-Za-z-]+)_([0-9A-Za-z-]+)\.changelog$")
# files of the store directories of a query checkpoint, state/<operator>/<partition>[/<store>]/,
# except Spark's own state schema file (state/<operator>/0/_metadata/schema)
STORE_FILES_REGEX = r"/state/\d+/\d+/(?!_metadata/)"
SPARK_METADATA_DIR = "_metadata"


def testfs_jar() -> str:
    """The test FileSystem jar; FileNotFoundError (with what to do) if it is missing."""
    if not TESTFS_JAR.is_file():
        raise FileNotFoundError(
            f"The test FileSystem jar is missing at {TESTFS_JAR}. Build it with `make jar` "
            "(or `gradle --offline -q testfsJar`) in the ttlstate source tree.")
    return str(TESTFS_JAR)


def faulty(path) -> str:
    """`faulty:///abs/path` of a local path."""
    return f"{TESTFS_SCHEME}://{os.path.abspath(str(path))}"


def local_path(uri: str) -> pathlib.Path:
    """The local path of a `faulty:` or `file:` URI, or of a plain path."""
    s = str(uri)
    for scheme in (TESTFS_SCHEME + "://", "file://"):
        if s.startswith(scheme):
            return pathlib.Path(s[len(scheme):])
    if s.startswith("file:"):
        return pathlib.Path(s[len("file:"):])
    return pathlib.Path(s)


def testfs_session_confs(jar: str | None = None) -> dict[str, str]:
    """Builder confs that put the test FileSystem on the classpath and register `faulty:`."""
    jar = jar or testfs_jar()
    return {"spark.jars": jar, "spark.driver.extraClassPath": jar,
            f"spark.hadoop.fs.{TESTFS_SCHEME}.impl": TESTFS_CLASS}


def build_testfs_session(app_name: str, confs: dict[str, str] | None = None):
    """A local session with the test FileSystem and ttlstate (`ttlstate.configure` appends
    the shim jar to the class paths set here)."""
    import ttlstate

    b = st.session_builder(app_name)
    for k, v in testfs_session_confs().items():
        b = b.config(k, v)
    for k, v in (confs or {}).items():
        b = b.config(k, v)
    spark = st.get_or_create(ttlstate.configure(b))
    spark.sparkContext.setLogLevel("WARN")
    # what a failed run's log must explain: ttlstate's own lines and Spark's store loads and unloads
    levels = spark._jvm.org.apache.logging.log4j
    for logger in ("io.ttlstate", "org.apache.spark.sql.execution.streaming.state.StateStore"):
        levels.core.config.Configurator.setLevel(logger, levels.Level.INFO)
    return spark


def fs_class(spark):
    """The FaultyFileSystem class in the session's JVM (its static controls)."""
    return spark._jvm.io.ttlstate.testfs.FaultyFileSystem


# ---------------------------------------------------------------------------------------
# The aggregation under test and its exact model

def sum_by_key(df):
    """count and sum of `value` per key (update mode): state (key) -> (count, sum)."""
    from pyspark.sql import functions as F

    return df.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"))


QUERIES = {
    "sum_by_key": (sum_by_key, "update"),
    "dedup": (st.dedup, "append"),
    "inner_join": (st.inner_join, "append"),
}


def agg_batches(n_batches: int, rows_per_batch: int, n_keys: int, seed: int = 11,
                start: int = 0) -> list[list[tuple[str, int]]]:
    """Batches of (key, value): each batch touches a random subset of the keys."""
    rng = random.Random(seed)
    out = []
    for _ in range(start + n_batches):
        out.append([(f"k{rng.randrange(n_keys):04d}", rng.randint(1, 9))
                    for _ in range(rows_per_batch)])
    return out[start:]


def model_sum_by_key(batches: Sequence[Sequence[tuple[str, int]]]):
    """(update-mode rows of each batch, state after each batch {key: (count, sum)})."""
    state: dict[str, tuple[int, int]] = {}
    rows, states = {}, {}
    for b, batch in enumerate(batches):
        touched = collections.OrderedDict()
        for k, v in batch:
            n, total = state.get(k, (0, 0))
            state[k] = (n + 1, total + v)
            touched[k] = True
        rows[b] = st.sort_rows((k, *state[k]) for k in touched)
        states[b] = dict(state)
    return rows, states


def write_batches(directory, batches, start: int = 0, stop: int | None = None):
    """Files `start..stop-1` of `batches` (one per batch) into `directory`."""
    stop = len(batches) if stop is None else stop
    files = []
    for b, rows in enumerate(batches):
        ts = (st.BASE_TS + dt.timedelta(minutes=b)).strftime("%Y-%m-%d %H:%M:%S")
        files.append([{"key": k, "value": int(v), "ts": ts} for k, v in rows])
    st.write_files(directory, files, start, stop)
    return pathlib.Path(directory)


# ---------------------------------------------------------------------------------------
# Outcomes of runs (the subprocess result, as the test sees it)

class Run:
    """One `run` step's outcome."""

    def __init__(self, d: dict):
        self.name = d["name"]
        self.checkpoint = d["checkpoint"]
        self.batches = {int(b): [_tuple(r) for r in rows] for b, rows in d["batches"].items()}
        self.progress = d["progress"]
        self.error = d.get("error")
        self.error_trace = d.get("error_trace") or ""
        self.fs = d.get("fs") or {}
        self.injected = d.get("injected") or []
        self.pending_faults = d.get("pending_faults", 0)
        self.settle = d.get("settle")
        self.log_excerpt = d.get("log_excerpt") or ""

    def check(self) -> "Run":
        if self.error is not None:
            raise AssertionError(f"query {self.name} failed:\n{self.error[:4000]}\n"
                                 f"{self.error_trace[:4000]}\n"
                                 f"the subprocess log on its stores:\n{self.log_excerpt[-8000:]}")
        return self

    def batch_ids(self) -> list[int]:
        return sorted(p["batchId"] for p in self.progress)

    def progress_of(self, batch: int) -> dict:
        for p in self.progress:
            if p["batchId"] == batch:
                return p
        raise AssertionError(f"{self.name}: no progress of batch {batch}; "
                             f"batches {self.batch_ids()}")

    def metric(self, batch: int, name: str) -> int | None:
        """A custom metric of one batch, summed over its state operators; None if absent."""
        ops = self.progress_of(batch).get("stateOperators", [])
        values = [o.get("customMetrics", {}).get(name) for o in ops]
        values = [v for v in values if v is not None]
        return sum(values) if values else None

    def metric_names(self) -> set[str]:
        return {k for p in self.progress for o in p.get("stateOperators", [])
                for k in (o.get("customMetrics") or {})}

    def output_rows(self) -> dict[int, list[tuple]]:
        return {b: st.sort_rows(r) for b, r in self.batches.items()}


def _tuple(v):
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v


def merged_rows(*runs: Run) -> dict[int, list[tuple]]:
    """Sink rows by batch id over consecutive runs of one checkpoint (a re-run batch keeps
    its last output, as a sink that overwrites by batch id would)."""
    out: dict[int, list[tuple]] = {}
    for r in runs:
        out.update(r.output_rows())
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------
# A store's checkpoint directory

def store_dirs(checkpoint, operator: int = 0) -> dict[str, pathlib.Path]:
    """{"<partition>" or "<partition>/<storeName>": directory} of one operator's stores."""
    root = local_path(checkpoint) / "state" / str(operator)
    out = {}
    for part in sorted(root.iterdir(), key=lambda p: p.name) if root.is_dir() else []:
        if not part.name.isdigit():
            continue
        subs = [d for d in part.iterdir() if d.is_dir() and d.name not in ("sst", "_metadata")]
        if subs and not any(f.is_file() for f in part.iterdir()):
            for d in sorted(subs):
                out[f"{part.name}/{d.name}"] = d
        else:
            out[part.name] = part
    return out


def list_files(d: pathlib.Path) -> dict[str, int]:
    """{relative path: size} of every file under a store directory, except Spark's own
    `_metadata/` (the state schema file Spark keeps in partition 0's directory)."""
    out = {}
    for dirpath, dirnames, names in os.walk(d):
        if pathlib.Path(dirpath) == d and SPARK_METADATA_DIR in dirnames:
            dirnames.remove(SPARK_METADATA_DIR)
        for n in names:
            p = pathlib.Path(dirpath) / n
            try:
                out[str(p.relative_to(d))] = p.stat().st_size
            except FileNotFoundError:  # deleted by maintenance while listing
                pass
    return out


def is_crc(name: str) -> bool:
    """Hadoop's checksum side files (`.<name>.crc`, written through `file:`)."""
    base = name.rsplit("/", 1)[-1]
    return base.startswith(".") and base.endswith(".crc")


def crc_of(name: str) -> str:
    """The data file a `.<name>.crc` belongs to (same directory)."""
    head, _, base = name.rpartition("/")
    data = base[1:-len(".crc")]
    return f"{head}/{data}" if head else data


def versions_v1(files) -> tuple[dict[int, str], dict[int, str]]:
    """({version: manifest name}, {version: changelog name}) of v1 names."""
    manifests, changelogs = {}, {}
    for f in files:
        m = V1_FILE.match(f)
        if m:
            (manifests if m.group(2) == "manifest" else changelogs)[int(m.group(1))] = f
    return manifests, changelogs


def manifest_ssts(path) -> list[str]:
    """Names of the SSTs a manifest references (the provider's own reader)."""
    from ttlstate import manifest

    return [s.name for s in manifest.read(str(path)).ssts]


def state_files(files) -> tuple[dict[int, list[tuple[str, str]]], dict[int, list[tuple[str, str, str]]]]:
    """({version: [(manifest name, id)]}, {version: [(changelog name, id, baseId)]}) of v1
    names (id "") and v2 names (PROTOCOL.md, "Checkpoint layout of a store")."""
    manifests: dict[int, list] = {}
    changelogs: dict[int, list] = {}
    for f in files:
        m = V1_FILE.match(f)
        if m:
            if m.group(2) == "manifest":
                manifests.setdefault(int(m.group(1)), []).append((f, ""))
            else:
                changelogs.setdefault(int(m.group(1)), []).append((f, "", ""))
            continue
        m = V2_MANIFEST.match(f)
        if m:
            manifests.setdefault(int(m.group(1)), []).append((f, m.group(2)))
            continue
        m = V2_CHANGELOG.match(f)
        if m:
            changelogs.setdefault(int(m.group(1)), []).append((f, m.group(2), m.group(3)))
    return manifests, changelogs


def retention_report(store_dir: pathlib.Path, min_batches: int,
                     committed: dict[int, str] | None = None) -> dict:
    """What a store directory must hold to recover its last `min_batches` versions, and
    only that (docs/decisions/023-retention.md, docs/decisions/024-checkpoint-format-v2.md), from
    its files; returns the expected and actual file sets,
    what is missing or extra, and whether each of the last versions loads from the files.

    v1 names: the newest manifest at or below `latest - min_batches + 1` (the base; none:
    version 0), every manifest and changelog after it, the changelogs of the retained versions
    (the base's own too: Spark's change feed reads them, docs/decisions/094-state-rules-audit.md
    g), and exactly the SSTs
    those manifests reference. A version loads from a manifest plus the changelogs after it.
    v2 names: every file (of every attempt) of the retained versions, as attempts that lost
    are deleted only once their version falls out of retention, plus the files their names
    lead back to (changelog -> its baseId's version -> ... -> a manifest), plus the SSTs of
    those manifests. `committed` ({version: unique id}, from Spark's commit log) names the
    attempt each retained version must load from; without it any attempt will do.
    """
    actual = list_files(store_dir)
    names = [f for f in actual if not is_crc(f)]
    manifests, changelogs = state_files(names)
    latest = max([*manifests, *changelogs], default=0)
    oldest_needed = max(1, latest - min_batches + 1)
    unreadable: dict[str, str] = {}
    refs: dict[str, list[str] | None] = {}

    def sst_refs(f):
        if f not in refs:
            try:
                refs[f] = [f"sst/{sst}" for sst in manifest_ssts(store_dir / f)]
            except Exception as e:  # noqa: BLE001 - reported
                unreadable[f] = f"{type(e).__name__}: {e}"
                refs[f] = None
        return refs[f]

    def manifest_ok(f):
        r = sst_refs(f)
        return r is not None and all(s in actual for s in r)

    v2 = any(i for fs in manifests.values() for _, i in fs) or \
        any(i for fs in changelogs.values() for _, i, _ in fs)
    loadable = {}
    if not v2:
        base = max([m for m in manifests if m <= oldest_needed], default=0)
        kept = [f for m in manifests if m >= base for f, _ in manifests[m]]  # base 0: all
        expected = set(kept) | {f for c in changelogs if c > base or c >= oldest_needed
                                for f, _, _ in changelogs[c]}
        for f in kept:
            expected |= set(sst_refs(f) or [])
        for v in range(oldest_needed, latest + 1):
            starts = [m for m in manifests if m <= v] + [0]
            loadable[v] = any(all(c in changelogs for c in range(m + 1, v + 1))
                              and (m == 0 or manifest_ok(manifests[m][0][0]))
                              for m in starts)
    else:
        expected, bases = set(), []
        for v in range(oldest_needed, latest + 1):
            attempts = ({i for _, i in manifests.get(v, [])}
                        | {i for _, i, _ in changelogs.get(v, [])})
            expected |= {f for f, _ in manifests.get(v, [])}
            expected |= {f for f, _, _ in changelogs.get(v, [])}
            want = [committed[v]] if committed and v in committed else sorted(attempts)
            ok = False
            for uid in attempts | set(want):
                walk = _v2_walk(manifests, changelogs, v, uid)
                if walk is None:
                    continue
                files, manifest_file, base_v = walk
                expected |= set(files)
                if manifest_file is not None:
                    expected |= set(sst_refs(manifest_file) or [])
                if uid in want and (manifest_file is None or manifest_ok(manifest_file)):
                    ok = True
                    bases.append(base_v)
            loadable[v] = ok
        base = min(bases, default=0)
    # crc side files (file: scheme) belong to their data file
    expected |= {f for f in actual if is_crc(f) and crc_of(f) in expected}
    missing = sorted(expected - set(actual))
    extra = sorted(set(actual) - expected)
    return {"dir": str(store_dir), "latest": latest, "base": base, "v2": v2,
            "manifests": sorted(manifests), "changelogs": sorted(changelogs),
            "ssts": sorted(f for f in names if f.startswith("sst/")),
            "expected": sorted(expected), "actual": sorted(actual),
            "missing": missing, "extra": extra, "unreadable": unreadable,
            "loadable": loadable,
            "ok": not missing and not extra and not unreadable and latest > 0
            and all(loadable.values())}


def _v2_walk(manifests, changelogs, v: int, uid: str):
    """(files, manifest file or None for version 0, version it starts from) of loading
    version `v` with unique id `uid` by names (PROTOCOL.md: a changelog names the id of
    version v - 1 it was built on, `0` when that is version 0); None if a link is missing."""
    files = []
    while v > 0:
        for f, i in manifests.get(v, []):
            if i == uid:
                return files + [f], f, v
        step = [(f, b) for f, i, b in changelogs.get(v, []) if i == uid]
        if not step:
            return None
        files.append(step[0][0])
        v, uid = v - 1, step[0][1]
    return files, None, 0


def committed_ids(checkpoint, operator: int = 0) -> dict[str, dict[int, str]]:
    """{partition: {version: unique id}} from Spark's commit log (checkpoint format v2;
    batch b commits version b + 1), for operators with one store per partition."""
    out: dict[str, dict[int, str]] = {}
    d = local_path(checkpoint) / "commits"
    for f in d.iterdir() if d.is_dir() else []:
        if not f.name.isdigit():
            continue
        lines = f.read_text().splitlines()
        ids = json.loads(lines[1]).get("stateUniqueIds", {}).get(str(operator)) if len(lines) > 1 else None
        for part, per_store in enumerate(ids or []):
            if len(per_store) == 1:
                out.setdefault(str(part), {})[int(f.name) + 1] = per_store[0]
    return out


def retention_reports(checkpoint, min_batches: int, operator: int = 0) -> dict[str, dict]:
    ids = committed_ids(checkpoint, operator)
    return {name: retention_report(d, min_batches, ids.get(name))
            for name, d in store_dirs(checkpoint, operator).items()}


def short_report(reports: dict[str, dict]) -> str:
    """The interesting part of retention reports, for an assertion message."""
    lines = []
    for name, r in reports.items():
        lines.append(f"store {name}: latest={r['latest']} base={r['base']} ok={r['ok']} "
                     f"manifests={r['manifests']} changelogs={r['changelogs']} "
                     f"ssts={len(r['ssts'])} expected={len(r['expected'])} "
                     f"actual={len(r['actual'])} missing={r['missing'][:8]} "
                     f"extra={r['extra'][:12]} unreadable={r['unreadable']} "
                     f"unloadable={[v for v, ok in r['loadable'].items() if not ok]}")
    return "\n".join(lines)


def v1_load_plan(files: dict[str, int], store_dir: pathlib.Path, version: int) -> dict[str, int]:
    """{file: size} a v1 load of `version` needs (docs/decisions/020-commit-modes.md): the newest
    manifest at or
    below it, the SSTs it references, and the changelogs after it (`files`: a listing)."""
    manifests, changelogs = versions_v1(files)
    base = max([m for m in manifests if m <= version], default=0)
    plan = {}
    if base:
        plan[manifests[base]] = files[manifests[base]]
        for sst in manifest_ssts(store_dir / manifests[base]):
            plan[f"sst/{sst}"] = files[f"sst/{sst}"]
    for v in range(base + 1, version + 1):
        plan[changelogs[v]] = files[changelogs[v]]
    return plan


def version_files(store_dir: pathlib.Path, version: int) -> list[str]:
    """Manifests and changelogs of `version` (v1 or v2 names) in a store directory."""
    out = []
    for f in list_files(store_dir):
        if is_crc(f):
            continue
        m = V1_FILE.match(f) or V2_MANIFEST.match(f) or V2_CHANGELOG.match(f)
        if m and int(m.group(1)) == version:
            out.append(f)
    return sorted(out)


# ---------------------------------------------------------------------------------------
# The subprocess

def run_subprocess(spec: dict, work_dir, timeout_s: float = 900) -> dict:
    """Runs `spec` ({"session_confs": {...}, "steps": [...]}) in a new Python process with
    its own SparkSession (test FileSystem and ttlstate); returns {"steps": [results],
    "log": path}. Raises with the log's tail if the process did not produce a result."""
    work_dir = pathlib.Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    tag = spec.get("tag", "run") + "-" + uuid.uuid4().hex[:6]
    spec = dict(spec, result_file=str(work_dir / f"{tag}.result.json"))
    proc, log, log_path = st.spawn_spec_process(__file__, spec, work_dir, tag)
    with log:
        rc = st.wait_or_kill(proc, timeout_s)
    result_file = pathlib.Path(spec["result_file"])
    if not result_file.exists():
        tail = log_path.read_text(errors="replace")[-6000:]
        raise AssertionError(f"the subprocess (exit {rc}) wrote no result; log {log_path}:\n{tail}")
    result = json.loads(result_file.read_text())
    result["log"] = str(log_path)
    result["returncode"] = rc
    failed = [step for step in result["steps"] if step.get("error") is not None]
    if failed:  # a failed query: what the log says of its stores
        excerpt = store_log_excerpt(log_path)
        for step in failed:
            step["log_excerpt"] = excerpt
    return result


# what explains a failed query in a subprocess's log (a CI run keeps no temp files)
_STORE_LOG_LINE = re.compile(r" (WARN|ERROR) (?!CheckpointFileManager|ResolveWriteToStream|MicroBatchExecution"
                             r"|Utils|NativeCodeLoader|FileStreamSink|HadoopFSUtils)"
                             r"|StateStore: (Closing|FromLoadedProviders|Error)|close deferred")


def store_log_excerpt(log_path, max_lines: int = 60) -> str:
    """The last `max_lines` lines of a subprocess log about its stores: warnings and errors
    (but Spark's usual ones), Spark's unloads of providers, ttlstate's deferred closes."""
    lines = [line[:600] for line in pathlib.Path(log_path).read_text(errors="replace").splitlines()
             if _STORE_LOG_LINE.search(line)]
    return "\n".join(lines[-max_lines:])


def _subprocess_main(spec_path: str) -> int:
    spec = json.loads(pathlib.Path(spec_path).read_text())
    spark = build_testfs_session(spec.get("app", "ttlstate-checkpoint-subprocess"),
                                 spec.get("session_confs"))
    results = []
    for step in spec["steps"]:
        try:
            results.append(STEPS[step["do"]](spark, step))
        except Exception as e:  # noqa: BLE001 - reported to the test
            results.append({"do": step["do"], "step_error": f"{type(e).__name__}: {e}",
                            "traceback": traceback.format_exc()})
    tmp = spec["result_file"] + ".tmp"
    pathlib.Path(tmp).write_text(json.dumps({"steps": results}))
    os.replace(tmp, spec["result_file"])
    spark.stop()
    return 0


def _fs_counts(fs, regexes: dict[str, str]) -> dict:
    out = {}
    for name, rx in {"all": None, **regexes}.items():
        out[name] = {"written": fs.bytesWritten(rx) if rx else fs.bytesWritten(),
                     "read": fs.bytesRead(rx) if rx else fs.bytesRead(),
                     "created": fs.filesCreated(rx) if rx else fs.filesCreated(),
                     "opened": fs.filesOpened(rx) if rx else fs.filesOpened(),
                     "deletes": fs.deletes(rx or "")}
    return out


# a query takes the session's SQL confs when it starts: queries started by `parallel` steps
# set theirs and start one at a time
_START_LOCK = threading.Lock()


def _step_run(spark, step: dict) -> dict:
    """A query run; see the module docstring."""
    fs = fs_class(spark)
    if step.get("reset_fs", True):
        fs.reset()
    for kind, regex, times in step.get("faults", []):
        getattr(fs, kind)(regex, int(times))
    build_df, mode = QUERIES[step["query"]]
    batches: dict[int, list] = {}

    def on_batch(batch_df, batch_id):
        batches[batch_id] = [st.to_plain(r) for r in batch_df.collect()]

    confs = {st.PROVIDER_CLASS_KEY: step.get("provider", st.TTLSTATE), **step.get("confs", {})}
    name = step.get("name") or "q_" + uuid.uuid4().hex[:10]
    error = trace = None
    query = None
    try:
        with _START_LOCK, st.session_confs(spark, confs):  # `parallel` runs: one conf set at a time
            df = build_df(*[st.read_events(spark, d) for d in step["inputs"]])
            query = (df.writeStream.outputMode(mode)
                     .option("checkpointLocation", step["checkpoint"])
                     .trigger(availableNow=True).queryName(name)
                     .foreachBatch(on_batch).start())
        if not query.awaitTermination(float(step.get("timeout_s", 400))):
            error = "the query did not finish in time"
    except Exception as e:  # noqa: BLE001 - StreamingQueryException: reported
        error = f"{type(e).__name__}: {e}"
        trace = _java_trace(e)
    finally:
        if query is not None and query.isActive:
            query.stop()
    progress = [json.loads(p.json) for p in query.recentProgress] if query is not None else []
    out = {"do": "run", "name": name, "checkpoint": step["checkpoint"],
           "batches": {str(b): st.sort_rows(r) for b, r in sorted(batches.items())},
           "progress": progress, "error": error, "error_trace": trace,
           "fs": _fs_counts(fs, step.get("count", {})),
           "injected": list(fs.injected()), "pending_faults": fs.pendingFaults(),
           "store_files": {n: list_files(d) for n, d in store_dirs(step["checkpoint"]).items()}}
    fs.clearFaults()
    settle = step.get("settle")
    if settle:
        out["settle"] = wait_for_retention(step["checkpoint"], int(settle["min_batches"]),
                                           float(settle.get("timeout_s", 120)))
    return out


def _java_trace(e) -> str | None:
    """The JVM stack trace (with its causes) of a captured Spark exception, if any."""
    for attr in ("getStackTrace", "_stackTrace"):
        v = getattr(e, attr, None)
        try:
            v = v() if callable(v) else v
        except Exception:  # noqa: BLE001
            v = None
        if v:
            return str(v)
    return None


def wait_for_retention(checkpoint, min_batches: int, timeout_s: float,
                       stable_s: float = 3.0) -> dict:
    """Waits (maintenance runs in the background) until every store directory holds exactly
    what retention keeps, and still does `stable_s` later; returns the last reports and
    whether they converged. Never fails: the test asserts on the files itself."""
    deadline = time.monotonic() + timeout_s
    ok_since = None
    reports = {}
    while True:
        try:
            reports = retention_reports(checkpoint, min_batches)
            ok = bool(reports) and all(r["ok"] for r in reports.values())
        except Exception:  # noqa: BLE001 - a file deleted while reading: try again
            ok = False
        now = time.monotonic()
        if ok:
            ok_since = ok_since or now
            if now - ok_since >= stable_s:
                return {"converged": True, "summary": short_report(reports)}
        else:
            ok_since = None
        if now > deadline:
            return {"converged": False, "summary": short_report(reports) if reports else ""}
        time.sleep(0.5)


def _step_read_state(spark, step: dict) -> dict:
    """{batchId: sorted [(key, (count, sum), partition)]} or the error of each read."""
    out, errors = {}, {}
    root = pathlib.Path(step["cache_root"])
    for b in step["batch_ids"]:
        confs = {CACHE_DIR: str(root / f"read-{b}-{uuid.uuid4().hex[:6]}"),
                 **step.get("confs", {})}
        try:
            with st.session_confs(spark, confs):
                df = (spark.read.format("statestore").option("batchId", int(b))
                      .load(step["checkpoint"]))
                out[str(b)] = st.sort_rows(st.to_plain(r) for r in df.collect())
        except Exception as e:  # noqa: BLE001 - reported
            errors[str(b)] = f"{type(e).__name__}: {e}"[:3000]
    return {"do": "read_state", "rows": out, "errors": errors}


def _step_rmtree(spark, step: dict) -> dict:
    existed = os.path.exists(step["path"])
    shutil.rmtree(step["path"], ignore_errors=True)
    return {"do": "rmtree", "existed": existed}


def _step_copytree(spark, step: dict) -> dict:
    """Copies a directory (a stopped query's checkpoint) to a new place."""
    shutil.copytree(step["src"], step["dst"])
    return {"do": "copytree"}


def _step_write_batches(spark, step: dict) -> dict:
    batches = [[tuple(r) for r in b] for b in step["batches"]]
    write_batches(step["dir"], batches, int(step.get("start", 0)), step.get("stop"))
    return {"do": "write_batches"}


def _step_list_stores(spark, step: dict) -> dict:
    """The files of every store directory of a checkpoint, with their sizes, now."""
    return {"do": "list_stores",
            "store_files": {n: list_files(d) for n, d in store_dirs(step["checkpoint"]).items()}}


def _step_sleep(spark, step: dict) -> dict:
    """Lets background work (maintenance, unloading a stopped query's stores) happen; no
    test asserts on how long anything took."""
    time.sleep(float(step["s"]))
    return {"do": "sleep"}


# the private members of Spark's `StateStore` object that hold providers: loaded ones; unloaded
# ones waiting for their last maintenance and close (Spark 4.1+); ones a maintenance pass is
# working on (claims, 4.1+)
_HELD_PROVIDERS = ("loadedProviders", "unloadedProvidersToClose", "snapshotPartitions",
                   "cleanupPartitions")


def loaded_store_ids(spark) -> list[str] | None:
    """`<checkpointRootLocation> <operator> <partition> <storeName>` of every provider Spark's
    `StateStore` holds now (`_HELD_PROVIDERS`, read by reflection: they are private); None if
    this Spark has none of those members."""
    from py4j.protocol import Py4JJavaError

    obj = st.state_store(spark)
    out, found = [], False
    for field in _HELD_PROVIDERS:
        try:
            f = obj.getClass().getDeclaredField(field)
        except Py4JJavaError:  # not in this Spark version
            continue
        found = True
        f.setAccessible(True)
        held = f.get(obj)
        items = held.keysIterator() if field == "loadedProviders" else held.iterator()
        while items.hasNext():
            pid = items.next()
            if field == "unloadedProvidersToClose":
                pid = pid._1()
            sid = pid.storeId()
            out.append(f"{sid.checkpointRootLocation()} {sid.operatorId()} {sid.partitionId()} "
                       f"{sid.storeName()}")
    return out if found else None


def _step_wait_unloaded(spark, step: dict) -> dict:
    """Waits (polling, instead of a fixed sleep) until Spark holds no provider of the
    checkpoint any more: the stores of a stopped query stay loaded until a maintenance pass
    runs their last maintenance, unloads and closes them. Then waits `after_s` more. Never
    fails: `unloaded` says if it happened in `timeout_s`. Where Spark's members cannot be
    read, sleeps `fallback_s` instead."""
    where = str(local_path(step["checkpoint"])) + "/"
    deadline = time.monotonic() + float(step.get("timeout_s", 60))
    while True:
        try:
            ids = loaded_store_ids(spark)
        except Exception:  # noqa: BLE001 - a map changed while reading it: look again
            ids = [where]
        if ids is None:
            time.sleep(float(step.get("fallback_s", 4)))
            return {"do": "wait_unloaded", "unloaded": None}
        held = any(where in location for location in ids)
        if not held or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    time.sleep(float(step.get("after_s", 0)))
    return {"do": "wait_unloaded", "unloaded": not held}


def _step_parallel(spark, step: dict) -> dict:
    """Runs `steps` at once, each in a thread of its own (independent queries in one JVM:
    separate checkpoints; `run` steps there should set `reset_fs` false, as the counters of
    the test FileSystem are JVM-wide); `results` in the order of `steps`."""
    results: list = [None] * len(step["steps"])

    def one(i, sub):
        try:
            results[i] = STEPS[sub["do"]](spark, sub)
        except Exception as e:  # noqa: BLE001 - reported to the test
            results[i] = {"do": sub["do"], "step_error": f"{type(e).__name__}: {e}",
                          "traceback": traceback.format_exc()}

    threads = [threading.Thread(target=one, args=(i, sub), daemon=True)
               for i, sub in enumerate(step["steps"])]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r["step_error"] for r in results if "step_error" in r]
    out = {"do": "parallel", "results": results}
    if errors:
        out["step_error"] = "; ".join(errors)
        out["traceback"] = "\n".join(r.get("traceback", "") for r in results if "step_error" in r)
    return out


def _step_call(spark, step: dict) -> dict:
    fn = globals()[step["fn"]]
    return {"do": "call", "value": fn(spark, **step.get("args", {}))}


STEPS = {"run": _step_run, "read_state": _step_read_state, "rmtree": _step_rmtree,
         "write_batches": _step_write_batches, "list_stores": _step_list_stores,
         "sleep": _step_sleep, "call": _step_call, "wait_unloaded": _step_wait_unloaded,
         "copytree": _step_copytree, "parallel": _step_parallel}


def step_errors(result: dict) -> list[str]:
    return [f"step {i} ({s['do']}): {s['step_error']}\n{s.get('traceback', '')}"
            for i, s in enumerate(result["steps"]) if "step_error" in s]


def check_steps(result: dict) -> list[dict]:
    """The step results; fails the test if a step itself broke (not a query error)."""
    errs = step_errors(result)
    if errs:
        raise AssertionError("subprocess steps failed (log: %s):\n%s"
                             % (result.get("log"), "\n".join(errs)[:8000]))
    return result["steps"]


# ---------------------------------------------------------------------------------------
# The test FileSystem's self-test (runs in the subprocess: `call` step)

def _failure_of(fn, *args) -> str | None:
    """The message (first 2,000 characters) of what `fn(*args)` raised, or None."""
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - the expected failure
        return str(e)[:2000]
    return None


def fs_selftest(spark, root: str) -> dict:
    """Drives the test FileSystem through Hadoop's API and Spark's CheckpointFileManager and
    reports what it saw (the test asserts on it)."""
    jvm = spark._jvm
    fs = fs_class(spark)
    fs.reset()
    conf = spark._jsc.hadoopConfiguration()
    out: dict = {}
    base = jvm.org.apache.hadoop.fs.Path(faulty(root))
    hfs = base.getFileSystem(conf)
    out["fs_class"] = hfs.getClass().getName()
    out["uri"] = hfs.getUri().toString()

    # plain create / read through FileSystem
    p = jvm.org.apache.hadoop.fs.Path(faulty(os.path.join(root, "plain", "a.bin")))
    stream = hfs.create(p, True)
    data = bytearray(range(256)) * 4
    stream.write(data)
    stream.close()
    out["plain_local_size"] = os.path.getsize(os.path.join(root, "plain", "a.bin"))
    out["written_after_plain"] = fs.bytesWritten("/plain/")
    ins = hfs.open(p)
    buf = spark.sparkContext._gateway.new_array(jvm.byte, 4096)
    n = 0
    while True:
        k = ins.read(buf)
        if k < 0:
            break
        n += k
    ins.close()
    out["read_bytes_returned"] = n
    out["read_after_plain"] = fs.bytesRead("/plain/")
    out["created_after_plain"] = fs.filesCreated("/plain/")
    out["listed"] = sorted(s.getPath().toString() for s in hfs.listStatus(p.getParent()))

    # Spark's CheckpointFileManager on faulty: (FileSystem-based: no AbstractFileSystem)
    cfm_cls = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    ckdir = jvm.org.apache.hadoop.fs.Path(faulty(os.path.join(root, "cfm")))
    fm = cfm_cls.create(ckdir, conf)
    out["cfm_class"] = fm.getClass().getName()
    fm.mkdirs(ckdir)

    def atomic_write(name, payload: bytes):
        s = fm.createAtomic(jvm.org.apache.hadoop.fs.Path(ckdir, name), True)
        s.write(bytearray(payload))
        s.close()

    atomic_write("1.changelog", b"x" * 100)
    out["atomic_ok_files"] = sorted(os.listdir(os.path.join(root, "cfm")))
    out["atomic_created"] = list(fs.createdPaths("/cfm/"))
    out["atomic_renames"] = fs.renames(r"/cfm/1\.changelog$")

    # an injected create failure raises, naming the file
    fs.failCreate(r"/cfm/.*2\.changelog", 1)
    out["create_failure"] = _failure_of(atomic_write, "2.changelog", b"y" * 10)
    out["after_create_failure"] = sorted(os.listdir(os.path.join(root, "cfm")))

    # an injected write failure raises; the partial temp file is cancelled by Spark or stays
    fs.failWrite(r"/cfm/.*3\.changelog", 1)
    out["write_failure"] = _failure_of(atomic_write, "3.changelog", b"z" * 10)

    # a lost rename: close() succeeds, the file never appears, the temp file stays
    fs.loseRename(r"/cfm/4\.changelog$", 1)
    atomic_write("4.changelog", b"w" * 10)
    out["after_lost_rename"] = sorted(os.listdir(os.path.join(root, "cfm")))

    # a failed rename raises
    fs.failRename(r"/cfm/5\.changelog$", 1)
    out["rename_failure"] = _failure_of(atomic_write, "5.changelog", b"v" * 10)
    out["injected"] = list(fs.injected())
    out["pending_faults"] = fs.pendingFaults()
    fs.reset()
    out["after_reset"] = [fs.bytesWritten(), fs.bytesRead(), fs.filesCreated(),
                          len(list(fs.injected()))]
    return out


if __name__ == "__main__":
    sys.exit(_subprocess_main(sys.argv[1]))
