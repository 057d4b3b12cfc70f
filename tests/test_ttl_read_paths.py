"""A TTL store on the batch clock (OnCreateAndWrite, NeverReturnExpired: the defaults) reads
and writes the way a store without TTL does (docs/decisions/102-ttl-batch-clock-fast-paths.md): its
writes carry presence hints, an
aggregation's restore and a join's input and eviction read ahead, and full scans are served
from a complete view. Real Spark, real stores: with a TTL nothing reaches, the output equals
the HDFS provider's on the same input, and the read paths report their work in the metrics;
with a short TTL that expires entries during the run (and a restart, whose warm-up builds the
key filter the hints rely on), the output and the live key count equal the reference model
of Flink's TTL rule on the batch timestamps the run had.
"""

from __future__ import annotations

import collections
import uuid

import pytest

import streaming as st
from ttlstate.checkpoint_reader import CheckpointLocation, materialise
import ttl_queries as tq
from streaming import HDFS, TTLSTATE

pytestmark = pytest.mark.slow

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
HOUR = {PREFIX + "ttl": "1h"}


@pytest.fixture(autouse=True)
def _ttlstate_only(candidate):
    if candidate != TTLSTATE:
        pytest.skip("state TTL is a ttlstate feature; other providers ignore its confs")


def _sum_metric(result, name: str) -> int:
    return sum(int((op.get("customMetrics") or {}).get(name, 0)) for op in result.state_operators())


def _assert_ttl_on(result):
    assert _sum_metric(result, "ttlstateTtlMs") > 0, result.state_operators()[-1]


def test_an_aggregation_with_ttl_reads_its_state_ahead(spark, candidate, tmp_path):
    events = tmp_path / "events"
    st.write_files(events, st.generate_events(6, 2000, n_keys=3000, seed=51, active_fraction=0.9))
    expected = st.run_query(spark, HDFS, st.agg_by_key, "update", events, tmp_path / "ck-hdfs")
    # a cache far smaller than the state: the restore's reads come through the read-ahead
    actual, plan = st.run_query_with_plan(spark, candidate, st.agg_by_key, "update", events, tmp_path / "ck-ttl",
                                          confs={**HOUR, PREFIX + "cache.maxBytes": "128k"})
    st.assert_provider_served(actual, candidate)
    _assert_ttl_on(actual)
    st.assert_same_rows(expected, actual, min_rows=3000, what="aggregation with TTL, state read ahead")
    assert "StateReadAhead" in plan, plan
    # before docs/decisions/102-ttl-batch-clock-fast-paths.md a TTL store read nothing ahead (0)
    assert _sum_metric(actual, "ttlstatePrefetchedValues") > 0, actual.state_operators()[-1]


def test_drop_duplicates_within_watermark_with_ttl_scans_its_view(spark, candidate, tmp_path):
    events = tmp_path / "events"
    st.write_files(events, st.generate_events(5, 1500, n_keys=400, n_values=20, seed=52))
    expected = st.run_query(spark, HDFS, st.dedup_within_watermark, "append", events, tmp_path / "ck-hdfs")
    actual = st.run_query(spark, candidate, st.dedup_within_watermark, "append", events, tmp_path / "ck-ttl",
                          confs=HOUR)
    st.assert_provider_served(actual, candidate)
    _assert_ttl_on(actual)
    st.assert_same_rows(expected, actual, min_rows=500, what="dropDuplicatesWithinWatermark with TTL")
    # the eviction's scan of every entry, each batch, served from the JVM's complete view
    # (before docs/decisions/102-ttl-batch-clock-fast-paths.md a TTL store's scans always went to
    # the worker: 0)
    assert _sum_metric(actual, "ttlstateResidentScans") > 0, actual.state_operators()[-1]


def test_a_join_with_ttl_reads_its_input_and_eviction_ahead(spark, candidate, tmp_path):
    left, right = tmp_path / "left", tmp_path / "right"
    st.write_files(left, st.generate_events(6, 400, n_keys=2000, seed=53, active_fraction=0.9))
    st.write_files(right, st.generate_events(6, 400, n_keys=2000, seed=54, active_fraction=0.9))
    expected = st.run_query(spark, HDFS, st.inner_join, "append", [left, right], tmp_path / "ck-hdfs")
    actual, plan = st.run_query_with_plan(spark, candidate, st.inner_join, "append", [left, right],
                                          tmp_path / "ck-ttl", confs={**HOUR, PREFIX + "cache.maxBytes": "256k"})
    st.assert_provider_served(actual, candidate)
    _assert_ttl_on(actual)
    st.assert_same_rows(expected, actual, min_rows=100, what="inner join with TTL, read ahead")
    assert plan.count("StateReadAhead") == 2, plan
    # Spark reports the values stores' metrics: their values were read ahead (0 before
    # docs/decisions/102-ttl-batch-clock-fast-paths.md)
    assert _sum_metric(actual, "ttlstatePrefetchedValues") > 0, actual.state_operators()[-1]


# A count per key over many keys, with a cache far smaller than the state, so the restore reads
# ahead and most writes' hints come from the worker's answers and the key filter. Batch 0
# writes keys 0..1199, batch 1 keys 600..1799, batch 2 keys 0..599 and 1200..2399 (some twice).
EXPIRY_KEYS = 2400
EXPIRY_BATCHES = [
    [(f"k{i}", 0) for i in range(0, 1200)],
    [(f"k{i}", 1) for i in range(600, 1800)],
    [(f"k{i}", 2) for i in list(range(0, 600)) + list(range(1200, 2400)) + list(range(0, 2400, 7))],
]
EXPIRY_TTL_MS = 3000


def test_entries_expire_as_the_model_says_with_hints_read_ahead_and_a_restart(spark, tmp_path):
    """Batch 1 follows batch 0 by at least 1 s, batch 2 follows batch 1 by more than the TTL
    (3 s), after a restart: in batch 2 the keys of batches 0 and 1 are expired, stored or
    already cleaned up, and the restarted query's view was built by a warm-up. Each batch's
    counts and live key count (numRowsTotal, from the worker's key count and timestamp
    histogram, which the hints feed) must be the model's."""
    name = f"ttl_expiry_{uuid.uuid4().hex[:8]}"
    inputs = tmp_path / "in"
    files = [[{"key": k, "value": v, "ts": "2024-01-01 00:00:00"} for k, v in batch] for batch in EXPIRY_BATCHES]
    # snapshot mode: every version's manifest records the worker's key count and timestamp
    # histogram as they were, for the check at the end
    confs = {**tq.ttl_conf(EXPIRY_TTL_MS), PREFIX + "cache.maxBytes": "64k", PREFIX + "checkpoint.mode": "snapshot"}
    checkpoint = str(tmp_path / "ck")
    outcomes = []
    for part, (start, stop, pace) in enumerate([(0, 2, {0: 1.0, 1: EXPIRY_TTL_MS / 1000 + 0.5}), (2, 3, {})]):
        st.write_files(inputs, files, start, stop)
        spec = tq.QuerySpec(name=f"{name}_{part}", query="count_by_key", inputs=[str(inputs)],
                            checkpoint=checkpoint, confs=confs, pace=pace)
        outcomes.append(tq.run_side_by_side(spark, [spec])[0].check())
    first, second = outcomes
    ts = first.timestamps()
    assert sorted(ts) == [0, 1, 2] and ts[2] - ts[1] > EXPIRY_TTL_MS, ts
    expected, live, model = tq.model_count_by_key(EXPIRY_BATCHES, ts, ttl=EXPIRY_TTL_MS)
    batches = {**first.batches, **second.batches}
    assert batches == expected
    rows_total = {**first.rows_total(), **second.rows_total()}
    assert rows_total == live
    # entries did expire: batch 2 counts keys 0..599 from 1 again
    assert expected[2] != tq.model_count_by_key(EXPIRY_BATCHES, ts)[0][2]
    counts = collections.Counter(k for k, _ in EXPIRY_BATCHES[2])
    assert dict(expected[2]) == dict(counts)
    # the new read paths ran: the restore read ahead in the first part. After the restart
    # every stored entry is expired: the warm-up keeps none, so the view holds every live
    # entry (none) and answers the restore's reads itself, and nothing is read ahead, while
    # the key filter holds the expired keys still stored, so a write of one is no PUT_NEW
    assert first.metric_sum("ttlstatePrefetchedValues") > 0, first.progress[-1]
    assert second.metric_sum("ttlstatePrefetchedValues") == 0, second.progress[-1]
    assert model.expired_on_read > 0
    # the worker removed expired entries (the incremental cleanup; cleanup on read where it read)
    assert (second.metric_sum("ttlstateExpiredOnRead") + second.metric_sum("ttlstateExpiredIncremental")) > 0
    # the worker's key count and timestamp histogram of every version are those of the entries
    # it stored: a hint that called an expired stored key "not stored" (a key filter without
    # it) or gave a wrong timestamp would leave them off
    versions = 0
    location = CheckpointLocation(checkpoint)
    for op in location.operators():
        for store_dir in location.stores(op):
            for version in store_dir.versions():
                with materialise(store_dir, version) as loaded:
                    stamps = [ts for _, _, ts in loaded.entries()]
                    assert loaded.store.num_keys == len(stamps), (store_dir.label, version)
                    assert loaded.store.hist.counts == dict(collections.Counter(stamps)), (store_dir.label, version)
                    versions += 1
    assert versions >= 4 * 3, versions

