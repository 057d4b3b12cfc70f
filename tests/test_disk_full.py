"""A full local state disk fails the batch with an error that says so; the query recovers
once space returns.

The store service keeps its stores' RocksDB files under the executor's Spark local dir, or
under `java.io.tmpdir` when that path is too long for a Unix socket (docs/guide/clusters.md,
"On a cluster"). A subprocess driver is started with a long `spark.local.dir` (shuffle files
stay on the normal disk) and `java.io.tmpdir` on a small tmpfs: the stores live there.
It runs half of the input, the test fills the tmpfs, the next run must fail naming the
lack of space, the test frees the space, and the next run must complete: the output of all
runs equals an undisturbed HDFS run. (A checkpoint file system that fails is covered by
tests/test_checkpoint_faults.py.) Needs root for `mount -t tmpfs`; skipped otherwise.
"""

from __future__ import annotations

import errno
import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import cluster as cl  # noqa: E402
import streaming as st  # noqa: E402

pytestmark = pytest.mark.slow

N_FILES, HALF = 6, 3


@pytest.fixture
def small_disk():
    # a short path: java.io.tmpdir only holds the service when its path leaves room for a
    # Unix socket path (tmp_path's length depends on the user name and pytest's numbering)
    mount = pathlib.Path(tempfile.mkdtemp(prefix="tsdisk-", dir="/tmp"))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)
        shutil.rmtree(mount, ignore_errors=True)


def _fill(directory: pathlib.Path) -> pathlib.Path:
    """Writes a file until the disk is full; returns it."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as f:
        chunk = b"\0" * (1 << 16)
        try:
            while True:
                f.write(chunk)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    small = b"\0" * 512
    with open(directory / "filler-tail", "wb", buffering=0) as f:
        try:
            while True:
                f.write(small)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    return filler


def test_full_state_disk_fails_the_batch_and_the_query_recovers(spark, candidate, tmp_path,
                                                                small_disk):
    if candidate != st.TTLSTATE:
        pytest.skip("fills ttlstate's local state disk")
    files = st.generate_events(N_FILES, 300, n_keys=2000, seed=23)
    full_input, inp = tmp_path / "in-full", tmp_path / "in"
    st.write_files(full_input, files)
    st.write_files(inp, files, 0, HALF)
    reference = st.run_query(spark, st.HDFS, st.agg_by_key_bucket, "update", full_input,
                             tmp_path / "ck-ref", sink="foreach_batch")
    # > 64 characters: the service falls back to java.io.tmpdir for its directory
    local = tmp_path / ("spark-local-" + "x" * 64)
    spec = {"input": str(inp), "checkpoint": str(tmp_path / "ck"), "out": str(tmp_path / "out"),
            "local_dir": str(local), "tmpdir": str(small_disk), "flags": str(tmp_path)}
    proc, log, log_path = st.spawn_spec_process(__file__, spec, tmp_path, "disk-full")
    try:
        def step(marker):
            cl.wait_until(lambda: marker in log_path.read_text() or proc.poll() is not None,
                          300, marker)
            assert marker in log_path.read_text(), log_path.read_text()[-4000:]

        step("RUN 1 DONE")
        assert any(small_disk.glob("ttlstate-*/stores/*")), "the stores are not on the tmpfs"
        filler = _fill(small_disk)
        st.write_files(inp, files, HALF, N_FILES)
        (tmp_path / "filled").touch()
        step("RUN 2 FAILED")
        error = log_path.read_text().split("RUN 2 FAILED", 1)[1][:20000]
        assert "No space left on device" in error, error[:4000]
        assert "[TTLSTATE_STORAGE]" in error and f"local dir {small_disk}/" in error, error[:4000]
        filler.unlink()
        (small_disk / "filler-tail").unlink()
        (tmp_path / "freed").touch()
        step("RUN 3 DONE")
        assert st.wait_or_kill(proc, 120) == 0, log_path.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)
        log.close()
    got = {int(f.stem): st.sort_rows(pickle.loads(f.read_bytes()))
           for f in (tmp_path / "out").glob("*.pkl")}
    assert got == reference.batches
    # the service removes its directory once it sees its JVM gone (after stopping its workers,
    # up to 3 s), which may be just after the driver process exited: wait for it, boundedly
    cl.wait_until(lambda: not list(small_disk.glob("ttlstate-*")), 30,
                  "the service to remove its directory after the driver exited")


def child(spec_path: str) -> None:
    import time

    import ttlstate

    spec = json.loads(pathlib.Path(spec_path).read_text())
    flags, out = pathlib.Path(spec["flags"]), pathlib.Path(spec["out"])
    out.mkdir(exist_ok=True)
    builder = (st.session_builder("ttlstate-disk-full")
               .config("spark.local.dir", spec["local_dir"])
               .config("spark.driver.extraJavaOptions", f"-Djava.io.tmpdir={spec['tmpdir']}"))
    spark = st.get_or_create(ttlstate.configure(builder))

    def run():
        r = st.run_query(spark, st.TTLSTATE, st.agg_by_key_bucket, "update", spec["input"],
                         spec["checkpoint"], sink="foreach_batch")
        for b, rows in r.batches.items():
            (out / f"{b}.pkl").write_bytes(pickle.dumps(rows))

    def wait_for(flag):
        while not (flags / flag).exists():
            time.sleep(0.2)

    run()
    print("RUN 1 DONE", flush=True)
    wait_for("filled")
    try:
        run()
        print("RUN 2 DID NOT FAIL", flush=True)
    except Exception as e:  # noqa: BLE001 - the error text is the point
        print("RUN 2 FAILED", str(e), flush=True)
    wait_for("freed")
    run()
    print("RUN 3 DONE", flush=True)
    spark.stop()


if __name__ == "__main__":
    child(sys.argv[1])
