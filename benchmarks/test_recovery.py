"""Recovery: the first batch after a restart (issue 43, target 6), ttlstate against Spark's
RocksDB provider (changelog on).

A query runs the first `STATE_BATCHES - 1` batches of an `aggregation-state-*` workload
(batch 0 writes 1M or 10M keys, each later one updates 200,000 of them) in one process and
driver JVM and stops, once per provider; the next file arrives and, in every round, the query
starts again from a copy of that stopped run in a new process and JVM, which must load the
state before its first batch. Two cases:
- `restart`: the same machine (ttlstate's local file cache, `checkpoint.localCacheDir`, is the
  first run's);
- `new-host`: a copy of the checkpoint with an empty local file cache, as after the loss of
  an executor and its disk (every provider downloads its state from the checkpoint).

Reported per provider and case, medians of `BENCH_RECOVERY_ROUNDS` (default 3) with min–max,
the providers alternating: the first batch's time (`triggerExecution`), of it the state
operators' update time, and ttlstate's load time (`ttlstateLoadMs`, summed over the batch's
tasks). Knobs: BENCH_RECOVERY_WORKLOADS (default `aggregation-state-1m`;
`aggregation-state-10m` in `make bench-full`), BENCH_RECOVERY_VARIANTS, BENCH_RECOVERY_ROUNDS,
BENCH_SCALE. Writes `recovery.md` in `BENCH_RESULTS`. Timings are reported, never asserted.
"""

from __future__ import annotations

import os
import shutil

import pytest

import report
import runner
import workloads
from test_query_comparison import _median_of, _spread, input_root, run_variant  # noqa: F401 (fixture)

SELECTED = [w for w in os.environ.get("BENCH_RECOVERY_WORKLOADS", "aggregation-state-1m").split(",") if w]
VARIANTS = [v for v in os.environ.get("BENCH_RECOVERY_VARIANTS", "ttlstate,rocksdb-changelog").split(",") if v]
ROUNDS = int(os.environ.get("BENCH_RECOVERY_ROUNDS", "3"))
CASES = ("restart", "new-host")
RUNS = [(w, r, v) for w in SELECTED for r, v in runner.alternating(ROUNDS, VARIANTS)]
RESULTS: dict[tuple[str, str, str], list[dict]] = {}  # (workload, variant, case) -> first batches
FIRST_RUN_BATCHES = workloads.STATE_BATCHES - 1


def _link_or_copy(src, dst) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def _first_batch(result: dict) -> dict:
    phases = result["batch_state_phases_ms"][0]
    custom = result.get("first_batch_custom", {})
    return {"batch_ms": result["batch_ms"][0], "updates_ms": phases["updates"],
            "load_ms": custom.get("ttlstateLoadMs"), "downloaded": custom.get("ttlstateDownloadedBytes")}


@pytest.fixture(scope="session")
def first_runs(tmp_path_factory, input_root):  # noqa: F811
    """Where the first runs go, the input they read, and (workload, variant) -> its first run."""
    return {"root": tmp_path_factory.mktemp("recovery"), "input": input_root}


def _first_run(first_runs: dict, workload: str, variant: str):
    """The first run of `workload` on `variant` (batches 0..FIRST_RUN_BATCHES-1), made once and
    kept as it stopped (`pristine`), with the input of the restart beside it. Every round restarts
    from a fresh copy of `pristine` at the first run's own paths (ttlstate's local file cache
    names the checkpoint by its path), so the rounds load the same state and the first run,
    which the report does not measure, is not repeated."""
    key = (workload, variant)
    if key not in first_runs:
        files = sorted((workloads.ensure_input(workload, first_runs["input"]) / "in").glob("part-*.json"))
        assert len(files) > FIRST_RUN_BATCHES, files
        base = first_runs["root"] / f"{workload}-{variant}"
        data = base / "input"
        (data / "in").mkdir(parents=True)
        for f in files[:FIRST_RUN_BATCHES]:
            _link_or_copy(f, data / "in" / f.name)
        first = run_variant(workload, variant, data, base / "work")
        assert first["batches"] == FIRST_RUN_BATCHES, first["batches"]
        shutil.copytree(base / "work", base / "pristine", ignore=shutil.ignore_patterns("spark-local"))
        _link_or_copy(files[FIRST_RUN_BATCHES], data / "in" / files[FIRST_RUN_BATCHES].name)
        first_runs[key] = base
    return first_runs[key]


@pytest.mark.parametrize("workload,round_,variant", RUNS, ids=[f"{w}-{v}-r{r}" for w, r, v in RUNS])
def test_recovery(benchmark, first_runs, tmp_path, workload, round_, variant):
    base = _first_run(first_runs, workload, variant)
    work = base / "work"
    shutil.rmtree(work)
    shutil.copytree(base / "pristine", work)
    # the same checkpoint without the first run's local files, for the new-host case
    moved = tmp_path / "moved"
    shutil.copytree(work / "checkpoint", moved / "checkpoint")

    def both():
        return {"restart": run_variant(workload, variant, base / "input", work),
                "new-host": run_variant(workload, variant, base / "input", moved)}
    after = benchmark.pedantic(both, rounds=1, iterations=1)
    for case in CASES:
        assert after[case]["batches"] == 1, after[case]
        RESULTS.setdefault((workload, variant, case), []).append(_first_batch(after[case]))
    write_report()


def write_report() -> None:
    out = ["# Recovery: the first batch after a restart\n",
           "Command: `make bench` (this part: `"
           f"{report.knobs('BENCH_RECOVERY_WORKLOADS', 'BENCH_RECOVERY_VARIANTS', 'BENCH_RECOVERY_ROUNDS', 'BENCH_SCALE')}"
           "python -m pytest benchmarks/test_recovery.py --benchmark-only -s`). "
           f"{report.machine()}.\n",
           f"A query runs batches 0..{FIRST_RUN_BATCHES - 1} in one process and driver JVM (`local[2]`, 4 shuffle "
           "partitions) and stops; the next input file arrives and the query starts in a new process and JVM. "
           "`restart`: on the same machine; `new-host`: a copy of the checkpoint with no local files (ttlstate's "
           "local file cache empty, as after losing an executor with its disk). Figures: the first batch after "
           f"the restart, medians over {ROUNDS} round(s) with min–max, the providers alternating; update ms is "
           "Spark's `allUpdatesTimeMs` (summed over tasks), load ms ttlstate's `ttlstateLoadMs` and downloaded MiB its "
           "`ttlstateDownloadedBytes` (summed over tasks). ttlstate with its defaults.\n"]
    for workload in SELECTED:
        rows = []
        for case in CASES:
            base = RESULTS.get((workload, "ttlstate", case), [])
            for v in VARIANTS:
                runs = RESULTS.get((workload, v, case), [])
                if not runs:
                    continue
                ratio = "–"
                if base and v != "ttlstate":
                    ratio = report.ratio(_median_of(base, lambda r: r["batch_ms"]),
                                         _median_of(runs, lambda r: r["batch_ms"]))
                loads = [r for r in runs if r["load_ms"] is not None]
                downloads = [r for r in runs if r["downloaded"] is not None]
                rows.append([case, runner.VARIANTS[v][0], _spread(runs, lambda r: r["batch_ms"], report.fmt), ratio,
                             _spread(runs, lambda r: r["updates_ms"], report.fmt),
                             _spread(loads, lambda r: r["load_ms"], report.fmt) if loads else "–",
                             _spread(downloads, lambda r: r["downloaded"], report.mib) if downloads else "–",
                             str(len(runs))])
        if rows:
            out.append(f"## {workload}\n\n{workloads.workload(workload).description}.\n")
            out.append(report.table(["case", "provider", "first batch ms", "ttlstate ÷ it (batch ms)",
                                     "update ms", "ttlstate load ms", "ttlstate downloaded MiB", "rounds"], rows) + "\n")
    path = report.RESULTS_DIR / "recovery.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))
