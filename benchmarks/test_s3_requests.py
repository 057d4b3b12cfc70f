"""S3 requests and bytes per commit (issue 44): ttlstate against Spark's RocksDB provider
(changelog on), both with their checkpoint at `s3a://` on moto's S3 server on loopback, every
request passing a counting proxy (tests/s3_server.py, tests/s3_proxy.py; `make servers`
resolves S3A).

Workload: the aggregation `groupBy(key).agg(count, sum, max)`, update mode, BENCH_S3_BATCHES
files of BENCH_S3_ROWS events over BENCH_S3_KEYS keys (one file per batch), `local[2]`, 2 shuffle
partitions, each provider in a driver of its own with Spark's defaults but a 5 s maintenance
interval (so maintenance uploads snapshots within the run, as it would within an hour of a long
run). Counted: requests by kind (PUT, GET, HEAD, LIST, DELETE, POST) and bytes, for objects under
`<checkpoint>/state/` (the provider's) and in all (Spark's offset and commit logs too), divided
by the batches committed. One run per provider: the counts are not timings. Writes
`s3_requests.md` in BENCH_RESULTS; no assertion on the counts.
"""

from __future__ import annotations

import datetime
import json
import os
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))

import report  # noqa: E402
import streaming as st  # noqa: E402
from s3_proxy import CountingProxy  # noqa: E402
from s3_server import S3Server, running_s3, s3a_jars  # noqa: E402

BATCHES = int(os.environ.get("BENCH_S3_BATCHES", "12"))
ROWS = int(os.environ.get("BENCH_S3_ROWS", "5000"))
KEYS = int(os.environ.get("BENCH_S3_KEYS", "20000"))
BUCKET = "ttlstate-bench"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
VARIANTS = {
    "ttlstate": (st.TTLSTATE, {}),
    "rocksdb-changelog": (ROCKSDB, {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}),
}
KINDS = ("PUT", "GET", "HEAD", "LIST", "DELETE", "POST")
PIPELINE = pathlib.Path(__file__).resolve().parents[1] / "tests" / "checkpoint_pipeline.py"
RESULTS: dict[str, dict] = {}


@pytest.fixture(scope="module")
def s3(tmp_path_factory, _report):
    with running_s3(tmp_path_factory.mktemp("s3"), BUCKET) as server_and_proxy:
        yield server_and_proxy


@pytest.fixture(scope="module")
def events(tmp_path_factory):
    d = tmp_path_factory.mktemp("s3-events") / "events"
    st.write_files(d, st.generate_events(BATCHES, ROWS, n_keys=KEYS, n_values=100, seed=91, active_fraction=0.9))
    return d


def _run(work: pathlib.Path, server: S3Server, proxy: CountingProxy, variant: str, events) -> dict:
    provider, confs = VARIANTS[variant]
    spec = dict(queries=["agg"], input=str(events), checkpoint=f"s3a://{BUCKET}/{variant}",
                out_file=str(work / f"{variant}.json"), driver_classpath=s3a_jars(),
                confs={**server.spark_confs(proxy.endpoint), st.PROVIDER_CLASS_KEY: provider,
                       "spark.sql.streaming.stateStore.maintenanceInterval": "5s", **confs})
    proc, log, log_path = st.spawn_spec_process(str(PIPELINE), spec, work, variant)
    code = st.wait_or_kill(proc, 1800)
    log.close()
    assert code == 0, f"{variant} exited {code}:\n{log_path.read_text(errors='replace')[-4000:]}"
    return json.loads((work / f"{variant}.json").read_text())


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_s3_requests_per_commit(benchmark, s3, events, tmp_path, variant):
    server, proxy = s3
    proxy.counts.reset()
    proxy.counts.log = [] if os.environ.get("BENCH_S3_LOG") else None
    out = benchmark.pedantic(lambda: _run(tmp_path, server, proxy, variant, events), rounds=1, iterations=1)
    counts = proxy.counts.snapshot()
    if proxy.counts.log is not None:  # every request, for finding where they come from
        (report.RESULTS_DIR / f"s3_requests-{variant}.log").write_text(
            "".join(f"{k} {p} {q}\n" for k, p, q in proxy.counts.log))
    RESULTS[variant] = dict(commits=len(out["agg"]["batches"]), **counts)


def _per_commit(r: dict, what: str, kind: str | None, state_only: bool) -> float:
    total = sum(n for (k, state), n in r[what].items() if (kind is None or k == kind) and (state or not state_only))
    return total / max(r["commits"], 1)


@pytest.fixture(scope="module")
def _report():
    """Writes the report after the module's runs (a fixture: --benchmark-only skips plain tests)."""
    yield
    if len(RESULTS) == len(VARIANTS):
        write_report()


def write_report():
    rows = []
    for scope, state_only in (("state/ (the provider's files)", True), ("all (Spark's logs too)", False)):
        for v, r in RESULTS.items():
            rows.append(f"| {scope} | {v} | {r['commits']} | "
                        + " | ".join(f"{_per_commit(r, 'requests', k, state_only):.1f}" for k in KINDS)
                        + f" | {_per_commit(r, 'requests', None, state_only):.1f}"
                        + f" | {_per_commit(r, 'sent', None, state_only) / 1024:.1f}"
                        + f" | {_per_commit(r, 'received', None, state_only) / 1024:.1f} |")
    t, rdb = RESULTS["ttlstate"], RESULTS["rocksdb-changelog"]
    ratio = [f"- state/ requests per commit, ttlstate ÷ RocksDB: "
             f"{_per_commit(t, 'requests', None, True) / max(_per_commit(rdb, 'requests', None, True), 1e-9):.2f}x",
             f"- state/ bytes sent per commit, ttlstate ÷ RocksDB: "
             f"{_per_commit(t, 'sent', None, True) / max(_per_commit(rdb, 'sent', None, True), 1e-9):.2f}x"]
    text = "\n".join([
        "# S3 requests and bytes per commit: ttlstate vs Spark's RocksDB provider (changelog on)", "",
        f"Command: `python -m pytest benchmarks/test_s3_requests.py --benchmark-only -s` "
        f"(BENCH_S3_BATCHES={BATCHES}, BENCH_S3_ROWS={ROWS}, BENCH_S3_KEYS={KEYS}). "
        f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC. See the module's docstring for the workload.", "",
        "Per committed batch (requests by kind; KiB sent to and received from S3):", "",
        "| objects | provider | batches | " + " | ".join(KINDS) + " | requests | KiB sent | KiB received |",
        "|---|---|---:|" + "---:|" * (len(KINDS) + 3), *rows, "", *ratio, ""])
    print("\n" + text)
    (report.RESULTS_DIR / "s3_requests.md").write_text(text)
