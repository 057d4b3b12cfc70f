"""SIGKILL of store workers at random moments changes no result.

A session on `local[2,4]` (Spark retries a failed task up to 4 times) runs aggregation,
dropDuplicates and the stream-stream join, one query per run, while a killer thread
SIGKILLs a random store worker of the session's service at random moments (seeded gaps
of 0.3-2 s, at most one kill per batch): during gets, write-behind flushes, commits,
uploads or between them. The service starts a new worker; a task that lost its worker
fails, and its retry reloads the store from the checkpoint. Every run must complete with
exactly the per-batch output of an undisturbed HDFS run. The failed tasks' errors (Spark's
REST API) name the request each kill interrupted; the test prints their tally.

Runs: `TTLSTATE_WORKER_KILL_RUNS`; by default 3 in `make test` (one per query, as CI runs
it), 21 in `make test-thorough` (the issue asked for 20 or more).
"""

from __future__ import annotations

import collections
import os
import random
import re
import signal
import threading

import pytest

import cluster as cl
import streaming as st
from streaming import HDFS, TTLSTATE
from test_e2e_restart import RestartCase

pytestmark = pytest.mark.slow

RUNS = st.repetitions("TTLSTATE_WORKER_KILL_RUNS", ci=3, thorough=21)
QUERIES = ["aggregation_update", "drop_duplicates", "inner_join"]


@pytest.fixture(scope="module")
def retrying_spark(_session_holder, tmp_path_factory):
    """A local session whose failed tasks are retried (`local[2,4]`), with its UI's REST
    API on; the shared session is stopped first and rebuilt by the next module."""
    import ttlstate

    _session_holder.stop()
    b = (st.session_builder("ttlstate-worker-kills",
                            str(tmp_path_factory.mktemp("kills-warehouse")))
         .master("local[2,4]").config("spark.ui.enabled", "true"))
    spark = st.get_or_create(ttlstate.configure(b))
    spark.sparkContext.setLogLevel("ERROR")
    yield spark
    spark.stop()


@pytest.fixture(scope="module")
def references(retrying_spark, tmp_path_factory):
    """query -> (its inputs, the undisturbed HDFS run)."""
    cases = {n: RestartCase(n, tmp_path_factory.mktemp(f"kills-{n}"), HDFS) for n in QUERIES}
    runs = [dict(provider=HDFS, input_dir=c.full, checkpoint_dir=c.root / "ck-reference",
                 **c.common) for c in cases.values()]
    out = {}
    for (n, c), r in zip(cases.items(), st.run_many(retrying_spark, runs)):
        if isinstance(r, BaseException):
            raise r
        out[n] = (c, r)
    return out


class Killer(threading.Thread):
    """SIGKILLs a random store worker at random moments until stopped, at most once per
    batch (`done_batches()` tells how many finished): Spark gives up on a task after 4
    failed attempts, so one kill must not be followed by another before the batch is done."""

    def __init__(self, spark, seed: int, done_batches):
        super().__init__(name="worker-killer", daemon=True)
        self.spark, self.rng, self.stop = spark, random.Random(seed), threading.Event()
        self.done_batches = done_batches
        self.kills: list[int] = []

    def run(self):
        killed_at = -1
        # short random waits: a run of a few small batches can end within a couple of seconds
        # (CI once saw a whole run pass before a first wait of up to 2 s ended, and no kill)
        while not self.stop.wait(self.rng.uniform(0.05, 0.8)):
            done = self.done_batches()
            workers = cl.session_worker_pids(self.spark)
            if workers and done > killed_at:
                try:
                    os.kill(self.rng.choice(workers), signal.SIGKILL)
                except ProcessLookupError:
                    continue
                self.kills.append(done)
                killed_at = done


def _interrupted_requests(api: cl.StatusApi, run_id: str) -> collections.Counter:
    """The request named by each failed task's error (`... during COMMIT ...`)."""
    tally: collections.Counter = collections.Counter()
    for stage_ids in api.batch_stage_ids(run_id).values():
        for sid in stage_ids:
            for t in api.tasks(sid):
                if t.get("status") == "FAILED":
                    m = re.search(r"during ([A-Z_]+)", t.get("errorMessage") or "")
                    tally[m.group(1) if m else "other"] += 1
    return tally


@pytest.mark.parametrize("run", range(RUNS))
def test_killed_workers_change_no_result(retrying_spark, candidate, references, tmp_path, run):
    if candidate != TTLSTATE:
        pytest.skip("kills ttlstate's store workers")
    spark = retrying_spark
    name = QUERIES[run % len(QUERIES)]
    c, reference = references[name]
    q = st.start_query(spark, TTLSTATE, c.build_df, c.mode, c.full, tmp_path / "ck",
                       sink="foreach_batch")
    killer = Killer(spark, seed=run, done_batches=lambda: len(q.batches))
    killer.start()
    try:
        result = q.result()
    finally:
        killer.stop.set()
        killer.join()
    assert result.batches == reference.batches, f"{name}: output differs after kills"
    assert killer.kills, "the killer killed no worker"
    tally = _interrupted_requests(cl.StatusApi(spark), result.progress[0]["runId"])
    print(f"\n{name} run {run}: {len(killer.kills)} workers killed; failed tasks by the "
          f"request they lost: {dict(tally)}; "
          f"batches {len(result.batches)}, output equals HDFS")
