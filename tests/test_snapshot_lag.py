"""Snapshot-upload lag reporting (issue 16, item 3;
docs/decisions/036-snapshot-reports-to-coordinator.md): ttlstate tells Spark's state
store coordinator about every snapshot it uploads, as Spark's own providers do, so with
`coordinatorReportSnapshotUploadLag` and `forceSnapshotUploadOnLag` on the coordinator knows
each store's latest snapshot, reports no store as lagging and forces no snapshot at commit.

An aggregation runs on ttlstate and on Spark's RocksDB provider (changelog checkpointing on)
with maintenance every 200 ms and a snapshot wanted after every delta. After each batch from
the third on, the driver waits for maintenance and asks the coordinator (its test hooks, as
Spark's own suites do) for each partition's latest snapshot version, whether it would force a
snapshot, and which stores lag. The coordinator forgets a query's stores when it stops, so
this happens while the query runs, from the foreachBatch sink.

Then a real lag: maintenance every hour (so it never snapshots) and `minDeltasForSnapshot` 2,
under which the coordinator forces a snapshot at commit of every store in batch 3 (the rule is
spelled out below). Both providers are asked the same questions after every batch, and the
coordinator's record, its decisions and the snapshot files must be the same for both.
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

    def __init__(self, spark, first_batch: int = 2, wait_s: float = 60.0, checkpoint=None, suffix=""):
        self.spark = spark
        self.first_batch = first_batch
        # at most this long for maintenance to snapshot the batch's version of every store and
        # report it (polled: a fixed pause can end first on a loaded machine); 0: ask at once
        self.wait_s = wait_s
        self.checkpoint, self.suffix = checkpoint, suffix  # also list the snapshot files there
        self.seen: list[dict] = []

    def __call__(self, batch_id: int):
        if batch_id < self.first_batch:
            return
        jvm = self.spark._jvm
        state = jvm.org.apache.spark.sql.execution.streaming.state
        (query,) = self.spark.streams.active  # the queries of this module run one at a time
        run_id = jvm.java.util.UUID.fromString(str(query.runId))
        coordinator = self.spark._jsparkSession.sessionState().streamingQueryManager().stateStoreCoordinator()
        root = query._jsq.streamingQuery().resolvedCheckpointRoot() + "/state"
        pids = {p: state.StateStoreProviderId(state.StateStoreId(root, 0, p, "default"), run_id)
                for p in PARTITIONS}

        def latest_reported():
            out = {}
            for p, pid in pids.items():
                v = coordinator.getLatestSnapshotVersionForTesting(pid)
                out[p] = int(v.get()) if v.isDefined() else None
            return out

        deadline = time.monotonic() + self.wait_s
        while time.monotonic() < deadline and any(v is None or v < batch_id + 1 for v in latest_reported().values()):
            time.sleep(0.1)
        latest = latest_reported()
        forced = {p: coordinator.checkIfShouldForceSnapshotUploadForTesting(pid) for p, pid in pids.items()}
        lagging = coordinator.getLaggingStoresForTesting(run_id, batch_id + 1, False)
        files = ({p: snapshot_versions(self.checkpoint, p, self.suffix) for p in PARTITIONS}
                 if self.checkpoint is not None else None)
        self.seen.append(dict(batch=batch_id, latest=latest, forced=forced, lagging=lagging.size(),
                              snapshots=files))


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


# ---- a real lag: the coordinator forces a snapshot at commit ---------------------------------
#
# Spark 4.3's rule (StateStoreCoordinator.findLaggingStores, read from its bytecode): after each
# batch b the driver (ProgressContext.finishTrigger) sends LogLaggingStateStores(runId, b + 1,
# isTerminatingTrigger). A store of the run lags if
#     b + 1 - last reported snapshot version > multiplierForMinVersionDiffToLog x minDeltasForSnapshot
# and (isTerminatingTrigger, which is true for every Trigger.AvailableNow batch, or
#     now - that report's time > multiplierForMinTimeDiffToLog x maintenanceInterval);
# a store never reported counts as version 0 at time 0. With forceSnapshotUploadOnLag the
# lagging stores replace the run's set, and in the next batch StateStore.get's
# reportActiveInstance answers shouldForceSnapshotUpload for them: getStore(...,
# forceSnapshotOnCommit=true), so that batch's commit writes a snapshot.
#
# Maintenance every hour never runs here, so no store snapshots on its own (RocksDB only makes
# local checkpoints at commit and uploads them in maintenance). Each store reports version 0
# when it loads the empty state; after batch 2 (version 3 > 1 x 2) every store lags, batch 3
# commits version 4 with a forced snapshot, and the report of it ends the lag: with 7 batches
# the next version lag (7 - 4 > 2) comes after the last batch.

FORCE_CONFS = {
    tq.MAINTENANCE_INTERVAL: "1h",
    tq.MIN_DELTAS_FOR_SNAPSHOT: "2",
    "spark.sql.streaming.stateStore.coordinatorReportSnapshotUploadLag": "true",
    "spark.sql.streaming.stateStore.forceSnapshotUploadOnLag": "true",
    "spark.sql.streaming.stateStore.multiplierForMinVersionDiffToLog": "1",
    "spark.sql.streaming.stateStore.multiplierForMinTimeDiffToLog": "1",
    "spark.sql.streaming.stateStore.snapshotLagReportInterval": "0",
}
FORCED_BATCH = 3  # the first b with b + 1 - 0 > 1 x 2 is 2; the batch after it is forced
FORCED_VERSION = FORCED_BATCH + 1


@pytest.fixture(scope="module")
def forced_runs(_session_holder, candidate, tmp_path_factory):
    if candidate != TTLSTATE:
        pytest.skip("compares ttlstate with Spark's RocksDB provider")
    spark = _session_holder.get()
    root = tmp_path_factory.mktemp("forced")
    st.write_files(root / "events", st.generate_events(N_FILES, 40, n_keys=12, seed=7))
    out = {}
    try:
        for provider, name, confs in ((TTLSTATE, "ttlstate", {}), (SPARK_ROCKSDB, "rocksdb", ROCKSDB_CHANGELOG)):
            st.restart_state_store_maintenance(spark)  # starts again at the next load, every hour
            probe = CoordinatorProbe(spark, first_batch=0, wait_s=0, checkpoint=root / name,
                                     suffix=SNAPSHOT_SUFFIX[provider])
            # the coordinator reads the lag confs from the driver session's conf when it
            # checks, after each batch: they stay set while the query runs
            with st.session_confs(spark, FORCE_CONFS):
                result = st.run_query(spark, provider, st.agg_by_key, "update", root / "events", root / name,
                                      sink="foreach_batch", confs={**FORCE_CONFS, **confs}, on_batch=probe)
            st.assert_provider_served(result, provider)
            files = {p: snapshot_versions(root / name, p, SNAPSHOT_SUFFIX[provider]) for p in PARTITIONS}
            out[provider] = (result, probe.seen, files)
    finally:
        st.restart_state_store_maintenance(spark)  # later modules start it with their own interval
    yield out


def test_forced_run_rows_equal_the_rocksdb_providers(forced_runs):
    st.assert_same_rows(forced_runs[SPARK_ROCKSDB][0], forced_runs[TTLSTATE][0], min_rows=10,
                        what="aggregation with a forced snapshot")


@pytest.mark.parametrize("provider", [TTLSTATE, SPARK_ROCKSDB])
def test_the_coordinator_forces_a_snapshot_at_commit_of_each_lagging_store(forced_runs, provider):
    result, seen, files = forced_runs[provider]
    assert [s["batch"] for s in seen] == list(range(N_FILES)), seen
    everywhere = lambda v: {p: v for p in PARTITIONS}  # noqa: E731
    for s in seen:
        b = s["batch"]
        # forced in exactly one batch, every store of it
        assert s["forced"] == everywhere(b == FORCED_BATCH), (provider, s)
        # what the coordinator knows: version 0 from each store's load, then the forced snapshot
        assert s["latest"] == everywhere(0 if b < FORCED_BATCH else FORCED_VERSION), (provider, s)
        # the snapshot file is there once the forced batch committed (maintenance never ran)
        assert s["snapshots"] == everywhere(set() if b < FORCED_BATCH else {FORCED_VERSION}), (provider, s)
        # no store lags by the rule of a non-terminating trigger: each report is recent
        assert s["lagging"] == 0, (provider, s)
    assert files == everywhere({FORCED_VERSION}), (provider, files)
    if provider == SPARK_ROCKSDB:  # RocksDB counts its forced snapshots per batch
        counts = {p["batchId"]: sum(int(op["customMetrics"]["rocksdbForceSnapshotCount"])
                                    for op in p["stateOperators"]) for p in result.progress}
        assert counts == {b: len(PARTITIONS) if b == FORCED_BATCH else 0 for b in range(N_FILES)}, counts


def test_forced_snapshots_are_the_rocksdb_providers(forced_runs):
    """Batch by batch, the coordinator's record, its decisions and the snapshot versions on
    disk are the same for ttlstate as for the RocksDB provider."""
    ttl, rocks = forced_runs[TTLSTATE], forced_runs[SPARK_ROCKSDB]
    assert ttl[1] == rocks[1]
    assert ttl[2] == rocks[2]
