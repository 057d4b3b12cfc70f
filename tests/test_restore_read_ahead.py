"""A streaming aggregation whose state outgrows the JVM's cache reads it ahead
(`StateReadAheadExec` under Spark's `StateStoreRestoreExec`,
docs/decisions/068-aggregation-read-ahead.md): the keys of a block
of input rows come from the worker in one MULTI_GET instead of one synchronous read each.
Real Spark, real stores; the output must equal the HDFS provider's on the same input.
"""

from __future__ import annotations

import pyspark
import pytest

import streaming as st
from streaming import HDFS

# cache misses are counted: they must be this file's queries' own
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_other_stores_loaded")]

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
# From Spark 4.1 the restore's read store is upgraded to the write store, so its reads count
# in the metrics Spark reports; on 4.0 a read store's reads are not reported anywhere.
RESTORE_READS_REPORTED = tuple(int(x) for x in pyspark.__version__.split(".")[:2]) >= (4, 1)


def _sum_metric(result, name: str) -> int:
    return sum(int((op.get("customMetrics") or {}).get(name, 0)) for op in result.state_operators())


def _assert_read_ahead_values_are_hit(result):
    prefetched = _sum_metric(result, "ttlstatePrefetchedValues")
    misses = _sum_metric(result, "ttlstateCacheMisses")
    hits = _sum_metric(result, "ttlstateCacheHits")
    assert prefetched > 0, result.state_operators()[-1]
    if RESTORE_READS_REPORTED:
        # the values read ahead were in the cache when the restore read them (measured: about
        # 4,000 read ahead and 1-6% of them missed; without the read-ahead nothing is read
        # ahead and thousands of reads miss)
        assert hits > prefetched // 2, (prefetched, hits, misses)
        assert misses < prefetched // 4, (prefetched, hits, misses)


@pytest.mark.matrix  # the plan node is matched by name on every Spark line
def test_aggregation_state_beyond_the_cache_is_read_ahead_and_the_output_is_unchanged(spark, candidate,
                                                                                        tmp_path):
    events = tmp_path / "events"
    st.write_files(events, st.generate_events(6, 2000, n_keys=3000, seed=41, active_fraction=0.9))
    expected = st.run_query(spark, HDFS, st.agg_by_key, "update", events, tmp_path / "ck-hdfs")
    # a cache far smaller than the state (3,000 keys): without the read-ahead nearly every
    # restore read of an existing key is a worker read. The second query runs while the first
    # one's stores are still loaded (until Spark's maintenance unloads them) and hold the
    # budget: its stores must still get their share and keep what they read ahead
    # (docs/decisions/069-view-takes-back-its-share.md;
    # they kept none, and every value read ahead was read again, before that)
    for run in ("first", "second"):
        actual, plan = st.run_query_with_plan(spark, candidate, st.agg_by_key, "update", events,
                                              tmp_path / f"ck-ttl-{run}", confs={PREFIX + "cache.maxBytes": "128k"})
        st.assert_provider_served(actual, candidate)
        st.assert_same_rows(expected, actual, min_rows=3000, what=f"aggregation, state read ahead, {run} query")
        assert "StateReadAhead" in plan, plan
        _assert_read_ahead_values_are_hit(actual)


def test_a_cache_that_holds_the_state_reads_nothing_ahead(spark, candidate, tmp_path):
    events = tmp_path / "events"
    st.write_files(events, st.generate_events(4, 1000, n_keys=500, seed=42, active_fraction=0.9))
    expected = st.run_query(spark, HDFS, st.agg_by_key, "update", events, tmp_path / "ck-hdfs")
    actual, plan = st.run_query_with_plan(spark, candidate, st.agg_by_key, "update", events, tmp_path / "ck-ttl")
    st.assert_same_rows(expected, actual, min_rows=500, what="aggregation, cache holds the state")
    assert "StateReadAhead" in plan, plan
    # the view holds every entry (it grew from an empty state): the rows pass straight through
    assert _sum_metric(actual, "ttlstatePrefetchedValues") == 0, actual.state_operators()[-1]
    if RESTORE_READS_REPORTED:
        assert _sum_metric(actual, "ttlstateCacheMisses") == 0, actual.state_operators()[-1]
