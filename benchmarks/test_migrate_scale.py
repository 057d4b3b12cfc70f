"""Migration at scale (issue 45, item 5): `python -m ttlstate migrate` of a stopped query whose
state holds 1M or 10M keys, from Spark's RocksDB provider (changelog on) to ttlstate, then back.

The query is batch 0 of an `aggregation-state-*` workload (it writes every key once), run on the
RocksDB provider in its own process and driver JVM; then the command migrates it to ttlstate,
then migrates the result back to the RocksDB provider, each as a user runs it (a process of
its own, which starts its own local Spark session). Measured per migration: the command's wall
time, keys per second, and the peak memory of its process tree sampled every 0.25 s (RSS of the
command's Python, of the Spark JVM it starts, and of their sum). The entries are streamed (the
JVM writes each task's rows to a file, Python reads them into RocksDB write batches), so memory
should not grow with the key count: compare 1M with 10M. Knobs: BENCH_MIGRATE_WORKLOADS (default
`aggregation-state-1m,aggregation-state-10m`), BENCH_MIGRATE_ROUNDS (default 1), BENCH_SCALE.
Writes `migrate_scale.md` in `BENCH_RESULTS`. Timings are reported, never asserted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import psutil
import pytest

import report
import runner
import workloads
from test_query_comparison import _spread, input_root, run_variant  # noqa: F401 (fixture)

SELECTED = [w for w in os.environ.get("BENCH_MIGRATE_WORKLOADS",
                                      "aggregation-state-1m,aggregation-state-10m").split(",") if w]
ROUNDS = int(os.environ.get("BENCH_MIGRATE_ROUNDS", "1"))
SOURCE = "rocksdb-changelog"
DIRECTIONS = ("ttlstate", "rocksdb")  # there, then back
RESULTS: dict[tuple[str, str], list[dict]] = {}  # (workload, target) -> runs


class TreeMemory(threading.Thread):
    """Peak RSS of a process, of its Java descendants, and of the whole tree, summed."""

    def __init__(self, pid: int, period: float = 0.25):
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.period = period
        self.stop = threading.Event()
        self.peak_python = self.peak_jvm = self.peak_total = 0

    def run(self):
        while not self.stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                return
            python = jvm = 0
            for p in procs:
                try:
                    rss = p.memory_info().rss
                    if p.pid == self.root.pid:
                        python += rss
                    elif p.name() == "java":
                        jvm += rss
                except psutil.Error:
                    continue
            self.peak_python, self.peak_jvm = max(self.peak_python, python), max(self.peak_jvm, jvm)
            self.peak_total = max(self.peak_total, python + jvm)
            self.stop.wait(self.period)


def migrate(checkpoint, to: str) -> dict:
    """Runs the command; returns its JSON result with the wall time and peaks."""
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate", "migrate", str(checkpoint), "--to", to, "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    memory = TreeMemory(proc.pid)
    memory.start()
    out, err = proc.communicate(timeout=7200)
    seconds = time.monotonic() - start
    memory.stop.set()
    memory.join()
    assert proc.returncode == 0, err[-5000:]
    r = json.loads(out)
    keys = sum(s["keys"] for s in r["stores"])
    return {"seconds": seconds, "keys": keys, "keys_per_s": keys / seconds, "peak_python": memory.peak_python,
            "peak_jvm": memory.peak_jvm, "peak_total": memory.peak_total,
            "bytes": sum(s["bytes"] for s in r["stores"])}


RUNS = [(w, r) for w in SELECTED for r in range(ROUNDS)]


@pytest.mark.parametrize("workload,round_", RUNS, ids=[f"{w}-r{r}" for w, r in RUNS])
def test_migrate_scale(benchmark, input_root, tmp_path, workload, round_):  # noqa: F811
    files = sorted((workloads.ensure_input(workload, input_root) / "in").glob("part-*.json"))
    data = tmp_path / "input"
    (data / "in").mkdir(parents=True)
    os.symlink(files[0], data / "in" / files[0].name)
    work = tmp_path / "work"
    first = run_variant(workload, SOURCE, data, work)
    assert first["batches"] == 1, first["batches"]
    expected = workloads.workload(workload).first_batch_rows

    def both():
        return {to: migrate(work / "checkpoint", to) for to in DIRECTIONS}
    runs = benchmark.pedantic(both, rounds=1, iterations=1)
    for to, r in runs.items():
        assert r["keys"] == expected, (to, r["keys"], expected)
        RESULTS.setdefault((workload, to), []).append(r)
    write_report()


def write_report() -> None:
    out = ["# Migration at scale: `python -m ttlstate migrate`\n",
           "Command: `"
           f"{report.knobs('BENCH_MIGRATE_WORKLOADS', 'BENCH_MIGRATE_ROUNDS', 'BENCH_SCALE')}"
           "python -m pytest benchmarks/test_migrate_scale.py --benchmark-only -s`. "
           f"{report.machine()}.\n",
           f"A query's batch 0 writes every key once on {runner.VARIANTS[SOURCE][0]} (`local[2]`, 4 shuffle "
           "partitions) and stops; `migrate --to ttlstate` moves its state, then `migrate --to rocksdb` moves "
           "it back, each command a process of its own with the local Spark session it starts (driver memory "
           "Spark's default). Peak memory: RSS sampled every 0.25 s, of the command's Python process, of the "
           f"Spark JVM it starts, and of both summed. Medians over {ROUNDS} round(s), min–max in parentheses.\n"]
    rows = []
    for workload in SELECTED:
        for to in DIRECTIONS:
            runs = RESULTS.get((workload, to), [])
            if not runs:
                continue
            rows.append([workload, f"to {to}", report.fmt(runs[0]["keys"]),
                         _spread(runs, lambda r: r["seconds"], lambda v: report.fmt(float(v), 1)),
                         _spread(runs, lambda r: r["keys_per_s"], lambda v: report.fmt(round(v))),
                         report.mib(runs[0]["bytes"]),
                         _spread(runs, lambda r: r["peak_python"], report.mib),
                         _spread(runs, lambda r: r["peak_jvm"], report.mib),
                         _spread(runs, lambda r: r["peak_total"], report.mib), str(len(runs))])
    out.append(report.table(["workload", "migration", "keys", "seconds", "keys/s", "state written MiB",
                             "peak Python RSS MiB", "peak JVM RSS MiB", "peak total MiB", "rounds"], rows) + "\n")
    path = report.RESULTS_DIR / "migrate_scale.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out))
