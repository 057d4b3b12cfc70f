"""Query-level comparison: ttlstate against Spark's HDFS-backed and RocksDB providers (changelog
checkpointing on and off), four workloads, one run, the same generated input for everyone.

Every (workload, provider) runs in its own process and driver JVM (`runner.py`), so peak
memory belongs to that run alone. Writes `benchmarks/results/comparison.md` and
`comparison.png` after every run (a partial run leaves a partial table). Knobs:
BENCH_SCALE (rows per batch, default 1.0), BENCH_BATCHES (default 20), BENCH_WORKLOADS and
BENCH_VARIANTS (comma-separated names), BENCH_DRIVER_MEMORY (default 2g). Timings are
reported, never asserted.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import report
import runner
import workloads

HERE = pathlib.Path(__file__).parent
SELECTED_WORKLOADS = [w for w in os.environ.get("BENCH_WORKLOADS", ",".join(workloads.WORKLOADS)).split(",") if w]
SELECTED_VARIANTS = [v for v in os.environ.get("BENCH_VARIANTS", ",".join(runner.VARIANTS)).split(",") if v]
RESULTS: dict[tuple[str, str], dict] = {}
TARGETS = {  # workload: (minimum ratio to RocksDB, minimum ratio to HDFS or None), issue 5
    "aggregation": (1.0, 0.8), "dropDuplicates": (1.0, 0.8), "join": (0.8, None), "window": (0.8, None),
}


def run_variant(workload: str, variant: str, input_root: pathlib.Path, work: pathlib.Path,
                confs: dict | None = None) -> dict:
    """Runs `runner.py` in a fresh process and returns its result."""
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(HERE / "runner.py"), workload, variant, str(input_root), str(work),
           json.dumps(confs or {})]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stderr[-5000:]
    return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="session")
def input_root(tmp_path_factory):
    root = pathlib.Path(os.environ.get("BENCH_INPUT_DIR", tmp_path_factory.mktemp("bench-input")))
    return root


@pytest.mark.parametrize("variant", SELECTED_VARIANTS)
@pytest.mark.parametrize("workload", SELECTED_WORKLOADS)
def test_query(benchmark, input_root, tmp_path, workload, variant):
    data = workloads.ensure_input(workload, input_root)
    result = benchmark.pedantic(run_variant, args=(workload, variant, data, tmp_path), rounds=1, iterations=1)
    assert result["rows"] == workloads.BATCHES * workloads.WORKLOADS[workload].rows_per_batch
    RESULTS[(workload, variant)] = result
    benchmark.extra_info.update({k: v for k, v in result.items() if k != "confs"})
    write_report()


def _memory(r: dict) -> int:
    return r["peak_jvm_rss"] + r["peak_python_pss"]


def write_report() -> None:
    out = [f"# ttlstate vs Spark's state store providers: queries\n",
           f"Command: `make bench` (this part: `python -m pytest benchmarks/test_query_comparison.py "
           f"--benchmark-only -s`). {report.machine()}.\n",
           f"Every run: `local[2]`, 4 shuffle partitions, driver memory {runner.DRIVER_MEMORY}, its own "
           f"process and JVM, {workloads.BATCHES} batches of one generated JSON file each "
           f"(`maxFilesPerTrigger=1`, `Trigger.AvailableNow`, scale {workloads.SCALE:g}), `noop` sink. "
           "Rows/s and medians are over batches 1..N (batch 0 pays the JVM's start and JIT warm-up, "
           "for every provider alike); commit ms is Spark's `commitTimeMs` (summed over the batch's tasks "
           "and state operators); checkpoint bytes are all files under `<checkpoint>/state` at the end; "
           "memory is the peak RSS of the driver JVM (driver and executor in local mode) and the peak "
           "summed PSS of ttlstate's Python processes (store service and workers); CPU seconds are the "
           "whole run's (JVM start included) of the JVM and of ttlstate's processes. ttlstate runs with "
           "its defaults (value cache `cache.maxBytes=128m`, key filter on).\n"]
    groups, series = [], {}
    for workload in SELECTED_WORKLOADS:
        res = {v: RESULTS.get((workload, v)) for v in SELECTED_VARIANTS}
        if not any(res.values()):
            continue
        base = res.get("ttlstate")
        out.append(f"## {workload}\n\n{workloads.WORKLOADS[workload].description}.\n")
        rows = []
        for v, r in res.items():
            if not r:
                continue
            rows.append([r["label"], report.fmt(r["rows_per_s"]),
                         report.ratio(base and base["rows_per_s"], r["rows_per_s"]),
                         report.fmt(r["median_batch_ms"]), report.fmt(r["median_commit_ms"]),
                         report.mib(r["checkpoint_bytes"]), report.mib(r["peak_jvm_rss"]),
                         report.mib(r["peak_python_pss"]), report.mib(_memory(r)),
                         f"{r['cpu_jvm_s']:,.0f} + {r['cpu_python_s']:,.0f}", report.fmt(r["state_rows"])])
        out.append(report.table(["provider", "rows/s", "ttlstate ÷ it (rows/s)", "median batch ms",
                                 "median commit ms", "checkpoint MiB", "peak JVM RSS MiB",
                                 "peak ttlstate Python PSS MiB", "JVM + Python MiB", "CPU s, JVM + Python",
                                 "state rows at end"], rows) + "\n")
        if base:
            c = base["custom"]
            lookups = c.get("ttlstateCacheHits", 0) + c.get("ttlstateCacheMisses", 0) + c.get("ttlstateFilterSkips", 0)
            note = (" Spark reports only the `keyWithIndexToValue` stores' custom metrics of a join, so the "
                    "lookups of `keyToNumValues` are missing here." if workload == "join" else "")
            out.append(f"ttlstate over the run: {report.fmt(c.get('ttlstateRoundTrips'))} round trips; of "
                       f"{report.fmt(lookups)} reads of keys the transaction had not written, "
                       f"{report.fmt(c.get('ttlstateCacheHits'))} were answered by the value cache, "
                       f"{report.fmt(c.get('ttlstateFilterSkips'))} (absent keys) by the key filter and "
                       f"{report.fmt(c.get('ttlstateCacheMisses'))} by the worker.{note}\n")
        groups.append(workload)
        for v in SELECTED_VARIANTS:
            r, label = res.get(v), runner.VARIANTS[v][0]
            series.setdefault(label, []).append(r["rows_per_s"] if r else None)
    out.append("## Targets (issue 5)\n")
    out.append(report.table(["target", "measured", "met"], _targets()) + "\n")
    chart = report.bar_chart(report.RESULTS_DIR / "comparison.png", "rows/s by workload and provider",
                             groups, series, "input rows / s (batches 1..N)")
    out.append(chart + "\n")
    path = report.RESULTS_DIR / "comparison.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))


def _targets() -> list[list[str]]:
    rows = []
    for workload, (vs_rocksdb, vs_hdfs) in TARGETS.items():
        base = RESULTS.get((workload, "ttlstate"))
        if not base:
            continue
        for variant, need in (("rocksdb-changelog", vs_rocksdb), ("rocksdb", vs_rocksdb), ("hdfs", vs_hdfs)):
            other = RESULTS.get((workload, variant))
            if need is None or not other:
                continue
            got = base["rows_per_s"] / other["rows_per_s"]
            rows.append([f"{workload}: rows/s >= {need}x {other['label']}", f"{got:.2f}x",
                         "yes" if got >= need else "no"])
    for workload in TARGETS:
        base, other = RESULTS.get((workload, "ttlstate")), RESULTS.get((workload, "rocksdb-changelog"))
        if base and other:
            got = base["median_commit_ms"] / max(other["median_commit_ms"], 1)
            rows.append([f"{workload}: commit p50 <= RocksDB with changelog", f"{base['median_commit_ms']:,.0f} vs "
                         f"{other['median_commit_ms']:,.0f} ms ({got:.2f}x)", "yes" if got <= 1 else "no"])
            budget = 128 * 2**20
            mem, limit = _memory(base), _memory(other) + budget
            rows.append([f"{workload}: peak JVM + Python <= RocksDB (changelog) + cache budget 128 MiB",
                         f"{report.mib(mem)} vs {report.mib(limit)} MiB", "yes" if mem <= limit else "no"])
    return rows
