"""What TTL costs on the aggregation: ttlstate without TTL vs with TTL, same input, one run.

Variants: no TTL; a TTL nothing reaches (`1h`: the pure cost of timestamps, the histogram
and the checks); a TTL every batch outlives (`1ms`: each batch finds the previous
batches' keys expired, so reads clean them and counts start over). Prints rows/s and the
ratio to the no-TTL run.
"""

import time

import pytest

from conftest import PROVIDERS, run_aggregation, summarize

TTL = "spark.sql.streaming.stateStore.ttlstate.ttl"
VARIANTS = {"no-ttl": {}, "ttl-1h": {TTL: "1h"}, "ttl-1ms": {TTL: "1ms"}}
RESULTS = {}


@pytest.fixture(scope="module")
def warmed_up(spark, input_dir, tmp_path_factory):
    run_aggregation(spark, PROVIDERS["ttlstate"], input_dir, str(tmp_path_factory.mktemp("warmup")))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_ttl_overhead(benchmark, spark, input_dir, warmed_up, tmp_path, variant):
    def target():
        return run_aggregation(spark, PROVIDERS["ttlstate"], input_dir, str(tmp_path / "cp"),
                               VARIANTS[variant])

    start = time.perf_counter()
    progress = benchmark.pedantic(target, rounds=1, iterations=1)
    r = RESULTS[variant] = summarize(progress, time.perf_counter() - start)
    custom = progress[-1]["stateOperators"][0]["customMetrics"]
    r["expired_on_read"] = sum(p["stateOperators"][0]["customMetrics"].get("ttlstateExpiredOnRead", 0)
                               for p in progress)
    benchmark.extra_info.update(r)
    if variant != "no-ttl":
        assert custom["ttlstateTtlMs"] > 0
    if len(RESULTS) == len(VARIANTS):
        base = RESULTS["no-ttl"]["rows_per_s"]
        print("\nvariant    rows/s  vs no-ttl  median batch ms  median commit ms  state rows  expired on read")
        for n, r in RESULTS.items():
            print(f"{n:8} {r['rows_per_s']:8.0f}  {r['rows_per_s'] / base:8.2f}x  {r['median_batch_ms']:14}  "
                  f"{r['median_commit_ms']:15}  {r['state_rows']:10}  {r['expired_on_read']}")
