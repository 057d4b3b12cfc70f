"""A batch replayed after a crash sees the TTL clock of its first attempt (BatchTimestamp).

The query (a count per key, update mode, TTL 12 s) runs in a subprocess whose foreachBatch
sink appends each batch's rows to a file. In batch 2 the sink ends the process with
os._exit(1) right after collecting the rows: the batch's state is committed (version 3),
its commit-log entry is not written, so a restart re-runs batch 2 from its offset-log entry,
with the same batchTimestampMs. The restart waits until the wall clock is past the TTL of
the keys batch 1 wrote: a wall clock (or a clock taken at the restart) would expire them;
the batch clock of batch 2 must not.

Timeline (batch timestamps T0..T3; each long gap is made by the sink, which waits until
15 s past its batch's timestamp, or by the wait before the restart; every gap is checked on
the recorded timestamps):

    batch 0  T0        e0 e1 e2 x0 are written
             the sink waits until T0 + 15 s
    batch 1  T1        l0 l1 l2 (twice each) and x0 are written; x0 restarts (T0 + 12 s <= T1)
    batch 2  T2 ~ T1   e* are expired on both clocks: their counts restart;
                       l* and x0 are live on the batch clock (T1 + 12 s > T2): counts go on;
                       n0 n1 are new -- then the driver is killed
             wait until T2 + 15 s, then a new process restarts the query
    batch 2  T2        replayed: must give exactly the rows of the first attempt
    batch 3  T3        every key restarts (T2 + 12 s <= T3)

The same input runs undisturbed in a third process (waits after batches 0 and 2); its
rows must equal the crashed-and-restarted run's, batch by batch, and both must equal the
reference model evaluated on each run's recorded batch timestamps.
"""

from __future__ import annotations

import pathlib
import time

import pytest

import ttl_queries as tq
from streaming import TTLSTATE

pytestmark = pytest.mark.slow

TTL_MS = 12_000
PAUSE_S = 15  # > TTL: what was written before the pause is expired after it

BATCHES = [
    [("e0", 0), ("e1", 0), ("e2", 0), ("x0", 0)],
    [("l0", 1), ("l0", 1), ("l1", 1), ("l1", 1), ("l2", 1), ("l2", 1), ("x0", 1)],
    [("e0", 2), ("e1", 2), ("e2", 2), ("l0", 2), ("l1", 2), ("l2", 2), ("n0", 2), ("n1", 2),
     ("x0", 2)],
    [("l0", 3), ("e0", 3), ("n0", 3), ("z0", 3)],
]
EXPECTED = {
    0: [("e0", 1), ("e1", 1), ("e2", 1), ("x0", 1)],
    1: [("l0", 2), ("l1", 2), ("l2", 2), ("x0", 1)],
    2: [("e0", 1), ("e1", 1), ("e2", 1), ("l0", 3), ("l1", 3), ("l2", 3), ("n0", 1), ("n1", 1),
        ("x0", 2)],
    3: [("e0", 1), ("l0", 1), ("n0", 1), ("z0", 1)],
}
KILL_AT = 2


@pytest.fixture(autouse=True)
def _ttlstate_only(candidate):
    if candidate != TTLSTATE:
        pytest.skip("state TTL is a ttlstate feature")


def _spec(tag, inputs, checkpoint, sink, pace, kill_at=None):
    from ttlstate.ttl.config import TtlConfig

    confs = TtlConfig.new_builder(f"{TTL_MS // 1000}s").build().to_conf()
    assert confs[tq.key("ttl")] == str(TTL_MS)
    assert confs[tq.key("timeCharacteristic")] == "BatchTimestamp"
    return {"tag": tag, "queries": [dict(
        name=f"ttl_replay_{tag}", query="count_by_key", inputs=inputs,
        checkpoint=str(checkpoint), confs=confs, pace=pace, kill_at=kill_at,
        sink_file=str(sink))]}


def _fail(what, rc, log):
    pytest.fail(f"{what} (rc {rc}); log {log}:\n{pathlib.Path(log).read_text()[-6000:]}",
                pytrace=False)


def _per_batch(lines) -> dict[int, list]:
    """The rows of each batch id, from the last call of the sink for it."""
    out = {}
    for rec in lines:
        out[rec["batch"]] = rec["rows"]
    return dict(sorted(out.items()))


def _crash_and_restart(jobs, go, ck, sink):
    """Waits for the crash, checks it, lets the restart run once T2 + PAUSE_S has passed."""
    rc, outcomes, jvm_pid, log = jobs["crash"][1]()
    if rc != 1 or outcomes is not None:
        _fail("the first run was not killed in batch 2", rc, log)
    assert tq.wait_for_exit(jvm_pid), f"the killed driver's JVM {jvm_pid} is still running"

    # Killed after the state of batch 2 was committed and before its commit-log entry.
    first = tq.read_sink_file(sink)
    assert [r["batch"] for r in first] == [0, 1, 2]
    assert tq.committed_batches(ck) == [0, 1]
    assert any((p / f"{KILL_AT + 1}.changelog").exists()
               for p in (ck / "state" / "0").iterdir() if p.name.isdigit()), \
        "batch 2's state (version 3) was not committed before the kill"
    offsets_2 = (ck / "offsets" / str(KILL_AT)).read_text()
    ts_first = tq.batch_timestamps(ck)
    assert sorted(ts_first) == [0, 1, 2]

    # Restart once the wall clock has passed T1 + TTL by a margin.
    wait_s = ts_first[KILL_AT] / 1000 + PAUSE_S - time.time()
    if wait_s > 0:
        time.sleep(wait_s)
    go.touch()
    rc, outcomes, _, log = jobs["restart"][1]()
    if rc != 0 or outcomes is None:
        _fail("the restarted run failed", rc, log)
    return first, offsets_2, ts_first, outcomes["ttl_replay_restart"].check()


def test_replayed_batch_expires_exactly_what_its_first_attempt_expired(tmp_path):
    inputs = [str(tq.write_batches(tmp_path / "in", BATCHES))]
    ck, sink = tmp_path / "ck-crash", tmp_path / "sink-crash.jsonl"
    ck_u, sink_u = tmp_path / "ck-undisturbed", tmp_path / "sink-undisturbed.jsonl"

    # The run that is killed in batch 2, and the undisturbed run, at the same time; the
    # restart's process starts too, but runs its query only when told to.
    go = tmp_path / "restart.go"
    jobs = {
        "crash": tq.run_subprocess(_spec("crash", inputs, ck, sink, {0: PAUSE_S},
                                         kill_at=KILL_AT), tmp_path, wait=False),
        "undisturbed": tq.run_subprocess(_spec("undisturbed", inputs, ck_u, sink_u,
                                               {0: PAUSE_S, 2: PAUSE_S}), tmp_path, wait=False),
        "restart": tq.run_subprocess(dict(_spec("restart", inputs, ck, sink, {}),
                                          start_file=str(go)), tmp_path, wait=False),
    }
    try:
        first, offsets_2, ts_first, restarted = _crash_and_restart(jobs, go, ck, sink)
        rc, outcomes, _, log = jobs["undisturbed"][1]()
        if rc != 0 or outcomes is None:
            _fail("the undisturbed run failed", rc, log)
        outcomes["ttl_replay_undisturbed"].check()
    finally:
        for proc, _ in jobs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    lines = tq.read_sink_file(sink)
    replay = lines[len(first):]
    assert [r["batch"] for r in replay] == [2, 3], "the restart did not replay batch 2"
    assert replay[0]["pid"] != first[-1]["pid"]
    # Spark replays batch 2 with its logged offsets and timestamp.
    assert (ck / "offsets" / str(KILL_AT)).read_text() == offsets_2
    ts = tq.batch_timestamps(ck)
    assert sorted(ts) == [0, 1, 2, 3] and all(ts[b] == ts_first[b] for b in ts_first)
    assert tq.committed_batches(ck) == [0, 1, 2, 3]

    # The timing the case needs.
    assert ts[1] - ts[0] >= TTL_MS and ts[2] - ts[0] >= TTL_MS, f"batch timestamps {ts}"
    assert ts[2] - ts[1] < TTL_MS, f"batches 1 and 2 too far apart: {ts}"
    assert ts[3] - ts[2] >= TTL_MS, f"batch timestamps {ts}"
    replay_wall_ms = replay[0]["wall_ms"]
    assert replay_wall_ms >= ts[1] + TTL_MS, (
        "the replay ran before the keys of batch 1 were expired by the wall clock: "
        f"{replay_wall_ms} < {ts[1]} + {TTL_MS}")
    # ... so a wall clock would have given other rows for batch 2 than the batch clock.
    wall = {**ts, KILL_AT: replay_wall_ms}
    assert tq.model_count_by_key(BATCHES, wall, ttl=TTL_MS)[0][KILL_AT] != EXPECTED[KILL_AT]

    # The replayed batch gives exactly the rows of its first attempt ...
    assert replay[0]["rows"] == first[-1]["rows"] == EXPECTED[KILL_AT]
    # ... and the whole output is the undisturbed run's and the model's.
    crashed_rows = _per_batch(lines)
    undisturbed_lines = tq.read_sink_file(sink_u)
    assert [r["batch"] for r in undisturbed_lines] == [0, 1, 2, 3]
    undisturbed_rows = _per_batch(undisturbed_lines)
    ts_u = tq.batch_timestamps(ck_u)
    model, live, _ = tq.model_count_by_key(BATCHES, ts, ttl=TTL_MS)
    model_u, _, _ = tq.model_count_by_key(BATCHES, ts_u, ttl=TTL_MS)
    assert crashed_rows == model == EXPECTED
    assert undisturbed_rows == model_u == EXPECTED
    assert crashed_rows == undisturbed_rows
    # The replayed batch's state: numRowsTotal counts the keys live at T2, then at T3.
    assert restarted.rows_total() == {2: live[2], 3: live[3]}
    assert (live[2], live[3]) == (9, 4)
    assert restarted.metric_sum("ttlstateTtlMs") > 0
