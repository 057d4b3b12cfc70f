"""A stream-stream join whose values outgrow the JVM's cache reads them ahead: while Spark
walks a side's counts store (watermark eviction, JoinPrefetch), and for each block of input
rows (`StateReadAheadExec` under each side, docs/decisions/072-join-input-read-ahead.md), the
values it reads next come in one
MULTI_GET per block instead of one synchronous read each. Real Spark, real stores; the output
must equal the HDFS provider's on the same input.
"""

from __future__ import annotations

import pytest

import streaming as st
from streaming import HDFS

# cache misses are counted: they must be this file's queries' own
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_other_stores_loaded")]

PREFIX = "spark.sql.streaming.stateStore.ttlstate."


def _sum_metric(result, name: str) -> int:
    return sum(int((op.get("customMetrics") or {}).get(name, 0)) for op in result.state_operators())


def test_join_values_beyond_the_cache_are_read_ahead_and_the_output_is_unchanged(spark, candidate, tmp_path):
    left, right = tmp_path / "left", tmp_path / "right"
    st.write_files(left, st.generate_events(6, 400, n_keys=2000, seed=31, active_fraction=0.9))
    st.write_files(right, st.generate_events(6, 400, n_keys=2000, seed=32, active_fraction=0.9))
    expected = st.run_query(spark, HDFS, st.inner_join, "append", [left, right], tmp_path / "ck-hdfs")
    # a cache smaller than the join's values: without read-ahead every value the eviction
    # reads is a worker read
    actual = st.run_query(spark, candidate, st.inner_join, "append", [left, right], tmp_path / "ck-ttl",
                          confs={PREFIX + "cache.maxBytes": "256k"})
    st.assert_provider_served(actual, candidate)
    st.assert_same_rows(expected, actual, min_rows=100, what="inner join, values read ahead")
    prefetched = _sum_metric(actual, "ttlstatePrefetchedValues")
    misses = _sum_metric(actual, "ttlstateCacheMisses")
    assert prefetched > 0, actual.state_operators()[-1]
    # the values read ahead were there when the eviction read them: few reads went to the worker
    # (measured: 8,421 read ahead, 9,845 cache hits, 938 worker reads; keys read ahead wrongly
    # or evicted before use leave thousands of worker reads)
    assert _sum_metric(actual, "ttlstateCacheHits") > prefetched // 2, (prefetched, misses)
    # the next block's values and the counts' next chunk were asked for before they were
    # needed (docs/decisions/071-requests-sent-ahead.md), and what came back ahead answered reads
    # like the rest
    assert _sum_metric(actual, "ttlstateSentAhead") > 0, actual.state_operators()[-1]
    assert misses < prefetched // 4, (prefetched, misses)


# the join node is matched by name and read by its accessors on every Spark line
@pytest.mark.parametrize("build", [pytest.param(st.inner_join, id="inner", marks=pytest.mark.matrix),
                                   pytest.param(st.left_outer_join, id="left-outer")])
def test_join_input_beyond_the_cache_is_read_ahead_and_the_output_is_unchanged(spark, candidate, tmp_path, build):
    left, right = tmp_path / "left", tmp_path / "right"
    st.write_files(left, st.generate_events(6, 400, n_keys=2000, seed=33, active_fraction=0.9))
    st.write_files(right, st.generate_events(6, 400, n_keys=2000, seed=34, active_fraction=0.9))
    expected = st.run_query(spark, HDFS, build, "append", [left, right], tmp_path / "ck-hdfs")
    actual, plan = st.run_query_with_plan(spark, candidate, build, "append", [left, right], tmp_path / "ck-ttl",
                                          confs={PREFIX + "cache.maxBytes": "256k"})
    st.assert_provider_served(actual, candidate)
    st.assert_same_rows(expected, actual, min_rows=100, what=f"{build.__name__}, input read ahead")
    # one read-ahead under each side of the join
    assert plan.count("StateReadAhead") == 2, plan
    prefetched = _sum_metric(actual, "ttlstatePrefetchedValues")
    misses = _sum_metric(actual, "ttlstateCacheMisses")
    hits = _sum_metric(actual, "ttlstateCacheHits")
    # Spark reports the values stores' metrics only. The values each input row joins with were
    # read ahead with its block, so few reads of them miss. Measured on this input with no other
    # store loaded: 3-8 misses of 8,920-9,302 values read ahead; without the input's read-ahead
    # 881-913 of 8,202-8,496 (10.7%). (With an earlier query's stores still sharing the 256k
    # budget it was 334-1,206 of about 10,500, which is why `no_other_stores_loaded` unloads them.)
    assert hits > prefetched // 2, (prefetched, hits, misses)
    assert misses < prefetched // 50, (prefetched, hits, misses)
