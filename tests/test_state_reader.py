"""Spark's state reader (`spark.read.format("statestore")`) beyond `batchId` on ttlstate
checkpoints: `readChangeFeed` (`changeStartBatchId`/`changeEndBatchId`) and
`snapshotStartBatchId` + `snapshotPartitionId` (Spark's `SupportsFineGrainedReplay`,
docs/decisions/062-spark-state-reader.md), compared with Spark's own RocksDB provider (changelog
checkpointing on) run on
the same input; with TTL; and the refusals (a query in `checkpoint.mode=snapshot` has no
change feed; a version without a snapshot cannot be replayed from one).

The queries run once per module (fixture `ck`), side by side: an aggregation (update mode)
and a dropDuplicates with a watermark (its state evicts keys: the change feed has deletes),
each on ttlstate and on RocksDB, six batches each; ttlstate snapshots often (maintenance
every 200 ms, `minDeltasForSnapshot` 1), so that most versions have a snapshot to replay from.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import pathlib
import re
import shutil
import time

import pytest

import streaming as st
import ttl_queries as tq
from streaming import SPARK_ROCKSDB, TTLSTATE

PREFIX = "spark.sql.streaming.stateStore.ttlstate."
N_FILES = 6
PARTITIONS = [0, 1, 2, 3]
ROCKSDB_CHANGELOG = {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true"}
OFTEN = {tq.MAINTENANCE_INTERVAL: "200ms", tq.MIN_DELTAS_FOR_SNAPSHOT: "1"}
V2 = {"spark.sql.streaming.stateStore.checkpointFormatVersion": "2"}  # a checkpoint id per version
# TTL: a count per key with a 3-second TTL; the query pauses 4.5 s after batch 1, so what
# batches 0-1 wrote and batch 2 does not touch has expired by batch 2's clock
TTL_MS = 3000
TTL_PAUSE_AFTER = 1
TTL_BATCHES = [[("a", 0), ("b", 0), ("c", 0), ("d", 0), ("e", 0), ("f", 0)], [("a", 1), ("g", 1)],
               [("b", 2), ("h", 2)], [("b", 3), ("i", 3)]]


@dataclasses.dataclass
class Checkpoints:
    root: pathlib.Path
    agg: pathlib.Path
    agg_rocksdb: pathlib.Path
    dedup: pathlib.Path
    dedup_rocksdb: pathlib.Path
    snapshot_mode: pathlib.Path
    ttl: pathlib.Path
    ttl_run: st.RunResult
    agg_v2: pathlib.Path
    agg_v2_rocksdb: pathlib.Path


@pytest.fixture(scope="module")
def ck(_session_holder, candidate, tmp_path_factory):
    if candidate != TTLSTATE:
        pytest.skip("reads ttlstate checkpoints")
    st.restart_state_store_maintenance(_session_holder.get())  # OFTEN's interval applies to these runs
    root = tmp_path_factory.mktemp("reader")
    st.write_files(root / "events", st.generate_events(N_FILES, 40, n_keys=10, seed=31))

    tq.write_batches(root / "ttl-in", TTL_BATCHES)

    def run(provider, build_df, output_mode, name, confs, input_dir="events", **kw):
        return dict(provider=provider, build_df=build_df, output_mode=output_mode, input_dir=root / input_dir,
                    checkpoint_dir=root / name, sink="foreach_batch", confs={**OFTEN, **confs}, **kw)

    def snapshot_after(name, batches=(0, 2), timeout_s=60):
        """After those batches, wait until maintenance snapshotted the batch's version in every
        partition: each then has two snapshots to replay from, however loaded the machine."""
        def wait(batch_id):
            if batch_id in batches:
                tq.wait_for_snapshot(root / name, batch_id + 1, timeout_s)
        return wait

    runs = [run(TTLSTATE, st.agg_by_key, "update", "agg", {}, on_batch=snapshot_after("agg")),
            run(SPARK_ROCKSDB, st.agg_by_key, "update", "agg-rocksdb", ROCKSDB_CHANGELOG),
            run(TTLSTATE, st.dedup_with_watermark, "append", "dedup", {}),
            run(SPARK_ROCKSDB, st.dedup_with_watermark, "append", "dedup-rocksdb", ROCKSDB_CHANGELOG),
            run(TTLSTATE, st.agg_by_key, "update", "snapshot-mode", {PREFIX + "checkpoint.mode": "snapshot"}),
            run(TTLSTATE, tq.count_by_key, "update", "ttl", {PREFIX + "ttl": f"{TTL_MS}ms"}, "ttl-in",
                on_batch=lambda b: time.sleep(TTL_MS * 1.5 / 1000) if b == TTL_PAUSE_AFTER else None),
            run(TTLSTATE, st.agg_by_key, "update", "agg_v2", V2, on_batch=snapshot_after("agg_v2")),
            run(SPARK_ROCKSDB, st.agg_by_key, "update", "agg_v2-rocksdb", {**V2, **ROCKSDB_CHANGELOG})]
    results = st.run_many(_session_holder.get(), runs, max_parallel=len(runs))
    for r in results:
        if isinstance(r, BaseException):
            raise r
    for r, spec in zip(results, runs):
        st.assert_provider_served(r, spec["provider"])
    st.assert_same_rows(results[1], results[0], min_rows=5, what="aggregation")
    st.assert_same_rows(results[3], results[2], min_rows=5, what="dropDuplicates")
    yield Checkpoints(root, root / "agg", root / "agg-rocksdb", root / "dedup", root / "dedup-rocksdb",
                      root / "snapshot-mode", root / "ttl", results[5], root / "agg_v2", root / "agg_v2-rocksdb")
    st.restart_state_store_maintenance(_session_holder.get())  # later modules start it with their own interval


def read_state(spark, checkpoint, *, ordered: bool = False, **options) -> list[tuple]:
    """The reader's rows, sorted (`ordered`: in the order Spark gives them)."""
    reader = spark.read.format("statestore")
    for k, v in options.items():
        reader = reader.option(k, v)
    rows = [st.to_plain(r) for r in reader.load(str(checkpoint)).collect()]
    return rows if ordered else st.sort_rows(rows)


def plain_reads(spark, checkpoint):
    """`read_state(spark, checkpoint, batchId=b)` of each batch, read once: the checkpoint is
    stopped, so the rows of a batch are the same for every partition a test filters them by."""
    return functools.cache(lambda batch: read_state(spark, checkpoint, batchId=batch))


def replayed(feed: list[tuple]) -> list[tuple]:
    """The (key, value, partition) rows that applying a change feed in its order leaves, sorted."""
    state: dict = {}
    for _batch, kind, key, value, part in feed:
        if kind == "delete":
            state.pop((part, key), None)
        else:
            state[(part, key)] = value
    return st.sort_rows((k, v, p) for (p, k), v in state.items())


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


def batch_timestamps(checkpoint: pathlib.Path) -> dict[int, int]:
    """{batch: batchTimestampMs} from the offset log (the TTL clock of each batch)."""
    out = {}
    for p in (checkpoint / "offsets").iterdir():
        if p.name.isdigit():
            out[int(p.name)] = json.loads(p.read_text().splitlines()[1])["batchTimestampMs"]
    return out


def last_batch(checkpoint: pathlib.Path) -> int:
    """The last committed batch (a query with a watermark adds a no-data batch that evicts)."""
    return max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


# ---------------------------------------------------------------------------------------
# (a) the change feed, as RocksDB's

@pytest.mark.slow
@pytest.mark.parametrize("query", ["agg", "dedup", "agg_v2"])
def test_change_feed_gives_the_rocksdb_providers_rows(ck, spark, query):
    ours_ck, rocksdb_ck = getattr(ck, query), getattr(ck, query + "_rocksdb")
    last = last_batch(ours_ck)
    assert last == last_batch(rocksdb_ck) >= N_FILES - 1
    feeds = {}
    for start, end in [(0, last), (1, 3), (4, 4)]:
        rocksdb = change_feed(spark, rocksdb_ck, start, end)
        ours = feeds[start, end] = change_feed(spark, ours_ck, start, end)
        assert rocksdb, (query, start, end)
        assert ours == rocksdb, (query, start, end)
        assert {r[0] for r in ours} <= set(range(start, end + 1))
    every = feeds[0, last]  # the same read as change_feed(spark, ours_ck, 0, last)
    kinds = {r[1] for r in every}
    assert "update" in kinds
    if query == "dedup":
        assert "delete" in kinds and all(r[3] is None for r in every if r[1] == "delete")
    # replaying the feed in its order gives the state a plain read gives
    assert replayed(change_feed(spark, ours_ck, 0, last, ordered=True)) == read_state(spark, ours_ck)


# ---------------------------------------------------------------------------------------
# (b) replay from a chosen snapshot

@pytest.mark.slow
@pytest.mark.parametrize("query", ["agg", "agg_v2"])
def test_snapshot_start_batch_id_reads_the_state_of_a_plain_read(ck, spark, query):
    # Spark 4.3's RocksDB provider cannot read its own format-v2 checkpoint with `batchId`
    # (NumberFormatException on "<v>_<uuid>"): for v2 the reference is its v1 run, same input
    ours_ck, rocksdb_ck = getattr(ck, query), ck.agg_rocksdb
    last = last_batch(ours_ck)
    ours_plain, rocksdb_plain = plain_reads(spark, ours_ck), plain_reads(spark, rocksdb_ck)
    replayed_past_a_newer_snapshot = False
    for part in PARTITIONS:
        ours_snaps = [v for v in snapshot_versions(ours_ck, part, ".manifest") if v <= last + 1]
        assert ours_snaps, f"partition {part} of the aggregation has no snapshot"
        rocksdb_snaps = [v for v in snapshot_versions(rocksdb_ck, part, ".zip") if v <= last + 1]
        for batch in sorted({ours_snaps[0] - 1, last}):
            plain = [r for r in ours_plain(batch) if r[-1] == part]
            rocksdb = [r for r in rocksdb_plain(batch) if r[-1] == part]
            assert plain == rocksdb, (part, batch)
            for v in [v for v in ours_snaps if v <= batch + 1]:
                got = read_state(spark, ours_ck, snapshotStartBatchId=v - 1, snapshotPartitionId=part, batchId=batch)
                assert got == plain, (part, v, batch)
                replayed_past_a_newer_snapshot |= any(v < w <= batch + 1 for w in ours_snaps)
            for v in [v for v in rocksdb_snaps if v <= batch + 1][:1]:
                got = read_state(spark, rocksdb_ck, snapshotStartBatchId=v - 1, snapshotPartitionId=part,
                                 batchId=batch)
                assert got == rocksdb, ("rocksdb", part, v, batch)
    assert replayed_past_a_newer_snapshot  # the base really was the chosen snapshot, not the newest


# ---------------------------------------------------------------------------------------
# (c) with TTL

@pytest.mark.slow
def test_change_feed_and_replay_with_ttl(ck, spark):
    """With TTL the change feed is the changelogs' records: every put as Spark wrote it (the
    TTL timestamp removed), and a delete for each entry TTL cleanup removed, in the batch that
    removed it; an entry that expired but no cleanup reached has no record
    (docs/decisions/062-spark-state-reader.md)."""
    last = last_batch(ck.ttl)
    assert last == len(TTL_BATCHES) - 1
    feed = change_feed(spark, ck.ttl, 0, last, ordered=True)
    puts = {}
    for batch, kind, key, value, part in feed:
        if kind == "update":
            puts.setdefault(batch, []).append((key[0], value[0]))
    # every put is what the query output for that batch (update mode: the new counts)
    assert {b: sorted(rows) for b, rows in puts.items()} == {
        b: sorted(rows) for b, rows in ck.ttl_run.batches.items() if rows}
    # a count per key never deletes by itself: every delete is TTL's, of an entry whose last
    # write had expired at the clock of the batch that deletes it (batch timestamps from the
    # offset log: the clock is the batch's, whatever the machine's load)
    clock = batch_timestamps(ck.ttl)
    last_write: dict = {}
    deletes = []
    for batch, kind, key, value, part in feed:
        if kind == "delete":
            assert value is None
            assert key in last_write and clock[last_write[key]] + TTL_MS <= clock[batch], (key, batch, clock)
            deletes.append((batch, key[0]))
            del last_write[key]
        else:
            last_write[key] = batch
    # the pause after batch 1 expired everything batches 0-1 wrote by batch 2's clock
    assert clock[TTL_PAUSE_AFTER + 1] - clock[TTL_PAUSE_AFTER] >= TTL_MS
    assert deletes, feed
    # b expired and came back: its count restarted at 1 in batch 2
    assert ("b", 1) in puts[TTL_PAUSE_AFTER + 1]
    # replaying the feed gives every live entry of a plain read; what it has besides are
    # entries that expired but that no clean-up reached (a plain read hides them)
    plain = read_state(spark, ck.ttl)
    state = replayed(feed)
    assert set(plain) <= set(state)
    for key, value, part in set(state) - set(plain):
        assert clock[last_write[key]] + TTL_MS <= clock[last], (key, clock)
    # replay from each snapshot reads what a plain read of the batch reads
    ttl_plain = plain_reads(spark, ck.ttl)
    for part in PARTITIONS:
        for v in [v for v in snapshot_versions(ck.ttl, part, ".manifest") if v <= last + 1]:
            for batch in sorted({v - 1, last}):
                want = [r for r in ttl_plain(batch) if r[-1] == part]
                got = read_state(spark, ck.ttl, snapshotStartBatchId=v - 1, snapshotPartitionId=part, batchId=batch)
                assert got == want, (part, v, batch)


# ---------------------------------------------------------------------------------------
# (d) refusals

def _error_text(excinfo) -> str:
    return str(excinfo.value)


@pytest.mark.slow
def test_change_feed_of_a_snapshot_mode_query_is_refused_naming_the_conf(ck, spark):
    with pytest.raises(Exception) as e:
        change_feed(spark, ck.snapshot_mode, 0, 2)
    text = _error_text(e)
    assert "spark.sql.streaming.stateStore.ttlstate.checkpoint.mode=snapshot" in text, text[:3000]
    assert "spark.sql.streaming.stateStore.ttlstate.checkpoint.mode=changelog" in text, text[:3000]
    # a replay from an earlier snapshot needs changelogs too: refused the same way; from the
    # batch's own snapshot it reads what a plain read reads
    last = last_batch(ck.snapshot_mode)
    with pytest.raises(Exception) as e:
        read_state(spark, ck.snapshot_mode, snapshotStartBatchId=1, snapshotPartitionId=1, batchId=last)
    text = _error_text(e)
    assert f"Cannot replay version {last + 1}" in text and "checkpoint.mode=snapshot" in text, text[:3000]
    for batch in (1, last):
        want = [r for r in read_state(spark, ck.snapshot_mode, batchId=batch) if r[-1] == 1]
        assert want
        got = read_state(spark, ck.snapshot_mode, snapshotStartBatchId=batch, snapshotPartitionId=1, batchId=batch)
        assert got == want, batch


@pytest.mark.slow
def test_replay_from_a_version_without_snapshot_is_refused_naming_it(ck, spark, tmp_path):
    copy = tmp_path / "agg"
    shutil.copytree(ck.agg, copy)
    part = 2
    store = copy / "state" / "0" / str(part)
    version = snapshot_versions(copy, part, ".manifest")[-1]
    (store / f"{version}.manifest").unlink()
    with pytest.raises(Exception) as e:
        read_state(spark, copy, snapshotStartBatchId=version - 1, snapshotPartitionId=part,
                   batchId=last_batch(copy))
    text = _error_text(e)
    assert f"There is no snapshot of version {version}" in text, text[:3000]
    assert str(store / f"{version}.manifest") in text, text[:3000]
    # a plain read of the same batch still loads (from an older snapshot and the changelogs)
    assert read_state(spark, copy, batchId=last_batch(copy)) == read_state(spark, ck.agg, batchId=last_batch(copy))
