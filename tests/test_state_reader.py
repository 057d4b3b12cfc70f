"""Spark's state reader (`spark.read.format("statestore")`) beyond `batchId` on ttlstate
checkpoints: `readChangeFeed` (`changeStartBatchId`/`changeEndBatchId`) and
`snapshotStartBatchId` + `snapshotPartitionId` (Spark's `SupportsFineGrainedReplay`,
DESIGN 58), compared with Spark's own RocksDB provider (changelog checkpointing on) run on
the same input; with TTL; and the refusals (a query in `checkpoint.mode=snapshot` has no
change feed; a version without a snapshot cannot be replayed from one).

The queries run once per module (fixture `ck`), side by side: an aggregation (update mode)
and a dropDuplicates with a watermark (its state evicts keys: the change feed has deletes),
each on ttlstate and on RocksDB, six batches each; ttlstate snapshots often (maintenance
every 200 ms, `minDeltasForSnapshot` 1), so that most versions have a snapshot to replay from.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re

import pytest

import streaming as st
import ttl_queries as tq
from streaming import SPARK_ROCKSDB, TTLSTATE

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
N_FILES = 6
PARTITIONS = [0, 1, 2, 3]
ROCKSDB_CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
OFTEN = {tq.MAINTENANCE_INTERVAL: "200ms", tq.MIN_DELTAS_FOR_SNAPSHOT: "1"}


@dataclasses.dataclass
class Checkpoints:
    root: pathlib.Path
    agg: pathlib.Path
    agg_rocksdb: pathlib.Path
    dedup: pathlib.Path
    dedup_rocksdb: pathlib.Path
    snapshot_mode: pathlib.Path


@pytest.fixture(scope="module")
def ck(_session_holder, candidate, tmp_path_factory) -> Checkpoints:
    if candidate != TTLSTATE:
        pytest.skip("reads ttlstate checkpoints")
    root = tmp_path_factory.mktemp("reader")
    st.write_files(root / "events", st.generate_events(N_FILES, 40, n_keys=10, seed=31))

    def run(provider, build_df, output_mode, name, confs):
        return dict(provider=provider, build_df=build_df, output_mode=output_mode, input_dir=root / "events",
                    checkpoint_dir=root / name, sink="foreach_batch", confs={**OFTEN, **confs})

    runs = [run(TTLSTATE, st.agg_by_key, "update", "agg", {}),
            run(SPARK_ROCKSDB, st.agg_by_key, "update", "agg-rocksdb", ROCKSDB_CHANGELOG),
            run(TTLSTATE, st.dedup_with_watermark, "append", "dedup", {}),
            run(SPARK_ROCKSDB, st.dedup_with_watermark, "append", "dedup-rocksdb", ROCKSDB_CHANGELOG),
            run(TTLSTATE, st.agg_by_key, "update", "snapshot-mode", {PREFIX + "checkpoint.mode": "snapshot"})]
    results = st.run_many(_session_holder.get(), runs, max_parallel=len(runs))
    for r in results:
        if isinstance(r, BaseException):
            raise r
    for r, spec in zip(results, runs):
        st.assert_provider_served(r, spec["provider"])
    st.assert_same_rows(results[1], results[0], min_rows=5, what="aggregation")
    st.assert_same_rows(results[3], results[2], min_rows=5, what="dropDuplicates")
    return Checkpoints(root, root / "agg", root / "agg-rocksdb", root / "dedup", root / "dedup-rocksdb",
                       root / "snapshot-mode")


def read_state(spark, checkpoint, *, ordered: bool = False, **options) -> list[tuple]:
    """The reader's rows, sorted (`ordered`: in the order Spark gives them)."""
    reader = spark.read.format("statestore")
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = [st.to_plain(r) for r in reader.load(str(checkpoint)).collect()]
    return rows if ordered else st.sort_rows(rows)


def change_feed(spark, checkpoint, start: int, end: int, ordered: bool = False) -> list[tuple]:
    """(batch_id, change_type, key, value, partition_id) rows, sorted (`ordered`: in each
    partition in the order of the changelogs, as Spark gives them)."""
    return read_state(spark, checkpoint, ordered=ordered, readChangeFeed="true", changeStartBatchId=start,
                      changeEndBatchId=end)


def snapshot_versions(checkpoint: pathlib.Path, partition: int, suffix: str) -> list[int]:
    """The versions with a snapshot file (`<v>.manifest`, RocksDB's `<v>.zip`) in a partition's store."""
    d = checkpoint / "state" / "0" / str(partition)
    return sorted(int(m.group(1)) for p in d.iterdir() if (m := re.match(r"^(\d+)(_[^.]*)?" + re.escape(suffix) + "$",
                                                                         p.name)))


def last_batch(checkpoint: pathlib.Path) -> int:
    """The last committed batch (a query with a watermark adds a no-data batch that evicts)."""
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


# ---------------------------------------------------------------------------------------
# (a) the change feed, as RocksDB's

@pytest.mark.slow
@pytest.mark.parametrize("query", ["agg", "dedup"])
def test_change_feed_gives_the_rocksdb_providers_rows(ck, spark, query):
    ours_ck, rocksdb_ck = getattr(ck, query), getattr(ck, query + "_rocksdb")
    last = last_batch(ours_ck)
    assert last == last_batch(rocksdb_ck) >= N_FILES - 1
    for start, end in [(0, last), (1, 3), (4, 4)]:
        rocksdb = change_feed(spark, rocksdb_ck, start, end)
        ours = change_feed(spark, ours_ck, start, end)
        assert rocksdb, (query, start, end)
        assert ours == rocksdb, (query, start, end)
        assert {r[0] for r in ours} <= set(range(start, end + 1))
    every = change_feed(spark, ours_ck, 0, last)
    kinds = {r[1] for r in every}
    assert "update" in kinds
    if query == "dedup":
        assert "delete" in kinds and all(r[3] is None for r in every if r[1] == "delete")
    # replaying the feed in its order gives the state a plain read gives
    state: dict = {}
    for batch, kind, key, value, part in change_feed(spark, ours_ck, 0, last, ordered=True):
        if kind == "delete":
            state.pop((part, key), None)
        else:
            state[(part, key)] = value
    assert st.sort_rows((k, v, p) for (p, k), v in state.items()) == read_state(spark, ours_ck)


# ---------------------------------------------------------------------------------------
# (b) replay from a chosen snapshot

@pytest.mark.slow
def test_snapshot_start_batch_id_reads_the_state_of_a_plain_read(ck, spark):
    last = last_batch(ck.agg)
    replayed_past_a_newer_snapshot = False
    for part in PARTITIONS:
        ours_snaps = [v for v in snapshot_versions(ck.agg, part, ".manifest") if v <= last + 1]
        assert ours_snaps, f"partition {part} of the aggregation has no snapshot"
        rocksdb_snaps = [v for v in snapshot_versions(ck.agg_rocksdb, part, ".zip") if v <= last + 1]
        for batch in sorted({ours_snaps[0] - 1, last}):
            plain = [r for r in read_state(spark, ck.agg, batchId=batch) if r[-1] == part]
            rocksdb = [r for r in read_state(spark, ck.agg_rocksdb, batchId=batch) if r[-1] == part]
            assert plain == rocksdb, (part, batch)
            for v in [v for v in ours_snaps if v <= batch + 1]:
                got = read_state(spark, ck.agg, snapshotStartBatchId=v - 1, snapshotPartitionId=part, batchId=batch)
                assert got == plain, (part, v, batch)
                replayed_past_a_newer_snapshot |= any(v < w <= batch + 1 for w in ours_snaps)
            for v in [v for v in rocksdb_snaps if v <= batch + 1][:1]:
                got = read_state(spark, ck.agg_rocksdb, snapshotStartBatchId=v - 1, snapshotPartitionId=part,
                                 batchId=batch)
                assert got == rocksdb, ("rocksdb", part, v, batch)
    assert replayed_past_a_newer_snapshot  # the base really was the chosen snapshot, not the newest
