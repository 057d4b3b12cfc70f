"""TTL on event time in real streaming queries (Spark local mode, the ttlstate provider).

A backfill: every micro-batch reads one file, and the files span days of event time, so the
whole input runs in seconds of wall-clock time. Under `timeCharacteristic=EventTime` the TTL
clock of a batch is the query's event-time watermark for that batch (`batchWatermarkMs` in
the offset log); an entry written in a batch carries that batch's watermark and is expired
once a later batch's watermark is at or past that value plus the TTL. Entries written while
the watermark is still 0 (the first batch) carry the first watermark past 0.

Every case compares the sink rows of each batch with (a) rows written out here by hand and
(b) a reference model (`ttl_queries.EventTimeModelStore`, `model_join_by_key(event_time=True)`)
fed with the watermarks read back from the run's offset log. The same query with the
`BatchTimestamp` clock expires nothing (a TTL of one day, a run of seconds).

Watermarks (delay 1 minute; W_b is the largest event time of batches before b, less the
delay): the hand-written expectations below are checked against the offset log too.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

import ttl_queries as tq
from streaming import TTLSTATE
from ttl_queries import NEVER, RETURN

pytestmark = pytest.mark.slow

DAY_MS = 86_400_000
EVENT_TIME = {tq.key("ttl"): "1d", tq.key("timeCharacteristic"): "EventTime"}
BATCH_TIME = {tq.key("ttl"): "1d", tq.key("timeCharacteristic"): "BatchTimestamp"}
DELAY_MS = 60_000


@pytest.fixture(autouse=True)
def _ttlstate_only(candidate):
    if candidate != TTLSTATE:
        pytest.skip("state TTL is a ttlstate feature; other providers ignore its confs")


def specs(tmp_path, query: str, sources, variants: dict[str, dict], stop: int | None = None):
    """One QuerySpec per variant (name -> confs) of `query` on the same input files."""
    inputs = [str(tq.write_event_batches(tmp_path / f"in-{query}-{i}", batches, 0, stop))
              for i, batches in enumerate(sources)]
    return {name: tq.QuerySpec(name=f"ttl_et_{name}_{uuid.uuid4().hex[:8]}", query=query,
                               inputs=inputs, checkpoint=str(tmp_path / f"ck-{name}"),
                               confs=confs)
            for name, confs in variants.items()}


def run(spark, specs_by_name: dict[str, tq.QuerySpec], sources, first: int = 0) -> dict[str, tq.Outcome]:
    """Runs the specs side by side; each must read one file of each source per batch. Spark
    may add a batch without data at the end (the watermark moved): it must emit nothing."""
    outcomes = tq.run_side_by_side(spark, list(specs_by_name.values()))
    out = {}
    for name, o in zip(specs_by_name, outcomes):
        o.check()
        n = len(sources[0])
        expected = {b: sum(len(s[b]) for s in sources) for b in range(first, n)}
        got = o.input_rows()
        assert {b: r for b, r in got.items() if b < n} == expected, f"{name}: not one file per batch: {got}"
        extra = {b: o.batches.get(b) for b in got if b >= n}
        assert all(rows in ([], None) and got[b] == 0 for b, rows in extra.items()), f"{name}: {extra}"
        o.batches = {b: rows for b, rows in o.batches.items() if b < n}
        out[name] = o
    return out


def watermarks(o: tq.Outcome, n: int) -> dict[int, int]:
    """The offset log's watermarks of batches 0..n-1 (and of any batch without data after them)."""
    wm = tq.batch_watermarks(o.checkpoint)
    assert sorted(wm)[:n] == list(range(n)), f"{o.name}: offset log {wm}"
    return wm


def padded(batches, wm: dict[int, int]) -> list:
    """`batches` and an empty batch for every batch without data Spark added after them."""
    return list(batches) + [[] for _ in range(len(wm) - len(batches))]


def within(d: dict, n: int) -> dict:
    return {b: v for b, v in d.items() if b < n}


def inspect(checkpoint, *args) -> dict:
    """`python -m ttlstate inspect ... --json`, as a real subprocess."""
    proc = subprocess.run([sys.executable, "-m", "ttlstate", "inspect", str(checkpoint), *args, "--json"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def expected_watermarks(batches) -> dict[int, int]:
    """W_b by hand: 0, then the largest event time of the batches before b less the delay."""
    out, seen = {}, None
    for b, rows in enumerate(batches):
        out[b] = 0 if seen is None else max(0, seen - DELAY_MS)
        top = max(tq.event_ms(h) for _, _, h in rows)
        seen = top if seen is None else max(seen, top)
    return out


# ---------------------------------------------------------------------------------------
# A count per key over five days of events, in six batches

# (key, value, event time in hours after 2024-01-01 00:00). a, b, c are written at
# watermark 0 and get W1 (00:00 less a minute); a and c are idle more than a day of event
# time by batch 3, d by batch 4, a and b by batch 5.
COUNTS = [
    [("a", 0, 0), ("b", 0, 0), ("c", 0, 0)],
    [("a", 1, 12), ("d", 1, 12)],
    [("b", 2, 26)],
    [("a", 3, 26), ("c", 3, 26), ("e", 3, 26)],
    [("b", 4, 120), ("d", 4, 120)],
    [("a", 5, 121), ("b", 5, 121)],
]
COUNTS_EVENT_TIME = {0: [("a", 1), ("b", 1), ("c", 1)], 1: [("a", 2), ("d", 1)],
                     2: [("b", 2)], 3: [("a", 1), ("c", 1), ("e", 1)],
                     4: [("b", 3), ("d", 1)], 5: [("a", 1), ("b", 1)]}
COUNTS_NO_EXPIRY = {0: [("a", 1), ("b", 1), ("c", 1)], 1: [("a", 2), ("d", 1)],
                    2: [("b", 2)], 3: [("a", 3), ("c", 2), ("e", 1)],
                    4: [("b", 3), ("d", 2)], 5: [("a", 4), ("b", 4)]}


def test_backfill_expires_exactly_the_keys_idle_for_the_ttl_in_event_time(spark, tmp_path):
    runs = run(spark, specs(tmp_path, "count_by_key_wm", [COUNTS],
                            {"event": EVENT_TIME, "batch": BATCH_TIME}), [COUNTS])
    event, batch = runs["event"], runs["batch"]
    wm = watermarks(event, len(COUNTS))
    assert within(wm, len(COUNTS)) == expected_watermarks(COUNTS) and wm[1] == tq.event_ms(0) - DELAY_MS
    assert event.batches == COUNTS_EVENT_TIME
    expected, live, _ = tq.model_count_by_key(padded(COUNTS, wm), wm,
                                              store_cls=tq.EventTimeModelStore, ttl=DAY_MS)
    assert event.batches == within(expected, len(COUNTS))
    assert event.rows_total() == live
    assert within(live, len(COUNTS)) == {0: 3, 1: 4, 2: 4, 3: 4, 4: 5, 5: 2}
    # The metrics show the clock: the watermark of each batch, and that it is event time.
    assert event.metric("ttlstateTtlClockMs") == wm
    assert set(event.metric("ttlstateTtlEventTime").values()) == {1}
    # `inspect --ttl` on the event-time clock: the watermark of the latest version
    last = max(wm)
    doc = inspect(event.checkpoint, "--ttl", "1d", "--conf", f"{tq.key('timeCharacteristic')}=EventTime")
    [op] = doc["operators"]
    assert op["ttl"]["clocks"] == ["EventTime"] and op["ttl"]["batchTimestampMs"] == wm[last]
    assert sum(s.get("liveKeysNow", 0) for s in op["stores"]) == live[last]
    h = op["ttlHistogram"]
    assert (h["clock"], h["now"], h["basis"]) == ("EventTime", wm[last], "remainingTtl")
    buckets = {b["label"]: b["entries"] for b in h["buckets"]}
    assert buckets["unstamped"] == 0 and sum(buckets.values()) == op["keys"]
    assert op["keys"] - buckets["expired"] == live[last]
    # The same query on the batch clock: a run of seconds expires nothing.
    assert batch.metric("ttlstateTtlClockMs") == batch.timestamps()
    assert set(batch.metric("ttlstateTtlEventTime").values()) == {0}
    assert batch.batches == COUNTS_NO_EXPIRY
    assert within(batch.rows_total(), len(COUNTS)) == {0: 3, 1: 4, 2: 4, 3: 5, 4: 5, 5: 5}


def test_a_restart_in_the_middle_replays_the_stamping_batch_exactly(spark, tmp_path):
    """Run 1 reads files 0-1 (batch 1 stamps the entries written at watermark 0). Then the
    query is put back to where a crash after batch 1's state commit leaves it: batch 1's
    commit-log entry is deleted (and the batch without data Spark ran after it, as the
    watermark had moved, is forgotten), so run 2 replays batch 1 from its offset-log entry,
    at the same watermark, over the state versions run 1 already wrote, then reads files 2-5."""
    first, second, offsets_1 = _crash_after_batch_1_and_continue(spark, tmp_path)
    # replayed from the same entry
    assert (tq.pathlib.Path(first.checkpoint) / "offsets" / "1").read_text() == offsets_1
    assert second.batches[1] == first.batches[1]
    assert {**first.batches, **second.batches} == COUNTS_EVENT_TIME
    wm = watermarks(second, len(COUNTS))
    expected, live, _ = tq.model_count_by_key(padded(COUNTS, wm), wm,
                                              store_cls=tq.EventTimeModelStore, ttl=DAY_MS)
    assert {**first.batches, **second.batches} == within(expected, len(COUNTS))
    assert second.rows_total() == {b: live[b] for b in live if b >= 1}


def test_the_view_answers_event_time_reads_and_follows_the_stamping_across_a_restart(spark, tmp_path):
    """docs/decisions/104-event-time-jvm-view.md: under EventTime the JVM's view (value cache, key
    filter) answers reads once
    the watermark is known, and follows the worker's stamping of the entries written at
    watermark 0. Run 1 reads files 0-1: batch 0 writes a, b, c at watermark 0 (UNSTAMPED),
    batch 1 stamps them with W1 at its BEGIN. A crash after batch 1's state commit is then
    simulated (its commit-log entry deleted), so run 2 (a new provider: a load of version 1
    and a warm-up that reads a, b, c UNSTAMPED) replays batch 1, which stamps them again, then
    reads files 2-5. c is idle for more than the TTL by batch 3: a view that kept c's
    never-expiring time would serve it from the cache and count 2. Output and numRowsTotal
    equal the model on the offset log's watermarks, and the view answered reads (cache hits,
    keys the filter ruled out) in both runs, where before 104 it was unused."""
    first, second, _ = _crash_after_batch_1_and_continue(spark, tmp_path)
    assert {**first.batches, **second.batches} == COUNTS_EVENT_TIME
    wm = watermarks(second, len(COUNTS))
    expected, live, _ = tq.model_count_by_key(padded(COUNTS, wm), wm,
                                              store_cls=tq.EventTimeModelStore, ttl=DAY_MS)
    assert {**first.batches, **second.batches} == within(expected, len(COUNTS))
    assert within(first.rows_total(), 2) == within(live, 2)
    assert second.rows_total() == {b: live[b] for b in live if b >= 1}
    for o in (first, second):
        answered = o.metric_sum("ttlstateCacheHits") + o.metric_sum("ttlstateFilterSkips")
        assert answered > 0, f"{o.name}: the view answered no read"


def _crash_after_batch_1_and_continue(spark, tmp_path):
    """Run 1 of the counts on event time reads files 0-1; its checkpoint is then put back to
    where a crash after batch 1's state commit leaves it (batch 1's commit-log entry deleted,
    and the batch without data Spark ran after it forgotten), and run 2 reads files 0-5, so it
    replays batch 1. Returns (run 1, run 2, batch 1's offset-log entry as run 1 wrote it)."""
    s = specs(tmp_path, "count_by_key_wm", [COUNTS], {"event": EVENT_TIME}, stop=2)
    first = run(spark, s, [COUNTS[:2]])["event"]
    assert first.batches == {b: COUNTS_EVENT_TIME[b] for b in (0, 1)}
    ck = tq.pathlib.Path(first.checkpoint)
    offsets_1 = (ck / "offsets" / "1").read_text()
    for b in tq.batch_watermarks(ck):
        if b >= 2:  # the batch without data after batch 1
            forget(ck / "offsets", b)
            forget(ck / "commits", b)
    forget(ck / "commits", 1)
    assert tq.committed_batches(ck) == [0] and sorted(tq.batch_watermarks(ck)) == [0, 1]
    tq.write_event_batches(s["event"].inputs[0], COUNTS, 2)
    return first, run(spark, s, [COUNTS], first=1)["event"], offsets_1


def forget(log_dir, batch: int):
    """Delete a batch's entry of a metadata log, and its checksum file."""
    (log_dir / str(batch)).unlink()
    (log_dir / f".{batch}.crc").unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------
# dropDuplicates: NeverReturnExpired and ReturnExpiredIfNotCleanedUp

# a and m are written at watermark 0 (stamped W1 = 00:00 less a minute). In batch 2 the
# watermark is 30 h less a minute: both expired. NeverReturnExpired lets them through again;
# ReturnExpiredIfNotCleanedUp returns them once (dropped) and removes them, so batch 3 lets
# a through.
DEDUP = [[("a", 0, 0), ("m", 0, 0)], [("a", 1, 30)], [("a", 2, 31), ("m", 2, 31)],
         [("a", 3, 32)]]
NO_BACKGROUND = {tq.key("cleanup.inBackground"): "false"}


def test_drop_duplicates_on_event_time_with_either_visibility(spark, tmp_path):
    vis = tq.key("stateVisibility")
    runs = run(spark, specs(tmp_path, "dedup_key_wm", [DEDUP],
                            {"never": {**EVENT_TIME, **NO_BACKGROUND, vis: NEVER},
                             "return": {**EVENT_TIME, **NO_BACKGROUND, vis: RETURN},
                             "batch": BATCH_TIME}), [DEDUP])
    never, ret, batch = runs["never"], runs["return"], runs["batch"]
    assert never.batches == {0: [("a", 0), ("m", 0)], 1: [], 2: [("a", 2), ("m", 2)], 3: []}
    assert ret.batches == {0: [("a", 0), ("m", 0)], 1: [], 2: [], 3: [("a", 3)]}
    assert batch.batches == {0: [("a", 0), ("m", 0)], 1: [], 2: [], 3: []}
    for o, visibility in ((never, NEVER), (ret, RETURN)):
        wm = watermarks(o, len(DEDUP))
        assert within(wm, len(DEDUP)) == expected_watermarks(DEDUP)
        expected, live, model = tq.model_dedup_key(padded(DEDUP, wm), wm,
                                                   store_cls=tq.EventTimeModelStore,
                                                   ttl=DAY_MS, visibility=visibility)
        assert o.batches == within(expected, len(DEDUP))
        assert o.metric_sum("ttlstateExpiredOnRead") == model.expired_on_read == 2
        if visibility == NEVER:
            assert o.rows_total() == live


# ---------------------------------------------------------------------------------------
# A stream-stream join

# Each key at most once per side; both sides' event times keep pace, so the watermark is
# W1 = 00:00 - 1 min, W2 = 26 h - 1 min, W3 = 40 h - 1 min. a: left in 0 (stamped W1),
# right in 1: matches. b: left in 0 (stamped W1), right in 3: expired (W1 + 1 day <= W3).
# c: right in 1 (stamped W1), left in 2: expired (W1 + 1 day <= W2). d: left in 2 (stamped
# W2), right in 3: matches (W2 + 1 day > W3).
JOIN_LEFT = [[("a", 10, 0), ("b", 11, 0)], [("zl1", 12, 26)], [("c", 13, 40), ("d", 14, 40)],
             [("zl3", 15, 41)]]
JOIN_RIGHT = [[("zr0", 20, 0)], [("a", 21, 26), ("c", 22, 26)], [("zr2", 23, 40)],
              [("b", 24, 41), ("d", 25, 41)]]


def test_join_matches_a_buffered_row_only_while_live_in_event_time(spark, tmp_path):
    sources = [JOIN_LEFT, JOIN_RIGHT]
    runs = run(spark, specs(tmp_path, "join_by_key_wm", sources,
                            {"event": EVENT_TIME, "batch": BATCH_TIME}), sources)
    event, batch = runs["event"], runs["batch"]
    wm = watermarks(event, len(JOIN_LEFT))
    assert wm[1] == tq.event_ms(0) - DELAY_MS and wm[3] == tq.event_ms(40) - DELAY_MS
    assert event.batches == {0: [], 1: [("a", 10, 21)], 2: [], 3: [("d", 14, 25)]}
    assert event.batches == within(tq.model_join_by_key(
        padded(JOIN_LEFT, wm), padded(JOIN_RIGHT, wm), wm, left_ttl=DAY_MS, right_ttl=DAY_MS,
        event_time=True), len(JOIN_LEFT))
    assert batch.batches == {0: [], 1: [("a", 10, 21)], 2: [("c", 13, 22)],
                             3: [("b", 11, 24), ("d", 14, 25)]}


# ---------------------------------------------------------------------------------------
# A query with EventTime TTL and no watermark is refused before it starts

def test_event_time_without_a_watermark_is_refused_at_start(spark, tmp_path):
    per_operator = tq.key("timeCharacteristic", operator=0)
    s = specs(tmp_path, "count_by_key", [COUNTS],
              {"global": EVENT_TIME,
               "operator": {tq.key("ttl"): "1d", per_operator: "eventtime"},
               "batch_clock": BATCH_TIME})
    s["join"] = specs(tmp_path, "join_by_key", [JOIN_LEFT, JOIN_RIGHT], {"join": EVENT_TIME})["join"]
    outcomes = dict(zip(s, tq.run_side_by_side(spark, list(s.values()))))
    for name, key, value in (("global", tq.key("timeCharacteristic"), "EventTime"),
                             ("operator", per_operator, "eventtime"),
                             ("join", tq.key("timeCharacteristic"), "EventTime")):
        o = outcomes[name]
        assert o.error is not None, f"{name}: a query without a watermark was accepted"
        for part in ("TTLSTATE_INVALID_CONF", key, f"'{value}'", "needs the query's event-time watermark",
                     "withWatermark"):
            assert part in o.error, f"{name}: {part!r} not in {o.error[:2000]}"
        assert o.progress == [] and not tq.pathlib.Path(o.checkpoint, "offsets").exists(), \
            f"{name}: the query ran before it was refused"
    assert "Join" in outcomes["join"].error and "Aggregate" in outcomes["global"].error
    # not refused: the batch clock needs no watermark (EventTime with one: the cases above)
    assert outcomes["batch_clock"].check().batches[0] == [("a", 1), ("b", 1), ("c", 1)]


# ---------------------------------------------------------------------------------------
# RocksDB's TTL compaction filter never drops an entry live on the event-time clock

def test_the_compaction_filter_never_drops_entries_live_in_event_time(tmp_path):
    """Own processes, maintenance every second (Spark fixes the interval per JVM). TTL 2 s,
    the filter asked for with a safety margin of 0 and a compaction every second; 40 keys sent
    in four batches, all at the same event time, an hour ahead of the wall clock. Run 1 does
    batches 0-1; run 2 (a new process) loads the state at batch 2, whose watermark is past
    the wall clock, so RocksDB's TTL for the loaded database is 2 s (ttl + margin + a load
    lag of 0): the filter, were it on, would drop every entry during the pause after batch
    2 (10 s plus the time batch 2 took, which bounds the control's load lag on the batch
    clock), as a stalled live stream would see once ttl + margin + delay of wall-clock time
    passed. On the event-time clock the watermark never moves past the keys' watermark plus
    2 s, so every key is live in every batch: under EventTime the filter drops nothing and
    batches 1-3 find every key (dropDuplicates emits none). The control, the same settings
    on the batch clock, shows the filter at work."""
    import time

    ahead_h = (time.time() + 3600 - tq.event_ms(0) / 1000) / 3600
    keys = [(f"o{i:02d}", i, ahead_h) for i in range(40)]
    batches = [keys] * 4
    src = tmp_path / "in"
    tq.write_event_batches(src, batches, 0, 2)
    filter_on = {tq.key("ttl"): "2s", tq.key("cleanup.compactionFilter.enabled"): "true",
                 tq.key("cleanup.compactionFilter.safetyMargin"): "0s",
                 tq.key("cleanup.compactionFilter.periodicCompaction"): "1s",
                 tq.key("cleanup.incremental.size"): "1"}
    variants = {"event": {**filter_on, tq.key("timeCharacteristic"): "EventTime"},
                "batch": {**filter_on, tq.key("timeCharacteristic"): "BatchTimestamp"}}

    def spec(tag, lag_sleeps):
        return {"tag": tag,
                "session_confs": {tq.MAINTENANCE_INTERVAL: "1s", tq.MIN_DELTAS_FOR_SNAPSHOT: "1"},
                "queries": [dict(name=f"et_compaction_{name}", query="dedup_key_wm", inputs=[str(src)],
                                 checkpoint=str(tmp_path / f"ck-{name}"), confs=confs,
                                 lag_sleeps=lag_sleeps)
                            for name, confs in variants.items()]}

    def outcomes_of(tag, rc, outcomes, _, log):
        if rc != 0 or outcomes is None:
            pytest.fail(f"run {tag} failed (rc {rc}); log {log}:\n{log.read_text()[-6000:]}",
                        pytrace=False)
        return [outcomes[f"et_compaction_{n}"].check() for n in ("event", "batch")]

    # Run 2's process starts now and builds its session while run 1 runs (their JVMs' start-ups
    # overlap: wall time); it starts its queries only once `go` exists, after run 1 ended and
    # batches 2-3 were written, so it still loads in a new process what run 1 left.
    go = tmp_path / "run2.go"
    proc2, finish2 = tq.run_subprocess({**spec("run2", {2: 10}), "start_file": str(go)}, tmp_path,
                                       wait=False)
    try:
        event1, _ = outcomes_of("run1", *tq.run_subprocess(spec("run1", {}), tmp_path))
        tq.write_event_batches(src, batches, 2)
        go.write_text("go")
    finally:
        if not go.exists():
            proc2.kill()
            finish2()
    event, batch = outcomes_of("run2", *finish2())
    assert batch.metric_sum("ttlstateExpiredByCompaction") > 0, "the control: the filter ran"
    all_keys = sorted((k, v) for k, v, _ in keys)
    assert {**event1.batches, **event.batches} == {0: all_keys, 1: [], 2: [], 3: []}
    assert event.metric_sum("ttlstateExpiredByCompaction") == 0
    assert event.rows_total() == {2: 40, 3: 40}
    wm = watermarks(event, 4)
    assert wm == {0: 0, 1: wm[1], 2: wm[1], 3: wm[1]}
    assert 0 <= tq.event_ms(ahead_h) - DELAY_MS - wm[1] < 1000  # event times are whole seconds
    assert wm[1] > int(time.time() * 1000), "the watermark is ahead of the wall clock"
    expected, live, _ = tq.model_dedup_key([[(k, v) for k, v, _ in b] for b in batches], wm,
                                           store_cls=tq.EventTimeModelStore, ttl=2000)
    assert expected == {0: all_keys, 1: [], 2: [], 3: []} and live == {b: 40 for b in range(4)}
