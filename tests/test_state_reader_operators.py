"""Spark's state reader change feed (`readChangeFeed`, docs/decisions/062-spark-state-reader.md) on
the operators whose state
is more than one row per key: a stream-stream join (four stores), session windows (a prefix
key: grouping key + session start) and applyInPandasWithState. Each query runs on ttlstate and
on Spark's RocksDB provider with changelog checkpointing, on the same input; the change feed
of every batch range must be the same rows (batch, change type, key, value, partition).

A join's change feed is read store by store (`storeName`); Spark refuses `joinSide` together
with `readChangeFeed` for every provider (`STDS_CONFLICT_OPTIONS`; tested: the same refusal
on both).
"""

from __future__ import annotations

import dataclasses
import pathlib

import pytest

import streaming as st
from streaming import SPARK_ROCKSDB, TTLSTATE
from test_state_reader import ROCKSDB_CHANGELOG, last_batch, read_state, replayed

pytestmark = pytest.mark.slow

N_FILES = 6
JOIN_STORES = ("left-keyToNumValues", "left-keyWithIndexToValue",
               "right-keyToNumValues", "right-keyWithIndexToValue")
QUERIES = {  # name -> (build_df, output mode, input)
    "join": (st.inner_join, "append", "join"),
    "session": (st.session_agg, "append", "events"),
    "pandas": (st.pandas_running_count, "update", "events"),
}


@dataclasses.dataclass
class Pair:
    ours: pathlib.Path
    rocksdb: pathlib.Path


@pytest.fixture(scope="module")
def ck(_session_holder, candidate, tmp_path_factory) -> dict[str, Pair]:
    if candidate != TTLSTATE:
        pytest.skip("reads ttlstate checkpoints")
    root = tmp_path_factory.mktemp("reader-ops")
    inputs = {"events": root / "events", "join": [root / "join-left", root / "join-right"]}
    st.write_files(inputs["events"], st.generate_events(N_FILES, 40, n_keys=10, seed=41))
    st.write_files(inputs["join"][0], st.generate_events(N_FILES, 20, n_keys=4, seed=42, active_fraction=0.8))
    st.write_files(inputs["join"][1], st.generate_events(N_FILES, 20, n_keys=4, seed=43, active_fraction=0.8))
    runs = []
    for name, (build_df, mode, inp) in QUERIES.items():
        for provider, tag, confs in ((TTLSTATE, "ours", {}), (SPARK_ROCKSDB, "rocksdb", ROCKSDB_CHANGELOG)):
            runs.append(dict(provider=provider, build_df=build_df, output_mode=mode, input_dir=inputs[inp],
                             checkpoint_dir=root / f"{name}-{tag}", sink="foreach_batch", confs=confs))
    results = st.run_many(_session_holder.get(), runs, max_parallel=3)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    for r, spec in zip(results, runs):
        st.assert_provider_served(r, spec["provider"])
    for i, name in enumerate(QUERIES):
        st.assert_same_rows(results[2 * i + 1], results[2 * i], min_rows=5, what=name)
    return {name: Pair(root / f"{name}-ours", root / f"{name}-rocksdb") for name in QUERIES}


def _ranges(last: int) -> list[tuple[int, int]]:
    return [(0, last), (1, 3), (last, last)]


def _assert_same_feed(spark, pair: Pair, what: str, **options) -> list[tuple]:
    """The change feed of every range, equal on both providers; returns the whole feed (ours)."""
    last = last_batch(pair.ours)
    assert last == last_batch(pair.rocksdb) >= N_FILES - 1, what
    for start, end in _ranges(last):
        rocksdb = read_state(spark, pair.rocksdb, readChangeFeed="true", changeStartBatchId=start,
                             changeEndBatchId=end, **options)
        ours = read_state(spark, pair.ours, readChangeFeed="true", changeStartBatchId=start,
                          changeEndBatchId=end, **options)
        if start == 0:
            assert rocksdb, (what, start, end)
        assert ours == rocksdb, (what, start, end, [r for r in ours if r not in rocksdb][:5],
                                 [r for r in rocksdb if r not in ours][:5])
        assert {r[0] for r in ours} <= set(range(start, end + 1)), (what, start, end)
    return read_state(spark, pair.ours, ordered=True, readChangeFeed="true", changeStartBatchId=0,
                      changeEndBatchId=last, **options)


def _replays_to_the_state(spark, pair: Pair, feed: list[tuple], **options):
    """Applying the feed in its order gives what a plain read of the last batch gives."""
    assert replayed(feed) == read_state(spark, pair.ours, **options)


@pytest.mark.parametrize("store", JOIN_STORES)
def test_join_change_feed_of_each_store_is_the_rocksdb_providers(ck, spark, store):
    feed = _assert_same_feed(spark, ck["join"], f"join {store}", storeName=store)
    kinds = {r[1] for r in feed}
    assert "update" in kinds, (store, kinds)
    if store.endswith("keyWithIndexToValue"):  # watermarks evict rows (a key's count only drops)
        assert "delete" in kinds, (store, kinds)
    _replays_to_the_state(spark, ck["join"], feed, storeName=store)


def test_join_change_feed_by_join_side_is_refused_as_for_rocksdb(ck, spark):
    errors = {}
    for tag in ("ours", "rocksdb"):
        with pytest.raises(Exception) as e:
            change_feed_side = read_state(spark, getattr(ck["join"], tag), readChangeFeed="true",
                                          changeStartBatchId=0, joinSide="left")
            pytest.fail(f"{tag}: joinSide with readChangeFeed gave {len(change_feed_side)} rows")
        errors[tag] = str(e.value).splitlines()[0]
    assert errors["ours"] == errors["rocksdb"], errors
    assert "STDS_CONFLICT_OPTIONS" in errors["ours"], errors
    assert "joinSide" in errors["ours"] and "readChangeFeed" in errors["ours"], errors


def test_session_window_change_feed_is_the_rocksdb_providers(ck, spark):
    feed = _assert_same_feed(spark, ck["session"], "session window")
    kinds = {r[1] for r in feed}
    assert "update" in kinds and "delete" in kinds, kinds  # sessions merge and are evicted
    _replays_to_the_state(spark, ck["session"], feed)


def test_apply_in_pandas_with_state_change_feed_is_the_rocksdb_providers(ck, spark):
    feed = _assert_same_feed(spark, ck["pandas"], "applyInPandasWithState")
    kinds = {r[1] for r in feed}
    assert "update" in kinds and "delete" in kinds, kinds  # the state is removed at n >= 12
    _replays_to_the_state(spark, ck["pandas"], feed)
