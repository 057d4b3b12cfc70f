"""Snapshot-upload lag reporting (issue 16, item 3; DESIGN 36): ttlstate tells Spark's state
store coordinator about every snapshot it uploads, as Spark's own providers do, so with
`coordinatorReportSnapshotUploadLag` and `forceSnapshotUploadOnLag` on the coordinator knows
each store's latest snapshot, reports no store as lagging and forces no snapshot at commit.

An aggregation runs on ttlstate and on Spark's RocksDB provider (changelog checkpointing on)
with maintenance every 200 ms and a snapshot wanted after every delta. After each batch from
the third on, the driver waits for maintenance and asks the coordinator (its test hooks, as
Spark's own suites do) for each partition's latest snapshot version, whether it would force a
snapshot, and which stores lag. The coordinator forgets a query's stores when it stops, so
this happens while the query runs, from the foreachBatch sink.
"""

from __future__ import annotations

import re
import time

import pytest

import streaming as st
import ttl_queries as tq
from streaming import SPARK_ROCKSDB, TTLSTATE

pytestmark = pytest.mark.slow

PARTITIONS = range(4)
N_FILES = 7
LAG_CONFS = {
    tq.MAINTENANCE_INTERVAL: "200ms",
    tq.MIN_DELTAS_FOR_SNAPSHOT: "1",
    "spark.sql.streaming.stateStore.coordinatorReportSnapshotUploadLag": "true",
    "spark.sql.streaming.stateStore.forceSnapshotUploadOnLag": "true",
    "spark.sql.streaming.stateStore.multiplierForMinVersionDiffToLog": "1",
    "spark.sql.streaming.stateStore.multiplierForMinTimeDiffToLog": "1",
    "spark.sql.streaming.stateStore.snapshotLagReportInterval": "0",
}
ROCKSDB_CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
SNAPSHOT_SUFFIX = {TTLSTATE: ".manifest", SPARK_ROCKSDB: ".zip"}


class CoordinatorProbe:
    """What the coordinator knows of one running query's stores, after each batch."""

    def __init__(self, spark):
        self.spark = spark
        self.seen: list[dict] = []

    def __call__(self, batch_id: int):
        if batch_id < 2:
            return
        time.sleep(1.0)  # maintenance (every 200 ms) snapshots and reports meanwhile
        jvm = self.spark._jvm
        state = jvm.org.apache.spark.sql.execution.streaming.state
        (query,) = self.spark.streams.active  # the queries of this module run one at a time
        run_id = jvm.java.util.UUID.fromString(str(query.runId))
        coordinator = self.spark._jsparkSession.sessionState().streamingQueryManager().stateStoreCoordinator()
        root = query._jsq.streamingQuery().resolvedCheckpointRoot() + "/state"
        latest, forced = {}, {}
        for p in PARTITIONS:
            pid = state.StateStoreProviderId(state.StateStoreId(root, 0, p, "default"), run_id)
            v = coordinator.getLatestSnapshotVersionForTesting(pid)
            latest[p] = int(v.get()) if v.isDefined() else None
            forced[p] = coordinator.checkIfShouldForceSnapshotUploadForTesting(pid)
        lagging = coordinator.getLaggingStoresForTesting(run_id, batch_id + 1, False)
        self.seen.append(dict(batch=batch_id, latest=latest, forced=forced, lagging=lagging.size()))


def snapshot_versions(checkpoint, partition: int, suffix: str) -> set[int]:
    d = checkpoint / "state" / "0" / str(partition)
    return {int(m.group(1)) for p in d.iterdir()
            if (m := re.match(r"^(\d+)(_[^.]*)?" + re.escape(suffix) + "$", p.name))}


@pytest.fixture(scope="module")
def runs(_session_holder, candidate, tmp_path_factory):
    if candidate != TTLSTATE:
        pytest.skip("compares ttlstate with Spark's RocksDB provider")
    spark = _session_holder.get()
    st.restart_state_store_maintenance(spark)
    root = tmp_path_factory.mktemp("lag")
    st.write_files(root / "events", st.generate_events(N_FILES, 40, n_keys=12, seed=5))
    out = {}
    for provider, name, confs in ((TTLSTATE, "ttlstate", {}), (SPARK_ROCKSDB, "rocksdb", ROCKSDB_CHANGELOG)):
        probe = CoordinatorProbe(spark)
        result = st.run_query(spark, provider, st.agg_by_key, "update", root / "events", root / name,
                              sink="foreach_batch", confs={**LAG_CONFS, **confs}, on_batch=probe)
        st.assert_provider_served(result, provider)
        out[provider] = (result, probe.seen, root / name)
    yield out
    st.restart_state_store_maintenance(spark)  # later modules start it with their own interval


def test_rows_equal_the_rocksdb_providers(runs):
    st.assert_same_rows(runs[SPARK_ROCKSDB][0], runs[TTLSTATE][0], min_rows=10, what="aggregation")


@pytest.mark.parametrize("provider", [TTLSTATE, SPARK_ROCKSDB])
def test_the_coordinator_knows_each_stores_snapshot_and_none_lags(runs, provider):
    _, seen, checkpoint = runs[provider]
    assert len(seen) == N_FILES - 2, seen
    for s in seen:
        assert s["lagging"] == 0, (provider, s)
        assert not any(s["forced"].values()), (provider, s)
    last = seen[-1]
    for p in PARTITIONS:
        v = last["latest"][p]
        assert v is not None, (provider, p, seen)  # a snapshot was reported for every store
        assert 1 <= v <= last["batch"] + 1, (provider, p, last)
        # the reported version is a snapshot the store really wrote
        assert v in snapshot_versions(checkpoint, p, SNAPSHOT_SUFFIX[provider]), (provider, p, v)
