"""Helpers of the TTL streaming tests: inputs, queries, a runner, reference models, checkpoints.

Input: every micro-batch is one file (see `streaming.write_files`); a test describes its
input as a list of batches, each a list of `(key, value)` pairs. With `maxFilesPerTrigger=1`
batch `b` reads file `b` (of every source, for a join).

The TTL clock is the micro-batch's logical timestamp, `batchTimestampMs` in the query's
offset log (`<checkpoint>/offsets/<batchId>`). The reference models below take those
timestamps, read back from the checkpoint after the run, so the expected rows are computed
exactly for the batches Spark really ran, whatever the machine's speed; a test waits
between batches only to make the timing relation it needs (a gap longer or shorter than
the TTL) hold, and checks on the timestamps that it did hold.

The runner sleeps inside the foreachBatch sink after a batch's rows are collected (state
committed), which delays the next batch's timestamp: one query run can have short and long
gaps between batches. The same runner runs in a subprocess (`python ttl_queries.py
spec.json`) with its own SparkSession when a test needs its own maintenance interval (Spark
fixes it per JVM when maintenance first starts) or has to kill the driver mid-batch.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import json
import os
import pathlib
import sys
import time
from typing import Any, Callable, Sequence

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import streaming as st  # noqa: E402

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
MAINTENANCE_INTERVAL = "spark.sql.streaming.stateStore.maintenanceInterval"
MIN_DELTAS_FOR_SNAPSHOT = "spark.sql.streaming.stateStore.minDeltasForSnapshot"
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue",
               "right-keyToNumValues", "right-keyWithIndexToValue")

TTL_METRICS = ("ttlstateExpiredOnRead", "ttlstateExpiredIncremental",
               "ttlstateExpiredByCompaction", "ttlstateTtlMs")


def key(name: str, operator: int | None = None, store: str | None = None) -> str:
    """The conf key of TTL setting `name`, global or scoped to an operator / store."""
    scope = PREFIX
    if operator is not None:
        scope += f"operator.{operator}."
        if store is not None:
            scope += f"store.{store}."
    return scope + name


def ttl_conf(ttl: str | int, operator: int | None = None, store: str | None = None,
             **settings: str) -> dict[str, str]:
    """{key: value} of a TTL and extra settings given by their conf name with `_` for `.`:
    `ttl_conf(1, cleanup_inBackground="false")`."""
    out = {key("ttl", operator, store): str(ttl)}
    for name, value in settings.items():
        out[key(name.replace("_", "."), operator, store)] = str(value)
    return out


# ---------------------------------------------------------------------------------------
# Input

Batch = Sequence[tuple[str, int]]


def write_batches(directory, batches: Sequence[Batch]) -> pathlib.Path:
    """One file per batch; event time is one minute per batch (unused by the queries)."""
    files = []
    for b, rows in enumerate(batches):
        ts = (st.BASE_TS + dt.timedelta(minutes=b)).strftime("%Y-%m-%d %H:%M:%S")
        files.append([{"key": k, "value": int(v), "ts": ts} for k, v in rows])
    st.write_files(directory, files)
    return pathlib.Path(directory)


EventBatch = Sequence[tuple[str, int, float]]  # (key, value, event time: hours after BASE_TS)


def write_event_batches(directory, batches: Sequence[EventBatch], start: int = 0,
                        stop: int | None = None) -> pathlib.Path:
    """One file per batch (files[start:stop]), each row with its own event time."""
    files = [[{"key": k, "value": int(v),
               "ts": (st.BASE_TS + dt.timedelta(hours=h)).strftime("%Y-%m-%d %H:%M:%S")}
              for k, v, h in rows] for rows in batches]
    st.write_files(directory, files, start, stop)
    return pathlib.Path(directory)


def event_ms(hours: float) -> int:
    """Epoch milliseconds of the event time `hours` after BASE_TS (UTC)."""
    return int((st.BASE_TS.replace(tzinfo=dt.timezone.utc) + dt.timedelta(hours=hours)).timestamp() * 1000)


# ---------------------------------------------------------------------------------------
# The queries (module-level: a subprocess spec names them)

def dedup_key(df):
    """dropDuplicates on `key` (no watermark: Spark itself never forgets a key)."""
    return df.dropDuplicates(["key"]).select("key", "value")


def count_by_key(df):
    from pyspark.sql import functions as F

    return df.groupBy("key").agg(F.count("*").alias("n"))


def join_by_key(left, right):
    """Stream-stream inner equi-join without watermark: Spark keeps both sides forever."""
    from pyspark.sql import functions as F

    l = left.select(F.col("key").alias("lkey"), F.col("value").alias("lvalue"))
    r = right.select(F.col("key").alias("rkey"), F.col("value").alias("rvalue"))
    return l.join(r, F.expr("lkey = rkey"), "inner").select("lkey", "lvalue", "rvalue")


def dedup_then_count(df):
    """Two stateful operators: dropDuplicates(key, value), then a count per key."""
    from pyspark.sql import functions as F

    return (df.dropDuplicates(["key", "value"]).groupBy("key")
            .agg(F.count("*").alias("n")))


WATERMARK_DELAY = "1 minute"


def _watermarked(df):
    return df.withWatermark("ts", WATERMARK_DELAY)


def count_by_key_wm(df):
    """count_by_key with an event-time watermark (no time in the key: Spark evicts nothing)."""
    return count_by_key(_watermarked(df))


def dedup_key_wm(df):
    """dedup_key with an event-time watermark (`ts` not in the key: Spark evicts nothing)."""
    return dedup_key(_watermarked(df))


def join_by_key_wm(left, right):
    """join_by_key with a watermark on each side (no time condition: Spark evicts nothing)."""
    return join_by_key(_watermarked(left), _watermarked(right))


QUERIES: dict[str, tuple[Callable, str]] = {
    "dedup_key": (dedup_key, "append"),
    "count_by_key": (count_by_key, "update"),
    "join_by_key": (join_by_key, "append"),
    "dedup_then_count": (dedup_then_count, "update"),
    "count_by_key_wm": (count_by_key_wm, "update"),
    "dedup_key_wm": (dedup_key_wm, "append"),
    "join_by_key_wm": (join_by_key_wm, "append"),
}


# ---------------------------------------------------------------------------------------
# Running queries

@dataclasses.dataclass
class QuerySpec:
    name: str
    query: str                                  # a key of QUERIES
    inputs: list[str]                           # one directory per source
    checkpoint: str
    confs: dict[str, str] = dataclasses.field(default_factory=dict)
    sleeps: dict[int, float] = dataclasses.field(default_factory=dict)  # after batch id
    # after batch id b: wait until the wall clock is `pace[b]` seconds past b's timestamp
    pace: dict[int, float] = dataclasses.field(default_factory=dict)
    # after batch id b: sleep `lag_sleeps[b]` seconds plus how long b has run so far (wall
    # clock minus b's timestamp): a pause that outlasts whatever a slow batch adds to
    # RocksDB's TTL (the TTL compaction filter's TTL includes the batch clock's lag)
    lag_sleeps: dict[int, float] = dataclasses.field(default_factory=dict)
    # after batch id b: wait, at most `snapshot_waits[b]` seconds, until maintenance has
    # written version b + 1's snapshot (`<b+1>.manifest`) in every partition of operator 0
    snapshot_waits: dict[int, float] = dataclasses.field(default_factory=dict)
    provider: str = st.TTLSTATE
    kill_at: int | None = None    # os._exit(1) in this batch, after its state is committed
    sink_file: str | None = None  # JSON lines: one per foreachBatch call (subprocess runs)
    timeout_s: float = 300


@dataclasses.dataclass
class Outcome:
    name: str
    checkpoint: str
    batches: dict[int, list[tuple]]   # sorted sink rows of each batch
    progress: list[dict]
    error: str | None = None

    def check(self) -> "Outcome":
        """Fails the test with the query's error, if it failed."""
        if self.error is not None:
            raise AssertionError(f"query {self.name} failed:\n{self.error[:6000]}")
        return self

    def timestamps(self) -> dict[int, int]:
        return batch_timestamps(self.checkpoint)

    def ops(self, batch: int) -> list[dict]:
        for p in self.progress:
            if p["batchId"] == batch:
                return p.get("stateOperators", [])
        raise AssertionError(f"{self.name}: no progress for batch {batch} "
                             f"(batches {[p['batchId'] for p in self.progress]})")

    def op(self, batch: int, operator_name: str | None = None) -> dict:
        ops = self.ops(batch)
        if operator_name is None:
            assert len(ops) == 1, f"{self.name}: {len(ops)} state operators"
            return ops[0]
        found = [o for o in ops if o.get("operatorName") == operator_name]
        assert len(found) == 1, (f"{self.name}: operator {operator_name!r} not in "
                                 f"{[o.get('operatorName') for o in ops]}")
        return found[0]

    def rows_total(self, operator_name: str | None = None) -> dict[int, int]:
        """numRowsTotal of each batch."""
        return {p["batchId"]: self.op(p["batchId"], operator_name)["numRowsTotal"]
                for p in self.progress}

    def metric(self, name: str, operator_name: str | None = None) -> dict[int, int]:
        """A custom metric of each batch (missing: the metric was not reported)."""
        out = {}
        for p in self.progress:
            cm = self.op(p["batchId"], operator_name).get("customMetrics") or {}
            if name in cm:
                out[p["batchId"]] = cm[name]
        return out

    def metric_sum(self, name: str, operator_name: str | None = None) -> int:
        values = self.metric(name, operator_name)
        assert values, (f"{self.name}: custom metric {name} is never reported; reported: "
                        f"{sorted(self.metric_names())}")
        return sum(values.values())

    def metric_names(self) -> set[str]:
        return {k for p in self.progress for o in p.get("stateOperators", [])
                for k in (o.get("customMetrics") or {})}

    def input_rows(self) -> dict[int, int]:
        return {p["batchId"]: p.get("numInputRows", 0) for p in self.progress}


class Handle:
    def __init__(self, spec: QuerySpec, query, batches):
        self.spec, self.query, self.batches = spec, query, batches

    def result(self) -> Outcome:
        error = None
        try:
            if not self.query.awaitTermination(self.spec.timeout_s):
                error = f"did not finish in {self.spec.timeout_s} s"
        except Exception as e:  # noqa: BLE001 - StreamingQueryException: reported
            error = f"{type(e).__name__}: {e}"
        finally:
            if self.query.isActive:
                self.query.stop()
        progress = [json.loads(p.json) for p in self.query.recentProgress]
        return Outcome(self.spec.name, self.spec.checkpoint,
                       {b: st.sort_rows(r) for b, r in sorted(self.batches.items())},
                       progress, error)


def _append_line(path: str, record: dict):
    with open(path, "a") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def start(spark, spec: QuerySpec) -> Handle:
    """Starts one query (Trigger.AvailableNow, foreachBatch sink); returns at once.

    The sink collects each batch's rows; then, if `spec.sleeps` says so, sleeps, and if
    `spec.pace` says so, waits until the wall clock is that many seconds past the batch's
    timestamp (the next batch starts, and takes its timestamp, only after that: a pace of
    4 s makes the gap to the next batch 4 s and a bit, however long this batch took, unless
    it took longer), and if `spec.lag_sleeps` says so, sleeps that many seconds plus the time
    the batch has taken so far. In batch `spec.kill_at` it ends the whole process with os._exit(1):
    the batch's state is committed, its commit-log entry is not written.
    """
    build_df, mode = QUERIES[spec.query]
    batches: dict[int, list[tuple]] = {}
    sleeps = {int(k): float(v) for k, v in spec.sleeps.items()}
    pace = {int(k): float(v) for k, v in spec.pace.items()}
    lag_sleeps = {int(k): float(v) for k, v in spec.lag_sleeps.items()}
    snapshot_waits = {int(k): float(v) for k, v in spec.snapshot_waits.items()}

    def on_batch(batch_df, batch_id):
        rows = [st.to_plain(r) for r in batch_df.collect()]
        batches[batch_id] = rows
        if spec.sink_file:
            _append_line(spec.sink_file, {"batch": batch_id, "pid": os.getpid(),
                                          "wall_ms": int(time.time() * 1000), "rows": rows})
        if spec.kill_at is not None and batch_id == spec.kill_at:
            os._exit(1)
        if sleeps.get(batch_id):
            time.sleep(sleeps[batch_id])
        if pace.get(batch_id):
            ts = batch_timestamps(spec.checkpoint)[batch_id]
            time.sleep(max(0.0, ts / 1000 + pace[batch_id] - time.time()))
        if lag_sleeps.get(batch_id):
            ts = batch_timestamps(spec.checkpoint)[batch_id]
            time.sleep(lag_sleeps[batch_id] + max(0.0, time.time() - ts / 1000))
        if snapshot_waits.get(batch_id):
            wait_for_snapshot(spec.checkpoint, batch_id + 1, snapshot_waits[batch_id])

    with st.session_confs(spark, {st.PROVIDER_CLASS_KEY: spec.provider, **spec.confs}):
        df = build_df(*[st.read_events(spark, d) for d in spec.inputs])
        query = (df.writeStream.outputMode(mode)
                 .option("checkpointLocation", str(spec.checkpoint))
                 .trigger(availableNow=True).queryName(spec.name)
                 .foreachBatch(on_batch).start())
    return Handle(spec, query, batches)


def run_side_by_side(spark, specs: Sequence[QuerySpec]) -> list[Outcome]:
    """Starts every query, then waits for each; a failed query is an Outcome with `error`."""
    handles = []
    for spec in specs:
        try:
            handles.append(start(spark, spec))
        except Exception as e:  # noqa: BLE001 - e.g. an analysis error: reported
            handles.append(Outcome(spec.name, spec.checkpoint, {}, [], f"{type(e).__name__}: {e}"))
    return [h if isinstance(h, Outcome) else h.result() for h in handles]


# ---------------------------------------------------------------------------------------
# Subprocess runs: `python ttl_queries.py <spec.json>`

def run_subprocess(spec: dict, work_dir, timeout_s: float = 400, wait: bool = True):
    """Runs the queries of `spec` in a new Python process with its own SparkSession.

    spec: {"session_confs": {...}, "queries": [QuerySpec fields...], "start_file": optional
    path: the session starts at once, the queries only once that file exists}. Returns
    (returncode, {name: Outcome} or None if the process died, jvm pid or None, log path);
    with wait=False returns the Popen and a callable that finishes the job.
    """
    work_dir = pathlib.Path(work_dir)
    work_dir.mkdir(parents=True, exist_ok=True)
    tag = spec.get("tag", "run")
    spec = dict(spec, result_file=str(work_dir / f"{tag}.result.json"),
                pid_file=str(work_dir / f"{tag}.jvm_pid"))
    proc, log, log_path = st.spawn_spec_process(__file__, spec, work_dir, tag)

    def finish():
        rc = st.wait_or_kill(proc, timeout_s)
        log.close()
        outcomes = None
        if os.path.exists(spec["result_file"]):
            raw = json.loads(pathlib.Path(spec["result_file"]).read_text())
            outcomes = {name: Outcome(name, o["checkpoint"],
                                      {int(b): [_tuple(r) for r in rows]
                                       for b, rows in o["batches"].items()},
                                      o["progress"], o["error"])
                        for name, o in raw.items()}
        pid = None
        if os.path.exists(spec["pid_file"]):
            pid = int(pathlib.Path(spec["pid_file"]).read_text())
        return rc, outcomes, pid, log_path

    if wait:
        return finish()
    return proc, finish


def _tuple(v):
    return tuple(_tuple(x) for x in v) if isinstance(v, list) else v


def read_sink_file(path) -> list[dict]:
    """The JSON lines a subprocess sink wrote (one per foreachBatch call), rows as tuples."""
    out = []
    for line in pathlib.Path(path).read_text().splitlines():
        rec = json.loads(line)
        rec["rows"] = st.sort_rows(_tuple(r) for r in rec["rows"])
        out.append(rec)
    return out


def wait_for_exit(pid: int | None, timeout_s: float = 60) -> bool:
    """Waits until process `pid` is gone (the killed driver's JVM); True if it is."""
    if pid is None:
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass
        # a zombie child of someone else still answers kill(0): look at its state
        try:
            if pathlib.Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except (OSError, IndexError):
            return True
        time.sleep(0.2)
    return False


def _subprocess_main(spec_path: str) -> int:
    import ttlstate

    spec = json.loads(pathlib.Path(spec_path).read_text())
    builder = st.session_builder(spec.get("app", "ttlstate-ttl-subprocess"))
    for k, v in spec.get("session_confs", {}).items():
        builder = builder.config(k, v)
    spark = st.get_or_create(ttlstate.configure(builder))
    spark.sparkContext.setLogLevel("WARN")
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    pathlib.Path(spec["pid_file"]).write_text(str(pid))
    if spec.get("start_file"):  # started early (the JVM's start-up overlaps); wait for the go
        deadline = time.monotonic() + float(spec.get("start_timeout_s", 300))
        while not os.path.exists(spec["start_file"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {spec['start_file']} after the session started")
            time.sleep(0.1)
    specs = [QuerySpec(**q) for q in spec["queries"]]
    outcomes = run_side_by_side(spark, specs)
    result = {o.name: {"checkpoint": o.checkpoint, "batches": o.batches,
                       "progress": o.progress, "error": o.error} for o in outcomes}
    tmp = spec["result_file"] + ".tmp"
    pathlib.Path(tmp).write_text(json.dumps(result))
    os.replace(tmp, spec["result_file"])
    spark.stop()
    return 0


# ---------------------------------------------------------------------------------------
# Reference models: Flink's TTL semantics on the batch clock, cleanup on read only

ON_CREATE = "OnCreateAndWrite"
ON_READ = "OnReadAndWrite"
NEVER = "NeverReturnExpired"
RETURN = "ReturnExpiredIfNotCleanedUp"


def expired(ts: int, ttl: int, now: int) -> bool:
    """Flink's rule, written here again on purpose (not imported from ttlstate.ttl)."""
    return ts + min((1 << 63) - 1 - ts, ttl) <= now


class ModelStore:
    """One state store with TTL. With background cleanup off this is exact (also the
    visibility of expired entries); with it on, only what NeverReturnExpired shows is."""

    def __init__(self, ttl: int | None = None, update: str = ON_CREATE, visibility: str = NEVER):
        self.ttl, self.update, self.visibility = ttl or 0, update, visibility
        self.entries: dict[Any, tuple[Any, int]] = {}
        self.expired_on_read = 0

    def _expired(self, ts: int, now: int) -> bool:
        return self.ttl > 0 and expired(ts, self.ttl, now)

    def get(self, k, now: int):
        if k not in self.entries:
            return None
        value, ts = self.entries[k]
        if self._expired(ts, now):
            del self.entries[k]  # cleanup on read
            self.expired_on_read += 1
            return value if self.visibility == RETURN else None
        if self.update == ON_READ and self.ttl > 0:
            self.entries[k] = (value, self._stamp(now))
        return value

    def put(self, k, value, now: int):
        self.entries[k] = (value, self._stamp(now))

    def _stamp(self, now: int):
        return now

    def begin_batch(self, now: int):
        """A batch at clock `now` begins (nothing to do on the batch clock)."""

    def live(self, now: int) -> int:
        return sum(1 for _, ts in self.entries.values() if not self._expired(ts, now))


class EventTimeModelStore(ModelStore):
    """ModelStore on the event-time clock (`now` is the batch's watermark): an entry written
    at watermark 0 has no time yet (None) and never expires until the first batch at a
    watermark past 0 gives it that watermark."""

    def _expired(self, ts, now: int) -> bool:
        return ts is not None and super()._expired(ts, now)

    def _stamp(self, now: int):
        return now if now > 0 else None

    def begin_batch(self, now: int):
        if now > 0:
            for k, (v, ts) in list(self.entries.items()):
                if ts is None:
                    self.entries[k] = (v, now)


def _once_per_batch(batch: Batch):
    ks = [k for k, *_ in batch]
    assert len(ks) == len(set(ks)), f"a key twice in one batch makes the order matter: {batch}"


def model_dedup_key(batches: Sequence[Batch], ts: dict[int, int], store_cls=ModelStore, **store_kw):
    """(rows of each batch, live keys after each batch, the store) of `dedup_key`."""
    store = store_cls(**store_kw)
    out, live = {}, {}
    for b, batch in enumerate(batches):
        _once_per_batch(batch)
        now = ts[b]
        store.begin_batch(now)
        rows = []
        for k, v, *_ in batch:
            if store.get(k, now) is None:
                store.put(k, True, now)
                rows.append((k, v))
        out[b] = st.sort_rows(rows)
        live[b] = store.live(now)
    return out, live, store


def _add_counts(store: "ModelStore", counts: collections.Counter, now: int) -> list:
    """Adds `counts` to the running count per key in `store` at `now`; the sorted
    (key, new count) rows a count-by-key query emits."""
    rows = []
    for k in sorted(counts):
        n = (store.get(k, now) or 0) + counts[k]
        store.put(k, n, now)
        rows.append((k, n))
    return st.sort_rows(rows)


def model_count_by_key(batches: Sequence[Batch], ts: dict[int, int], store_cls=ModelStore, **store_kw):
    store = store_cls(**store_kw)
    out, live = {}, {}
    for b, batch in enumerate(batches):
        now = ts[b]
        store.begin_batch(now)
        counts = collections.Counter(k for k, *_ in batch)
        out[b] = _add_counts(store, counts, now)
        live[b] = store.live(now)
    return out, live, store


def model_join_by_key(left: Sequence[Batch], right: Sequence[Batch], ts: dict[int, int],
                      left_ttl: int | None = None, right_ttl: int | None = None,
                      event_time: bool = False):
    """Spark's symmetric hash join (state format 2) with a TTL per side: a batch's left rows
    probe the right state first, then its right rows probe the left state (which holds
    this batch's left rows). Every buffered row expires on its own. A buffered row that
    joins for the first time is rewritten by Spark (its matched flag), which is a write:
    its timestamp is refreshed. `event_time`: `ts` are watermarks, and a row written at
    watermark 0 has no time (None) until the first batch at a watermark past 0."""
    state: dict[str, dict[str, list[list]]] = {"l": {}, "r": {}}  # key -> [value, ts, matched]
    ttls = {"l": left_ttl or 0, "r": right_ttl or 0}

    def stamp(now):
        return None if event_time and now <= 0 else now

    def probe(side, k, now):
        ttl = ttls[side]
        live = [e for e in state[side].get(k, [])
                if not (ttl and e[1] is not None and expired(e[1], ttl, now))]
        for e in live:
            if not e[2]:
                e[1], e[2] = stamp(now), True
        return [e[0] for e in live]

    out = {}
    for b in range(len(left)):
        now = ts[b]
        if event_time and now > 0:
            for side in state.values():
                for entries in side.values():
                    for e in entries:
                        e[1] = now if e[1] is None else e[1]
        rows = []
        for k, v, *_ in left[b]:
            matches = probe("r", k, now)
            rows.extend((k, v, rv) for rv in matches)
            state["l"].setdefault(k, []).append([v, stamp(now), bool(matches)])
        for k, v, *_ in right[b]:
            matches = probe("l", k, now)
            rows.extend((k, lv, v) for lv in matches)
            state["r"].setdefault(k, []).append([v, stamp(now), bool(matches)])
        out[b] = st.sort_rows(rows)
    return out


def model_dedup_then_count(batches: Sequence[Batch], ts: dict[int, int],
                           dedup_ttl: int | None = None, count_ttl: int | None = None):
    dedup, count = ModelStore(dedup_ttl), ModelStore(count_ttl)
    out = {}
    for b, batch in enumerate(batches):
        now = ts[b]
        passed = collections.Counter()
        for k, v in batch:
            if dedup.get((k, v), now) is None:
                dedup.put((k, v), True, now)
                passed[k] += 1
        out[b] = _add_counts(count, passed, now)
    return out


# ---------------------------------------------------------------------------------------
# The checkpoint

def batch_timestamps(checkpoint) -> dict[int, int]:
    """batchTimestampMs of every batch in the offset log (the TTL clock of the batch)."""
    out = {}
    d = pathlib.Path(checkpoint) / "offsets"
    for f in d.iterdir() if d.is_dir() else []:
        if f.name.isdigit():
            lines = f.read_text().splitlines()
            out[int(f.name)] = int(json.loads(lines[1])["batchTimestampMs"])
    return dict(sorted(out.items()))


def batch_watermarks(checkpoint) -> dict[int, int]:
    """batchWatermarkMs of every batch in the offset log (the EventTime TTL clock)."""
    out = {}
    d = pathlib.Path(checkpoint) / "offsets"
    for f in d.iterdir() if d.is_dir() else []:
        if f.name.isdigit():
            lines = f.read_text().splitlines()
            out[int(f.name)] = int(json.loads(lines[1])["batchWatermarkMs"])
    return dict(sorted(out.items()))


def committed_batches(checkpoint) -> list[int]:
    d = pathlib.Path(checkpoint) / "commits"
    return sorted(int(f.name) for f in d.iterdir() if f.name.isdigit()) if d.is_dir() else []


def operator_ids(checkpoint) -> dict[str, int]:
    """operatorName -> operatorId, from Spark's state metadata files."""
    out = {}
    for meta in (pathlib.Path(checkpoint) / "state").glob("*/_metadata/metadata"):
        info = json.loads(meta.read_text().splitlines()[1])["operatorInfo"]
        out[info["operatorName"]] = int(info["operatorId"])
    return out


def snapshot_files(checkpoint, operator: int = 0, store: str | None = None) -> dict[int, dict[int, pathlib.Path]]:
    """partition -> version -> `<v>.manifest` (an incremental snapshot) of a store."""
    out: dict[int, dict[int, pathlib.Path]] = {}
    op_dir = pathlib.Path(checkpoint) / "state" / str(operator)
    for part in op_dir.iterdir() if op_dir.is_dir() else []:
        if not part.name.isdigit():
            continue
        d = part / store if store else part
        for f in d.glob("*.manifest"):
            stem = f.name[:-len(".manifest")]
            if stem.isdigit():
                out.setdefault(int(part.name), {})[int(stem)] = f
    return out


def snapshotted_everywhere(checkpoint, version: int, operator: int = 0) -> bool:
    """Whether every partition of the operator has a snapshot of `version` (`<version>.manifest`,
    or `<version>_<id>.manifest` in a checkpoint of format v2)."""
    op_dir = pathlib.Path(checkpoint) / "state" / str(operator)
    parts = [d for d in op_dir.iterdir() if d.name.isdigit()] if op_dir.is_dir() else []
    return bool(parts) and all((d / f"{version}.manifest").exists() or any(d.glob(f"{version}_*.manifest"))
                               for d in parts)


def wait_for_snapshot(checkpoint, version: int, timeout_s: float) -> bool:
    """Waits (maintenance snapshots in the background) until every partition of operator 0 has
    a snapshot of `version`; whether it does. Never fails: the test asserts on the files itself."""
    deadline = time.monotonic() + timeout_s
    while not snapshotted_everywhere(checkpoint, version):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def snapshot_sst_bytes(path) -> int:
    """Bytes of the SST files a manifest references."""
    from ttlstate import manifest

    return sum(f.size for f in manifest.read(str(path)).ssts)


def snapshot_entries(path, version: int) -> int:
    """Entries stored in the SSTs of a ttlstate manifest: the snapshot is restored into a
    scratch RocksDB (its SSTs by their RocksDB names, its inline files) and counted."""
    import shutil
    import tempfile

    from rocksdict import AccessType, Options, Rdict
    from ttlstate import manifest

    path = pathlib.Path(path)
    m = manifest.read(str(path), version)
    scratch = pathlib.Path(tempfile.mkdtemp(prefix="ttl-snapshot-count-"))
    try:
        for f in m.ssts:
            shutil.copyfile(path.parent / "sst" / f.name, scratch / f.local)
        for name, data in m.inline.items():
            (scratch / name).write_bytes(data)
        db = Rdict(str(scratch), Options(raw_mode=True), access_type=AccessType.read_only())
        try:
            return sum(1 for _ in db.keys())
        finally:
            db.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def snapshot_entries_at(checkpoint, version: int, operator: int = 0,
                        store: str | None = None) -> dict[int, int] | None:
    """partition -> entries of the `<version>.manifest` of every partition; None unless
    every partition has one."""
    files = snapshot_files(checkpoint, operator, store)
    if not files or any(version not in v for v in files.values()):
        return None
    return {p: snapshot_entries(v[version], version) for p, v in files.items()}


if __name__ == "__main__":
    sys.exit(_subprocess_main(sys.argv[1]))
