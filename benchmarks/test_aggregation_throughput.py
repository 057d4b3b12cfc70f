"""First rough throughput of a streaming aggregation: ttlstate vs Spark's built-in providers.

Same generated input for every provider (JSON files, one per micro-batch, Trigger.AvailableNow,
local[2], 4 shuffle partitions). Reports rows/s per provider and the ratios to ttlstate in
the benchmark's extra_info, and prints a small table.
"""

import time

import pytest

from conftest import PROVIDERS, run_aggregation, summarize

RESULTS = {}


@pytest.fixture(scope="module")
def warmed_up(spark, input_dir, tmp_path_factory):
    """One untimed run per provider, so no provider pays the JVM's JIT warm-up alone."""
    for name, cls in PROVIDERS.items():
        run_aggregation(spark, cls, input_dir, str(tmp_path_factory.mktemp(f"warmup-{name}")))


@pytest.mark.parametrize("name", list(PROVIDERS))
def test_aggregation(benchmark, spark, input_dir, warmed_up, tmp_path, name):
    runs = iter(range(100))

    def target():
        return run_aggregation(spark, PROVIDERS[name], input_dir, str(tmp_path / f"cp-{next(runs)}"))

    start = time.perf_counter()
    progress = benchmark.pedantic(target, rounds=1, iterations=1)
    RESULTS[name] = summarize(progress, time.perf_counter() - start)
    benchmark.extra_info.update(RESULTS[name])
    if len(RESULTS) == len(PROVIDERS):
        base = RESULTS["ttlstate"]["rows_per_s"]
        print("\nprovider   rows/s   ttlstate/provider  median batch ms  median commit ms  state rows")
        for n, r in RESULTS.items():
            print(f"{n:9} {r['rows_per_s']:8.0f}   {base / r['rows_per_s']:8.2f}x   "
                  f"{r['median_batch_ms']:14}  {r['median_commit_ms']:15}  {r['state_rows']}")
