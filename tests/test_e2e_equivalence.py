"""Every stateful operator ttlstate serves gives exactly the sink rows HDFS gives.

Each test runs one query twice on the same deterministic input (one file per micro-batch,
Trigger.AvailableNow), once with HDFSBackedStateStoreProvider and once with the provider
under test, each on its own checkpoint, and compares the sorted sink rows. The progress
must show that each run really kept state in the provider it was given.
"""

from __future__ import annotations

import pytest

import streaming as st
from streaming import HDFS

pytestmark = pytest.mark.slow

N_FILES = 8
ROWS_PER_FILE = 40


@pytest.fixture(scope="module")
def events_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("events")
    st.write_files(d, st.generate_events(N_FILES, ROWS_PER_FILE, seed=11))
    return d


@pytest.fixture(scope="module")
def join_dirs(tmp_path_factory):
    left = tmp_path_factory.mktemp("join_left")
    right = tmp_path_factory.mktemp("join_right")
    st.write_files(left, st.generate_events(N_FILES, 16, n_keys=4, seed=21, active_fraction=0.8))
    st.write_files(right, st.generate_events(N_FILES, 16, n_keys=4, seed=22, active_fraction=0.8))
    return [left, right]


def run_both(spark, candidate, build_df, mode, inputs, tmp_path):
    common = dict(build_df=build_df, output_mode=mode, input_dir=inputs)
    hdfs, cand = st.run_side_by_side(spark, [
        dict(provider=HDFS, checkpoint_dir=tmp_path / "ckpt-hdfs", **common),
        dict(provider=candidate, checkpoint_dir=tmp_path / "ckpt-candidate", **common)])
    st.assert_provider_served(hdfs, HDFS)
    st.assert_provider_served(cand, candidate)
    # Same micro-batches (one file each) and, per batch, as many sink rows.
    assert cand.input_rows_per_batch() == hdfs.input_rows_per_batch()
    assert cand.output_rows_per_batch() == hdfs.output_rows_per_batch()
    return hdfs, cand


def assert_evicted(result):
    """Some batch removed state rows (watermark eviction went through the provider)."""
    removed = [op.get("numRowsRemoved", 0) for op in result.state_operators()]
    assert any(n > 0 for n in removed), f"no state row was ever removed: {removed}"


@pytest.mark.parametrize("mode", ["update", "complete"])
def test_aggregation(spark, candidate, events_dir, tmp_path, mode):
    hdfs, cand = run_both(spark, candidate, st.agg_by_key_bucket, mode, events_dir, tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=20 if mode == "complete" else 60,
                        what=f"aggregation ({mode})")


def test_aggregation_append_with_watermark(spark, candidate, events_dir, tmp_path):
    hdfs, cand = run_both(spark, candidate, st.windowed_agg, "append", events_dir, tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=20, what="windowed aggregation (append)")
    assert_evicted(cand)


@pytest.mark.parametrize("build_df", [st.dedup, st.dedup_with_watermark],
                         ids=["no_watermark", "watermark"])
def test_drop_duplicates(spark, candidate, events_dir, tmp_path, build_df):
    hdfs, cand = run_both(spark, candidate, build_df, "append", events_dir, tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=30, what=f"dropDuplicates ({build_df.__name__})")
    assert len(cand.rows) < N_FILES * ROWS_PER_FILE, "nothing was deduplicated"
    if build_df is st.dedup_with_watermark:
        assert_evicted(cand)


def test_drop_duplicates_within_watermark(spark, candidate, events_dir, tmp_path):
    hdfs, cand = run_both(spark, candidate, st.dedup_within_watermark, "append", events_dir,
                          tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=30, what="dropDuplicatesWithinWatermark")
    assert len(cand.rows) < N_FILES * ROWS_PER_FILE, "nothing was deduplicated"
    assert_evicted(cand)


def test_apply_in_pandas_with_state(spark, candidate, events_dir, tmp_path):
    hdfs, cand = run_both(spark, candidate, st.pandas_running_count, "update", events_dir,
                          tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=30, what="applyInPandasWithState")
    # State carried across batches (rounds > 1) and was removed (n reset after >= 12).
    assert max(r[3] for r in cand.rows) > 1
    assert any(r[1] >= 12 for r in cand.rows)


def test_session_window(spark, candidate, events_dir, tmp_path):
    # Append only: Spark 4.3 refuses session windows in update mode
    # (STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION).
    hdfs, cand = run_both(spark, candidate, st.session_agg, "append", events_dir, tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=40, what="session window (append)")
    # Sessions merged several events (not one event per session).
    assert max(r[2] for r in cand.rows) > 1
    assert_evicted(cand)


def test_stream_stream_inner_join(spark, candidate, join_dirs, tmp_path):
    assert spark.conf.get("spark.sql.streaming.join.stateFormatVersion", "2") == "2"
    hdfs, cand = run_both(spark, candidate, st.inner_join, "append", join_dirs, tmp_path)
    st.assert_same_rows(hdfs, cand, min_rows=60, what="stream-stream inner join")
    # Left rows joined right rows of a later file: state survived across batches.
    assert any(st.file_of(r[5]) > st.file_of(r[2]) for r in cand.rows)
    assert_evicted(cand)
