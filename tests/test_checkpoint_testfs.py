"""The test FileSystem (`faulty:`) works from Spark: Hadoop's API and Spark's
CheckpointFileManager see the local disk through it, it counts bytes and files, and each
injected fault (failed create, failed write, lost rename, failed rename) does what the
checkpoint tests rely on. A streaming query (Spark's HDFS provider, so this test does not
depend on ttlstate) keeps its whole checkpoint on `faulty:`, and an injected failure of a
commit-log write fails it with the injected cause.
"""

from __future__ import annotations

import re

import pytest

import checkpoint_queries as cq
import streaming as st

pytestmark = pytest.mark.slow


def test_faulty_filesystem_from_spark(testfs_jar, tmp_path):
    batches = cq.agg_batches(4, 12, 6, seed=5)
    inputs = tmp_path / "in"
    ckpt = cq.faulty(tmp_path / "ck")
    run = dict(do="run", query="sum_by_key", provider=st.HDFS, inputs=[str(inputs)],
               checkpoint=ckpt, count={"ckpt": "/ck/", "state": cq.STORE_FILES_REGEX})
    spec = {"tag": "testfs", "steps": [
        dict(do="call", fn="fs_selftest", args={"root": str(tmp_path / "fs")}),
        dict(do="write_batches", dir=str(inputs), batches=batches, start=0, stop=2),
        dict(run, name="first"),
        dict(do="write_batches", dir=str(inputs), batches=batches, start=2, stop=4),
        dict(run, name="failing", faults=[["failCreate", "/ck/commits/", 1]]),
        dict(run, name="rerun"),
    ]}
    steps = cq.check_steps(cq.run_subprocess(spec, tmp_path / "work"))
    t = steps[0]["value"]

    # Hadoop's FileSystem API
    assert t["fs_class"] == cq.TESTFS_CLASS and t["uri"] == "faulty:///", t
    assert t["plain_local_size"] == 1024, t
    assert t["written_after_plain"] == 1024 and t["created_after_plain"] == 1, t
    assert t["read_bytes_returned"] == 1024 and t["read_after_plain"] == 1024, t
    assert t["listed"] and all(p.startswith("faulty:") for p in t["listed"]), t

    # Spark's CheckpointFileManager falls back to its FileSystem-based manager: atomic
    # writes are a temp file in the same directory, renamed (no .crc side files)
    assert t["cfm_class"].endswith("FileSystemBasedCheckpointFileManager"), t
    assert t["atomic_ok_files"] == ["1.changelog"], t
    assert len(t["atomic_created"]) == 1 and re.search(r"/cfm/\.1\.changelog\..*\.tmp$",
                                                      t["atomic_created"][0]), t
    assert t["atomic_renames"] == 1, t

    # faults
    assert t["create_failure"] and "injected create failure" in t["create_failure"] \
        and "2.changelog" in t["create_failure"], t
    assert "2.changelog" not in t["after_create_failure"], t
    assert t["write_failure"] and "injected write failure" in t["write_failure"], t
    lost = t["after_lost_rename"]
    assert "4.changelog" not in lost and any(re.match(r"\.4\.changelog\..*\.tmp$", f)
                                             for f in lost), lost
    assert t["rename_failure"] and "injected rename failure" in t["rename_failure"], t
    assert [i.split()[0] for i in t["injected"]] == ["CREATE", "WRITE", "RENAME_LOSE",
                                                     "RENAME_FAIL"], t["injected"]
    assert t["pending_faults"] == 0 and t["after_reset"] == [0, 0, 0, 0], t

    # a streaming query whose checkpoint lives on faulty:
    first, failing, rerun = (cq.Run(steps[i]) for i in (2, 4, 5))
    first.check()
    assert first.fs["ckpt"]["written"] > 0 and first.fs["ckpt"]["created"] > 0, first.fs
    assert first.fs["state"]["written"] > 0, first.fs
    assert failing.error and "injected create failure" in failing.error \
        and "/ck/commits/" in failing.error, failing.error
    assert failing.injected and failing.injected[0].startswith("CREATE ") \
        and "/ck/commits/." in failing.injected[0], failing.injected
    rerun.check()
    assert rerun.fs["ckpt"]["read"] > 0, rerun.fs  # the restart read the checkpoint back
    expected_rows, _ = cq.model_sum_by_key(batches)
    got = cq.merged_rows(first, failing, rerun)
    assert got == expected_rows, f"{got}\n!=\n{expected_rows}"
