"""Each round-trip avoidance of the shim measured on its own: ttlstate with its defaults
against ttlstate with the value cache off (`cache.maxBytes=0`), the key filter off
(`keyFilter.enabled=false`), both off, a larger cache, and with latency tracking on, on
workloads of the query comparison (same generated input, same runner, one process and JVM
per run). PLAN says which settings run on which workload.

Writes `benchmarks/results/ablation.md`. Knobs as in test_query_comparison (BENCH_SCALE,
BENCH_BATCHES) plus BENCH_ABLATION_WORKLOADS. Timings are reported, never asserted.
"""

from __future__ import annotations

import os

import pytest

import report
import workloads
from test_query_comparison import input_root, run_variant  # noqa: F401 (fixture)

P = "spark.sql.streaming.stateStore.ttlstate."
SETTINGS = {  # id: (label, ttlstate confs)
    "defaults": ("defaults (cache 128m, filter on)", {}),
    "no-cache": ("value cache off", {P + "cache.maxBytes": "0"}),
    "no-filter": ("key filter off", {P + "keyFilter.enabled": "false"}),
    "neither": ("cache and filter off", {P + "cache.maxBytes": "0", P + "keyFilter.enabled": "false"}),
    "cache-512m": ("value cache 512m", {P + "cache.maxBytes": "512m"}),
    "latency": ("defaults + latency tracking", {P + "latencyTracking.enabled": "true"}),
}
PLAN = {  # workload: the settings it runs (the cache matters where keys repeat, the filter where they are new)
    "aggregation": ["defaults", "no-cache", "no-filter", "neither", "latency"],
    "dropDuplicates": ["defaults", "no-filter"],
    "join": ["defaults", "cache-512m"],
}
WORKLOADS = [w for w in os.environ.get("BENCH_ABLATION_WORKLOADS", ",".join(PLAN)).split(",") if w]
RESULTS: dict[tuple[str, str], dict] = {}


@pytest.mark.parametrize(("workload", "setting"), [(w, s) for w in WORKLOADS for s in PLAN[w]])
def test_ablation(benchmark, input_root, tmp_path, workload, setting):  # noqa: F811
    data = workloads.ensure_input(workload, input_root)
    confs = SETTINGS[setting][1]
    result = benchmark.pedantic(run_variant, args=(workload, "ttlstate", data, tmp_path, confs),
                                rounds=1, iterations=1)
    assert result["rows"] == workloads.BATCHES * workloads.WORKLOADS[workload].rows_per_batch
    RESULTS[(workload, setting)] = result
    benchmark.extra_info.update({k: v for k, v in result.items() if k != "confs"})
    write_report()


def write_report() -> None:
    out = ["# ttlstate: each round-trip avoidance on its own\n",
           f"Command: `make bench` (this part: `python -m pytest benchmarks/test_round_trip_ablation.py "
           f"--benchmark-only -s`). {report.machine()}.\n",
           f"The query comparison's runner and input (`local[2]`, 4 shuffle partitions, {workloads.BATCHES} "
           f"batches, scale {workloads.SCALE:g}); only ttlstate's settings change. Round trips, cache hits, "
           "filter skips and worker reads are ttlstate's metrics summed over the run. Write-behind "
           "batching of puts and removes cannot be turned off (provider level: a put costs about "
           "1.4 µs against a synchronous round trip of 8-11 µs; see provider_ops.md).\n"]
    for workload in WORKLOADS:
        res = {s: RESULTS.get((workload, s)) for s in PLAN[workload]}
        if not any(res.values()):
            continue
        base = res.get("defaults")
        rows = []
        for s, r in res.items():
            if not r:
                continue
            c = r["custom"]
            rows.append([SETTINGS[s][0], report.fmt(r["rows_per_s"]),
                         report.ratio(r["rows_per_s"], base and base["rows_per_s"]),
                         report.fmt(r["median_batch_ms"]), report.fmt(r["median_commit_ms"]),
                         report.fmt(c.get("ttlstateRoundTrips")), report.fmt(c.get("ttlstateCacheHits")),
                         report.fmt(c.get("ttlstateFilterSkips")), report.fmt(c.get("ttlstateCacheMisses")),
                         report.mib(r["peak_jvm_rss"]), report.mib(r["peak_python_pss"]),
                         f"{r['cpu_jvm_s']:,.0f} + {r['cpu_python_s']:,.0f}"])
        out.append(f"## {workload}\n\n{workloads.WORKLOADS[workload].description}.\n")
        out.append(report.table(["ttlstate setting", "rows/s", "÷ defaults", "median batch ms",
                                 "median commit ms", "round trips", "cache hits", "filter skips",
                                 "worker reads", "peak JVM RSS MiB", "peak Python PSS MiB",
                                 "CPU s, JVM + Python"], rows) + "\n")
    path = report.RESULTS_DIR / "ablation.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))
