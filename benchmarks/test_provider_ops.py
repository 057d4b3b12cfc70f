"""Provider-level operations (get present and absent, put, remove, iterate, prefix scan,
commit, load from checkpoint), timed inside the JVM by `io.ttlstate.bench.ProviderBench`
through Spark's provider API, for ttlstate and Spark's providers.

Every provider runs in `BENCH_OPS_ROUNDS` fresh JVMs (default 3), the providers alternating
(each round starting with the next one); in each JVM `BENCH_OPS_WARMUPS` untimed passes
(default 1: the JIT compiles the provider's and Spark's paths) precede `BENCH_OPS_PASSES` timed
ones (default 3, their median is the JVM's figure). The table gives the median over the JVMs with min-max; ratios are
of medians. Writes `benchmarks/results/provider_ops.md`. Needs the bench jar (`make bench`
builds it). Knobs: also BENCH_OPS_KEYS (default 200,000). Timings are reported, never asserted.
"""

from __future__ import annotations

import os
import pathlib
import statistics
import subprocess
import sys

import pytest

import report
import runner

HERE = pathlib.Path(__file__).parent
BENCH_JAR = HERE.parent / "jvm-shim" / "build" / "libs" / "ttlstate-bench.jar"
KEYS = int(os.environ.get("BENCH_OPS_KEYS", "200000"))
ROUNDS = int(os.environ.get("BENCH_OPS_ROUNDS", "3"))
WARMUPS = int(os.environ.get("BENCH_OPS_WARMUPS", "1"))
PASSES = int(os.environ.get("BENCH_OPS_PASSES", "3"))
RESULTS: dict[str, list[dict[str, float]]] = {}  # variant -> one {op: ns} per JVM
RUNS = runner.alternating(ROUNDS, [v for v in runner.VARIANTS if v not in runner.PLAIN_VARIANTS])  # one JVM: no session set-up


def child(variant: str, root: str) -> None:
    """In the subprocess: one SparkSession with the bench jar, one ProviderBench run."""
    from pyspark.sql import SparkSession

    import ttlstate

    builder = ttlstate.configure(SparkSession.builder.master("local[2]").appName(f"provider-ops-{variant}"))
    cp = builder._options.get("spark.driver.extraClassPath", "")
    builder = (builder.config("spark.driver.extraClassPath", f"{cp}:{BENCH_JAR}" if cp else str(BENCH_JAR))
               .config("spark.ui.enabled", "false").config("spark.driver.memory", runner.DRIVER_MEMORY)
               .config("spark.local.dir", os.path.join(root, "spark-local")))
    if runner.DRIVER_JAVA_OPTIONS:  # profiling runs only (BENCH_DRIVER_JAVA_OPTIONS)
        builder = builder.config("spark.driver.extraJavaOptions", runner.DRIVER_JAVA_OPTIONS)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    _, cls, confs = runner.VARIANTS[variant]
    confs = {**confs, ttlstate.CONF_PREFIX + "checkpoint.localCacheDir": os.path.join(root, "cache")}
    text = spark._jvm.io.ttlstate.bench.ProviderBench.run(
        cls, os.path.join(root, "state"), KEYS, "\n".join(f"{k}={v}" for k, v in confs.items()),
        spark._jsc.hadoopConfiguration(), WARMUPS, PASSES)
    print("RESULT\n" + text, flush=True)
    spark.stop()


def run_child(variant: str, root: pathlib.Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, variant, str(root)], capture_output=True, text=True,
                          timeout=3600)
    assert proc.returncode == 0 and "RESULT" in proc.stdout, proc.stderr[-5000:]
    body = proc.stdout.split("RESULT\n", 1)[1]
    return {k: float(v) for k, v in (ln.split("=", 1) for ln in body.splitlines() if "=" in ln)}


@pytest.mark.skipif(not BENCH_JAR.exists(), reason="the bench jar is missing: run `make bench`")
@pytest.mark.parametrize("round_,variant", RUNS, ids=[f"{v}-r{r}" for r, v in RUNS])
def test_provider_ops(benchmark, tmp_path, round_, variant):
    result = benchmark.pedantic(run_child, args=(variant, tmp_path), rounds=1, iterations=1)
    assert result, f"{variant}: ProviderBench reported no operation"
    RESULTS.setdefault(variant, []).append(result)
    benchmark.extra_info.update(result)
    write_report()


def _median(variant: str, op: str) -> float | None:
    values = [r[op] for r in RESULTS.get(variant, []) if op in r]
    return statistics.median(values) if values else None


def _time(ns: float) -> str:
    return f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.2f} µs"


def _cell(variant: str, op: str) -> str:
    values = [r[op] for r in RESULTS.get(variant, []) if op in r]
    if not values:
        return "–"
    if len(values) == 1:
        return _time(values[0])
    return f"{_time(statistics.median(values))} ({_time(min(values))}–{_time(max(values))})"


def write_report() -> None:
    ops = list(next(iter(RESULTS.values()))[0])
    variants = [v for v in runner.VARIANTS if v in RESULTS]
    rows = []
    for op in ops:
        row = [op] + [_cell(v, op) for v in variants]
        for v in variants:
            if v != "ttlstate":
                row.append(report.ratio(_median("ttlstate", op), _median(v, op)))
        rows.append(row)
    headers = (["operation"] + [runner.VARIANTS[v][0] for v in variants]
               + [f"ttlstate ÷ {runner.VARIANTS[v][0]}" for v in variants if v != "ttlstate"])
    text = "\n".join([
        "# ttlstate vs Spark's state store providers: single operations\n",
        f"Command: `make bench` (this part: `{report.knobs('BENCH_OPS_KEYS', 'BENCH_OPS_ROUNDS', 'BENCH_OPS_WARMUPS', 'BENCH_OPS_PASSES')}"
        "python -m pytest benchmarks/test_provider_ops.py --benchmark-only -s`). "
        f"{report.machine()}.\n",
        f"`io.ttlstate.bench.ProviderBench` drives each provider through Spark's `StateStoreProvider` API in "
        f"{ROUNDS} fresh JVMs per provider (driver memory {runner.DRIVER_MEMORY}), the providers alternating "
        f"(each round starting with the next one); in each JVM {WARMUPS} untimed warm-up pass(es), then {PASSES} timed passes on fresh "
        f"providers and directories, the JVM's figure being their median. Each pass: {KEYS:,} keys `(k BIGINT)` with values "
        "`(count BIGINT, sum BIGINT)` put into version 0 and committed; the store of version 1 reads every key "
        "twice (the first read of a version and a read again), then as many absent keys, removes 10%, iterates; "
        "ten versions then each read-modify-write 1% of the keys and commit; a fresh provider loads the last "
        "version; a second store puts 100 keys under each of keys/100 prefixes and prefix-scans each. Times "
        "are per operation: the median over the JVMs, min–max in parentheses (ratios: of the medians, "
        "ttlstate's time ÷ the other's, lower is better for ttlstate).\n",
        report.table(headers, rows), ""])
    path = report.RESULTS_DIR / "provider_ops.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2])
