"""Query-level comparison: ttlstate against Spark's HDFS-backed and RocksDB providers (changelog
checkpointing on, and off on issue 5's four workloads), the same generated input for everyone.

Every (workload, provider) runs `BENCH_ROUNDS` times (default 3), the providers alternating
(each round starting with the next one), every run in its own process and driver JVM
(`runner.py`), so peak memory belongs to that run alone and a slow spell of the shared machine
hits every provider alike.
The report gives each measure's median over the rounds and the spread (min-max) of rows/s
and memory. Writes `benchmarks/results/comparison.md` and `comparison.png` after every run
(a partial run leaves a partial table). Knobs: BENCH_SCALE (rows per batch, default 1.0),
BENCH_BATCHES (default 20), BENCH_ROUNDS, BENCH_WORKLOADS and BENCH_VARIANTS (comma-separated
names), BENCH_DRIVER_MEMORY (default 2g), BENCH_DRIVER_JAVA_OPTIONS (e.g. `-Xms2g
-XX:+AlwaysPreTouch`: both providers with the same resident heap,
docs/decisions/083-aggregation-memory-g1-heap.md). A run that fails (e.g. an OutOfMemoryError) is
reported as failed. Timings are reported, never asserted.
"""

from __future__ import annotations

import json
import os
import pathlib
import statistics
import subprocess
import sys

import pytest

import report
import runner
import workloads

HERE = pathlib.Path(__file__).parent
SELECTED_WORKLOADS = [w for w in os.environ.get("BENCH_WORKLOADS", ",".join(workloads.WORKLOADS)).split(",") if w]
# `make bench` (BENCH_HEADLINE=1): the user's path against the RocksDB provider, and TTL's cost
HEADLINE = os.environ.get("BENCH_HEADLINE") == "1"
HEADLINE_VARIANTS = ("ttlstate-plain", "ttlstate", "ttlstate-ttl", "rocksdb-changelog")
SELECTED_VARIANTS = [v for v in os.environ.get(
    "BENCH_VARIANTS", ",".join(HEADLINE_VARIANTS if HEADLINE else runner.VARIANTS)).split(",") if v]
# Issue 5 compares every provider, the RocksDB provider with changelog checkpointing on and off,
# on its four workloads. The later ones (issue 15's join at 200k rows per side, the session
# windows) run the providers their targets name and the HDFS provider, not changelog off: it is
# no target, and on the large join its three runs take a quarter of an hour. BENCH_VARIANTS, when
# set, applies to every workload as given.
ALL_PROVIDER_WORKLOADS = ("aggregation", "dropDuplicates", "join", "window")
VARIANTS_GIVEN = "BENCH_VARIANTS" in os.environ


# TTL on the large join: in `make bench-full` only (its runs are the longest; the 50k join has TTL)
NO_TTL_HEADLINE = ("join-large",)


def variants_of(workload: str) -> list[str]:
    """The providers `workload` runs on, in the order they alternate."""
    if HEADLINE and not VARIANTS_GIVEN and workload in NO_TTL_HEADLINE:
        return [v for v in SELECTED_VARIANTS if not v.startswith("ttlstate-ttl")]
    if VARIANTS_GIVEN or HEADLINE or workload in ALL_PROVIDER_WORKLOADS:
        return SELECTED_VARIANTS
    return [v for v in SELECTED_VARIANTS if v != "rocksdb"]


ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
# (workload, variant) -> the result of every round (a failed run: {"failed": reason})
RESULTS: dict[tuple[str, str], list[dict]] = {}
MEMORY_ALLOWANCE = 128 * 2**20  # issue 15: peak JVM + Python <= RocksDB's peak + 128 MiB


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


def try_variant(workload: str, variant: str, input_root: pathlib.Path, work: pathlib.Path) -> dict:
    """`run_variant`, but a run that fails gives {"failed": the error's last line} instead."""
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, str(HERE / "runner.py"), workload, variant, str(input_root), str(work), "{}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3 * 3600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1][len("RESULT "):])
    text = proc.stderr + proc.stdout
    reason = next((ln.strip() for ln in text.splitlines() if "OutOfMemoryError" in ln), None)
    return {"failed": reason or (text.strip().splitlines() or ["exit %d" % proc.returncode])[-1][:300]}


@pytest.fixture(scope="session")
def input_root(tmp_path_factory):
    root = pathlib.Path(os.environ.get("BENCH_INPUT_DIR", tmp_path_factory.mktemp("bench-input")))
    return root


# workload by workload; within a workload round by round, the providers alternating
RUNS = [(w, r, v) for w in SELECTED_WORKLOADS for r, v in runner.alternating(ROUNDS, variants_of(w))]


def measure(benchmark, results: dict, write, input_root, tmp_path, workload: str, variant: str) -> None:
    """One run of `workload` on `variant`: recorded in `results`, reported by `write()`; a
    failed run is reported and skipped, a finished one must have read every input row."""
    data = workloads.ensure_input(workload, input_root)
    result = benchmark.pedantic(try_variant, args=(workload, variant, data, tmp_path), rounds=1, iterations=1)
    results.setdefault((workload, variant), []).append(result)
    write()
    if "failed" in result:
        pytest.skip(f"{variant} failed on {workload}: {result['failed']}")
    assert result["rows"] == workloads.workload(workload).total_rows()
    benchmark.extra_info.update({k: v for k, v in result.items() if k != "confs"})


@pytest.mark.parametrize("workload,round_,variant", RUNS, ids=[f"{w}-{v}-r{r}" for w, r, v in RUNS])
def test_query(benchmark, input_root, tmp_path, workload, round_, variant):
    measure(benchmark, RESULTS, write_report, input_root, tmp_path, workload, variant)


def _ok(workload: str, variant: str) -> list[dict]:
    return [r for r in RESULTS.get((workload, variant), []) if "failed" not in r]


def _allocated_per_row(r: dict) -> float | None:
    """Bytes the driver JVM allocated on its Java heap per input row (`gc_log.allocated`)."""
    return r["heap_allocated"] / r["rows"] if r.get("heap_allocated") and r.get("rows") else None


def _median_of(runs: list[dict], measure) -> float | None:
    values = [v for v in map(measure, runs) if v is not None]
    return statistics.median(values) if values else None


def _spread(runs: list[dict], measure, fmt) -> str:
    values = [measure(r) for r in runs]
    return "–" if not values else f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def _median_run(runs: list[dict]) -> dict | None:
    """The run whose rows/s is the median (for the counters quoted under a table)."""
    return sorted(runs, key=lambda r: r["rows_per_s"])[len(runs) // 2] if runs else None


def _growth(label: str, run: dict | None) -> str | None:
    """`label: early -> late ms (rows -> rows; phases, CPU)` over a run's batches 1..N, or over
    those from the first after which the state stays within 1% of its final size when there
    are 8 or more of them; None without per-batch times."""
    if not run or len(run.get("batch_ms", [])) < 3:
        return None
    ms, rows = run["batch_ms"][1:], run["batch_state_rows"][1:]
    # issue 15: no growth "beyond the state's own": once the state is within 1% of its final
    # size, compare the first and the last quarter of those batches
    flat = next(i for i in range(len(rows)) if all(abs(n - rows[-1]) <= 0.01 * rows[-1] for n in rows[i:]))
    if len(ms) - flat >= 8:
        ms, rows = ms[flat:], rows[flat:]
    q = max(1, len(ms) // 4)

    def quarters(series: list) -> tuple[float, float]:
        """The medians of the first and of the last quarter."""
        return statistics.median(series[:q]), statistics.median(series[-q:])

    early, late = quarters(ms)
    growth = f"{late / early:.2f}x" if early else "–"
    parts = []
    phases = run.get("batch_state_phases_ms", [])[1:][-len(ms):]
    if len(phases) == len(ms):
        for name in ("updates", "removals", "commit"):
            a, b = quarters([ph[name] for ph in phases])
            parts.append(f"{name} {a:,.0f} -> {b:,.0f}")
    cpu = run.get("batch_cpu_s", [])[1:][-len(ms):]
    if len(cpu) == len(ms):
        for i, name in ((0, "JVM"), (1, "ttlstate Python")):
            series = [c[i] for c in cpu]
            if any(series):
                a, b = quarters(series)
                parts.append(f"{name} CPU {a:.1f} -> {b:.1f} s")
    detail = f"; {', '.join(parts)}" if parts else ""
    return (f"{label} {early:,.0f} -> {late:,.0f} ms ({growth}; state rows "
            f"{rows[q - 1]:,} -> {rows[-1]:,}{detail})")


def _memory(r: dict) -> int:
    return r["peak_jvm_rss"] + r["peak_python_pss"]


def write_report() -> None:
    out = ["# ttlstate vs Spark's state store providers: queries\n",
           f"Command: `make bench` (this part: `{report.knobs('BENCH_HEADLINE', 'BENCH_WORKLOADS', 'BENCH_VARIANTS', 'BENCH_ROUNDS', 'BENCH_BATCHES', 'BENCH_SCALE', 'BENCH_SHUFFLE_PARTITIONS', 'BENCH_DRIVER_MEMORY', 'BENCH_DRIVER_JAVA_OPTIONS')}"
           f"python -m pytest benchmarks/test_query_comparison.py --benchmark-only -s`). {report.machine()}.\n",
           f"Every run: `local[2]`, {runner.SHUFFLE_PARTITIONS} shuffle partitions, driver memory {runner.DRIVER_MEMORY}, its own "
           f"process and JVM, {workloads.BATCHES} batches of one generated JSON file each "
           f"(`maxFilesPerTrigger=1`, `Trigger.AvailableNow`, scale {workloads.SCALE:g}), `noop` sink. "
           f"Each provider ran {ROUNDS} times per workload, the providers alternating, each round starting with the next one"
           + ("" if VARIANTS_GIVEN else
              f" (the RocksDB provider with changelog off on {', '.join(ALL_PROVIDER_WORKLOADS)} only)") + "; "
           "every figure is the median over the runs, with min–max in parentheses where given. "
           "Rows/s and medians are over batches 1..N (batch 0 pays the JVM's start and JIT warm-up, "
           "for every provider alike); commit ms is Spark's `commitTimeMs` (summed over the batch's tasks "
           "and state operators); checkpoint bytes are all files under `<checkpoint>/state` at the end; "
           "memory is the peak RSS of the driver JVM (driver and executor in local mode) and the peak "
           "summed PSS of ttlstate's Python processes (store service and workers); CPU seconds are the "
           "whole run's (JVM start included) of the JVM and of ttlstate's processes. ttlstate runs with "
           "its defaults.\n"]
    groups, series = [], {}
    for workload in SELECTED_WORKLOADS:
        if not any(RESULTS.get((workload, v)) for v in SELECTED_VARIANTS):
            continue
        base = _ok(workload, "ttlstate")
        base_rps = _median_of(base, lambda r: r["rows_per_s"])
        out.append(f"## {workload}\n\n{workloads.WORKLOADS[workload].description}.\n")
        rows = []
        for v in SELECTED_VARIANTS:
            runs, all_runs = _ok(workload, v), RESULTS.get((workload, v), [])
            label = runner.VARIANTS[v][0]
            failed = [r["failed"] for r in all_runs if "failed" in r]
            if not runs:
                if failed:
                    rows.append([label, f"failed ({len(failed)} of {len(all_runs)}): {failed[0]}"] + ["–"] * 12)
                continue
            med = lambda m: _median_of(runs, m)  # noqa: E731
            rows.append([label + (f" ({len(failed)} of {len(all_runs)} runs failed)" if failed else ""),
                         _spread(runs, lambda r: r["rows_per_s"], lambda x: f"{x:,.0f}"),
                         report.ratio(base_rps, med(lambda r: r["rows_per_s"])),
                         report.fmt(med(lambda r: r["median_batch_ms"])),
                         report.fmt(med(lambda r: r["median_commit_ms"])),
                         report.mib(med(lambda r: r["checkpoint_bytes"])),
                         report.mib(med(lambda r: r["peak_jvm_rss"])),
                         report.mib(med(lambda r: r.get("peak_heap_committed"))),
                         report.fmt(med(_allocated_per_row)),
                         report.mib(med(lambda r: r["peak_python_pss"])),
                         _spread(runs, _memory, lambda x: report.mib(x)),
                         f"{med(lambda r: r['cpu_jvm_s']):,.0f} + {med(lambda r: r['cpu_python_s']):,.0f}",
                         report.fmt(med(lambda r: r["state_rows"])), str(len(runs))])
        out.append(report.table(["provider", "rows/s", "ttlstate ÷ it (rows/s)", "median batch ms",
                                 "median commit ms", "checkpoint MiB", "peak JVM RSS MiB", "of it Java heap (G1) MiB",
                                 "Java heap allocated per input row, bytes",
                                 "peak ttlstate Python PSS MiB", "JVM + Python MiB", "CPU s, JVM + Python",
                                 "state rows at end", "runs"], rows) + "\n")
        growth = [g for g in (_growth(runner.VARIANTS[v][0], _median_run(_ok(workload, v))) for v in SELECTED_VARIANTS) if g]
        if growth:
            out.append("Batch time as the state grows (each provider's median run; median batch ms of the first "
                       "and the last quarter of batches 1..N, or of the batches from the first whose state is "
                       "within 1% of the final one when there are 8 or more of those, and the state rows at "
                       "their ends; in the same "
                       "quarters the median of the state operators' update, removal and commit ms and of the "
                       "CPU seconds used within a batch): "
                       + "; ".join(growth) + ".\n")
        rep = _median_run(base)
        if rep:
            c = rep["custom"]
            lookups = c.get("ttlstateCacheHits", 0) + c.get("ttlstateCacheMisses", 0) + c.get("ttlstateFilterSkips", 0)
            note = (" Spark reports only the `keyWithIndexToValue` stores' custom metrics of a join, so the "
                    "lookups of `keyToNumValues` are missing here." if workload.startswith("join") else "")
            out.append(f"ttlstate over its median run: {report.fmt(c.get('ttlstateRoundTrips'))} round trips, "
                       f"{report.fmt(c.get('ttlstateResidentScans'))} scans served in the JVM, "
                       f"{report.fmt(c.get('ttlstatePrefetchedValues'))} join values read ahead; of "
                       f"{report.fmt(lookups)} reads of keys the transaction had not written, "
                       f"{report.fmt(c.get('ttlstateCacheHits'))} were answered by the value cache, "
                       f"{report.fmt(c.get('ttlstateFilterSkips'))} (absent keys) by the key filter and "
                       f"{report.fmt(c.get('ttlstateCacheMisses'))} by the worker.{note}\n")
            out.append(f"Memory of that run: peak JVM RSS {report.mib(rep['peak_jvm_rss'])} MiB, of which the "
                       f"value cache and key filter held at most {report.mib(rep.get('peak_cache_bytes'))} MiB "
                       f"(`ttlstateCacheBytes`; the cache's slabs outside the Java heap, its index and the key "
                       f"filter in it) and G1 had committed at most {report.mib(rep.get('peak_heap_committed'))} MiB "
                       f"of Java heap (the heap G1 keeps around Spark's and ttlstate's live objects, sized by "
                       f"its pause-time goal: docs/decisions/051-jvm-memory-measured.md, docs/decisions/083-aggregation-memory-g1-heap.md); ttlstate's Python processes {report.mib(rep['peak_python_pss'])} MiB "
                       f"of PSS, of which the stores reported at most "
                       f"{report.mib(rep.get('peak_store_memory_bytes'))} MiB of memtables and table readers "
                       f"(`memoryUsedBytes`; the data blocks in each worker's shared block cache, which with the "
                       f"memtables stays within `rocksdb.boundedMemory.totalBytes`, belong to no store and are not in it; "
                       f"the rest is the Python processes themselves and freed memory not yet returned).\n")
        groups.append(workload)
        for v in SELECTED_VARIANTS:
            series.setdefault(runner.VARIANTS[v][0], []).append(
                _median_of(_ok(workload, v), lambda r: r["rows_per_s"]))
    out.append("## Targets (issue 43)\n")
    out.append(report.table(["target", "measured (medians)", "met"], _targets()) + "\n")
    chart = report.bar_chart(report.RESULTS_DIR / "comparison.png", "rows/s by workload and provider (median)",
                             groups, series, "input rows / s (batches 1..N)")
    out.append(chart + "\n")
    path = report.RESULTS_DIR / "comparison.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))


# issue 43: (numerator, denominator, minimum ratio of rows/s, what it stands for)
RATIO_TARGETS = (
    ("ttlstate-plain", "rocksdb-changelog", 1.0, "the user's path (plain session) vs RocksDB"),
    ("ttlstate", "rocksdb-changelog", 1.0, "ttlstate.configure vs RocksDB"),
    ("ttlstate-plain", "ttlstate", 0.9, "plain session vs ttlstate.configure"),
    ("ttlstate-ttl", "ttlstate", 0.9, "TTL none reaches vs no TTL"),
    ("ttlstate-ttl-expiring", "ttlstate", 0.8, "TTL reached every few batches vs no TTL"),
    ("ttlstate-ttl", "rocksdb-changelog", 1.0, "TTL on vs RocksDB (no TTL)"),
    ("ttlstate", "hdfs", 1.0, "moonshot: vs HDFS-backed"),
)


def _targets() -> list[list[str]]:
    rows = []
    for workload in SELECTED_WORKLOADS:
        for num, den, need, what in RATIO_TARGETS:
            a, b = _ok(workload, num), _ok(workload, den)
            if not a or not b:
                continue
            got = _median_of(a, lambda r: r["rows_per_s"]) / _median_of(b, lambda r: r["rows_per_s"])
            rows.append([f"{workload}: {what} ({runner.VARIANTS[num][0]} ÷ {runner.VARIANTS[den][0]}) >= {need}x",
                         f"{got:.2f}x", "yes" if got >= need else "no"])
        other = _ok(workload, "rocksdb-changelog")
        if other:
            limit = _median_of(other, _memory) + MEMORY_ALLOWANCE
            for v in SELECTED_VARIANTS:
                runs = _ok(workload, v) if v.startswith("ttlstate") else []
                if runs:  # every run, not the median
                    worst = max(map(_memory, runs))
                    rows.append([f"{workload}: peak JVM + Python of every {runner.VARIANTS[v][0]} run <= RocksDB "
                                 "(changelog, median) + 128 MiB", f"{report.mib(worst)} vs {report.mib(limit)} MiB",
                                 "yes" if worst <= limit else "no"])
    return rows
