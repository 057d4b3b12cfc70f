"""A stopped session's stores stay loaded in Spark's `StateStore` until a later session's
maintenance unloads them (Spark's maintenance thread outlives its SparkContext); their store
service stopped with the first session. That maintenance must pass over them quietly: it logged
a WARN and a stack trace for each store, reading the retained manifests through a connection
to the stopped service (found by a `make bench` run at small sizes, where the query comparison's
session followed the checkpoint benchmark's in one JVM). Real Spark, real stores and services.
"""

from __future__ import annotations

import time

import pytest

import jvm_log
import streaming as st
from checkpoint_queries import MIN_BATCHES, MODE

pytestmark = pytest.mark.slow

MAINTENANCE_INTERVAL = "spark.sql.streaming.stateStore.maintenanceInterval"
# the cleanup of a first-session store: 6 versions, 2 kept (the second session's have 2 versions)
STALE_CLEANUP = "(keeping versions from 5)"


def test_a_stopped_sessions_stores_are_maintained_without_warnings(spark, restart_spark, tmp_path):
    # no maintenance pass in the first session: its stores' cleanup is left to the second one
    # (a pass after the first query's last commit left nothing to delete, and no cleanup line)
    spark.conf.set(MAINTENANCE_INTERVAL, "1h")
    st.restart_state_store_maintenance(spark)  # the next store load starts it at 1 h
    events = tmp_path / "events"
    st.write_files(events, st.generate_events(6, 300, n_keys=40, seed=3))
    # snapshot mode with 2 versions retained: every maintenance pass has manifests to read
    confs = {MODE: "snapshot", MIN_BATCHES: "2"}
    first = st.run_query(spark, st.TTLSTATE, st.agg_by_key, "update", events, tmp_path / "ck-first", confs=confs)
    st.assert_provider_served(first, st.TTLSTATE)
    # the new session's first store load starts the maintenance task again, with its interval
    st.state_store(spark).stopMaintenanceTask()
    fresh = restart_spark()
    fresh.conf.set(MAINTENANCE_INTERVAL, "5s")
    # what the new session's first store load does first, now, before the next maintenance pass
    # (5 s apart) reaches the first session's stores: the first session's service stops
    fresh._jvm.io.ttlstate.spark.service.PythonService.get(fresh._jvm.java.util.HashMap())
    with jvm_log.captured(fresh, "io.ttlstate", "INFO") as log:
        st.write_files(tmp_path / "events2", st.generate_events(2, 100, n_keys=10, seed=4))
        second = st.run_query(fresh, st.TTLSTATE, st.agg_by_key, "update", tmp_path / "events2",
                              tmp_path / "ck-second", confs=confs)
        deadline = time.monotonic() + 60
        while not ("ck-first" in log.text and STALE_CLEANUP in log.text) and time.monotonic() < deadline:
            time.sleep(0.5)  # until a maintenance pass cleaned up and unloaded the first session's stores
        time.sleep(1)
    st.assert_provider_served(second, st.TTLSTATE)
    fresh.conf.unset(MAINTENANCE_INTERVAL)  # the shared session goes on with Spark's default
    st.restart_state_store_maintenance(fresh)  # later modules start it with their own interval
    text = log.text
    assert "ck-first" in text, text[-3000:]  # the stale stores were maintained while captured
    assert "WARN" not in text and "ERROR" not in text, text[-5000:]
    # their cleanup still deleted SSTs: a worker of the running service planned it (their own
    # connection is gone; docs/decisions/110-worker-plans-checkpoint-files.md)
    stale_cleanups = [line for line in text.splitlines() if STALE_CLEANUP in line]
    assert stale_cleanups and not any("no SSTs" in line for line in stale_cleanups), text[-5000:]
