"""State TTL in real streaming queries (Spark local mode, the ttlstate provider).

Every case runs the same query on the same input with different TTL settings, side by
side, each on its own checkpoint, and compares the sink rows of every micro-batch with
(a) the rows written out here by hand and (b) a reference model (`ttl_queries.model_*`)
evaluated on the batch timestamps the run really had (read back from its offset log). The
model is Flink's TTL rule on the batch clock: an entry written (or, with OnReadAndWrite,
read) in the batch with timestamp T is expired in the batch with timestamp N iff
T + ttl <= N.

A TTL of `1` (1 ms) expires everything written in earlier batches, deterministically and
without waiting. Cases that need an entry to live across some batches and not others use
a TTL of seconds and let the sink wait, after a batch, until a set time past that batch's
timestamp (the next batch starts, and takes its timestamp, only then); they check on the
recorded timestamps that the gaps were what they need. Those cases run side by side in
one module fixture (`timed_runs`).

The cleanup cases that need Spark's state-store maintenance (compaction filter, full
snapshot) run in their own Python process, started when this module starts and running
while the other tests run: Spark fixes the maintenance interval per JVM when maintenance
first starts, so the shared session cannot get a 1 s interval.
"""

from __future__ import annotations

import uuid

import pytest

import ttl_queries as tq
from streaming import TTLSTATE
from ttl_queries import NEVER, ON_CREATE, ON_READ, RETURN

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _ttlstate_only(candidate):
    if candidate != TTLSTATE:
        pytest.skip("state TTL is a ttlstate feature; other providers ignore its confs")


def variant_specs(tmp_path, query: str, sources, variants: dict[str, dict],
                  pace: dict[int, float] | None = None) -> list[tq.QuerySpec]:
    """One QuerySpec per variant (name -> TTL confs) of `query`, all on the same input."""
    inputs = [str(tq.write_batches(tmp_path / f"in-{query}-{i}", batches))
              for i, batches in enumerate(sources)]
    return [tq.QuerySpec(name=f"ttl_{name}_{uuid.uuid4().hex[:8]}", query=query,
                         inputs=inputs, checkpoint=str(tmp_path / f"ck-{name}"),
                         confs=confs, pace=dict(pace or {}))
            for name, confs in variants.items()]


def checked(name: str, o: tq.Outcome, sources) -> tq.Outcome:
    """The outcome of a query that ran without error, one file of each source per batch."""
    o.check()
    expected_input = {b: sum(len(s[b]) for s in sources) for b in range(len(sources[0]))}
    assert o.input_rows() == expected_input, (
        f"{name}: batches did not read one file each: {o.input_rows()}")
    return o


def run_variants(spark, tmp_path, query: str, sources, variants: dict[str, dict],
                 pace: dict[int, float] | None = None) -> dict[str, tq.Outcome]:
    """Runs `query` once per variant (name -> TTL confs), side by side, on the same input."""
    specs = variant_specs(tmp_path, query, sources, variants, pace)
    outcomes = tq.run_side_by_side(spark, specs)
    return {name: checked(name, o, sources) for name, o in zip(variants, outcomes)}


def timestamps(outcome: tq.Outcome, n_batches: int) -> dict[int, int]:
    ts = outcome.timestamps()
    assert sorted(ts) == list(range(n_batches)), f"{outcome.name}: offset log {ts}"
    assert all(ts[b] < ts[b + 1] for b in range(n_batches - 1)), f"not increasing: {ts}"
    return ts


def gaps(ts: dict[int, int]) -> list[int]:
    return [ts[b + 1] - ts[b] for b in range(len(ts) - 1)]


# ---------------------------------------------------------------------------------------
# 1 + 9. dropDuplicates forgets a key after its TTL (TTL conf from the Python builder)

DEDUP_BATCHES = [
    [("a", 0), ("b", 0), ("c", 0)],
    [("a", 1), ("d", 1)],
    [("a", 2), ("b", 2), ("d", 2)],
]


def test_drop_duplicates_forgets_a_key_after_its_ttl(spark, tmp_path):
    from ttlstate.ttl.config import TtlConfig

    builder_conf = TtlConfig.new_builder("1").build().to_conf()
    assert builder_conf[tq.key("ttl")] == "1"
    runs = run_variants(spark, tmp_path, "dedup_key", [DEDUP_BATCHES],
                        {"off": {}, "ttl": builder_conf})
    off, on = runs["off"], runs["ttl"]

    # Without TTL Spark never forgets a key: each is emitted once.
    assert off.batches == {0: [("a", 0), ("b", 0), ("c", 0)], 1: [("d", 1)], 2: []}
    assert off.rows_total() == {0: 3, 1: 4, 2: 4}
    # With a 1 ms TTL every key of an earlier batch is forgotten: emitted again.
    assert on.batches == {0: [("a", 0), ("b", 0), ("c", 0)], 1: [("a", 1), ("d", 1)],
                          2: [("a", 2), ("b", 2), ("d", 2)]}
    expected, live, _ = tq.model_dedup_key(DEDUP_BATCHES, timestamps(on, 3), ttl=1)
    assert on.batches == expected
    # numRowsTotal does not count expired entries (NeverReturnExpired, the default).
    assert on.rows_total() == live == {0: 3, 1: 2, 2: 3}
    # The TTL in force is reported; no TTL without the conf.
    assert on.metric_sum("ttlstateTtlMs") > 0
    assert off.metric_sum("ttlstateTtlMs") == 0


# ---------------------------------------------------------------------------------------
# 2. A count aggregation restarts a key's count after expiry

COUNT_BATCHES = [
    [("a", 0), ("a", 0), ("b", 0)],
    [("a", 1), ("c", 1)],
    [("a", 2), ("b", 2), ("b", 2), ("b", 2)],
]


@pytest.mark.matrix  # the smoke subset of `make test-matrix`
def test_count_aggregation_restarts_a_key_after_expiry(spark, tmp_path):
    runs = run_variants(spark, tmp_path, "count_by_key", [COUNT_BATCHES],
                        {"off": {}, "ttl": tq.ttl_conf(1)})
    off, on = runs["off"], runs["ttl"]
    assert off.batches == {0: [("a", 2), ("b", 1)], 1: [("a", 3), ("c", 1)],
                           2: [("a", 4), ("b", 4)]}
    assert on.batches == {0: [("a", 2), ("b", 1)], 1: [("a", 1), ("c", 1)],
                          2: [("a", 1), ("b", 3)]}
    expected, live, _ = tq.model_count_by_key(COUNT_BATCHES, timestamps(on, 3), ttl=1)
    assert on.batches == expected
    assert on.rows_total() == live == {0: 2, 1: 2, 2: 2}
    assert off.rows_total() == {0: 2, 1: 3, 2: 3}


# ---------------------------------------------------------------------------------------
# 3. A stream-stream join no longer matches a buffered row after expiry

# Each key at most once per side. a: left in 0, right in 1; b: right in 0, left in 1;
# c: both in 0; d: left in 1, right in 2; zl*/zr*: never match (every file has rows).
JOIN_LEFT = [[("a", 10), ("c", 11)], [("b", 12), ("d", 13)], [("zl2", 14)]]
JOIN_RIGHT = [[("b", 20), ("c", 21)], [("a", 22), ("zr1", 23)], [("d", 24)]]


def test_join_no_longer_matches_a_buffered_row_after_expiry(spark, tmp_path):
    runs = run_variants(spark, tmp_path, "join_by_key", [JOIN_LEFT, JOIN_RIGHT],
                        {"off": {}, "ttl": tq.ttl_conf(1)})
    off, on = runs["off"], runs["ttl"]
    # Without TTL the buffered rows of both sides match later rows of the other side.
    assert off.batches == {0: [("c", 11, 21)], 1: [("a", 10, 22), ("b", 12, 20)],
                           2: [("d", 13, 24)]}
    # With a 1 ms TTL only rows of the same batch meet.
    assert on.batches == {0: [("c", 11, 21)], 1: [], 2: []}
    assert on.batches == tq.model_join_by_key(JOIN_LEFT, JOIN_RIGHT, timestamps(on, 3),
                                              left_ttl=1, right_ttl=1)
    assert off.batches == tq.model_join_by_key(JOIN_LEFT, JOIN_RIGHT, timestamps(off, 3))


# Key a is buffered twice on the left: in batch 1 and, 5.5 s later, in batch 2 (TTL 10 s).
# Its right row comes 5.5 s after that: the first left row is expired, the second is not. Spark
# keeps a key's buffered rows as keyToNumValues[a] = 2 (rewritten in batch 2) and
# keyWithIndexToValue[a, 0] (batch 1), [a, 1] (batch 2): the count is live while entry 0
# is expired, and the join must still give exactly the live row (ttlstate has Spark skip
# the expired entry: it needs spark.sql.streaming.stateStore.skipNullsForStreamStreamJoins
# .enabled, which `ttlstate.configure`, used by the session fixture, turns on). Batch 0 only
# warms the query up (a first batch can take seconds).
TIMED_TTL_MS = 10_000
TIMED_PACE_S = 5.5  # < TTL, and two of them > TTL: a batch may take up to ~9 s
MULTI_LEFT = [[("zl0", 1)], [("a", 10)], [("a", 11)], [("zl3", 12)]]
MULTI_RIGHT = [[("zr0", 2)], [("zr1", 20)], [("zr2", 21)], [("a", 22)]]


def test_join_expires_each_buffered_row_of_a_key_on_its_own(timed_runs):
    off, on = timed_runs["multi_off"].check(), timed_runs["multi_ttl"].check()
    ts = timestamps(on, 4)
    assert all(g < TIMED_TTL_MS for g in gaps(ts)[1:]) and ts[3] - ts[1] >= TIMED_TTL_MS, (
        f"gaps {gaps(ts)} ms: the case needs gaps 1-2 and 2-3 < {TIMED_TTL_MS} ms, "
        "their sum >= it")
    assert off.batches == {0: [], 1: [], 2: [], 3: [("a", 10, 22), ("a", 11, 22)]}
    assert on.batches == {0: [], 1: [], 2: [], 3: [("a", 11, 22)]}
    assert on.batches == tq.model_join_by_key(MULTI_LEFT, MULTI_RIGHT, ts,
                                              left_ttl=TIMED_TTL_MS, right_ttl=TIMED_TTL_MS)


# ---------------------------------------------------------------------------------------
# 4. OnReadAndWrite keeps a key alive that is only read

# StreamingDeduplicateExec only calls store.get(key) for a key it has seen and puts a key
# only when get returned null, so a key seen again is read, never rewritten. k is seen in
# batches 1-4, 5.5 s apart (TTL 10 s): OnReadAndWrite refreshes it on every read and keeps
# it; OnCreateAndWrite lets its first write expire (batch 3 is 11 s+ after batch 1) and
# emits it again. j is seen in batches 1 and 4 only: it expires under both. Batch 0 only
# warms the query up.
READ_BATCHES = [[("w", 0)], [("k", 1), ("j", 1), ("u", 1)], [("k", 2)], [("k", 3)],
                [("k", 4), ("j", 4)]]


@pytest.fixture(scope="module")
def timed_runs(_session_holder, candidate, tmp_path_factory):
    """The cases that need gaps between batches of about TIMED_PACE_S, run side by side."""
    if candidate != TTLSTATE:
        pytest.skip("state TTL is a ttlstate feature")
    root = tmp_path_factory.mktemp("ttl-timed")
    ttl = tq.ttl_conf(TIMED_TTL_MS)
    pace = {b: TIMED_PACE_S for b in (1, 2, 3)}
    groups = [  # (query, sources, variants)
        ("dedup_key", [READ_BATCHES],
         {"create": tq.ttl_conf(TIMED_TTL_MS, updateType=ON_CREATE),
          "read": tq.ttl_conf(TIMED_TTL_MS, updateType=ON_READ)}),
        ("join_by_key", [MULTI_LEFT, MULTI_RIGHT], {"multi_off": {}, "multi_ttl": ttl}),
    ]
    runs = [(name, spec, sources) for query, sources, variants in groups
            for name, spec in zip(variants, variant_specs(root, query, sources, variants, pace))]
    outcomes = tq.run_side_by_side(_session_holder.get(), [spec for _, spec, _ in runs])
    # a failed query fails only the test that uses it
    return {name: o if o.error else checked(name, o, sources)
            for (name, _, sources), o in zip(runs, outcomes)}


def test_on_read_and_write_keeps_a_key_alive_that_is_only_read(timed_runs):
    create, read = timed_runs["create"].check(), timed_runs["read"].check()
    ts_c, ts_r = timestamps(create, 5), timestamps(read, 5)
    # The timing this case needs (the pace makes it; a batch slower than ~9 s breaks it).
    for name, ts in (("create", ts_c), ("read", ts_r)):
        assert all(g < TIMED_TTL_MS for g in gaps(ts)[1:]), (
            f"{name}: a gap between batches 1-4 reached the TTL, the case cannot show "
            f"anything: gaps {gaps(ts)} ms, TTL {TIMED_TTL_MS} ms")
        assert ts[3] - ts[1] >= TIMED_TTL_MS, f"{name}: gaps {gaps(ts)} too short"

    assert create.batches == {0: [("w", 0)], 1: [("j", 1), ("k", 1), ("u", 1)], 2: [],
                              3: [("k", 3)], 4: [("j", 4)]}
    assert read.batches == {0: [("w", 0)], 1: [("j", 1), ("k", 1), ("u", 1)], 2: [], 3: [],
                            4: [("j", 4)]}
    exp_c, live_c, _ = tq.model_dedup_key(READ_BATCHES, ts_c, ttl=TIMED_TTL_MS, update=ON_CREATE)
    exp_r, live_r, _ = tq.model_dedup_key(READ_BATCHES, ts_r, ttl=TIMED_TTL_MS, update=ON_READ)
    assert create.batches == exp_c and read.batches == exp_r
    assert create.rows_total() == live_c
    assert read.rows_total() == live_r


# ---------------------------------------------------------------------------------------
# 5. ReturnExpiredIfNotCleanedUp vs NeverReturnExpired

# TTL 1 ms and no background cleanup: only a read removes an expired entry. a is read in
# every batch; m in batches 0 and 2. ReturnExpiredIfNotCleanedUp returns an expired entry
# once (dedup drops the row) and removes it, so the next batch emits a; m, not read in
# batch 1, is still there in batch 2 and returned. NeverReturnExpired never returns it.
VIS_BATCHES = [[("a", 0), ("m", 0)], [("a", 1)], [("a", 2), ("m", 2)], [("a", 3)]]
NO_BACKGROUND = {"cleanup_inBackground": "false"}


def test_return_expired_if_not_cleaned_up_vs_never_return_expired(spark, tmp_path):
    runs = run_variants(
        spark, tmp_path, "dedup_key", [VIS_BATCHES],
        {"never": tq.ttl_conf(1, stateVisibility=NEVER, **NO_BACKGROUND),
         "return": tq.ttl_conf(1, stateVisibility=RETURN, **NO_BACKGROUND)})
    never, ret = runs["never"], runs["return"]
    assert never.batches == {0: [("a", 0), ("m", 0)], 1: [("a", 1)], 2: [("a", 2), ("m", 2)],
                             3: [("a", 3)]}
    assert ret.batches == {0: [("a", 0), ("m", 0)], 1: [], 2: [("a", 2)], 3: []}
    exp_n, live_n, model_n = tq.model_dedup_key(VIS_BATCHES, timestamps(never, 4), ttl=1,
                                                visibility=NEVER)
    exp_r, _, _ = tq.model_dedup_key(VIS_BATCHES, timestamps(ret, 4), ttl=1, visibility=RETURN)
    assert never.batches == exp_n and ret.batches == exp_r
    assert never.rows_total() == live_n
    # 7 (on read). Every expired entry a read found was removed and counted, and only
    # those (no other cleanup runs): a in batches 1, 2, 3 and m in batch 2.
    assert never.metric_sum("ttlstateExpiredOnRead") == model_n.expired_on_read == 4
    assert never.metric_sum("ttlstateExpiredIncremental") == 0


# ---------------------------------------------------------------------------------------
# 6. Per-operator and per-store overrides

def test_per_store_overrides_give_each_join_side_its_own_ttl(spark, tmp_path):
    from ttlstate.ttl.config import TtlConfig

    # operator 0 (the join) gets a 1 ms TTL, its right stores none: store beats operator.
    left_only = TtlConfig.new_builder("1").build().to_conf(operator=0)
    for store in ("right-keyToNumValues", "right-keyWithIndexToValue"):
        left_only[tq.key("ttl", 0, store)] = "0"
    # a global 1 ms TTL, the left stores none: store beats global.
    right_only = tq.ttl_conf(1)
    for store in ("left-keyToNumValues", "left-keyWithIndexToValue"):
        right_only[tq.key("ttl", 0, store)] = "0"
    runs = run_variants(spark, tmp_path, "join_by_key", [JOIN_LEFT, JOIN_RIGHT],
                        {"left_only": left_only, "right_only": right_only})
    lo, ro = runs["left_only"], runs["right_only"]
    assert tq.operator_ids(lo.checkpoint) == {"symmetricHashJoin": 0}
    # Left rows expire: a (left 0, right 1) and d (left 1, right 2) no longer match;
    # b (right 0, left 1) still does.
    assert lo.batches == {0: [("c", 11, 21)], 1: [("b", 12, 20)], 2: []}
    assert lo.batches == tq.model_join_by_key(JOIN_LEFT, JOIN_RIGHT, timestamps(lo, 3),
                                              left_ttl=1)
    # Right rows expire: b no longer matches; a and d do.
    assert ro.batches == {0: [("c", 11, 21)], 1: [("a", 10, 22)], 2: [("d", 13, 24)]}
    assert ro.batches == tq.model_join_by_key(JOIN_LEFT, JOIN_RIGHT, timestamps(ro, 3),
                                              right_ttl=1)


# dedupe (key, value), then count per key. k1 repeats (k1, 1); k2 gets new values.
TWO_OP_BATCHES = [[("k1", 1), ("k2", 5)], [("k1", 1), ("k2", 6)], [("k1", 1), ("k2", 5)]]


def test_per_operator_overrides_apply_to_their_operator_only(spark, tmp_path):
    # Operator ids in a query are given top-down from the sink: the aggregation
    # (stateStoreSave) is 0, the deduplication below it is 1 (checked on the checkpoint).
    agg_id, dedup_id = 0, 1
    runs = run_variants(spark, tmp_path, "dedup_then_count", [TWO_OP_BATCHES],
                        {"off": {},
                         "dedup": tq.ttl_conf(1, operator=dedup_id),
                         "agg": tq.ttl_conf(1, operator=agg_id),
                         # global TTL, switched off for the aggregation
                         "global_but_agg": {**tq.ttl_conf(1), **tq.ttl_conf(0, operator=agg_id)}})
    for o in runs.values():
        assert tq.operator_ids(o.checkpoint) == {"stateStoreSave": agg_id, "dedupe": dedup_id}
    off, dedup, agg, gba = runs["off"], runs["dedup"], runs["agg"], runs["global_but_agg"]
    assert off.batches == {0: [("k1", 1), ("k2", 1)], 1: [("k2", 2)], 2: []}
    # Only the deduplication forgets: repeated pairs pass again and the counts go on.
    assert dedup.batches == {0: [("k1", 1), ("k2", 1)], 1: [("k1", 2), ("k2", 2)],
                             2: [("k1", 3), ("k2", 3)]}
    assert gba.batches == dedup.batches
    # Only the aggregation forgets: repeated pairs stay dropped, counts restart.
    assert agg.batches == {0: [("k1", 1), ("k2", 1)], 1: [("k2", 1)], 2: []}
    for o, d_ttl, a_ttl in ((dedup, 1, None), (agg, None, 1), (gba, 1, None)):
        assert o.batches == tq.model_dedup_then_count(
            TWO_OP_BATCHES, timestamps(o, 3), dedup_ttl=d_ttl, count_ttl=a_ttl)
        # The TTL in force, per operator.
        assert (o.metric_sum("ttlstateTtlMs", "dedupe") > 0) == (d_ttl is not None)
        assert (o.metric_sum("ttlstateTtlMs", "stateStoreSave") > 0) == (a_ttl is not None)


# ---------------------------------------------------------------------------------------
# 7. Each cleanup strategy shrinks the state

OLD_KEYS = [(f"o{i:02d}", 0) for i in range(40)]
NEW_KEYS = [(f"n{i:02d}", 1) for i in range(60)]


def test_incremental_cleanup_removes_entries_that_are_never_read_again(spark, tmp_path):
    """Batch 0 writes 40 keys, batch 1 60 other keys: the old ones are never read again, so
    only the incremental cleanup (a cursor over the store, `size` entries per state access)
    can remove them. ReturnExpiredIfNotCleanedUp makes numRowsTotal count what is still
    stored: it drops to 60 only if the entries were really removed."""
    batches = [OLD_KEYS, NEW_KEYS]
    common = dict(stateVisibility=RETURN, cleanup_compactionFilter_enabled="false")
    runs = run_variants(spark, tmp_path, "dedup_key", [batches],
                        {"incremental": tq.ttl_conf(1, cleanup_incremental_size="100", **common),
                         "none": tq.ttl_conf(1, **NO_BACKGROUND, **common)})
    inc, none = runs["incremental"], runs["none"]
    every_partition_gets_new_keys(spark, NEW_KEYS)
    for o in (inc, none):
        assert o.batches == {0: sorted_rows(OLD_KEYS), 1: sorted_rows(NEW_KEYS)}
    # Without background cleanup the 40 expired entries stay.
    assert none.rows_total() == {0: 40, 1: 100}
    assert none.metric_sum("ttlstateExpiredIncremental") == 0
    # With it, the cursor (100 entries per access, every store is accessed in batch 1)
    # removes all of them.
    assert inc.metric_sum("ttlstateExpiredIncremental") == 40
    assert inc.rows_total() == {0: 40, 1: 60}
    assert inc.metric_sum("ttlstateExpiredOnRead") == 0


def sorted_rows(batch):
    return sorted(batch, key=repr)


def every_partition_gets_new_keys(spark, batch, partitions: int = 4):
    """The dedup shuffle (hash of `key` into 4 partitions) gives every partition a key, so
    every store is accessed in that batch (checked with Spark's own partitioner)."""
    from pyspark.sql import functions as F

    df = spark.createDataFrame(batch, "key string, value long").repartition(partitions, "key")
    used = {r[0] for r in df.select(F.spark_partition_id()).distinct().collect()}
    assert used == set(range(partitions)), f"partitions with keys: {sorted(used)}"


# Compaction filter and full snapshot: their own process (maintenance every second).

MAINT_TTL = "2s"
MAINT_BATCHES = [OLD_KEYS, [(f"n{i}", 1) for i in range(4)]]
# Maintenance compacts / snapshots during the pauses. RocksDB's TTL is the TTL + margin +
# how far the batch clock lagged the wall clock when the store was opened (at most the time
# batch 0 took), so the first pause is 10 s plus the time batch 0 took: on a loaded machine
# (CI runs two test files at a time) batch 0 took 12 s, and a fixed 12 s pause left some
# partitions' entries alive through it.
MAINT_LAG_SLEEPS = {0: 10}
# After batch 1 each query waits until maintenance has snapshotted version 2 in all its
# partitions (16 stores, one maintenance pass a second; a fixed 4 s pause could end first
# on a loaded machine), at most 120 s: the tests below say which partition has none.
MAINT_SNAPSHOT_WAITS = {1: 120}


MAINTENANCE_TESTS = ("test_compaction_filter_cleanup_drops_expired_entries",
                     "test_full_snapshot_cleanup_leaves_expired_entries_out")


@pytest.fixture(scope="module", autouse=True)
def _maintenance_job(request, tmp_path_factory, candidate):
    """Starts the maintenance subprocess when the module starts, if one of its tests is
    selected: it runs while the other tests run in this process."""
    selected = any(item.module is request.module and item.originalname in MAINTENANCE_TESTS
                   for item in request.session.items)
    if candidate != TTLSTATE or not selected:
        yield None
        return
    root = tmp_path_factory.mktemp("ttl-maintenance")
    inputs = [str(tq.write_batches(root / "in", MAINT_BATCHES))]
    compaction = dict(cleanup_compactionFilter_enabled="true",
                      cleanup_compactionFilter_safetyMargin="0s",
                      cleanup_compactionFilter_periodicCompaction="1s",
                      cleanup_incremental_size="1")
    variants = {
        "compaction": tq.ttl_conf(MAINT_TTL, **compaction),
        "compaction_off": tq.ttl_conf(MAINT_TTL, **NO_BACKGROUND),
        "full_snapshot": tq.ttl_conf(MAINT_TTL, cleanup_fullSnapshot="true", **NO_BACKGROUND),
        "full_snapshot_off": tq.ttl_conf(MAINT_TTL, cleanup_fullSnapshot="false",
                                         **NO_BACKGROUND),
    }
    spec = {"tag": "maintenance",
            "session_confs": {tq.MAINTENANCE_INTERVAL: "1s", tq.MIN_DELTAS_FOR_SNAPSHOT: "1"},
            "queries": [dict(name=name, query="dedup_key", inputs=inputs,
                             checkpoint=str(root / f"ck-{name}"), confs=confs,
                             snapshot_waits=MAINT_SNAPSHOT_WAITS, lag_sleeps=MAINT_LAG_SLEEPS)
                for name, confs in variants.items()]}
    proc, finish = tq.run_subprocess(spec, root, wait=False)
    yield finish
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def maintenance_runs(_maintenance_job):
    if _maintenance_job is None:
        pytest.skip("state TTL is a ttlstate feature")
    rc, outcomes, _, log = _maintenance_job()
    if rc != 0 or outcomes is None:
        pytest.fail(f"the maintenance subprocess failed (rc {rc}); log {log}:\n"
                    + log.read_text()[-6000:], pytrace=False)
    for name, o in outcomes.items():
        o.check()
        assert o.batches == {0: sorted_rows(OLD_KEYS), 1: sorted_rows(MAINT_BATCHES[1])}, name
        ts = timestamps(o, 2)
        assert ts[1] - ts[0] >= 2000, f"{name}: old keys not expired in batch 1: {ts}"
    return outcomes


def _snapshot_total(o: tq.Outcome, version: int) -> int:
    entries = tq.snapshot_entries_at(o.checkpoint, version)
    assert entries is not None, (
        f"{o.name}: no {version}.manifest in every partition "
        f"({tq.snapshot_files(o.checkpoint)}): maintenance did not snapshot within MAINT_SNAPSHOT_WAITS")
    return sum(entries.values())


def test_compaction_filter_cleanup_drops_expired_entries(maintenance_runs):
    """TTL 2 s, safety margin 0 s, periodic compaction every 1 s: during the pause after
    batch 0 (10 s plus the time batch 0 took) maintenance compacts and RocksDB's TTL drops
    the 40 old entries. Batch 1 has only 4 new keys and a 1-entry incremental step, so the
    incremental cleanup cannot account for what disappeared. The snapshot of version 2 (the database's SST files,
    fullSnapshot off) shows what is really stored."""
    on, off = maintenance_runs["compaction"], maintenance_runs["compaction_off"]
    assert on.metric_sum("ttlstateExpiredByCompaction") > 0
    assert off.metric_sum("ttlstateExpiredByCompaction") == 0
    stored_off = _snapshot_total(off, 2)
    stored_on = _snapshot_total(on, 2)
    assert stored_off == 44, "without cleanup the snapshot holds every entry"
    by_others = (on.metric_sum("ttlstateExpiredIncremental")
                 + on.metric_sum("ttlstateExpiredOnRead"))
    assert stored_off - stored_on - by_others >= 20, (
        f"compaction removed too little: stored {stored_on} of 44, "
        f"{by_others} removed by the other strategies")
    assert on.rows_total()[1] == off.rows_total()[1] == 4


def test_full_snapshot_cleanup_leaves_expired_entries_out(maintenance_runs):
    """No background cleanup; maintenance snapshots every version. Version 1's snapshot
    is taken while its 40 entries are live on its batch's clock; version 2's (batch 1,
    10 s+ later, TTL 2 s) leaves the 40 expired entries out with fullSnapshot, not without."""
    full, plain = maintenance_runs["full_snapshot"], maintenance_runs["full_snapshot_off"]
    for o in (full, plain):
        v1 = tq.snapshot_entries_at(o.checkpoint, 1)
        if v1 is not None:  # maintenance snapshotted version 1 during the pause
            assert sum(v1.values()) == 40, f"{o.name}: snapshot 1 dropped live entries: {v1}"
    assert _snapshot_total(plain, 2) == 44
    assert _snapshot_total(full, 2) == 4
    size = {o.name: sum(tq.snapshot_sst_bytes(f[2]) for f in tq.snapshot_files(o.checkpoint).values())
            for o in (full, plain)}
    assert size[full.name] < size[plain.name], size
    assert full.rows_total() == plain.rows_total() == {0: 40, 1: 4}


# ---------------------------------------------------------------------------------------
# 8. An invalid TTL value fails the query at start

INVALID = {
    "ttl": (tq.key("ttl"), "ten minutes", ["duration", "30s"]),
    "updateType": (tq.key("updateType"), "Sometimes",
                   ["OnCreateAndWrite", "OnReadAndWrite", "Disabled"]),
    "store_visibility": (tq.key("stateVisibility", 0, "left-keyToNumValues"), "Maybe",
                         ["NeverReturnExpired", "ReturnExpiredIfNotCleanedUp"]),
    "incremental_size": (tq.key("cleanup.incremental.size"), "0", ["1000000"]),
}


def test_invalid_ttl_value_fails_the_query_at_start(spark, tmp_path):
    inputs = [str(tq.write_batches(tmp_path / "in", DEDUP_BATCHES))]
    specs = [tq.QuerySpec(name=f"ttl_bad_{case}_{uuid.uuid4().hex[:8]}", query="dedup_key",
                          inputs=inputs, checkpoint=str(tmp_path / f"ck-{case}"),
                          confs={tq.key("ttl"): "1s", k: v} if case != "ttl" else {k: v})
             for case, (k, v, _) in INVALID.items()]
    for (case, (k, v, allowed)), o in zip(INVALID.items(), tq.run_side_by_side(spark, specs)):
        assert o.error is not None, f"{case}: {k}={v!r} was accepted"
        for part in [k, v, *allowed]:
            assert part in o.error, f"{case}: {part!r} not in the error:\n{o.error[:3000]}"
        assert o.batches == {}, f"{case}: the sink got rows"
        assert tq.committed_batches(o.checkpoint) == [], f"{case}: a batch was committed"
