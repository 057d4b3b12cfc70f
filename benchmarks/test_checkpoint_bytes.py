"""What a commit costs in the checkpoint location: ttlstate's two checkpoint modes vs Spark's providers.

Workload (issue 4's acceptance): a streaming aggregation `groupBy(k).agg(count, sum(v))`,
update mode, a foreachBatch sink that runs the batch into the `noop` writer, `local[2]`,
4 shuffle partitions, `maxFilesPerTrigger=1`. Batch 0 loads BENCH_CKPT_KEYS keys (default
1,000,000), then BENCH_CKPT_BATCHES batches (default 20) each update 1% of them (distinct
existing keys, a seeded random choice). Every variant reads the same generated files.

After each batch the foreachBatch function walks `<checkpoint>/state/` and sums the sizes of
the files that are new or whose size or mtime changed since the previous walk (the same
rule for every provider; `.crc` side files of Hadoop's local file system included, and
whatever background maintenance wrote in between is counted in the batch it showed up in).
Medians and means are over the update batches (batch 0 excluded: it is the first snapshot
for ttlstate's snapshot mode, and the initial load for everyone).

Changed-entry bytes (the acceptance ratio's denominator) are the key and value bytes of
the state rows Spark hands to the store for the changed keys: UnsafeRows, key `(k BIGINT)`
16 bytes, value = aggregation buffer `(count BIGINT, sum BIGINT)` 24 bytes, so
40 bytes x 1% of the keys per commit. With ttlstate in changelog mode the benchmark checks
this against a decoded changelog (sum of len(key) + len(value) of its records).

Load latency: the query is restarted from its checkpoint in the same JVM with a tiny
extra file (RESTART_ROWS existing keys), twice: the second time with ttlstate's local
cache directory (`checkpoint.localCacheDir`, one per variant) deleted, so that restart
downloads everything. Reported: the restart batch's `triggerExecution` ms and the
provider's own load metric (ttlstate `ttlstateLoadMs`, Spark RocksDB
`rocksdbLoadLatencyMs`; both summed over the 4 partitions; HDFS has none).

`python -m pytest benchmarks/test_checkpoint_bytes.py --benchmark-only -s` prints a table and
writes it to `benchmarks/results/checkpoint_bytes.md`. Knobs: BENCH_CKPT_KEYS,
BENCH_CKPT_BATCHES, BENCH_CKPT_WARMUP_KEYS, BENCH_CKPT_PROVIDERS (comma-separated ids from
VARIANTS, e.g. `rocksdb,hdfs`), BENCH_CKPT_DRIVER_MEMORY (default 4g; ignored when a Spark
session already runs in the process), BENCH_CKPT_RESULTS (where the Markdown goes; by default
checkpoint_bytes.md in `BENCH_RESULTS`, which defaults to benchmarks/results/). No
assertion is made on sizes or timings.
"""

import datetime
import json
import os
import pathlib
import platform
import random
import shutil
import time
import zipfile

import pytest
from pyspark.sql import SparkSession, functions as F

import report
import ttlstate
from conftest import PROVIDERS, file_states, files_added, median

KEYS = int(os.environ.get("BENCH_CKPT_KEYS", "1000000"))
BATCHES = int(os.environ.get("BENCH_CKPT_BATCHES", "20"))
WARMUP_KEYS = int(os.environ.get("BENCH_CKPT_WARMUP_KEYS", "20000"))
WARMUP_BATCHES = 3
RESTART_ROWS = 100
PARTITIONS = 4

MODE = ttlstate.CONF_PREFIX + "checkpoint.mode"
CACHE_DIR = ttlstate.CONF_PREFIX + "checkpoint.localCacheDir"
ROCKSDB_CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"

# id: (label, provider, confs)
VARIANTS = {
    "ttlstate-changelog": ("ttlstate, checkpoint.mode=changelog", "ttlstate", {MODE: "changelog"}),
    "ttlstate-snapshot": ("ttlstate, checkpoint.mode=snapshot", "ttlstate", {MODE: "snapshot"}),
    # the SST codec before docs/decisions/076-lz4-sst-compression.md (LZ4 now): what the default
    # costs in uploaded bytes
    "ttlstate-snapshot-snappy": ("ttlstate, checkpoint.mode=snapshot, rocksdb.compression=snappy", "ttlstate",
                                 {MODE: "snapshot", ttlstate.CONF_PREFIX + "rocksdb.compression": "snappy"}),
    "rocksdb-changelog": ("Spark RocksDB, changelog on", "rocksdb", {ROCKSDB_CHANGELOG: "true"}),
    "rocksdb": ("Spark RocksDB, changelog off", "rocksdb", {ROCKSDB_CHANGELOG: "false"}),
    "hdfs": ("Spark HDFS-backed (default)", "hdfs", {}),
}
SELECTED = [v.strip() for v in os.environ.get("BENCH_CKPT_PROVIDERS", ",".join(VARIANTS)).split(",")
            if v.strip()]
# every commit uploads SSTs (ttlstate's snapshot mode, Spark's RocksDB without changelog): analyse them
EVERY_COMMIT_SNAPSHOT = {v for v, (_, _, confs) in VARIANTS.items()
                         if confs.get(MODE) == "snapshot" or confs.get(ROCKSDB_CHANGELOG) == "false"}
LOAD_METRIC = {"ttlstate": "ttlstateLoadMs", "rocksdb": "rocksdbLoadLatencyMs"}
UPLOAD_METRIC = {"ttlstate": "ttlstateUploadedBytes", "rocksdb": "rocksdbBytesCopied"}
RESULTS_MD = pathlib.Path(os.environ.get("BENCH_CKPT_RESULTS",
                                         report.RESULTS_DIR / "checkpoint_bytes.md"))
RESULTS = {}


def unsafe_row_bytes(fixed_fields):
    """Size of an UnsafeRow of fixed-width fields: the null bitset in 8-byte words + 8 per field."""
    return 8 * ((fixed_fields + 63) // 64) + 8 * fixed_fields


KEY_BYTES = unsafe_row_bytes(1)  # (k BIGINT)
VALUE_BYTES = unsafe_row_bytes(2)  # aggregation buffer (count BIGINT, sum BIGINT)


def changed_entry_bytes(keys):
    return max(1, keys // 100) * (KEY_BYTES + VALUE_BYTES)


# ---------------------------------------------------------------------------- input


def _write_rows(path, rows, mtime):
    with open(path, "w") as out:
        out.write("".join(f'{{"k":{k},"v":{v}}}\n' for k, v in rows))
    os.utime(path, (mtime, mtime))  # the file source orders files by mtime: make it explicit


def make_input(root, keys, batches, seed=4):
    """Files of batch 0 (every key once), of the update batches (1% distinct keys each) and of
    two restarts (RESTART_ROWS existing keys each), with increasing mtimes."""
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    base = time.time() - 86400
    main = [root / "part-0000.json"]
    _write_rows(main[0], ((k, rng.randrange(100)) for k in range(keys)), base)
    for b in range(1, batches + 1):
        main.append(root / f"part-{b:04d}.json")
        _write_rows(main[-1], ((k, rng.randrange(100)) for k in rng.sample(range(keys), max(1, keys // 100))),
                    base + b)
    restart = []
    for r in range(2):
        restart.append(root / f"restart-{r}.json")
        _write_rows(restart[-1], ((k, 1) for k in rng.sample(range(keys), min(keys, RESTART_ROWS))),
                    base + batches + 1 + r)
    return {"keys": keys, "batches": batches, "main": main, "restart": restart}


@pytest.fixture(scope="module")
def ckpt_input(tmp_path_factory):
    return make_input(tmp_path_factory.mktemp("ckpt-input"), KEYS, BATCHES)


@pytest.fixture(scope="module")
def ckpt_spark():
    """The benchmarks' session (conftest's `spark` settings) with a driver heap that holds the
    HDFS provider's maps of 1M keys for two runs of a query."""
    session = (ttlstate.configure(SparkSession.builder.master("local[2]").appName("ttlstate-bench"))
               .config("spark.sql.shuffle.partitions", str(PARTITIONS))
               .config("spark.ui.enabled", "false")
               .config("spark.driver.memory", os.environ.get("BENCH_CKPT_DRIVER_MEMORY", "4g"))
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    yield session
    session.stop()


# ---------------------------------------------------------------------------- queries


def run_query(spark, provider_class, input_dir, checkpoint, confs, on_batch=None):
    """The aggregation until the input is consumed; returns the progress of batches with input."""
    spark.conf.set("spark.sql.streaming.stateStore.providerClass", provider_class)
    for k, v in confs.items():
        spark.conf.set(k, v)
    try:
        df = (spark.readStream.schema("k LONG, v LONG").option("maxFilesPerTrigger", 1).json(str(input_dir))
              .groupBy("k").agg(F.count("*").alias("c"), F.sum("v").alias("s")))

        def batch(out, batch_id):
            out.write.format("noop").mode("overwrite").save()
            if on_batch:
                on_batch(batch_id)

        q = (df.writeStream.outputMode("update").foreachBatch(batch)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        q.awaitTermination()
    finally:
        for k in confs:
            spark.conf.unset(k)
    return [p for p in q.recentProgress if p["numInputRows"] > 0]


def _link(files, input_dir):
    input_dir.mkdir(parents=True, exist_ok=True)
    for f in files:
        os.link(f, input_dir / f.name)  # hard links keep the mtimes the source orders by


class Run:
    """One variant's directories (input, checkpoint, ttlstate cache) and confs."""

    def __init__(self, variant, root, inp):
        self.variant = variant
        self.label, provider, confs = VARIANTS[variant]
        self.provider = provider
        self.provider_class = PROVIDERS[provider]
        self.dir = root / variant
        self.input = self.dir / "input"
        self.checkpoint = self.dir / "checkpoint"
        self.cache = self.dir / "cache"
        self.confs = dict(confs)
        if provider == "ttlstate":
            self.confs[CACHE_DIR] = str(self.cache)
        self.inp = inp
        _link(inp["main"], self.input)

    def main(self, spark):
        """All batches of the input, walking the state directory after each."""
        walks = []
        state = self.checkpoint / "state"
        progress = run_query(spark, self.provider_class, self.input, self.checkpoint, self.confs,
                             lambda batch_id: walks.append((batch_id, file_states(state))))
        assert [b for b, _ in walks] == list(range(self.inp["batches"] + 1)), walks
        assert len(progress) == self.inp["batches"] + 1
        return progress, [w for _, w in walks]

    def restart(self, spark, n, clear_cache):
        _link([self.inp["restart"][n]], self.input)
        if clear_cache:
            shutil.rmtree(self.cache, ignore_errors=True)
        progress = run_query(spark, self.provider_class, self.input, self.checkpoint, self.confs)
        assert len(progress) == 1 and progress[0]["numInputRows"] == min(self.inp["keys"], RESTART_ROWS)
        p = progress[0]
        custom = p["stateOperators"][0]["customMetrics"]
        metric = LOAD_METRIC.get(self.provider)
        return {"trigger_ms": p["durationMs"]["triggerExecution"],
                "add_batch_ms": p["durationMs"].get("addBatch"),
                "load_metric_ms": custom.get(metric) if metric else None,
                "custom": custom}


# ---------------------------------------------------------------------------- checkpoint reading


def _kind(path):
    name = os.path.basename(path)
    if name.endswith(".crc"):
        return "crc"
    if name.endswith(".sst"):
        return "sst"
    for suffix in ("changelog", "delta", "snapshot", "zip", "manifest"):
        if name.endswith("." + suffix):
            return suffix
    return "other"


def _partitions(checkpoint):
    root = checkpoint / "state" / "0"
    return sorted((p for p in root.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))


def _version(name):
    return int(name.split(".")[0].split("_")[0])


def ttlstate_changelog_entry_bytes(checkpoint, version):
    """(records, key + value bytes) of the changelogs of `version` over all partitions."""
    from ttlstate import statefile
    from ttlstate.statefile import FILE_CHANGELOG
    records = size = 0
    for part in _partitions(checkpoint):
        meta, recs = statefile.read(str(part / f"{version}.changelog"), FILE_CHANGELOG, version)
        ttl_prefix = 8 if meta.layout == statefile.LAYOUT_TTL else 0
        for key, value in recs:
            records += 1
            size += len(key) + (len(value) - ttl_prefix if value is not None else 0)
    return records, size


def ttlstate_sst_bytes(checkpoint):
    """Total size of the SSTs referenced by each partition's newest manifest (None: no manifest)."""
    try:
        from ttlstate import manifest
    except ImportError:
        return None
    total, found = 0, False
    for part in _partitions(checkpoint):
        manifests = sorted(part.glob("*.manifest"), key=lambda p: _version(p.name))
        if manifests:
            found = True
            m = manifest.read(str(manifests[-1]))
            total += sum(s.size if hasattr(s, "size") else s["size"] for s in m.ssts)
    return total if found else None


def rocksdb_sst_bytes(checkpoint):
    """Total size of the SSTs referenced by each partition's newest Spark RocksDB snapshot zip."""
    total, found = 0, False
    for part in _partitions(checkpoint):
        zips = sorted(part.glob("*.zip"), key=lambda p: _version(p.name))
        if zips:
            found = True
            with zipfile.ZipFile(zips[-1]) as z:
                text = z.read("metadata").decode()
            meta = json.loads(text[text.index("\n") + 1:])  # "v1\n{json}"
            total += sum(f["sizeBytes"] for f in meta["sstFiles"])
    return total if found else None


def _levels(ssts, inline, tmp):
    """{RocksDB file name: (level, size)} of a checkpoint rebuilt in `tmp` from its SSTs
    ({RocksDB file name: checkpoint path}, hard-linked) and its small files ({name: bytes}),
    opened read-only."""
    from rocksdict import AccessType, Options, Rdict
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for name, data in inline.items():
        (tmp / name).write_bytes(data)
    for local, path in ssts.items():
        os.link(path, tmp / local)
    db = Rdict(str(tmp), Options(raw_mode=True), access_type=AccessType.read_only())
    try:
        return {f["name"].lstrip("/"): (f["level"], f["size"]) for f in db.live_files()}
    finally:
        db.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _ttlstate_snapshots(part):
    """[(version, {checkpoint name: RocksDB name}, inline files)] of a partition's manifests."""
    from ttlstate import manifest
    out = []
    for path in sorted(part.glob("*.manifest"), key=lambda p: _version(p.name)):
        m = manifest.read(str(path))
        out.append((m.version, {s.name: (s.local, part / "sst" / s.name) for s in m.ssts}, m.inline))
    return out


def _rocksdb_snapshots(part):
    """The same for Spark RocksDB's `<v>.zip` snapshots (metadata JSON + small files, SSTs in SSTs/)."""
    out = []
    for path in sorted(part.glob("*.zip"), key=lambda p: _version(p.name)):
        with zipfile.ZipFile(path) as z:
            text = z.read("metadata").decode()
            inline = {n: z.read(n) for n in z.namelist() if n != "metadata" and "/" not in n}
        meta = json.loads(text[text.index("\n") + 1:])
        out.append((_version(path.name),
                    {f["dfsSstFileName"]: (f["localFileName"], part / "SSTs" / f["dfsSstFileName"])
                     for f in meta["sstFiles"]}, inline))
    return out


def sst_analysis(checkpoint, provider, tmp):
    """Where a snapshot's new SST bytes come from: for each version after the first snapshot,
    the SSTs its snapshot holds that the previous version's did not, split by the level
    RocksDB placed them in (level 0: the flush of the commit's writes; deeper: compaction
    outputs), summed over partitions; and files and bytes per level of the newest snapshots."""
    per_version = {}
    newest = {}
    for part in _partitions(checkpoint):
        snaps = _ttlstate_snapshots(part) if provider == "ttlstate" else _rocksdb_snapshots(part)
        prev = None
        for i, (version, ssts, inline) in enumerate(snaps):
            if prev is None and i + 1 < len(snaps):  # the first snapshot is the baseline
                prev = set(ssts)
                continue
            levels = _levels({local: path for local, path in ssts.values()}, inline, tmp / part.name)
            if prev is not None:
                v = per_version.setdefault(version, {"flush": 0, "compaction": 0, "files": 0})
                for name in set(ssts) - prev:
                    level, size = levels[ssts[name][0]]
                    v["flush" if level == 0 else "compaction"] += size
                    v["files"] += 1
            prev = set(ssts)
            if i + 1 == len(snaps):
                for level, size in levels.values():
                    n = newest.setdefault(level, [0, 0])
                    n[0] += 1
                    n[1] += size
    return {"per_version": dict(sorted(per_version.items())), "newest_levels": dict(sorted(newest.items()))}


# ---------------------------------------------------------------------------- the benchmark


def measure(spark, variant, inp, root, benchmark=None):
    run = Run(variant, root, inp)
    load_before = os.getloadavg()[0]
    if benchmark is not None:
        progress, walks = benchmark.pedantic(lambda: run.main(spark), rounds=1, iterations=1)
    else:
        progress, walks = run.main(spark)
    added = [files_added({}, walks[0])] + [files_added(walks[i - 1], walks[i]) for i in range(1, len(walks))]
    per_commit = [sum(a.values()) for a in added[1:]]
    by_kind = {}
    for a in added[1:]:
        for path, size in a.items():
            k = by_kind.setdefault(_kind(path), [0, 0])
            k[0] += 1
            k[1] += size
    r = {
        "label": run.label,
        "batch0_bytes": sum(added[0].values()),
        "per_commit": per_commit,
        "median_bytes": median(per_commit),
        "mean_bytes": sum(per_commit) / len(per_commit),
        "max_bytes": max(per_commit),
        "by_kind": by_kind,
        "median_commit_ms": median([p["stateOperators"][0]["commitTimeMs"] for p in progress[1:]]),
        "median_batch_ms": median([p["batchDuration"] for p in progress[1:]]),
        "state_rows": progress[-1]["stateOperators"][0]["numRowsTotal"],
        "sst_bytes": None,
        "reported_upload_bytes": (median([p["stateOperators"][0]["customMetrics"].get(UPLOAD_METRIC[run.provider], 0)
                                          for p in progress[1:]]) if run.provider in UPLOAD_METRIC else None),
        "last_custom": progress[-1]["stateOperators"][0]["customMetrics"],
    }
    if run.provider == "ttlstate":
        r["sst_bytes"] = ttlstate_sst_bytes(run.checkpoint)
        if run.confs.get(MODE) == "changelog":
            r["decoded_changelog"] = ttlstate_changelog_entry_bytes(run.checkpoint, 2)
    elif run.provider == "rocksdb":
        r["sst_bytes"] = rocksdb_sst_bytes(run.checkpoint)
    if variant in EVERY_COMMIT_SNAPSHOT:
        r["sst_analysis"] = sst_analysis(run.checkpoint, run.provider, run.dir / "restored")
    r["restart_warm"] = run.restart(spark, 0, clear_cache=False)
    r["restart_cold"] = run.restart(spark, 1, clear_cache=True)
    r["loadavg"] = (load_before, os.getloadavg()[0])  # the machine is shared: 1-minute load, start and end
    return r


@pytest.fixture(scope="module")
def warmed_up(ckpt_spark, tmp_path_factory):
    """One small untimed run per variant (restarts included), so no variant pays the JIT
    warm-up or the start of ttlstate's service alone."""
    root = tmp_path_factory.mktemp("ckpt-warmup")
    inp = make_input(root / "input", min(KEYS, WARMUP_KEYS), WARMUP_BATCHES)
    for variant in SELECTED:
        measure(ckpt_spark, variant, inp, root)


def _fmt_bytes(n):
    return "–" if n is None else f"{n:,.0f}"


def _fmt_ratio(x, digits=2):
    return "–" if x is None else f"{x:.{digits}f}x"


def _fmt_pct(x):
    return "–" if x is None else f"{100 * x:.1f}%"


def _fmt_ms(x):
    return "–" if x is None else f"{x:,.0f}"


def table(results):
    changed = changed_entry_bytes(KEYS)
    lines = [
        "| provider | median bytes/commit | mean bytes/commit | median ÷ changed-entry bytes "
        "| median ÷ total SST size | median commit ms | load ms: restart batch, warm / cold cache "
        "| load ms: provider metric, warm / cold |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results.values():
        sst = r["median_bytes"] / r["sst_bytes"] if r["sst_bytes"] else None
        w, c = r["restart_warm"], r["restart_cold"]
        metric = ("–" if w["load_metric_ms"] is None
                  else f"{_fmt_ms(w['load_metric_ms'])} / {_fmt_ms(c['load_metric_ms'])}")
        lines.append(
            f"| {r['label']} | {_fmt_bytes(r['median_bytes'])} | {_fmt_bytes(r['mean_bytes'])} "
            f"| {_fmt_ratio(r['median_bytes'] / changed)} | {_fmt_pct(sst)} "
            f"| {_fmt_ms(r['median_commit_ms'])} "
            f"| {_fmt_ms(w['trigger_ms'])} / {_fmt_ms(c['trigger_ms'])} | {metric} |")
    return "\n".join(lines)


def details(results):
    lines = ["| provider | batch 0 bytes | max bytes/commit | update-batch bytes by file kind (files, bytes) "
             "| median uploaded bytes/commit, provider metric | total SST bytes | median batch ms | state rows |",
             "|---|---:|---:|---|---:|---:|---:|---:|"]
    for r in results.values():
        kinds = ", ".join(f"{k} {n} / {b:,}" for k, (n, b) in sorted(r["by_kind"].items()))
        lines.append(f"| {r['label']} | {_fmt_bytes(r['batch0_bytes'])} | {_fmt_bytes(r['max_bytes'])} "
                     f"| {kinds} | {_fmt_bytes(r['reported_upload_bytes'])} | {_fmt_bytes(r['sst_bytes'])} | {_fmt_ms(r['median_batch_ms'])} "
                     f"| {r['state_rows']:,} |")
    lines.append("")
    lines.append("1-minute load average of the machine at the start and end of each variant: "
                 + ", ".join(f"{r['label']} {r['loadavg'][0]:.1f} -> {r['loadavg'][1]:.1f}" for r in results.values())
                 + f" ({os.cpu_count()} cores).")
    lines.append("")
    lines.append("Bytes per update commit, in batch order:")
    lines.append("")
    for r in results.values():
        lines.append(f"- {r['label']}: " + ", ".join(f"{b:,}" for b in r["per_commit"]))
    for r in results.values():
        if "decoded_changelog" in r:
            n, b = r["decoded_changelog"]
            lines.append("")
            lines.append(f"Check of the denominator: ttlstate's changelogs of version 2 hold {n:,} records "
                         f"of {b:,} key + value bytes (computed from the schema: "
                         f"{changed_entry_bytes(KEYS):,}).")
    for r in results.values():
        a = r.get("sst_analysis")
        if not a:
            continue
        pv = a["per_version"].values()
        flush, compaction = sum(v["flush"] for v in pv), sum(v["compaction"] for v in pv)
        lines.append("")
        lines.append(f"{r['label']}: new SSTs per snapshot after the first (summed over partitions), "
                     f"by the level RocksDB put them in (level 0 = the commit's flush, deeper = "
                     f"compaction outputs): {flush:,} flushed + {compaction:,} compaction-output bytes "
                     f"({100 * compaction / max(1, flush + compaction):.0f}% compaction); per version "
                     "(flush / compaction bytes): "
                     + ", ".join(f"v{ver} {v['flush']:,} / {v['compaction']:,}" for ver, v in a["per_version"].items())
                     + ". Newest snapshots, per level (files, bytes): "
                     + ", ".join(f"L{lvl} {n} / {b:,}" for lvl, (n, b) in a["newest_levels"].items()) + ".")
    lines.append("")
    lines.append("Restart batches' custom metrics (warm, then cold cache):")
    lines.append("")
    for r in results.values():
        for which in ("restart_warm", "restart_cold"):
            custom = {k: v for k, v in sorted(r[which]["custom"].items())
                      if k.startswith(("ttlstate", "rocksdbLoad", "rocksdbNumLoaded", "rocksdbReplay",
                                       "rocksdbNumReplay", "rocksdbBytesCopied", "rocksdbFilesCopied",
                                       "loadedMap"))}
            lines.append(f"- {r['label']}, {which[8:]}: triggerExecution {r[which]['trigger_ms']} ms, "
                         f"addBatch {r[which]['add_batch_ms']} ms, {json.dumps(custom)}")
    return "\n".join(lines)


def report(results):
    changed = changed_entry_bytes(KEYS)
    updated = max(1, KEYS // 100)
    head = (
        f"Checkpoint bytes per commit: {KEYS:,} keys in state, then {BATCHES} batches each updating "
        f"{updated:,} distinct existing keys (1%); streaming aggregation `groupBy(k).agg(count, sum)`, "
        f"update mode, foreachBatch into `noop`, `local[2]`, {PARTITIONS} shuffle partitions, "
        f"`maxFilesPerTrigger=1`; {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Spark {ttlstate_spark_version()}, {datetime.date.today().isoformat()}.\n\n"
        f"- bytes/commit: sizes of the files under `<checkpoint>/state/` that are new or changed "
        f"(size or mtime) after each update batch (`.crc` files included; maintenance output is "
        f"counted in the batch it appeared in); median and mean over the {BATCHES} update batches.\n"
        f"- changed-entry bytes: key + value bytes of the changed state rows as Spark hands them to "
        f"the store (UnsafeRows: key `(k BIGINT)` {KEY_BYTES} B + aggregation buffer "
        f"`(count, sum)` {VALUE_BYTES} B) x {updated:,} keys = {changed:,} bytes per commit.\n"
        f"- total SST size: SSTs referenced by the newest manifest (ttlstate) or snapshot zip "
        f"(Spark RocksDB) of each partition, summed, at the end of the run.\n"
        f"- load: the query restarted from its checkpoint in the same JVM on {RESTART_ROWS} rows; "
        f"the first batch's `triggerExecution`, and the provider's load metric summed over the "
        f"{PARTITIONS} partitions (ttlstate `ttlstateLoadMs`, Spark RocksDB `rocksdbLoadLatencyMs`); "
        f"cold = ttlstate's `checkpoint.localCacheDir` deleted before the restart (Spark's "
        f"providers never reuse local files across query runs, so both restarts load everything).\n")
    return head + "\n" + table(results) + "\n\n" + details(results) + "\n"


def ttlstate_spark_version():
    import pyspark
    return pyspark.__version__


@pytest.mark.parametrize("variant", SELECTED)
def test_checkpoint_bytes(benchmark, ckpt_spark, ckpt_input, warmed_up, tmp_path, variant):
    r = RESULTS[variant] = measure(ckpt_spark, variant, ckpt_input, tmp_path, benchmark)
    assert r["state_rows"] == KEYS
    benchmark.extra_info.update({k: v for k, v in r.items() if k not in ("last_custom",)})
    if len(RESULTS) == len(SELECTED):
        text = report(RESULTS)
        print("\n" + text)
        RESULTS_MD.parent.mkdir(exist_ok=True)
        RESULTS_MD.write_text(text)
