"""Spark may unload a provider while one of its tasks still writes to it: its maintenance
thread unloads a provider it finds inactive (the coordinator names another executor, or the
query's instances were deactivated) or whose maintenance failed, whatever a task is doing.
Spark's RocksDB provider waits for the task there (its close takes the instance lock the
task holds). A ttlstate store then closes when that task ends instead of cutting its
connection: before, the task's next write failed with "connection closed during WRITE_BATCH"
and the query stopped (seen once in CI, in test_checkpoint_recovery). Real Spark, real
stores, a real Python UDF holding its task inside applyInPandasWithState.
"""

from __future__ import annotations

import os

import pytest

import cluster as cl
import jvm_log
import streaming as st

pytestmark = pytest.mark.slow

MAINTENANCE_INTERVAL = "spark.sql.streaming.stateStore.maintenanceInterval"
SCHEMA = "key string, n long, total long"


def gated_running_count(gate_dir: str):
    """applyInPandasWithState: running count and sum per key. While `gate_dir/hold` exists,
    the first group that gets there marks `gate_dir/holding` and waits for `gate_dir/release`
    (120 s at most) before it updates its state: its task holds its write store meanwhile."""
    from pyspark.sql.streaming.state import GroupStateTimeout

    def running_count(key, pdfs, state):
        import os as os_
        import time as time_

        import pandas as pd

        hold, holding, release = (os_.path.join(gate_dir, n) for n in ("hold", "holding", "release"))
        if os_.path.exists(hold):
            try:
                os_.close(os_.open(holding, os_.O_CREAT | os_.O_EXCL))
                deadline = time_.monotonic() + 120
                while not os_.path.exists(release) and time_.monotonic() < deadline:
                    time_.sleep(0.1)
            except FileExistsError:
                pass  # another group holds its task already
        n, total = state.get if state.exists else (0, 0)
        for pdf in pdfs:
            n += len(pdf)
            total += int(pdf["value"].sum())
        state.update((n, total))
        yield pd.DataFrame({"key": [key[0]], "n": [n], "total": [total]})

    def build(df):
        return df.groupBy("key").applyInPandasWithState(
            running_count, SCHEMA, "n long, total long", "update", GroupStateTimeout.NoTimeout)

    return build


def test_a_store_unloaded_while_its_task_writes_closes_when_the_task_ends(spark, tmp_path):
    interval = spark.conf.get(MAINTENANCE_INTERVAL, None)
    spark.conf.set(MAINTENANCE_INTERVAL, "1s")
    st.restart_state_store_maintenance(spark)  # the next store load starts it at 1 s
    events = tmp_path / "events"
    st.write_files(events, st.generate_events(4, 200, n_keys=12, seed=11))
    gate = tmp_path / "gate"
    gate.mkdir()
    expected = st.run_query(spark, st.HDFS, gated_running_count(str(gate)), "update", events,
                            tmp_path / "ck-hdfs")

    (gate / "hold").touch()
    checkpoint = tmp_path / "ck-ttlstate"
    try:
        with jvm_log.captured(spark, "io.ttlstate", "INFO") as log:
            # one shuffle partition: the held task's store is the only one, so no other task
            # can still be writing when maintenance unloads the run's stores (with 4, on a
            # slow machine, a second store's close could be deferred as well)
            running = st.start_query(spark, st.TTLSTATE, gated_running_count(str(gate)), "update", events,
                                     checkpoint, confs={"spark.sql.shuffle.partitions": "1"})
            cl.wait_until(lambda: (gate / "holding").exists(), 120, "a task to hold its write store")
            # what Spark's maintenance does to the providers of a stopped query run: at its next
            # pass (1 s) it finds them inactive and unloads them, the held one included
            coordinator = spark._jsparkSession.streams().stateStoreCoordinator()
            coordinator.deactivateInstances(running.query._jsq.runId())
            cl.wait_until(lambda: "close deferred" in log.text, 60, "the held store's unload")
            os.unlink(gate / "hold")
            (gate / "release").touch()
            result = running.result()
            cl.wait_until(lambda: "Closed" in log.text.split("close deferred", 1)[1], 60,
                      "the deferred close at the end of the task")
    finally:
        (gate / "release").touch()
        if interval is None:
            spark.conf.unset(MAINTENANCE_INTERVAL)
        else:
            spark.conf.set(MAINTENANCE_INTERVAL, interval)
        st.restart_state_store_maintenance(spark)  # later modules start it with their own interval

    st.assert_provider_served(result, st.TTLSTATE)
    st.assert_same_rows(expected, result, min_rows=12, what="a store unloaded while its task wrote")
    deferred = [line for line in log.text.splitlines() if "close deferred" in line]
    assert len(deferred) == 1 and str(checkpoint) in deferred[0], log.text[-5000:]
    assert "WARN" not in log.text and "ERROR" not in log.text, log.text[-5000:]
