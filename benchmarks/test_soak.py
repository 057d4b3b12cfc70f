"""Soak: a 300-batch streaming aggregation with TTL keeps state and memory flat (issue 6).

Workload: `groupBy(k).agg(count, sum(v))`, update mode, a foreachBatch sink that runs the
batch into the `noop` writer, ttlstate provider, `local[2]`, 4 shuffle partitions, JSON
files read one per batch (`maxFilesPerTrigger=1`, `Trigger.AvailableNow`).

Keys: batch b holds BENCH_SOAK_ROWS rows whose keys lie in the sliding window
`[b * NEW_KEYS, b * NEW_KEYS + KEYS)` (with ROWS >= KEYS every key of the window once, in
a seeded random order). Each batch brings NEW_KEYS keys never seen before and a key
leaves the window for good KEYS / NEW_KEYS batches after it came, so the key space grows
without bound: without TTL the state grows by NEW_KEYS rows per batch; with a TTL
(default time characteristic: the batch timestamp) a key is dropped once TTL has passed
since the last batch that wrote it, and the live state plateaus at the keys written in
the last TTL of wall time.

Variants run by default: `ttl` (TTL, everything else at its default), `ttl-bounded`
(the same with `rocksdb.boundedMemory.totalBytes=8m`: RocksDB's memtables and caches of a
worker share one 8 MiB budget) and `no-ttl` (the growth TTL prevents); on request
`ttl-unload` (TTL with Spark's `stateStore.unloadOnCommit=true`: every store is closed on
its worker after its commit and loaded again, from the local cache, in the next batch). Each runs in its own Python process with its own Spark driver JVM (a soak wants
fresh processes, and the runs must not share a JVM, a store service or stores).
After each batch's noop write (the state stores have committed by then), the foreachBatch
function records:

- local store bytes: the sum of the file sizes under the ttlstate store service's
  directory (the `--dir` of `python -m ttlstate.service`, a child of the driver JVM found
  with psutil), which holds every store's RocksDB directory; split into `.sst`, `.log`
  (RocksDB's WAL), `LOG*` (RocksDB's info log) and other files. This is what the executor
  keeps on disk; the operator's `memoryUsedBytes` is not the state's size (ttlstate
  reports RocksDB's memtables, table readers and block cache there plus open
  transactions' buffers), so it is recorded too but not used as the size.
- local cache bytes: files under `checkpoint.localCacheDir` (a directory of the run).
- checkpoint bytes: files under `<checkpoint>/state` (`.crc` files included).
- RSS of the driver JVM (its pid from `RuntimeMXBean`), the JVM heap in use and committed
  (`Runtime`), every 25 batches the heap still in use after `Runtime.gc()`, and the RSS,
  PSS and anonymous RSS of the ttlstate Python processes (the service and each worker;
  summed RSS counts the pages the forked workers share with the service once per
  process, PSS splits them).

After the query, each batch's progress (`durationMs.triggerExecution`, `numRowsTotal`,
`memoryUsedBytes`, the `ttlstate*` custom metrics) is joined with those samples, and the
batch timestamps of the offset log (read in foreachBatch: the log keeps only the last
`minBatchesToRetain` entries) give the expected live-key count (`model rows`: keys whose
last write is younger than the TTL at the batch's timestamp), which numRowsTotal should
equal.

`python -m pytest benchmarks/test_soak.py --benchmark-only -s` runs the variants one after
the other and writes `benchmarks/results/soak.md` (and `soak.png` when matplotlib is
installed; it is not a dependency of the project); the per-batch rows go to
`soak-rows.json` in pytest's temporary directory. Knobs: BENCH_SOAK_BATCHES (300),
BENCH_SOAK_NOTTL_BATCHES (as many), BENCH_SOAK_ROWS (rows per batch, 5000),
BENCH_SOAK_KEYS (window of keys per batch, 5000), BENCH_SOAK_NEW_KEYS (new keys per
batch, 500), BENCH_SOAK_TTL (`20s`), BENCH_SOAK_MAINTENANCE (Spark's
`stateStore.maintenanceInterval` for the runs, `10s`), BENCH_SOAK_VARIANTS (ids of
VARIANTS, comma-separated; `ttl-no-cleanup` is there too, not run by default),
BENCH_SOAK_RESULTS (the Markdown path, by default soak.md in `BENCH_RESULTS`; the PNG goes
beside it). Asserted: every batch ran, the TTL runs' cleanup metrics are > 0, and the TTL run
ends with far fewer state rows than the no-TTL run. Nothing is asserted on timings or memory.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import platform
import random
import subprocess
import sys
import time

import pytest

import report

BATCHES = int(os.environ.get("BENCH_SOAK_BATCHES", "300"))
NOTTL_BATCHES = int(os.environ.get("BENCH_SOAK_NOTTL_BATCHES", str(BATCHES)))
ROWS = int(os.environ.get("BENCH_SOAK_ROWS", "5000"))
KEYS = int(os.environ.get("BENCH_SOAK_KEYS", "5000"))
NEW_KEYS = int(os.environ.get("BENCH_SOAK_NEW_KEYS", "500"))
TTL = os.environ.get("BENCH_SOAK_TTL", "20s")
MAINTENANCE = os.environ.get("BENCH_SOAK_MAINTENANCE", "10s")
PARTITIONS = 4
SEED = 6
RESULTS_MD = pathlib.Path(os.environ.get("BENCH_SOAK_RESULTS",
                                         report.RESULTS_DIR / "soak.md"))
RESULTS_PNG = RESULTS_MD.with_suffix(".png")

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
TTL_KEY = PREFIX + "ttl"
CACHE_DIR = PREFIX + "checkpoint.localCacheDir"

# id: (label, batches, ttlstate confs)
VARIANTS = {
    "ttl": (f"TTL {TTL} (defaults otherwise)", BATCHES, {TTL_KEY: TTL}),
    "no-ttl": ("no TTL", NOTTL_BATCHES, {}),
    # Spark unloads every store after its commit (the provider closes it on its worker, which
    # ends the store's transactions and deletes its local files) and loads it again, from
    # the local cache, in the next batch: no transaction outlives its batch
    "ttl-unload": (f"TTL {TTL}, unloadOnCommit=true", BATCHES,
                   {TTL_KEY: TTL, "spark.sql.streaming.stateStore.unloadOnCommit": "true"}),
    # RocksDB's memory bounded per worker process (one block cache of 8 MiB, memtables
    # charged to it): its memtables and caches cannot grow past the budget
    "ttl-bounded": (f"TTL {TTL}, rocksdb.boundedMemory.totalBytes=8m", BATCHES,
                    {TTL_KEY: TTL, PREFIX + "rocksdb.boundedMemory.totalBytes": "8m"}),
    # not run by default: TTL without the incremental cleanup and the compaction filter,
    # so only reads delete expired entries (keys that never come back stay on disk)
    "ttl-no-cleanup": (f"TTL {TTL}, cleanup.inBackground=false", BATCHES,
                       {TTL_KEY: TTL, PREFIX + "cleanup.inBackground": "false"}),
}
SELECTED = [v.strip() for v in os.environ.get("BENCH_SOAK_VARIANTS", "ttl,ttl-bounded,no-ttl").split(",") if v.strip()]
EXPIRED = ("ttlstateExpiredOnRead", "ttlstateExpiredIncremental", "ttlstateExpiredByCompaction")
RESULTS = {}


# ---------------------------------------------------------------------------- input


def batch_keys(b: int) -> list[int]:
    """The keys of batch b's rows, in file order (deterministic)."""
    rng = random.Random(SEED * 1_000_003 + b)
    if ROWS >= KEYS:
        offsets = [i % KEYS for i in range(ROWS)]
    else:
        offsets = rng.sample(range(KEYS), ROWS)
    rng.shuffle(offsets)
    start = b * NEW_KEYS
    return [start + o for o in offsets]


def make_input(root: pathlib.Path, batches: int) -> pathlib.Path:
    root.mkdir(parents=True, exist_ok=True)
    base = time.time() - 86400
    for b in range(batches):
        rng = random.Random(SEED + b)
        path = root / f"part-{b:04d}.json"
        with open(path, "w") as out:
            out.write("".join(f'{{"k":{k},"v":{rng.randrange(100)}}}\n' for k in batch_keys(b)))
        os.utime(path, (base + b, base + b))  # the file source orders files by mtime
    return root


def linked_input(src: pathlib.Path, dest: pathlib.Path, batches: int) -> pathlib.Path:
    """The first `batches` files of `src`, hard-linked (mtimes kept)."""
    dest.mkdir(parents=True, exist_ok=True)
    for b in range(batches):
        os.link(src / f"part-{b:04d}.json", dest / f"part-{b:04d}.json")
    return dest


def model_rows(batches: int, batch_ts: list[int], ttl_ms: int) -> list[int]:
    """Live keys after each batch: keys whose last write (its batch's timestamp) is younger
    than the TTL at the batch's timestamp (live iff ts + ttl > now); all keys without TTL."""
    last: dict[int, int] = {}
    per_batch = [0] * batches  # keys whose latest write is in batch L
    out = []
    for b in range(batches):
        for k in set(batch_keys(b)):
            old = last.get(k)
            if old is not None:
                per_batch[old] -= 1
            last[k] = b
            per_batch[b] += 1
        if not ttl_ms:
            out.append(len(last))
        else:
            now = batch_ts[b]
            out.append(sum(n for L, n in enumerate(per_batch[:b + 1]) if batch_ts[L] + ttl_ms > now))
    return out


# ---------------------------------------------------------------------------- the child process


def _du(root) -> dict[str, int]:
    """Bytes under root by kind: sst, log (RocksDB WAL), infolog (RocksDB's info `LOG`
    files), other; and the total and file count."""
    out = {"sst": 0, "log": 0, "infolog": 0, "other": 0, "total": 0, "files": 0}
    for dirpath, _, names in os.walk(root):
        for name in names:
            try:
                size = os.stat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:  # deleted by maintenance while we walk
                continue
            kind = ("sst" if name.endswith(".sst") else "log" if name.endswith(".log")
                    else "infolog" if name.startswith("LOG") else "other")
            out[kind] += size
            out["total"] += size
            out["files"] += 1
    return out


class Sampler:
    """Finds the driver JVM and the ttlstate service tree; samples sizes and memory."""

    def __init__(self, spark, checkpoint: pathlib.Path, cache: pathlib.Path):
        import psutil
        self.psutil = psutil
        jvm = spark.sparkContext._jvm
        self.runtime = jvm.java.lang.Runtime.getRuntime()
        self.jvm = psutil.Process(int(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid()))
        self.checkpoint = checkpoint
        self.cache = cache
        self.service = None
        self.service_dir = None

    def _find_service(self):
        if self.service is not None and self.service.is_running():
            return self.service
        self.service = None
        for c in self.jvm.children():
            try:
                cmd = c.cmdline()
            except self.psutil.Error:
                continue
            if "ttlstate.service" in cmd and "--dir" in cmd:
                self.service, self.service_dir = c, cmd[cmd.index("--dir") + 1]
        return self.service

    def sample(self, batch_id: int) -> dict:
        t0 = time.perf_counter()
        s = {"batch": batch_id, "t": time.time()}
        s["jvm_rss"] = self.jvm.memory_info().rss
        s["jvm_threads"] = self.jvm.num_threads()
        s["jvm_fds"] = self.jvm.num_fds()
        s["heap_used"] = self.runtime.totalMemory() - self.runtime.freeMemory()
        s["heap_committed"] = self.runtime.totalMemory()
        if batch_id % 25 == 24 or batch_id == 0:  # live heap: after a full GC, now and then
            self.runtime.gc()
            s["heap_live"] = self.runtime.totalMemory() - self.runtime.freeMemory()
        service = self._find_service()
        procs = []
        if service is not None:
            procs = [service] + service.children()
        rss = pss = anon = fds = 0
        each = []  # RSS of the service, then of each worker
        for p in procs:
            try:
                m = p.memory_full_info()
                with open(f"/proc/{p.pid}/status") as f:
                    a = next(int(line.split()[1]) * 1024 for line in f if line.startswith("RssAnon:"))
                rss += m.rss
                pss += m.pss
                anon += a
                fds += p.num_fds()
                each.append(m.rss)
            except (self.psutil.Error, OSError, StopIteration):
                continue
        s.update(py_rss=rss, py_pss=pss, py_anon=anon, py_each=each, py_procs=len(procs), py_fds=fds)
        s["store"] = _du(self.service_dir) if self.service_dir else _du("/nonexistent")
        s["cache"] = _du(self.cache)["total"]
        s["ckpt"] = _du(self.checkpoint / "state")["total"]
        s["sample_ms"] = (time.perf_counter() - t0) * 1000
        return s


def child_main(cfg: dict) -> None:
    from pyspark.sql import SparkSession, functions as F
    import ttlstate

    work = pathlib.Path(cfg["work"])
    checkpoint, cache = work / "checkpoint", work / "cache"
    builder = (ttlstate.configure(SparkSession.builder.master("local[2]").appName(f"ttlstate-soak-{cfg['variant']}"))
               .config("spark.sql.shuffle.partitions", str(PARTITIONS))
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.streaming.numRecentProgressUpdates", str(cfg["batches"] + 100))
               .config("spark.sql.streaming.stateStore.maintenanceInterval", cfg["maintenance"])
               .config(CACHE_DIR, str(cache)))
    for k, v in cfg["confs"].items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    sampler = Sampler(spark, checkpoint, cache)
    samples = []
    started = time.time()

    def batch(out, batch_id):
        out.write.format("noop").mode("overwrite").save()
        samples.append(sampler.sample(batch_id))
        # the batch's timestamp (the TTL clock), from its offset log entry: read now, since
        # the offset log keeps only the last minBatchesToRetain batches
        offsets = (checkpoint / "offsets" / str(batch_id)).read_text().splitlines()
        samples[-1]["batch_ts"] = json.loads(offsets[1])["batchTimestampMs"]
        if batch_id % 25 == 24 or batch_id == 0:
            s = samples[-1]
            print(f"[soak {cfg['variant']}] batch {batch_id}: {time.time() - started:.0f} s, "
                  f"store {s['store']['total'] / 1e6:.1f} MB, JVM RSS {s['jvm_rss'] / 2**20:.0f} MB, "
                  f"Python RSS {s['py_rss'] / 2**20:.0f} MB", file=sys.stderr, flush=True)

    df = (spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 1).json(cfg["input"])
          .groupBy("k").agg(F.count("*").alias("c"), F.sum("v").alias("s")))
    q = (df.writeStream.outputMode("update").foreachBatch(batch)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    q.awaitTermination()
    progress = [json.loads(p.json) for p in q.recentProgress]
    spark.stop()
    with open(cfg["out"], "w") as out:
        json.dump({"samples": samples, "progress": progress, "wall_s": time.time() - started}, out)


# ---------------------------------------------------------------------------- the parent


def run_variant(variant: str, inp: pathlib.Path, work: pathlib.Path) -> dict:
    label, batches, confs = VARIANTS[variant]
    work.mkdir(parents=True, exist_ok=True)
    cfg = {"variant": variant, "batches": batches, "confs": confs, "maintenance": MAINTENANCE,
           "input": str(linked_input(inp, work / "input", batches)), "work": str(work),
           "out": str(work / "result.json")}
    load_before = os.getloadavg()[0]
    t0 = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--child", json.dumps(cfg)], check=True)
    elapsed = time.perf_counter() - t0
    with open(cfg["out"]) as f:
        raw = json.load(f)
    return collate(variant, raw, batches, elapsed, (load_before, os.getloadavg()[0]))


def _ttl_ms(confs) -> int:
    if TTL_KEY not in confs:
        return 0
    from ttlstate.ttl.config import parse_duration
    return parse_duration(confs[TTL_KEY])


def collate(variant: str, raw: dict, batches: int, elapsed: float, loadavg) -> dict:
    label, _, confs = VARIANTS[variant]
    progress = {p["batchId"]: p for p in raw["progress"] if p["numInputRows"] > 0}
    samples = {s["batch"]: s for s in raw["samples"]}
    assert sorted(progress) == list(range(batches)), sorted(progress)[:5]
    assert sorted(samples) == list(range(batches))
    batch_ts = [samples[b]["batch_ts"] for b in range(batches)]
    model = model_rows(batches, batch_ts, _ttl_ms(confs))
    rows = []
    for b in range(batches):
        p, s = progress[b], samples[b]
        op = p["stateOperators"][0]
        custom = op.get("customMetrics", {})
        rows.append({
            "batch": b, "ts": batch_ts[b], "ms": p["durationMs"]["triggerExecution"],
            "rows": op["numRowsTotal"], "model": model[b], "updated": op["numRowsUpdated"],
            "removed": op.get("numRowsRemoved", 0), "mem_used": op["memoryUsedBytes"],
            **{k: custom.get(k, 0) for k in EXPIRED},
            "store": s["store"]["total"], "store_sst": s["store"]["sst"], "store_log": s["store"]["log"],
            "store_infolog": s["store"]["infolog"], "store_files": s["store"]["files"],
            "round_trips": custom.get("ttlstateRoundTrips", 0), "snapshot_ms": custom.get("ttlstateSnapshotMs", 0),
            "uploaded_files": custom.get("ttlstateUploadedFiles", 0),
            "heap_live": s.get("heap_live"), "py_anon": s["py_anon"], "py_each": s["py_each"], "cache": s["cache"], "ckpt": s["ckpt"],
            "jvm_rss": s["jvm_rss"], "heap_used": s["heap_used"], "heap_committed": s["heap_committed"],
            "jvm_threads": s["jvm_threads"], "jvm_fds": s["jvm_fds"],
            "py_rss": s["py_rss"], "py_pss": s["py_pss"], "py_procs": s["py_procs"], "py_fds": s["py_fds"],
            "sample_ms": s["sample_ms"],
        })
    return {"label": label, "variant": variant, "batches": batches, "rows": rows, "elapsed_s": elapsed,
            "query_s": raw["wall_s"], "loadavg": loadavg, "ttl_ms": _ttl_ms(confs)}


# ---------------------------------------------------------------------------- statistics


def mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def slope(ys, xs):
    """Least-squares slope of ys over xs."""
    mx, my = mean(xs), mean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / den if den else float("nan")


METRICS = [  # key, label, scale, unit
    ("rows", "state rows (numRowsTotal)", 1, ""),
    ("store", "local store bytes", 2**20, " MB"),
    ("cache", "local cache bytes", 2**20, " MB"),
    ("ckpt", "checkpoint bytes (state/)", 2**20, " MB"),
    ("jvm_rss", "driver JVM RSS", 2**20, " MB"),
    ("heap_used", "JVM heap used", 2**20, " MB"),
    ("heap_live", "JVM heap live after GC (every 25 batches)", 2**20, " MB"),
    ("py_rss", "ttlstate Python RSS (sum)", 2**20, " MB"),
    ("py_pss", "ttlstate Python PSS (sum)", 2**20, " MB"),
    ("mem_used", "memoryUsedBytes (operator)", 2**20, " MB"),
    ("store_infolog", "RocksDB info LOG bytes", 2**20, " MB"),
]


def flatness(r: dict, key: str) -> dict:
    """Quartile means (Q2: 2nd quarter of the batches, Q4: the last) and the slope over the
    batches after warm-up (the first third), per 100 batches."""
    rows = [x for x in r["rows"] if x[key] is not None]
    n = len(r["rows"])
    q = n // 4
    q2 = mean(x[key] for x in rows if q <= x["batch"] < 2 * q)
    q4 = mean(x[key] for x in rows if x["batch"] >= 3 * q)
    post = [x for x in rows if x["batch"] >= n // 3]
    nan = float("nan")
    if len(post) < 2:
        return {"q2": q2, "q4": q4, "ratio": nan, "slope100": nan, "slope_pct": nan, "min": nan, "max": nan}
    sl = slope([x[key] for x in post], [x["batch"] for x in post]) * 100
    level = mean(x[key] for x in post)
    return {"q2": q2, "q4": q4, "ratio": q4 / q2 if q2 else nan, "slope100": sl,
            "slope_pct": 100 * sl / level if level else nan,
            "min": min(x[key] for x in post), "max": max(x[key] for x in post)}


# ---------------------------------------------------------------------------- report


def _mb(n):
    return f"{n / 2**20:,.1f}"


def _table(r: dict) -> str:
    rows = r["rows"]
    marks = [0] + [b for b in range(24, len(rows), 25)]
    if marks[-1] != len(rows) - 1:
        marks.append(len(rows) - 1)
    lines = ["| batch | numRowsTotal | model rows | local store MB (sst / WAL / info LOG) | local cache MB "
             "| checkpoint MB | JVM RSS MB | JVM heap MB: used / live after GC | Python RSS MB (service / workers) "
             "| Python PSS MB | memoryUsedBytes MB | batch ms, mean of window "
             "| expired: read / incremental / compaction, sum of window |",
             "|---:|---:|---:|---|---:|---:|---:|---|---|---:|---:|---:|---|"]
    prev = -1
    for b in marks:
        x = rows[b]
        window = rows[prev + 1:b + 1]
        prev = b
        exp = " / ".join(f"{sum(w[k] for w in window):,}" for k in EXPIRED)
        live = "–" if x["heap_live"] is None else _mb(x["heap_live"])
        lines.append(
            f"| {b} | {x['rows']:,} | {x['model']:,} "
            f"| {_mb(x['store'])} ({_mb(x['store_sst'])} / {_mb(x['store_log'])} / {_mb(x['store_infolog'])}) "
            f"| {_mb(x['cache'])} | {_mb(x['ckpt'])} | {_mb(x['jvm_rss'])} | {_mb(x['heap_used'])} / {live} "
            f"| {_mb(x['py_rss'])} ({' / '.join(_mb(e) for e in x['py_each'])}) | {_mb(x['py_pss'])} "
            f"| {_mb(x['mem_used'])} | {mean(w['ms'] for w in window):,.0f} | {exp} |")
    return "\n".join(lines)


def _flatness_table(results: dict) -> str:
    lines = ["| metric | run | mean of batches Q2 | mean of batches Q4 | Q4 / Q2 | slope after warm-up, per 100 batches "
             "| slope, % of mean per 100 batches | min / max after warm-up |",
             "|---|---|---:|---:|---:|---:|---:|---|"]
    for key, label, scale, unit in METRICS:
        for r in results.values():
            f = flatness(r, key)
            fmt = (lambda v: f"{v / scale:,.1f}") if scale > 1 else (lambda v: f"{v:,.0f}")
            lines.append(f"| {label}{unit and ' (' + unit.strip() + ')'} | {r['label']} | {fmt(f['q2'])} | {fmt(f['q4'])} "
                         f"| {f['ratio']:.3f} | {fmt(f['slope100'])} | {f['slope_pct']:+.1f}% "
                         f"| {fmt(f['min'])} / {fmt(f['max'])} |")
    return "\n".join(lines)


SPARK_CHARS = "▁▂▃▄▅▆▇█"


def sparkline(values, width=60):
    """A one-line chart (min..max of the values), each character the mean of a bucket."""
    n = len(values)
    width = min(width, n)
    buckets = [mean(values[i * n // width:(i + 1) * n // width]) for i in range(width)]
    lo, hi = min(buckets), max(buckets)
    span = hi - lo or 1
    return "".join(SPARK_CHARS[min(7, int((v - lo) / span * 8))] for v in buckets)


def _sparklines(results: dict) -> str:
    lines = ["```"]
    for key, label, scale, unit in METRICS + [("ms", "batch ms", 1, "")]:
        for r in results.values():
            vals = [x[key] for x in r["rows"] if x[key] is not None]
            lo, hi = min(vals) / scale, max(vals) / scale
            lines.append(f"{label[:26]:26} {r['variant']:14} {sparkline(vals)}  {lo:,.1f} .. {hi:,.1f}{unit}")
    lines.append("```")
    return "\n".join(lines)


def _git_state() -> str:
    try:
        return subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                              cwd=pathlib.Path(__file__).parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _plot(results: dict, path: pathlib.Path) -> str:
    """soak.png with matplotlib if it is installed; returns what to say about it."""
    try:
        import matplotlib
    except ImportError:
        return "matplotlib is not installed (it is not a dependency of the project): no soak.png."
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = [("rows", "state rows", 1), ("store", "local store MB", 2**20), ("ckpt", "checkpoint MB", 2**20),
              ("jvm_rss", "JVM RSS MB", 2**20), ("py_rss", "Python RSS MB", 2**20), ("ms", "batch ms", 1)]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.2 * len(panels)), sharex=True)
    for ax, (key, title, scale) in zip(axes, panels):
        for r in results.values():
            ax.plot([x["batch"] for x in r["rows"]], [x[key] / scale for x in r["rows"]], label=r["label"])
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    axes[0].legend()
    axes[-1].set_xlabel("batch")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return f"Plot: `{path.name}`."


def report(results: dict, plot_note: str) -> str:
    import pyspark
    head = [
        "# Soak: state size and process memory over a long run with TTL",
        "",
        f"Command: `{' '.join(f'{k}={v}' for k, v in sorted(os.environ.items()) if k.startswith('BENCH_SOAK_'))}"
        f"{' ' if any(k.startswith('BENCH_SOAK_') for k in os.environ) else ''}"
        f"python -m pytest benchmarks/test_soak.py --benchmark-only -s` "
        f"({datetime.date.today().isoformat()}, repo at `{_git_state()}`; {os.cpu_count()} cores; "
        f"Python {platform.python_version()}, Spark {pyspark.__version__}; each run's load average below).",
        "",
        f"Workload: streaming aggregation `groupBy(k).agg(count, sum(v))`, update mode, foreachBatch into `noop`, "
        f"ttlstate provider (changelog checkpoints, Spark's defaults for `minDeltasForSnapshot` = 10 and "
        f"`minBatchesToRetain` = 100), `local[2]`, {PARTITIONS} shuffle partitions, one JSON file per batch "
        f"(`maxFilesPerTrigger=1`, `Trigger.AvailableNow`), `stateStore.maintenanceInterval={MAINTENANCE}` "
        f"(Spark's default is 60s; shorter so snapshots and checkpoint retention run several times per quarter "
        f"of the run). Each run is a fresh Python process and driver JVM (default 1g heap).",
        "",
        f"Keys: batch b has {ROWS:,} rows whose keys are the window [b x {NEW_KEYS:,}, b x {NEW_KEYS:,} + {KEYS:,})"
        + (" (every key of the window once)" if ROWS >= KEYS else f" ({ROWS:,} distinct keys of it)")
        + f": {NEW_KEYS:,} new keys per batch, and a key leaves the window after {KEYS // max(1, NEW_KEYS)} batches "
        f"and never comes back. Without TTL the state grows by {NEW_KEYS:,} rows per batch; with TTL "
        f"(time characteristic: batch timestamp, `OnCreateAndWrite`, `NeverReturnExpired`, incremental cleanup "
        f"5 entries per access, compaction filter on with its 1h safety margin, which a run this short never "
        f"reaches) the live state is the keys written in the last TTL of wall time.",
        "",
        "Variants: `ttl` is the TTL with every other setting at its default; `ttl-bounded` adds "
        "`rocksdb.boundedMemory.totalBytes=8m` (one 8 MiB block cache per worker process, charged for the "
        "memtables too); `no-ttl` shows the growth TTL prevents; `ttl-unload` (when selected) adds Spark's `spark.sql.streaming.stateStore.unloadOnCommit=true`: each store is "
        "closed on its worker right after its commit (its local files deleted) and loaded again from the local cache "
        "in the next batch, so no worker transaction outlives its batch (its local store bytes, sampled after the "
        "commit, are therefore ~0; its local cache holds the state on disk).",
        "",
        "Columns: `numRowsTotal` of the state operator after the batch; `model rows`: the live keys computed from "
        "the generated keys and the batch timestamps of the offset log (a key is live iff its last write's batch "
        "timestamp + TTL > the batch's timestamp); local store: bytes of all files in the ttlstate store service's "
        "directory (every store's RocksDB files; found through the service process's `--dir`), with the `.sst`, "
        "WAL (`.log`) and RocksDB info log (`LOG*`) parts; local cache: `checkpoint.localCacheDir`; checkpoint: "
        "files under `<checkpoint>/state` (`.crc` included); RSS from `/proc` through psutil, sampled in the "
        "foreachBatch function right after the batch's write (the stores have committed); JVM heap live: in use "
        "after `Runtime.gc()`, every 25 batches; Python RSS: the sum, then the service and each worker (PSS splits "
        "the pages the forked workers share); `memoryUsedBytes`: the operator's metric (ttlstate: RocksDB memtables, "
        "table readers and block cache plus open transactions' write buffers), not used as the state's size. "
        "Batch ms (`durationMs.triggerExecution`, includes the sampling, median "
        + ", ".join(f"{r['variant']} {sorted(x['sample_ms'] for x in r['rows'])[len(r['rows']) // 2]:.0f} ms"
                    for r in results.values())
        + ") and expired counts are over the batches since the previous row.",
        "",
        "Runs: " + "; ".join(
            f"{r['label']}: {r['batches']} batches in {r['query_s']:.0f} s (process {r['elapsed_s']:.0f} s), "
            f"1-minute load average {r['loadavg'][0]:.1f} -> {r['loadavg'][1]:.1f}" for r in results.values()) + ".",
        "",
    ]
    body = []
    for r in results.values():
        body += [f"## {r['label']}", "", _table(r), ""]
    n = max(r["batches"] for r in results.values())
    body += [
        "## Flatness",
        "",
        f"Q2 / Q4: mean over the second and last quarter of each run's batches ({n // 4}..{2 * (n // 4) - 1} and "
        f"{3 * (n // 4)}..{n - 1} for {n} batches); slope: least squares over the batches after the first third "
        f"({n // 3}..{n - 1}), per 100 batches.",
        "",
        _flatness_table(results),
        "",
    ]
    for r in results.values():
        diff = [abs(x["rows"] - x["model"]) for x in r["rows"]]
        line = (f"- {r['label']}: numRowsTotal equals the model in {sum(d == 0 for d in diff)} of {len(diff)} "
                f"batches (largest difference {max(diff):,} rows)")
        if r["ttl_ms"]:
            line += ("; expired entries deleted in the whole run: "
                     + ", ".join(f"{k} {sum(x[k] for x in r['rows']):,}" for k in EXPIRED))
        post = r["rows"][len(r["rows"]) // 3:]
        per = lambda key: slope([x[key] for x in post], [x["batch"] for x in post]) / 2**20  # noqa: E731
        each = [slope([x["py_each"][i] for x in post], [x["batch"] for x in post]) / 2**20
                for i in range(min(len(x["py_each"]) for x in post))]
        line += (f". Growth per batch after warm-up (least squares, batches {post[0]['batch']}..{post[-1]['batch']}): "
                 f"JVM RSS {per('jvm_rss'):+.2f} MB, Python RSS {per('py_rss'):+.2f} MB (service "
                 + ", workers ".join(f"{e:+.2f}" for e in each[:1]) + (", workers " if len(each) > 1 else "")
                 + ", ".join(f"{e:+.2f}" for e in each[1:])
                 + f"; anonymous memory of all {per('py_anon'):+.2f} MB), local store {per('store'):+.3f} MB "
                 f"(of which RocksDB info log {per('store_infolog'):+.3f} MB), memoryUsedBytes {per('mem_used'):+.3f} MB, "
                 f"batch time {slope([x['ms'] for x in post], [x['batch'] for x in post]):+.1f} ms.")
        body.append(line)
    body.append("")
    body += ["## Curves", "", "Min .. max of each run, 60 buckets over its batches:", "", _sparklines(results), "",
             plot_note, ""]
    return "\n".join(head + body)


# ---------------------------------------------------------------------------- the benchmark


@pytest.fixture(scope="module")
def soak_input(tmp_path_factory):
    return make_input(tmp_path_factory.mktemp("soak-input"), max(VARIANTS[v][1] for v in SELECTED))


@pytest.mark.parametrize("variant", SELECTED)
def test_soak(benchmark, soak_input, tmp_path, variant):
    r = RESULTS[variant] = benchmark.pedantic(lambda: run_variant(variant, soak_input, tmp_path / variant),
                                              rounds=1, iterations=1)
    last = r["rows"][-1]
    benchmark.extra_info.update({"batches": r["batches"], "state_rows": last["rows"], "store_bytes": last["store"],
                                 "jvm_rss": last["jvm_rss"], "py_rss": last["py_rss"]})
    if r["ttl_ms"] and variant in ("ttl", "ttl-bounded", "ttl-unload"):
        assert sum(x["ttlstateExpiredIncremental"] + x["ttlstateExpiredOnRead"] for x in r["rows"]) > 0
    if len(RESULTS) == len(SELECTED):
        ordered = {v: RESULTS[v] for v in SELECTED}
        raw = tmp_path.parent / "soak-rows.json"  # every batch's row, for a closer look
        with open(raw, "w") as f:
            json.dump(ordered, f)
        RESULTS_MD.parent.mkdir(exist_ok=True)
        note = _plot(ordered, RESULTS_PNG)
        text = report(ordered, note)
        print("\n" + text + f"\nper-batch rows: {raw}")
        RESULTS_MD.write_text(text)
        if "ttl" in RESULTS and "no-ttl" in RESULTS:
            t, nt = RESULTS["ttl"]["rows"], RESULTS["no-ttl"]["rows"]
            b = min(len(t), len(nt)) - 1
            # meaningful only if TTL really bounded the state that grows without it
            assert t[b]["rows"] * 3 < nt[b]["rows"], (t[b]["rows"], nt[b]["rows"])


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--child", required=True, help="JSON config of one run (internal)")
    child_main(json.loads(ap.parse_args().child))
