"""Provider-level operations (get present and absent, put, remove, iterate, prefix scan,
commit, load from checkpoint), timed inside the JVM by `io.ttlstate.bench.ProviderBench`
through Spark's provider API, for ttlstate and Spark's providers, each in a fresh JVM.

Writes `benchmarks/results/provider_ops.md` (nanoseconds per operation and ratios). Needs the
bench jar (`make bench` builds it). Knobs: BENCH_OPS_KEYS (default 200,000). Timings are
reported, never asserted.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

import report
import runner

HERE = pathlib.Path(__file__).parent
BENCH_JAR = HERE.parent / "jvm-shim" / "build" / "libs" / "ttlstate-bench.jar"
KEYS = int(os.environ.get("BENCH_OPS_KEYS", "200000"))
RESULTS: dict[str, dict[str, float]] = {}


def child(variant: str, root: str) -> None:
    """In the subprocess: one SparkSession with the bench jar, one ProviderBench run."""
    from pyspark.sql import SparkSession

    import ttlstate

    builder = ttlstate.configure(SparkSession.builder.master("local[2]").appName(f"provider-ops-{variant}"))
    cp = builder._options.get("spark.driver.extraClassPath", "")
    spark = (builder.config("spark.driver.extraClassPath", f"{cp}:{BENCH_JAR}" if cp else str(BENCH_JAR))
             .config("spark.ui.enabled", "false").config("spark.driver.memory", runner.DRIVER_MEMORY)
             .config("spark.local.dir", os.path.join(root, "spark-local")).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    _, cls, confs = runner.VARIANTS[variant]
    confs = {**confs, ttlstate.CONF_PREFIX + "checkpoint.localCacheDir": os.path.join(root, "cache")}
    text = spark._jvm.io.ttlstate.bench.ProviderBench.run(
        cls, os.path.join(root, "state"), KEYS, "\n".join(f"{k}={v}" for k, v in confs.items()),
        spark._jsc.hadoopConfiguration())
    print("RESULT\n" + text, flush=True)
    spark.stop()


def run_child(variant: str, root: pathlib.Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, variant, str(root)], capture_output=True, text=True,
                          timeout=3600)
    assert proc.returncode == 0 and "RESULT" in proc.stdout, proc.stderr[-5000:]
    body = proc.stdout.split("RESULT\n", 1)[1]
    return {k: float(v) for k, v in (ln.split("=", 1) for ln in body.splitlines() if "=" in ln)}


@pytest.mark.skipif(not BENCH_JAR.exists(), reason="the bench jar is missing: run `make bench`")
@pytest.mark.parametrize("variant", list(runner.VARIANTS))
def test_provider_ops(benchmark, tmp_path, variant):
    RESULTS[variant] = benchmark.pedantic(run_child, args=(variant, tmp_path), rounds=1, iterations=1)
    benchmark.extra_info.update(RESULTS[variant])
    write_report()


def write_report() -> None:
    ops = list(next(iter(RESULTS.values())))
    variants = [v for v in runner.VARIANTS if v in RESULTS]
    base = RESULTS.get("ttlstate")
    rows = []
    for op in ops:
        row = [op]
        for v in variants:
            ns = RESULTS[v].get(op)
            row.append("–" if ns is None else (f"{ns / 1e6:,.1f} ms" if ns >= 1e6 else f"{ns / 1e3:,.2f} µs"))
        for v in variants:
            if v != "ttlstate":
                row.append(report.ratio(base.get(op) if base else None, RESULTS[v].get(op)))
        rows.append(row)
    headers = (["operation"] + [runner.VARIANTS[v][0] for v in variants]
               + [f"ttlstate ÷ {runner.VARIANTS[v][0]}" for v in variants if v != "ttlstate"])
    text = "\n".join([
        "# ttlstate vs Spark's state store providers: single operations\n",
        f"Command: `make bench` (this part: `python -m pytest benchmarks/test_provider_ops.py --benchmark-only -s`). "
        f"{report.machine()}.\n",
        f"`io.ttlstate.bench.ProviderBench` drives each provider through Spark's `StateStoreProvider` API inside "
        f"its own fresh JVM (driver memory {runner.DRIVER_MEMORY}): {KEYS:,} keys `(k BIGINT)` with values "
        "`(count BIGINT, sum BIGINT)` put into version 0 and committed; the store of version 1 reads every key "
        "twice (the first read of a version and a read again), then as many absent keys, removes 10%, iterates; "
        "ten versions then each read-modify-write 1% of the keys and commit; a fresh provider loads the last "
        "version; a second store puts 100 keys under each of keys/100 prefixes and prefix-scans each. Times "
        "are per operation (ratios: ttlstate's time ÷ the other's, lower is better for ttlstate).\n",
        report.table(headers, rows), ""])
    path = report.RESULTS_DIR / "provider_ops.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2])
