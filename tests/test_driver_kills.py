"""Killing the driver JVM in the middle of a batch, again and again, changes no output.

A subprocess runs a streaming aggregation on ttlstate (its own driver JVM, store service
and checkpoint) over many small files, one per batch, with a foreachBatch sink that writes
each batch's rows to `out/batch-<id>.pkl` (atomically; a replayed batch overwrites its
file). The test SIGKILLs the subprocess's JVM at a random moment (0-0.8 s) after one of
the next 1-3 batches started, then the Python driver, and starts it again on the same
checkpoint, until the query completes. A kill counts as mid-batch when the offset log
holds a batch the commit log does not. The sink files must equal, batch by batch, an
undisturbed HDFS run.

Mid-batch kills: `TTLSTATE_DRIVER_KILLS` (default 2, as CI runs it; the issue asks for 10
or more).
"""

from __future__ import annotations

import os
import pathlib
import pickle
import random
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cluster as cl  # noqa: E402
import streaming as st  # noqa: E402

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("TTLSTATE_DRIVER_KILLS", "2"))
N_FILES = 12 + 4 * KILLS


def _batch_ids(directory: pathlib.Path) -> list[int]:
    return sorted(int(f.name) for f in directory.iterdir() if f.name.isdigit()) \
        if directory.is_dir() else []


def in_flight(checkpoint: pathlib.Path) -> int | None:
    """The batch the offset log started and the commit log has not finished, if any."""
    offsets, commits = _batch_ids(checkpoint / "offsets"), _batch_ids(checkpoint / "commits")
    if offsets and (not commits or offsets[-1] > commits[-1]):
        return offsets[-1]
    return None


def read_output(out: pathlib.Path) -> dict[int, list[tuple]]:
    return {int(f.stem.split("-")[1]): st.sort_rows(pickle.loads(f.read_bytes()))
            for f in out.glob("batch-*.pkl")}


def _jvms_of(pid: int) -> list[int]:
    return [p for p, ppid, args in cl._processes() if ppid == pid and "java" in args.split()[0]]


def test_driver_killed_mid_batch_changes_no_output(spark, candidate, tmp_path):
    inp, ck, out = tmp_path / "in", tmp_path / "ck", tmp_path / "out"
    st.write_files(inp, st.generate_events(N_FILES, 30, n_keys=12, seed=17))
    reference = st.run_query(spark, st.HDFS, st.agg_by_key_bucket, "update", inp,
                             tmp_path / "ck-ref", sink="foreach_batch")
    spec = {"provider": candidate, "input": str(inp), "checkpoint": str(ck), "out": str(out)}
    rng = random.Random(5)
    kills: list[dict] = []
    for attempt in range(4 * KILLS + 10):
        proc, log, log_path = st.spawn_spec_process(__file__, spec, tmp_path, f"run-{attempt}")
        try:
            started = cl.wait_until(lambda: "QUERY STARTED" in log_path.read_text()
                                    or proc.poll() is not None, 180, "the query to start")
            # Kill early in a batch 1-3 batches after the last committed one, so kills land
            # in different batches and at different points of a batch.
            target = (_batch_ids(ck / "commits") or [-1])[-1] + rng.randint(1, 3)
            cl.wait_until(lambda: proc.poll() is not None
                          or (_batch_ids(ck / "offsets") or [-1])[-1] >= target, 300,
                          f"batch {target} to start")
            mid_batch_kills = sum(k["batch"] is not None for k in kills)
            if proc.poll() is not None or mid_batch_kills >= KILLS:
                assert st.wait_or_kill(proc, 600) == 0, log_path.read_text()[-3000:]
                break
            time.sleep(rng.uniform(0.0, 0.8))
            batch = in_flight(ck)
            jvms = _jvms_of(proc.pid)
            for pid in jvms:
                os.kill(pid, signal.SIGKILL)
            proc.kill()
            proc.wait(60)
            if jvms and proc.returncode != 0:
                kills.append({"attempt": attempt, "batch": batch})
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(60)
            log.close()
        assert started
    else:
        pytest.fail(f"the query did not complete after {len(kills)} kills")
    mid_batch = [k for k in kills if k["batch"] is not None]
    assert len(mid_batch) >= KILLS, f"only {len(mid_batch)} of {len(kills)} kills were mid-batch"
    assert read_output(out) == reference.batches
    print(f"\n{len(kills)} driver kills ({len(mid_batch)} mid-batch, in batches "
          f"{[k['batch'] for k in mid_batch]}); the output equals an undisturbed HDFS run")


def child(spec_path: str) -> None:
    """The subprocess: runs the query to the end of its input (Trigger.AvailableNow)."""
    import json

    spec = json.loads(pathlib.Path(spec_path).read_text())
    out = pathlib.Path(spec["out"])
    out.mkdir(exist_ok=True)
    import threading

    import ttlstate

    # Spark's local dirs inside the test's directory: a killed JVM leaves them behind
    builder = st.session_builder("ttlstate-driver-kills").config(
        "spark.local.dir", str(pathlib.Path(spec["checkpoint"]).parent / "spark-local"))
    spark = ttlstate.configure(builder).getOrCreate()
    started = threading.Event()
    holder = {}

    def write_batch(batch_id):
        started.wait()
        _write_batch(out, batch_id, holder["query"].batches)

    holder["query"] = q = st.start_query(spark, spec["provider"], st.agg_by_key_bucket, "update",
                                         spec["input"], spec["checkpoint"],
                                         sink="foreach_batch", on_batch=write_batch)
    started.set()
    print("QUERY STARTED", flush=True)
    q.result()
    print("QUERY DONE", flush=True)
    spark.stop()


def _write_batch(out: pathlib.Path, batch_id: int, batches: dict) -> None:
    tmp = out / f".batch-{batch_id}.tmp"
    tmp.write_bytes(pickle.dumps(batches[batch_id]))
    os.replace(tmp, out / f"batch-{batch_id}.pkl")


if __name__ == "__main__":
    child(sys.argv[1])
