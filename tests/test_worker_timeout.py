"""A store worker that stops answering fails the task after `workerTimeout`, not never.

The store workers of the session's service are stopped with SIGSTOP between two batches.
The next batch's first request to a stopped worker waits `workerTimeout` (3 s here); the
JVM then kills that worker and fails the task with `TTLSTATE_WORKER_TIMEOUT`, naming the
key. In `local[2]` a failed task fails the query, so the error reaches the test. A restart
from the checkpoint then runs on the fresh workers the service started, and the output of
both runs equals an undisturbed run.
"""

from __future__ import annotations

import os
import re
import signal

import pytest

import cluster as cl
import streaming as st
from streaming import HDFS, TTLSTATE

pytestmark = pytest.mark.slow

TIMEOUT_KEY = "spark.sql.streaming.stateStore.ttlstate.workerTimeout"


def test_stopped_worker_fails_the_task_after_the_timeout(spark, candidate, tmp_path):
    if candidate != TTLSTATE:
        pytest.skip("stops ttlstate's store workers")
    inp = tmp_path / "in"
    st.write_files(inp, st.generate_events(6, 40, n_keys=10, seed=5))
    common = dict(build_df=st.agg_by_key, output_mode="update", input_dir=inp,
                  sink="foreach_batch")
    reference = st.run_query(spark, HDFS, checkpoint_dir=tmp_path / "ck-ref", **common)

    stopped: list[int] = []

    def stop_workers(batch_id):
        if batch_id == 2:
            for pid in cl.session_worker_pids(spark):
                os.kill(pid, signal.SIGSTOP)
                stopped.append(pid)

    q = st.start_query(spark, TTLSTATE, checkpoint_dir=tmp_path / "ck",
                       confs={TIMEOUT_KEY: "3s"}, on_batch=stop_workers, **common)
    try:
        with pytest.raises(Exception) as failure:
            q.result()
    finally:
        for pid in stopped:  # a worker no request reached is still stopped
            if cl.alive(pid):
                os.kill(pid, signal.SIGCONT)
    message = str(failure.value)
    assert "TTLSTATE_WORKER_TIMEOUT" in message and TIMEOUT_KEY in message, message[:3000]
    assert re.search(r"did not answer [A-Z_]+ within 3000 ms", message), message[:3000]
    assert stopped and not all(cl.alive(p) for p in stopped), "no stopped worker was killed"
    assert max(q.batches) == 2, f"batches after the stop: {sorted(q.batches)}"

    # The service replaced the killed workers; the query resumes from its checkpoint.
    cl.wait_until(lambda: len(cl.session_worker_pids(spark)) == len(stopped), 30,
                  "replacement workers")
    second = st.run_query(spark, TTLSTATE, checkpoint_dir=tmp_path / "ck", **common)
    merged = {b: st.sort_rows(rows) for b, rows in {**q.batches, **second.batches}.items()}
    assert merged == reference.batches
    assert len(reference.rows) > 20
