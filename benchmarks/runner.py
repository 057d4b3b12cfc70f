"""Run one workload on one provider variant in this process (its own driver JVM) and print a
JSON result: `python benchmarks/runner.py <workload> <variant> <input root> <work dir>`.

Measured:
- rows/s over batches 1..N (batch 0 pays the JVM's start and JIT warm-up; it is excluded
  for every provider alike): input rows / sum of their `triggerExecution` times;
- median batch time (`triggerExecution`) and median commit time (the state operators'
  `commitTimeMs`, summed over operators; each is Spark's sum over the batch's tasks) over
  batches 1..N, and each batch's time and state rows (`numRowsTotal`), to show how batch
  time grows with the state; per batch also the state operators' phases (Spark's
  `allUpdatesTimeMs`, `allRemovalsTimeMs`, `commitTimeMs`, summed over operators) and the CPU
  seconds the JVM and ttlstate's processes used within it (from a sample every second), to
  show which part grows;
- checkpoint bytes: every file under `<checkpoint>/state` at the end (`.crc` included);
- peak memory, sampled every 0.25 s: RSS of the driver JVM (driver and executor share it in
  local mode), and the PSS of all ttlstate Python processes together (the store service and
  its workers; PSS splits the pages the forked workers share, so the sum is not inflated);
- the ttlstate and RocksDB custom metrics of interest, summed over batches.
"""

from __future__ import annotations

import json
import os
import pathlib
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import psutil  # noqa: E402

import gc_log  # noqa: E402
import workloads  # noqa: E402

PROVIDER_KEY = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
ROCKSDB_CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
TTLSTATE = "io.ttlstate.spark.TtlStateStoreProvider"
TTL_KEY = "spark.sql.streaming.stateStore.ttlstate.ttl"

# id: (label, provider class, confs)
VARIANTS = {
    "ttlstate": ("ttlstate", TTLSTATE, {}),
    # set up as the documented spark-submit example (docs/guide/spark-submit.md): the jar and the provider class, no ttlstate.configure
    "ttlstate-plain": ("ttlstate, plain session", TTLSTATE, {}),
    # TTL on (ttlstate.configure's session): one no entry reaches in the run, and one entries
    # reach every few batches (the cleanup's work is in the expired-entry counters)
    "ttlstate-ttl": ("ttlstate, TTL 1h", TTLSTATE, {TTL_KEY: "1h"}),
    "ttlstate-ttl-expiring": ("ttlstate, TTL 5s", TTLSTATE, {TTL_KEY: "5s"}),
    "rocksdb-changelog": ("RocksDB, changelog on", ROCKSDB, {ROCKSDB_CHANGELOG: "true"}),
    "rocksdb": ("RocksDB, changelog off", ROCKSDB, {ROCKSDB_CHANGELOG: "false"}),
    "hdfs": ("HDFS-backed", HDFS, {}),
}
PLAIN_VARIANTS = ("ttlstate-plain",)
# A custom metric only each provider reports: run() checks the query's state was kept by the
# provider named (a benchmark that silently ran another provider compared it with itself:
# ProviderBench did until fec6ed0, docs/decisions/080-providerbench-fix-and-prefix-runs.md).
SERVED_BY_METRIC = {TTLSTATE: "ttlstateRoundTrips", ROCKSDB: "rocksdbCommitCompactLatency",
                    HDFS: "loadedMapCacheHitCount"}
DRIVER_MEMORY = os.environ.get("BENCH_DRIVER_MEMORY", "2g")
# Spark's default is 200; the benchmarks' 4 suit local[2] (BENCH_SHUFFLE_PARTITIONS=200: as users leave it)
SHUFFLE_PARTITIONS = os.environ.get("BENCH_SHUFFLE_PARTITIONS", "4")
# Extra JVM options for profiling runs (e.g. `-XX:StartFlightRecording=filename=...`); unset in `make bench`.
DRIVER_JAVA_OPTIONS = os.environ.get("BENCH_DRIVER_JAVA_OPTIONS", "")
SUMMED_METRICS = ("ttlstateRoundTrips", "ttlstateResidentScans", "ttlstatePrefetchedValues", "ttlstateSentAhead", "ttlstateCacheHits", "ttlstateCacheMisses", "ttlstateFilterSkips",
                  "ttlstateExpiredOnRead", "ttlstateExpiredIncremental", "ttlstateExpiredByCompaction")


def alternating(rounds: int, variants) -> list[tuple[int, str]]:
    """(round, variant) in run order: the variants alternate, and each round starts with the
    one after the last round's first, so no provider holds the same place in every round."""
    variants = list(variants)
    return [(r, variants[(r - 1 + i) % len(variants)]) for r in range(1, rounds + 1) for i in range(len(variants))]


class MemorySampler(threading.Thread):
    """Peak RSS of the driver JVM and peak summed PSS of the ttlstate processes."""

    CPU_EVERY = 4  # periods between CPU samples

    def __init__(self, jvm_pid: int, period: float = 0.25):
        super().__init__(daemon=True)
        self.jvm = psutil.Process(jvm_pid)
        self.period = period
        self.stop = threading.Event()
        self.peak_jvm = 0
        self.peak_python = 0
        self.cpu_samples: list[tuple[float, float, float]] = []  # (epoch s, JVM CPU s, ttlstate CPU s)

    def cpu_seconds(self) -> tuple[float, float]:
        """CPU seconds (user + system) used so far by the JVM and by the ttlstate processes."""
        def used(p):
            t = p.cpu_times()
            return t.user + t.system
        python = 0.0
        for p in self._ttlstate_processes():
            try:
                python += used(p)
            except psutil.Error:
                pass
        return used(self.jvm), python

    def _ttlstate_processes(self):
        for child in self.jvm.children(recursive=True):
            try:
                if any("ttlstate.service" in part for part in child.cmdline()):
                    yield child
            except psutil.Error:
                continue

    def run(self):
        tick = 0
        while not self.stop.is_set():
            try:
                if tick % self.CPU_EVERY == 0:
                    self.cpu_samples.append((time.time(), *self.cpu_seconds()))
                tick += 1
                self.peak_jvm = max(self.peak_jvm, self.jvm.memory_info().rss)
                total = 0
                for p in self._ttlstate_processes():
                    try:
                        total += p.memory_full_info().pss
                    except psutil.Error:
                        pass
                self.peak_python = max(self.peak_python, total)
            except psutil.Error:
                return
            self.stop.wait(self.period)


def _dir_bytes(root: pathlib.Path) -> int:
    total = 0
    for dirpath, _, names in os.walk(root):
        for n in names:
            try:
                total += os.stat(os.path.join(dirpath, n)).st_size
            except FileNotFoundError:
                pass
    return total


def _median(xs):
    xs = sorted(xs)
    n = len(xs)
    return None if not n else (xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2)


STATE_PHASES = (("updates", "allUpdatesTimeMs"), ("removals", "allRemovalsTimeMs"), ("commit", "commitTimeMs"))


def _state_phases(p: dict) -> dict:
    """One batch's state operator phases in ms, each summed over the query's operators."""
    return {name: sum(int(o.get(field) or 0) for o in p.get("stateOperators", [])) for name, field in STATE_PHASES}


def _cpu_at(samples: list[tuple[float, float, float]], t: float) -> tuple[float, float]:
    """(JVM, ttlstate) CPU seconds used by time `t`, interpolated between the samples around it."""
    if t <= samples[0][0]:
        return samples[0][1], samples[0][2]
    for (t0, j0, p0), (t1, j1, p1) in zip(samples, samples[1:]):
        if t <= t1:
            f = (t - t0) / (t1 - t0) if t1 > t0 else 1.0
            return j0 + f * (j1 - j0), p0 + f * (p1 - p0)
    return samples[-1][1], samples[-1][2]


def batch_cpu(progress: list[dict], samples: list[tuple[float, float, float]]) -> list[list[float]]:
    """Per batch, [JVM, ttlstate] CPU seconds used between its trigger's start and end."""
    from datetime import datetime

    if len(samples) < 2:
        return []
    out = []
    for p in progress:
        t0 = datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp()
        t1 = t0 + p["durationMs"]["triggerExecution"] / 1000.0
        (j0, p0), (j1, p1) = _cpu_at(samples, t0), _cpu_at(samples, t1)
        out.append([round(j1 - j0, 2), round(p1 - p0, 2)])
    return out


def summarize(progress: list[dict]) -> dict:
    steady = progress[1:] or progress
    rows = sum(p["numInputRows"] for p in steady)
    ms = sum(p["durationMs"]["triggerExecution"] for p in steady)
    ops = [p.get("stateOperators", []) for p in steady]
    custom: dict[str, int] = {}
    for p in progress:
        for op in p.get("stateOperators", []):
            for k, v in op.get("customMetrics", {}).items():
                if k in SUMMED_METRICS:
                    custom[k] = custom.get(k, 0) + int(v)
    last_ops = progress[-1].get("stateOperators", [])

    def peak(read) -> int:  # the largest per-batch sum over a query's state operators
        return max((sum(int(read(o) or 0) for o in p.get("stateOperators", [])) for p in progress), default=0)

    return {
        "batches": len(progress),
        "rows": sum(p["numInputRows"] for p in progress),
        "rows_per_s": rows / (ms / 1000.0) if ms else None,
        "median_batch_ms": _median([p["durationMs"]["triggerExecution"] for p in steady]),
        # per batch (batch 0 first): how batch time grows with the state
        "batch_ms": [p["durationMs"]["triggerExecution"] for p in progress],
        "batch_state_rows": [sum(o.get("numRowsTotal", 0) for o in p.get("stateOperators", [])) for p in progress],
        "batch_state_phases_ms": [_state_phases(p) for p in progress],
        "median_commit_ms": _median([sum(o.get("commitTimeMs", 0) for o in os_) for os_ in ops]),
        "state_rows": sum(o.get("numRowsTotal", 0) for o in last_ops),
        "custom": custom,
        # the first batch's custom metrics (summed over operators): what a restart's first batch paid
        "first_batch_custom": {k: sum(int((o.get("customMetrics") or {}).get(k, 0)) for o in progress[0].get("stateOperators", []))
                               for k in ("ttlstateLoadMs", "ttlstateCheckpointLoads", "ttlstateDownloadedBytes")}
        if progress else {},
        # What the stores report (the memory breakdown): ttlstate's memoryUsedBytes is its
        # workers' RocksDB memory (memtables, table readers, per-store block caches) plus open
        # overlays; ttlstateCacheBytes the JVM's value cache and key filter.
        "peak_store_memory_bytes": peak(lambda o: o.get("memoryUsedBytes")),
        "peak_cache_bytes": peak(lambda o: o.get("customMetrics", {}).get("ttlstateCacheBytes")),
    }




def check_served_by(provider: str, progress: list[dict]) -> None:
    """Raises unless every state operator of the last batch reports `provider`'s own metric."""
    metric = SERVED_BY_METRIC[provider]
    ops = progress[-1].get("stateOperators", []) if progress else []
    if not ops or not all(metric in op.get("customMetrics", {}) for op in ops):
        raise RuntimeError(f"the query's state operators did not report {metric}: not served by {provider} "
                           f"({[sorted(op.get('customMetrics', {})) for op in ops]})")


def run(workload: str, variant: str, input_root: pathlib.Path, work: pathlib.Path, confs: dict | None = None) -> dict:
    from pyspark.sql import SparkSession

    import ttlstate

    label, provider, variant_confs = VARIANTS[variant]
    builder = SparkSession.builder.master("local[2]").appName(f"bench-{workload}-{variant}")
    if variant in PLAIN_VARIANTS:
        builder = builder.config("spark.jars", ttlstate.jar_path())
    else:
        builder = ttlstate.configure(builder)
    builder = (builder.config("spark.sql.shuffle.partitions", SHUFFLE_PARTITIONS)
               .config("spark.ui.enabled", "false")
               .config("spark.driver.memory", DRIVER_MEMORY)
               .config("spark.local.dir", str(work / "spark-local"))
               .config(ttlstate.CONF_PREFIX + "checkpoint.localCacheDir", str(work / "ttlstate-cache"))
               .config(PROVIDER_KEY, provider))
    work.mkdir(parents=True, exist_ok=True)
    gc_file = work / "gc.log"  # the JVM's heap as G1 sized it, and what it allocated (gc_log.py)
    builder = builder.config("spark.driver.extraJavaOptions", f"-Xlog:gc:file={gc_file} {DRIVER_JAVA_OPTIONS}".strip())
    for k, v in {**variant_confs, **(confs or {})}.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    jvm_pid = int(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid())
    sampler = MemorySampler(jvm_pid)
    sampler.start()
    checkpoint = work / "checkpoint"
    start = time.perf_counter()
    q = workloads.workload(workload).start(spark, input_root, str(checkpoint))
    q.awaitTermination()
    elapsed = time.perf_counter() - start
    sampler.stop.set()
    sampler.join()
    cpu = sampler.cpu_seconds()
    sampler.cpu_samples.append((time.time(), *cpu))  # the last batch ends after the last sample
    progress = [p for p in q.recentProgress if p["numInputRows"] > 0]
    check_served_by(provider, progress)
    result = summarize(progress)
    result["batch_cpu_s"] = batch_cpu(progress, sampler.cpu_samples)
    gc_text = gc_log.read(gc_file)
    result.update({
        "workload": workload, "variant": variant, "label": label, "elapsed_s": elapsed,
        "checkpoint_bytes": _dir_bytes(checkpoint / "state"),
        "peak_jvm_rss": sampler.peak_jvm, "peak_python_pss": sampler.peak_python,
        "peak_heap_committed": gc_log.peak_committed(gc_text) if gc_text else None,
        "heap_allocated": gc_log.allocated(gc_text) if gc_text else None,
        "cpu_jvm_s": cpu[0], "cpu_python_s": cpu[1],
        "jvm_pid": jvm_pid,
        "confs": {**variant_confs, **(confs or {})},
    })
    spark.stop()
    return result


JVM_EXIT_GRACE_S = 30


def main(argv):
    workload, variant, input_root, work = argv[1:5]
    confs = json.loads(argv[5]) if len(argv) > 5 else {}
    result = run(workload, variant, pathlib.Path(input_root), pathlib.Path(work), confs)
    print("RESULT " + json.dumps(result), flush=True)
    _end_driver_jvm(result["jvm_pid"])


def _end_driver_jvm(pid: int) -> None:
    """Lets the driver JVM exit (pyspark's gateway exits when its stdin closes) and kills it if
    it is still there 30 s later, so the caller, which reads its output until the pipe closes,
    does not wait for it. Seen with Spark's RocksDB provider after the 10M-key aggregation:
    minutes of an idle JVM after the query had ended."""
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is not None and proc.stdin is not None:
        proc.stdin.close()
    try:
        jvm = psutil.Process(pid)
        jvm.wait(JVM_EXIT_GRACE_S)
    except psutil.NoSuchProcess:
        return
    except psutil.TimeoutExpired:
        print(f"runner: the driver JVM (pid {pid}) was still running {JVM_EXIT_GRACE_S} s after the query "
              "ended; killed", file=sys.stderr, flush=True)
        jvm.kill()


if __name__ == "__main__":
    main(sys.argv)
