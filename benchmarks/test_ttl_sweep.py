"""TTL tuning sweep: TTL duration x cleanup strategy on the aggregation and dropDuplicates
workloads, driven by the profiles of `benchmarks/profiles/ttl_sweep.toml` (plus a run
without TTL), so users can pick settings from a table: state rows left at the end, entries
reclaimed by each cleanup, checkpoint bytes and throughput.

Writes `benchmarks/results/ttl_sweep.md` and `ttl_sweep.png`. Every run is ttlstate in its own
process (`runner.py`) with `spark.sql.streaming.stateStore.maintenanceInterval=5s`, so the
compaction filter and snapshots (full-snapshot cleanup) get a chance in a run of a minute.
Knobs: BENCH_TTL_SCALE (rows per batch, default 0.25 of the comparison's), BENCH_TTL_PROFILES
(a TOML file), BENCH_TTL_WORKLOADS.
"""

from __future__ import annotations

import os
import pathlib

import pytest

import report
import workloads
from test_query_comparison import run_variant
from ttlstate.ttl.config import load_profiles

HERE = pathlib.Path(__file__).parent
PROFILES_FILE = os.environ.get("BENCH_TTL_PROFILES", str(HERE / "profiles" / "ttl_sweep.toml"))
PROFILES = {"no-ttl": {}, **load_profiles(PROFILES_FILE)}
SWEEP_WORKLOADS = [w for w in os.environ.get("BENCH_TTL_WORKLOADS", "aggregation,dropDuplicates").split(",") if w]
SWEEP_CONFS = {"spark.sql.streaming.stateStore.maintenanceInterval": "5s"}
RESULTS: dict[tuple[str, str], dict] = {}


@pytest.fixture(scope="module")
def sweep_input(tmp_path_factory):
    scale = os.environ.get("BENCH_TTL_SCALE", "0.25")
    old = os.environ.get("BENCH_SCALE")
    os.environ["BENCH_SCALE"] = scale  # the runner subprocesses read it too
    root = tmp_path_factory.mktemp("ttl-sweep-input")
    import importlib
    importlib.reload(workloads)
    try:
        yield {w: workloads.ensure_input(w, root) for w in SWEEP_WORKLOADS}
    finally:
        if old is None:
            os.environ.pop("BENCH_SCALE", None)
        else:
            os.environ["BENCH_SCALE"] = old
        importlib.reload(workloads)


@pytest.mark.parametrize("profile", list(PROFILES))
@pytest.mark.parametrize("workload", SWEEP_WORKLOADS)
def test_ttl_profile(benchmark, sweep_input, tmp_path, workload, profile):
    confs = {**SWEEP_CONFS, **PROFILES[profile]}
    result = benchmark.pedantic(run_variant, args=(workload, "ttlstate", sweep_input[workload], tmp_path, confs),
                                rounds=1, iterations=1)
    RESULTS[(workload, profile)] = result
    benchmark.extra_info.update({k: v for k, v in result.items() if k not in ("confs", "custom")})
    write_report()


def write_report() -> None:
    out = ["# TTL tuning sweep\n",
           f"Command: `make bench` (this part: `python -m pytest benchmarks/test_ttl_sweep.py --benchmark-only -s`). "
           f"{report.machine()}.\n",
           f"ttlstate only, each run in its own process; profiles from `{os.path.relpath(PROFILES_FILE, HERE.parent)}` "
           f"(TTL duration x cleanup strategy), {workloads.BATCHES} batches at scale "
           f"{os.environ.get('BENCH_TTL_SCALE', '0.25')} of the comparison's workloads, maintenance every 5 s. "
           "The TTL clock is each batch's timestamp (wall clock when the batch started), so a 5 s TTL "
           "expires a key a few batches after its last update. `reclaimed` sums the entries deleted by reads, "
           "by the incremental cleanup and by RocksDB's compaction filter over the run (full-snapshot cleanup "
           "deletes are not counted by a metric: they show in the state rows and checkpoint bytes).\n"]
    series: dict[str, list] = {}
    for workload in SWEEP_WORKLOADS:
        res = {p: RESULTS.get((workload, p)) for p in PROFILES}
        if not any(res.values()):
            continue
        base = res.get("no-ttl")
        out.append(f"## {workload}\n\n{workloads.WORKLOADS[workload].description} (here scaled).\n")
        rows = []
        for p, r in res.items():
            if not r:
                continue
            c = r["custom"]
            rows.append([p, report.fmt(r["state_rows"]), report.fmt(c.get("ttlstateExpiredOnRead", 0)),
                         report.fmt(c.get("ttlstateExpiredIncremental", 0)),
                         report.fmt(c.get("ttlstateExpiredByCompaction", 0)), report.mib(r["checkpoint_bytes"]),
                         report.fmt(r["rows_per_s"]), report.ratio(r["rows_per_s"], base and base["rows_per_s"]),
                         report.fmt(r["median_commit_ms"])])
            series.setdefault(workload, []).append((p, r["state_rows"]))
        out.append(report.table(["profile", "state rows at end", "reclaimed on read", "reclaimed incrementally",
                                 "reclaimed by compaction", "checkpoint MiB", "rows/s", "rows/s vs no TTL",
                                 "median commit ms"], rows) + "\n")
    profiles = list(PROFILES)
    chart = report.bar_chart(report.RESULTS_DIR / "ttl_sweep.png", "state rows at the end of the run",
                             profiles, {w: [dict(v).get(p) for p in profiles] for w, v in series.items()},
                             "state rows")
    out.append(chart + "\n")
    path = report.RESULTS_DIR / "ttl_sweep.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))
