"""Every stateful operator ttlstate serves gives exactly the sink rows HDFS gives.

Each case runs one query twice on the same deterministic input (one file per micro-batch,
Trigger.AvailableNow, memory sink), once with HDFSBackedStateStoreProvider and once with
the provider under test, each on its own checkpoint, and compares the sorted sink rows.
The progress must show that each run really kept state in the provider it was given.

The queries of all selected cases run up front, several at a time (a module fixture);
each test then checks its own pair, and a failed query fails only its own test. The cases
marked `matrix` (aggregation, dropDuplicates, session window, join) are part of the smoke
subset `make test-matrix` runs on every Spark line.
"""

from __future__ import annotations

import pytest

import streaming as st
from streaming import HDFS

pytestmark = pytest.mark.slow

N_FILES = 6
ROWS_PER_FILE = 48

# case -> (build_df, output mode, input)
CASES = {
    "aggregation_update": (st.agg_by_key_bucket, "update", "events"),
    "aggregation_complete": (st.agg_by_key_bucket, "complete", "events"),
    "aggregation_append_watermark": (st.windowed_agg, "append", "events"),
    "drop_duplicates": (st.dedup, "append", "events"),
    "drop_duplicates_watermark": (st.dedup_with_watermark, "append", "events"),
    "drop_duplicates_within_watermark": (st.dedup_within_watermark, "append", "events"),
    "apply_in_pandas_with_state": (st.pandas_running_count, "update", "events"),
    # Append only: Spark 4.3 refuses session windows in update mode
    # (STREAMING_OUTPUT_MODE.UNSUPPORTED_OPERATION).
    "session_window": (st.session_agg, "append", "events"),
    "inner_join": (st.inner_join, "append", "join"),
}

# case -> rows the HDFS run must exceed (an empty or tiny result cannot pass)
MIN_ROWS = {"aggregation_update": 80, "aggregation_complete": 25,
            "aggregation_append_watermark": 20, "drop_duplicates": 40,
            "drop_duplicates_watermark": 40, "drop_duplicates_within_watermark": 40,
            "apply_in_pandas_with_state": 30, "session_window": 40, "inner_join": 100}


def _selected_cases(request) -> list[str]:
    cases = []
    for item in request.session.items:
        if item.module is request.module and hasattr(item, "callspec"):
            case = item.callspec.params.get("case")
            if case in CASES and case not in cases:
                cases.append(case)
    return cases


def write_inputs(root) -> dict:
    """The deterministic input files of the cases, under `root`: {input name: dir(s)}."""
    inputs = {"events": root / "events", "join": [root / "join-left", root / "join-right"]}
    st.write_files(inputs["events"], st.generate_events(N_FILES, ROWS_PER_FILE, n_keys=10,
                                                        seed=11))
    st.write_files(inputs["join"][0],
                   st.generate_events(N_FILES, 20, n_keys=4, seed=21, active_fraction=0.8))
    st.write_files(inputs["join"][1],
                   st.generate_events(N_FILES, 20, n_keys=4, seed=22, active_fraction=0.8))
    return inputs


@pytest.fixture(scope="module")
def outcomes(request, _session_holder, candidate, tmp_path_factory):
    """case -> (HDFS result or exception, candidate result or exception)."""
    root = tmp_path_factory.mktemp("equivalence")
    inputs = write_inputs(root)
    cases = _selected_cases(request)
    runs = []
    for case in cases:
        build_df, mode, inp = CASES[case]
        for tag, provider in (("hdfs", HDFS), ("candidate", candidate)):
            runs.append(dict(provider=provider, build_df=build_df, output_mode=mode,
                             input_dir=inputs[inp], checkpoint_dir=root / f"ck-{case}-{tag}"))
    spark = _session_holder.get()
    assert spark.conf.get("spark.sql.streaming.join.stateFormatVersion", "2") == "2"
    results = st.run_many(spark, runs, max_parallel=6)
    return {case: (results[2 * i], results[2 * i + 1]) for i, case in enumerate(cases)}


def pair(outcomes, case, candidate):
    hdfs, cand = outcomes[case]
    for r in (hdfs, cand):
        if isinstance(r, BaseException):
            raise r
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


@pytest.mark.parametrize("case", [pytest.param("aggregation_update", marks=pytest.mark.matrix), "aggregation_complete"])
def test_aggregation(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)


@pytest.mark.parametrize("case", ["aggregation_append_watermark"])
def test_aggregation_append_with_watermark(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)
    assert_evicted(cand)


@pytest.mark.parametrize("case", [pytest.param("drop_duplicates", marks=pytest.mark.matrix), "drop_duplicates_watermark"])
def test_drop_duplicates(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)
    assert len(cand.rows) < N_FILES * ROWS_PER_FILE, "nothing was deduplicated"
    if case.endswith("watermark"):
        assert_evicted(cand)


@pytest.mark.parametrize("case", ["drop_duplicates_within_watermark"])
def test_drop_duplicates_within_watermark(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)
    assert len(cand.rows) < N_FILES * ROWS_PER_FILE, "nothing was deduplicated"
    assert_evicted(cand)


@pytest.mark.parametrize("case", ["apply_in_pandas_with_state"])
def test_apply_in_pandas_with_state(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)
    # State carried across batches (rounds > 1) and was removed (n reached 12).
    assert max(r[3] for r in cand.rows) > 1
    assert any(r[1] >= 12 for r in cand.rows)
    assert_evicted(cand)


@pytest.mark.parametrize("case", [pytest.param("session_window", marks=pytest.mark.matrix)])
def test_session_window(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)
    assert max(r[2] for r in cand.rows) > 1, "no session merged several events"
    assert_evicted(cand)


@pytest.mark.parametrize("case", [pytest.param("inner_join", marks=pytest.mark.matrix)])
def test_stream_stream_inner_join(outcomes, candidate, case):
    hdfs, cand = pair(outcomes, case, candidate)
    st.assert_same_rows(hdfs, cand, min_rows=MIN_ROWS[case], what=case)
    # Left rows joined right rows of a later minute: state survived across batches.
    assert any(st.file_of(r[5]) > st.file_of(r[2]) for r in cand.rows)
    assert_evicted(cand)
