"""Scale: state far larger than the JVM's cache and the driver's 2g heap (issue 15).

- `dropDuplicates-scale`: dropDuplicates(id) without a watermark over 16 batches of 1,000,000
  new ids (the state ends at 16M keys);
- `aggregation-state-1m` / `aggregation-state-10m`: an aggregation whose batch 0 writes 1M or
  10M keys and whose batches 1..10 update 200,000 random keys each, so the cost of a batch can
  be read against the size of the state (the same rows changed per batch).

Every workload runs on ttlstate, Spark's RocksDB provider (changelog on) and the HDFS provider,
`BENCH_SCALE_ROUNDS` times (default 1), each run in its own process and JVM; a run that fails
(the HDFS provider's OutOfMemoryError) is reported as measured. Writes
`benchmarks/results/scale.md`. Knobs: BENCH_SCALE (rows), BENCH_SCALE_WORKLOADS,
BENCH_SCALE_VARIANTS, BENCH_DRIVER_MEMORY. Timings are reported, never asserted.
"""

from __future__ import annotations

import os
import statistics

import pytest

import report
import runner
import workloads
from test_query_comparison import _median_of, _median_run, _spread, input_root, measure  # noqa: F401 (fixture)

SELECTED = [w for w in os.environ.get("BENCH_SCALE_WORKLOADS", ",".join(workloads.SCALE_WORKLOADS)).split(",") if w]
VARIANTS = [v for v in os.environ.get("BENCH_SCALE_VARIANTS", "ttlstate,rocksdb-changelog,hdfs").split(",") if v]
ROUNDS = int(os.environ.get("BENCH_SCALE_ROUNDS", "1"))
RUNS = [(w, r, v) for w in SELECTED for r, v in runner.alternating(ROUNDS, VARIANTS)]
RESULTS: dict[tuple[str, str], list[dict]] = {}


@pytest.mark.parametrize("workload,round_,variant", RUNS, ids=[f"{w}-{v}-r{r}" for w, r, v in RUNS])
def test_scale(benchmark, input_root, tmp_path, workload, round_, variant):  # noqa: F811
    measure(benchmark, RESULTS, write_report, input_root, tmp_path, workload, variant)


def _med(runs, key):
    return _median_of([r for r in runs if "failed" not in r], lambda r: r[key])


def _per_batch(runs: list[dict], series) -> float | None:
    """The median over batches 1..N of a per-batch series of the median run (by rows/s), or None."""
    run = _median_run(runs)
    if run is None:
        return None
    values = series(run)[1:]
    return statistics.median(values) if values else None


def _ratio_by_round(large: list[dict], small: list[dict], median_large, median_small) -> str:
    """The ratio of the median batch times, with the min–max of each round's own ratio (the
    i-th run at 10M against the i-th at 1M) when there are several rounds."""
    ratios = [b["median_batch_ms"] / a["median_batch_ms"] for b, a in zip(large, small) if a["median_batch_ms"]]
    cell = report.ratio(median_large, median_small)
    return cell if len(ratios) < 2 or cell == "–" else f"{cell} ({min(ratios):.2f}x–{max(ratios):.2f}x by round)"


def _cpu_cell(jvm: float | None, python: float | None) -> str:
    return "–" if jvm is None else f"{jvm:.1f} + {python:.1f}"


def write_report() -> None:
    out = ["# Scale: state beyond memory\n",
           "Command: `make bench` (this part: `"
           f"{report.knobs('BENCH_SCALE_ROUNDS', 'BENCH_SCALE_WORKLOADS', 'BENCH_SCALE_VARIANTS', 'BENCH_SCALE', 'BENCH_DRIVER_MEMORY', 'BENCH_DRIVER_JAVA_OPTIONS')}"
           "python -m pytest benchmarks/test_scale.py --benchmark-only -s`). "
           f"{report.machine()}.\n",
           f"`local[2]`, 4 shuffle partitions, driver memory {runner.DRIVER_MEMORY}, each run its own process and "
           f"JVM; figures are medians over {ROUNDS} run(s) per provider, with min–max in parentheses; rows/s and "
           "medians over batches 1..N "
           "(batch 0 loads the state of the `aggregation-state-*` workloads and is left out). ttlstate with its "
           "defaults.\n"]
    for workload in SELECTED:
        if not any(RESULTS.get((workload, v)) for v in VARIANTS):
            continue
        out.append(f"## {workload}\n\n{workloads.workload(workload).description}.\n")
        base = _med(RESULTS.get((workload, "ttlstate"), []), "rows_per_s")
        rows = []
        for v in VARIANTS:
            runs = RESULTS.get((workload, v), [])
            if not runs:
                continue
            failed = [r["failed"] for r in runs if "failed" in r]
            if len(failed) == len(runs):
                rows.append([runner.VARIANTS[v][0], f"failed: {failed[0]}"] + ["–"] * 6)
                continue
            ok = [r for r in runs if "failed" not in r]
            rows.append([runner.VARIANTS[v][0], _spread(ok, lambda r: r["rows_per_s"], report.fmt),
                         report.ratio(base, _med(runs, "rows_per_s")),
                         _spread(ok, lambda r: r["median_batch_ms"], report.fmt),
                         _spread(ok, lambda r: r["median_commit_ms"], report.fmt),
                         _spread(ok, lambda r: r["peak_jvm_rss"] + r["peak_python_pss"], report.mib),
                         report.fmt(_med(runs, "state_rows")), f"{len(ok)} of {len(runs)}"])
        out.append(report.table(["provider", "rows/s", "ttlstate ÷ it", "median batch ms", "median commit ms",
                                 "peak JVM + Python MiB", "state rows at end", "runs ok"], rows) + "\n")
    small, large = "aggregation-state-1m", "aggregation-state-10m"
    if small in SELECTED and large in SELECTED:
        out.append("## Cost against state size\n\nThe same 200,000 updated keys per batch over a state of 1M "
                   "and of 10M keys (target: batch time at 10M <= 1.5x the time at 1M).\n")
        rows = []
        for v in VARIANTS:
            a, b = RESULTS.get((small, v), []), RESULTS.get((large, v), [])
            ba, bb = _med(a, "median_batch_ms"), _med(b, "median_batch_ms")
            ca, cb = _med(a, "median_commit_ms"), _med(b, "median_commit_ms")
            if ba is None and bb is None:
                continue
            ok_a, ok_b = ([r for r in runs if "failed" not in r] for runs in (a, b))
            rows.append([runner.VARIANTS[v][0], _spread(ok_a, lambda r: r["median_batch_ms"], report.fmt),
                         _spread(ok_b, lambda r: r["median_batch_ms"], report.fmt), _ratio_by_round(ok_b, ok_a, bb, ba),
                         report.fmt(ca), report.fmt(cb), report.ratio(cb, ca)])
        out.append(report.table(["provider", "batch ms at 1M", "batch ms at 10M", "10M ÷ 1M", "commit ms at 1M",
                                 "commit ms at 10M", "10M ÷ 1M"], rows) + "\n")
        rows = []
        for v in VARIANTS:
            cells = []
            for w in (small, large):
                ok = [r for r in RESULTS.get((w, v), []) if "failed" not in r]
                cells += [report.fmt(_per_batch(ok, lambda r: [ph["updates"] for ph in r.get("batch_state_phases_ms", [])])),
                          _cpu_cell(_per_batch(ok, lambda r: [c[0] for c in r.get("batch_cpu_s", [])]),
                                    _per_batch(ok, lambda r: [c[1] for c in r.get("batch_cpu_s", [])]))]
            if any(c != "–" for c in cells):
                rows.append([runner.VARIANTS[v][0]] + cells)
        if rows:
            out.append("Where a batch's time goes (medians over batches 1..N of the median run): the state "
                       "operators' update time (Spark's `allUpdatesTimeMs`, summed over the batch's tasks: the "
                       "reads and writes of the state) and the CPU seconds used within the batch by the JVM and "
                       "by ttlstate's Python processes (store service and workers).\n")
            out.append(report.table(["provider", "update ms at 1M", "CPU s at 1M, JVM + Python", "update ms at 10M",
                                     "CPU s at 10M, JVM + Python"], rows) + "\n")
    path = report.RESULTS_DIR / "scale.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))
