"""Helpers of the end-to-end tests: deterministic input files, a query runner, progress checks.

Input is a directory of JSON-lines files `part-000.json`, `part-001.json`, ... with an
explicit schema (`key STRING, value BIGINT, ts TIMESTAMP`). Every file gets a distinct
modification time in file order, so a file source with `maxFilesPerTrigger=1` reads exactly
one file per micro-batch, in order, and `Trigger.AvailableNow` stops when all are read: the
batches, and so the rows each stateful operator sees, are the same on every run.

The provider is a per-query SQL conf: `run_query` sets it right before it starts the query.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import pathlib
import random
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from typing import Callable, Iterable, Sequence

# `make test-thorough` (TTLSTATE_THOROUGH=1): the tests marked `thorough` run, and repeated
# scenarios (kill runs, executor losses) run their thorough number of repetitions.
THOROUGH = os.environ.get("TTLSTATE_THOROUGH", "") == "1"


def repetitions(env: str, ci: int, thorough: int) -> int:
    """How often a repeated scenario runs: `env` when set, else `thorough` under
    TTLSTATE_THOROUGH=1, else `ci` (what `make test` and CI run)."""
    value = os.environ.get(env)
    if value is None:
        return thorough if THOROUGH else ci
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{env}={value!r}: expected a whole number of runs, 1 or more")
    return n


PROVIDER_CLASS_KEY = "spark.sql.streaming.stateStore.providerClass"
TTLSTATE = "io.ttlstate.spark.TtlStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
SPARK_ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

# Custom-metric name prefixes that identify which provider really served a query.
METRIC_PREFIX = {
    TTLSTATE: "ttlstate",
    SPARK_ROCKSDB: "rocksdb",
    HDFS: "stateOnCurrentVersionSizeBytes",  # HDFS has no common prefix; its size metric
}

EVENT_SCHEMA = "key STRING, value BIGINT, ts TIMESTAMP"
TS_FORMAT = "yyyy-MM-dd HH:mm:ss"
BASE_TS = dt.datetime(2024, 1, 1, 0, 0, 0)
FILE_SPAN_S = 60  # event time advances one minute per file
BASE_MTIME = 1_700_000_000  # file modification times: BASE_MTIME + 10 * index


# ---------------------------------------------------------------------------------------
# Spark session

def session_builder(app_name: str = "ttlstate-e2e", warehouse: str | None = None, master: str | None = "local[2]"):
    """A light local builder (not yet configured for ttlstate); `master` None: spark-submit's."""
    from pyspark.sql import SparkSession

    b = SparkSession.builder if master is None else SparkSession.builder.master(master)
    b = (b.appName(app_name)
         .config("spark.sql.shuffle.partitions", "4")
         .config("spark.default.parallelism", "2")
         .config("spark.ui.enabled", "false")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.driver.memory", "1g")
         .config("spark.sql.streaming.stateStore.stateSchemaCheck", "true"))
    if warehouse:
        b = b.config("spark.sql.warehouse.dir", warehouse)
    cache = os.environ.get("TTLSTATE_TEST_CACHE_DIR")  # set by conftest for the test run
    if cache:
        b = b.config("spark.sql.streaming.stateStore.ttlstate.checkpoint.localCacheDir", cache)
    return b


def get_or_create(builder):
    """`builder.getOrCreate()`, its driver JVM mapping the tests' class-data-sharing archive of
    its classpath (tests/jvm_archive.py)."""
    import jvm_archive

    jvm_archive.use_for(builder)
    return builder.getOrCreate()


def build_session(app_name: str = "ttlstate-e2e", warehouse: str | None = None):
    """`ttlstate.configure(...)` on a light local builder, then getOrCreate()."""
    import ttlstate

    spark = get_or_create(ttlstate.configure(session_builder(app_name, warehouse)))
    spark.sparkContext.setLogLevel("WARN")
    return spark


# ---------------------------------------------------------------------------------------
# Deterministic input

def _fmt(ts: dt.datetime) -> str:
    return ts.strftime("%Y-%m-%d %H:%M:%S")


def generate_events(n_files: int, rows_per_file: int, *, n_keys: int = 8, n_values: int = 6,
                    seed: int = 7, late_fraction: float = 0.1,
                    late_by_s: tuple[int, int] = (90, 300),
                    active_fraction: float = 0.7) -> list[list[dict]]:
    """Rows of each file: file i holds events of minute i (plus some late ones).

    Keys are "k0".."k{n_keys-1}"; in each file only a random subset of keys is active, so
    keys have gaps in event time (session windows split). Values are small ints, so
    (key, value) repeats within and across files (deduplication has work to do). A
    `late_fraction` of the rows carries an event time `late_by_s` seconds before the file's
    minute: by default 1.5-5 minutes, so some are behind a 2-minute watermark, some not.
    """
    rng = random.Random(seed)
    files = []
    for i in range(n_files):
        start = BASE_TS + dt.timedelta(seconds=i * FILE_SPAN_S)
        active = [k for k in range(n_keys) if rng.random() < active_fraction] or [0]
        rows = []
        for _ in range(rows_per_file):
            k = rng.choice(active)
            if i > 1 and rng.random() < late_fraction:
                ts = start - dt.timedelta(seconds=rng.randint(*late_by_s))
            else:
                ts = start + dt.timedelta(seconds=rng.randint(0, FILE_SPAN_S - 1))
            rows.append({"key": f"k{k}", "value": rng.randint(0, n_values - 1), "ts": _fmt(ts)})
        files.append(rows)
    return files


def write_files(directory: str | os.PathLike, files: Sequence[Sequence[dict]],
                start: int = 0, stop: int | None = None) -> list[pathlib.Path]:
    """Writes files[start:stop] as part-<index>.json with increasing, distinct mtimes.

    A file is written under a hidden name and renamed, so a file source never sees it
    half-written.
    """
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    stop = len(files) if stop is None else stop
    written = []
    for i in range(start, stop):
        tmp = d / f".part-{i:03d}.json.tmp"
        tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in files[i]))
        mtime = BASE_MTIME + 10 * i
        os.utime(tmp, (mtime, mtime))
        final = d / f"part-{i:03d}.json"
        os.rename(tmp, final)
        written.append(final)
    return written


def file_minute_range(i: int) -> tuple[dt.datetime, dt.datetime]:
    """[start, end) of the on-time events of file i."""
    start = BASE_TS + dt.timedelta(seconds=i * FILE_SPAN_S)
    return start, start + dt.timedelta(seconds=FILE_SPAN_S)


def file_of(ts: dt.datetime) -> int:
    """Index of the file whose on-time events cover `ts` (a naive datetime from Spark)."""
    return int((ts - BASE_TS).total_seconds() // FILE_SPAN_S)


def read_events(spark, directory: str | os.PathLike):
    """A streaming DataFrame over `directory`, one file per micro-batch."""
    return (spark.readStream.format("json").schema(EVENT_SCHEMA)
            .option("timestampFormat", TS_FORMAT)
            .option("maxFilesPerTrigger", 1)
            .load(str(directory)))


# ---------------------------------------------------------------------------------------
# Running a query

def to_plain(value):
    """Spark Rows (also nested, e.g. a window struct) to plain tuples."""
    from pyspark.sql import Row

    if isinstance(value, Row):
        return tuple(to_plain(v) for v in value)
    if isinstance(value, (list, tuple)):
        return tuple(to_plain(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, to_plain(v)) for k, v in value.items()))
    return value


def sort_rows(rows: Iterable[tuple]) -> list[tuple]:
    """A total order that tolerates None and mixed types (equal multisets sort equal)."""
    return sorted(rows, key=repr)


@dataclass
class RunResult:
    provider: str
    output_mode: str
    rows: list[tuple]                       # sorted; complete mode: the final table
    progress: list[dict]                    # recentProgress, as plain dicts (from .json)
    batches: dict[int, list[tuple]] = field(default_factory=dict)  # foreachBatch sink only

    @property
    def last_progress(self) -> dict | None:
        return self.progress[-1] if self.progress else None

    def state_operators(self) -> list[dict]:
        """Every stateOperators entry of every progress update."""
        return [op for p in self.progress for op in p.get("stateOperators", [])]

    def max_state_rows(self) -> int:
        return max((op.get("numRowsTotal", 0) for op in self.state_operators()), default=0)

    def custom_metric_names(self) -> set[str]:
        return custom_metric_names(self.progress)

    def output_rows_per_batch(self) -> dict[int, int]:
        return {p["batchId"]: p["sink"].get("numOutputRows", -1) for p in self.progress}

    def input_rows_per_batch(self) -> dict[int, int]:
        return {p["batchId"]: p.get("numInputRows", 0) for p in self.progress}


class RunningQuery:
    """A started query (see `start_query`); `result()` waits for it and collects the sink."""

    def __init__(self, spark, provider, output_mode, sink, name, query, batches, timeout_s):
        self.spark, self.provider, self.output_mode = spark, provider, output_mode
        self.sink, self.name, self.query, self.batches = sink, name, query, batches
        self.timeout_s = timeout_s

    def result(self) -> RunResult:
        query, name = self.query, self.name
        try:
            # raises StreamingQueryException if the query failed
            finished = query.awaitTermination(self.timeout_s)
            if not finished:
                raise AssertionError(
                    f"query {name} ({self.provider}) did not finish in {self.timeout_s} s")
            progress = [json.loads(p.json) for p in query.recentProgress]
        finally:
            if query.isActive:
                query.stop()
        if self.sink == "memory":
            rows = [to_plain(r) for r in self.spark.table(name).collect()]
            self.spark.catalog.dropTempView(name)
        elif self.output_mode == "complete":
            rows = self.batches[max(self.batches)] if self.batches else []
        else:
            rows = [r for b in sorted(self.batches) for r in self.batches[b]]
        return RunResult(self.provider, self.output_mode, sort_rows(rows), progress,
                         {b: sort_rows(r) for b, r in self.batches.items()})


def start_query(spark, provider: str, build_df: Callable, output_mode: str,
                input_dir, checkpoint_dir, *, sink: str = "memory",
                query_name: str | None = None, confs: dict | None = None,
                timeout_s: float = 300, on_batch: Callable[[int], None] | None = None
                ) -> RunningQuery:
    """Starts `build_df(*streams)` with `provider` (see `run_query`); returns at once.

    `on_batch(batch_id)` (foreachBatch sink only) runs after each batch's rows are
    collected, while the query waits: its state is committed and no other batch runs.

    The provider conf is set on the session only while the query starts: a query clones
    the session's conf when it starts, so several queries with different providers can
    run side by side (and `assert_provider_served` checks that each got its own).
    """
    dirs = list(input_dir) if isinstance(input_dir, (list, tuple)) else [input_dir]
    with session_confs(spark, {PROVIDER_CLASS_KEY: provider, **(confs or {})}):
        df = build_df(*[read_events(spark, d) for d in dirs])
        name = query_name or "q_" + uuid.uuid4().hex[:12]
        writer = (df.writeStream.outputMode(output_mode)
                  .option("checkpointLocation", str(checkpoint_dir))
                  .trigger(availableNow=True).queryName(name))
        batches: dict[int, list[tuple]] = {}
        if sink == "memory":
            writer = writer.format("memory")
        elif sink == "foreach_batch":
            def collect_batch(batch_df, batch_id):
                batches[batch_id] = [to_plain(r) for r in batch_df.collect()]
                if on_batch is not None:
                    on_batch(batch_id)
            writer = writer.foreachBatch(collect_batch)
        else:
            raise ValueError(f"unknown sink {sink!r}")
        query = writer.start()
    return RunningQuery(spark, provider, output_mode, sink, name, query, batches, timeout_s)


@contextlib.contextmanager
def session_confs(spark, settings: dict):
    """Set SQL confs on the session for the duration of the block (a query clones them
    when it starts), then restore what was there."""
    previous = {k: spark.conf.get(k, None) for k in settings}
    for k, v in settings.items():
        spark.conf.set(k, v)
    try:
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def run_query_with_plan(spark, provider: str, build_df: Callable, output_mode: str, input_dir,
                        checkpoint_dir, *, confs: dict | None = None):
    """`run_query`, also returning the last batch's physical plan: (RunResult, plan text)."""
    running = start_query(spark, provider, build_df, output_mode, input_dir, checkpoint_dir, confs=confs)
    running.query.awaitTermination(running.timeout_s)
    plan = running.query._jsq.streamingQuery().lastExecution().executedPlan().toString()
    return running.result(), plan


def run_query(spark, provider: str, build_df: Callable, output_mode: str,
              input_dir, checkpoint_dir, *, sink: str = "memory",
              query_name: str | None = None, confs: dict | None = None,
              timeout_s: float = 300, on_batch: Callable[[int], None] | None = None
              ) -> RunResult:
    """Runs `build_df(*streams)` with `provider` until all available input is processed.

    `input_dir` is a directory or a list of directories (one file stream each, with
    maxFilesPerTrigger=1). The query uses Trigger.AvailableNow and the given checkpoint.
    sink="memory": a memory sink with a unique query name (Spark refuses to resume a
    memory sink from a checkpoint in append/update mode). sink="foreach_batch": collects
    every micro-batch's rows by batch id, and resumes from a checkpoint (restart tests).
    Returns the sink rows, sorted (complete mode: the final table), and the progress.
    """
    return start_query(spark, provider, build_df, output_mode, input_dir, checkpoint_dir,
                       sink=sink, query_name=query_name, confs=confs,
                       timeout_s=timeout_s, on_batch=on_batch).result()


def run_many(spark, runs: Sequence[dict], max_parallel: int = 6,
             timeout_s: float = 600) -> list:
    """Runs every run (kwargs of `start_query`), up to `max_parallel` at a time.

    Queries spend most of a micro-batch waiting (scheduling, file commits), so several at
    a time take little longer than one on two cores. Returns, in order, a RunResult or the
    exception of each run: one failing query does not hide the others' results.
    """
    import time

    results: list = [None] * len(runs)
    pending = list(enumerate(runs))
    active: dict[int, tuple[RunningQuery, float]] = {}
    try:
        while pending or active:
            while pending and len(active) < max_parallel:
                i, kw = pending.pop(0)
                try:
                    active[i] = (start_query(spark, **kw), time.monotonic())
                except Exception as e:  # noqa: BLE001 - reported to the caller
                    results[i] = e
            done = [i for i, (q, t0) in active.items()
                    if not q.query.isActive or time.monotonic() - t0 > timeout_s]
            for i in done:
                q, _ = active.pop(i)
                try:
                    if q.query.isActive:
                        q.query.stop()
                        raise AssertionError(f"query {q.name} ({q.provider}) did not finish "
                                             f"in {timeout_s} s")
                    results[i] = q.result()
                except Exception as e:  # noqa: BLE001
                    results[i] = e
            if not done:
                time.sleep(0.2)
    finally:
        for q, _ in active.values():
            if q.query.isActive:
                q.query.stop()
    return results


def run_side_by_side(spark, runs: Sequence[dict]) -> list[RunResult]:
    """`run_many` with all runs at once; raises the first failure."""
    results = run_many(spark, runs, max_parallel=len(runs))
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def merge_runs(*runs: RunResult) -> RunResult:
    """The sink output of consecutive runs on one checkpoint (foreachBatch sink), as one.

    A batch id seen twice (replayed after a restart) keeps its last output, as a
    foreachBatch sink that overwrites by batch id would.
    """
    batches: dict[int, list[tuple]] = {}
    for r in runs:
        batches.update(r.batches)
    mode = runs[-1].output_mode
    if mode == "complete":
        rows = batches[max(batches)] if batches else []
    else:
        rows = [row for b in sorted(batches) for row in batches[b]]
    return RunResult(runs[-1].provider, mode, sort_rows(rows),
                     [p for r in runs for p in r.progress], batches)


# ---------------------------------------------------------------------------------------
# Assertions about which provider served a query

def custom_metric_names(progress: list[dict]) -> set[str]:
    """The custom metric names of the state operators of every progress update (as dicts)."""
    return {k for p in progress for op in p.get("stateOperators", []) for k in (op.get("customMetrics") or {})}


def served_by(progress: list[dict], provider: str) -> bool:
    """Whether the progress carries `provider`'s custom metrics (`METRIC_PREFIX`)."""
    return any(n.startswith(METRIC_PREFIX[provider]) for n in custom_metric_names(progress))


def assert_provider_served(result: RunResult, provider: str):
    """The progress shows state kept by `provider` (and not by another provider)."""
    ops = result.state_operators()
    assert ops, f"{provider}: no stateOperators in the progress: {result.progress[-1:]}"
    assert result.max_state_rows() > 0, (
        f"{provider}: numRowsTotal was 0 in every batch: "
        f"{[op.get('numRowsTotal') for op in ops]}")
    names = result.custom_metric_names()
    mine = METRIC_PREFIX[provider]
    assert any(n.startswith(mine) for n in names), (
        f"{provider}: no custom metric starting with {mine!r} in {sorted(names)}")
    for other, prefix in METRIC_PREFIX.items():
        if other != provider:
            assert not any(n.startswith(prefix) for n in names), (
                f"{provider} run reports {other}'s metrics ({prefix!r}) in {sorted(names)}: "
                "the per-query providerClass was not applied")


def assert_same_rows(expected: RunResult, actual: RunResult, min_rows: int, what: str = ""):
    """Equal sorted row lists, with more than `min_rows` rows (an empty result cannot pass)."""
    assert len(expected.rows) > min_rows, (
        f"{what}: the {expected.provider} run produced only {len(expected.rows)} rows "
        f"(need > {min_rows}); the test input is too weak")
    if expected.rows != actual.rows:
        exp, act = expected.rows, actual.rows
        missing = [r for r in exp if r not in act][:10]
        extra = [r for r in act if r not in exp][:10]
        raise AssertionError(
            f"{what}: {actual.provider} gave {len(act)} rows, {expected.provider} gave "
            f"{len(exp)}.\n  missing (first 10): {missing}\n  unexpected (first 10): {extra}")


# ---------------------------------------------------------------------------------------
# The stateful queries under test: build_df(*streams) -> DataFrame

def agg_by_key(df):
    """Streaming aggregation without watermark (update / complete)."""
    from pyspark.sql import functions as F

    return df.groupBy("key").agg(F.count("*").alias("n"), F.sum("value").alias("total"),
                                 F.max("ts").alias("last_ts"))


def agg_by_key_bucket(df):
    """Streaming aggregation on two grouping columns (complete: a bigger final table)."""
    from pyspark.sql import functions as F

    return (df.groupBy("key", (F.col("value") % 3).alias("bucket"))
            .agg(F.count("*").alias("n"), F.sum("value").alias("total"),
                 F.min("ts").alias("first_ts"), F.max("ts").alias("last_ts")))


def windowed_agg(df):
    """Tumbling 1-minute windows with a 2-minute watermark (append: finished windows only)."""
    from pyspark.sql import functions as F

    return (df.withWatermark("ts", "2 minutes")
            .groupBy(F.window("ts", "1 minute"), "key")
            .agg(F.count("*").alias("n"), F.sum("value").alias("total")))


def dedup(df):
    """dropDuplicates without watermark: state grows forever."""
    return df.dropDuplicates(["key", "value"])


def dedup_with_watermark(df):
    """dropDuplicates on (key, value, minute) with a watermark on minute: state is evicted."""
    from pyspark.sql import functions as F

    return (df.withColumn("minute", F.date_trunc("minute", "ts"))
            .withWatermark("minute", "2 minutes")
            .dropDuplicates(["key", "value", "minute"]))


def dedup_within_watermark(df):
    return df.withWatermark("ts", "2 minutes").dropDuplicatesWithinWatermark(["key", "value"])


def pandas_running_count(df):
    """applyInPandasWithState: running count/sum per key; the state is dropped at n >= 12."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    def running_count(key, pdfs, state):  # nested: cloudpickle ships it by value
        import pandas as pd

        n, total, rounds = state.get if state.exists else (0, 0, 0)
        for pdf in pdfs:
            n += len(pdf)
            total += int(pdf["value"].sum())
        rounds += 1
        if n >= 12:
            state.remove()
        else:
            state.update((n, total, rounds))
        yield pd.DataFrame({"key": [key[0]], "n": [n], "total": [total], "rounds": [rounds]})

    return df.groupBy("key").applyInPandasWithState(
        running_count, "key string, n long, total long, rounds long",
        "n long, total long, rounds long", "update", GroupStateTimeout.NoTimeout)


def session_agg(df):
    """Session windows (gap 10 s) per key with a 2-minute watermark."""
    from pyspark.sql import functions as F

    return (df.withWatermark("ts", "2 minutes")
            .groupBy(F.session_window("ts", "10 seconds"), "key")
            .agg(F.count("*").alias("n"), F.sum("value").alias("total")))


def inner_join(left, right):
    """Stream-stream inner join (default state format), watermarks and a time range.

    A right event joins left events of the same key up to 45 s before it, so state is
    kept across batches (files) and evicted behind the watermarks.
    """
    return _time_range_join(left, right, "inner")


def left_outer_join(left, right):
    """`inner_join` as a left outer join: a left event no right event joined is output once,
    with nulls, when the watermark passes it (Spark marks the left values matched in state)."""
    return _time_range_join(left, right, "left_outer")


def _time_range_join(left, right, how: str):
    from pyspark.sql import functions as F

    l = (left.select(F.col("key").alias("lkey"), F.col("value").alias("lvalue"),
                     F.col("ts").alias("lts"))
         .withWatermark("lts", "1 minute"))
    r = (right.select(F.col("key").alias("rkey"), F.col("value").alias("rvalue"),
                      F.col("ts").alias("rts"))
         .withWatermark("rts", "1 minute"))
    return l.join(r, F.expr(
        "lkey = rkey AND rts >= lts AND rts <= lts + interval 45 seconds"), how)


# ---------------------------------------------------------------------------------------
# Queries in a subprocess (their own JVM)

def spawn_spec_process(script: str, spec: dict, work_dir: pathlib.Path, tag: str):
    """Writes `spec` to `<tag>.spec.json` in `work_dir` and starts `python <script> <spec>`
    there, its output in `<tag>.log`; returns (process, open log file, log path)."""
    spec_path = work_dir / f"{tag}.spec.json"
    spec_path.write_text(json.dumps(spec, indent=1))
    log_path = work_dir / f"{tag}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, os.path.abspath(script), str(spec_path)],
                            stdout=log, stderr=subprocess.STDOUT, cwd=str(work_dir))
    return proc, log, log_path


def wait_or_kill(proc, timeout_s: float) -> int | None:
    """The process's exit code, or None after killing it when `timeout_s` passed."""
    try:
        return proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return None


def state_store(spark):
    """Spark's `StateStore` object in the driver JVM (the Scala object, through py4j)."""
    cls = spark._jvm.java.lang.Class.forName("org.apache.spark.sql.execution.streaming.state.StateStore$")
    return cls.getField("MODULE$").get(None)


def unload_all_stores(spark) -> None:
    """Unload every loaded provider of this JVM (Spark's `StateStore.unloadAll()`), leaving
    Spark's maintenance alone. Not `StateStore.stop()`: it holds the loaded providers' lock
    while it waits for the maintenance pool to end, and a maintenance task that is running
    takes that lock after its provider's maintenance, so stop() then waits out
    `maintenanceShutdownTimeout` and the force timeout (a fixture's setup took 360 s in CI)."""
    state_store(spark).unloadAll()


def restart_state_store_maintenance(spark) -> None:
    """Spark fixes the state store maintenance interval when its maintenance task starts, at
    the first store load of the JVM: in a full suite an earlier module started it at the
    default 60 s. Stopping `StateStore` makes the next store load start it with the interval
    of the session then. The providers are unloaded and, where the line can (4.1+), the
    maintenance pool stopped without the providers' lock first, so running maintenance ends
    before stop() takes that lock (`unload_all_stores`)."""
    from py4j.protocol import Py4JError
    store = state_store(spark)
    store.unloadAll()
    try:
        store.stopMaintenanceTaskWithoutLock()
    except Py4JError:  # Spark 4.0 has no such method (nor the stall)
        pass
    store.stop()
