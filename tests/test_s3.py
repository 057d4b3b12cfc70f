"""ttlstate with its checkpoint on S3 (issue 44): S3A (hadoop-aws, resolved by `make servers`)
against a real S3-protocol server on loopback (moto's, started here; tests/s3_server.py), each
driver its own process. The aggregation and dropDuplicatesWithinWatermark with TTL, their
checkpoints at `s3a://`, give batch for batch the output of the HDFS-backed provider with a local
checkpoint, across a driver restart and with snapshots uploaded by maintenance; the state files
are objects in the bucket."""

from __future__ import annotations

import json

import pytest

import streaming as st
from s3_server import S3Server
from streaming import HDFS, TTLSTATE

pytestmark = [pytest.mark.s3, pytest.mark.slow]

HERE = st.pathlib.Path(__file__).parent
PIPELINE = HERE / "s3_pipeline.py"
BUCKET = "ttlstate-checkpoints"
PREFIX = "spark.sql.streaming.stateStore.ttlstate."
N_FILES = 8
# TTL on and reached by nothing in the run; maintenance often and a snapshot after every second
# changelog, so that snapshots (manifests and their SSTs) are uploaded as well as changelogs
TTLSTATE_CONFS = {PREFIX + "ttl": "1h", "spark.sql.streaming.stateStore.maintenanceInterval": "1s",
                  "spark.sql.streaming.stateStore.minDeltasForSnapshot": "2"}


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    server = S3Server(tmp_path_factory.mktemp("s3")).start()
    try:
        server.client().create_bucket(Bucket=BUCKET)
        yield server
    finally:
        server.stop()


def _run(work, tag: str, provider: str, checkpoint: str, confs: dict, s3: S3Server) -> dict:
    spec = dict(queries=["agg", "dedup"], input=str(work / "events"), checkpoint=checkpoint,
                out_file=str(work / f"{tag}.json"),
                confs={**s3.spark_confs(), st.PROVIDER_CLASS_KEY: provider, **confs})
    proc, log, log_path = st.spawn_spec_process(str(PIPELINE), spec, work, tag)
    code = st.wait_or_kill(proc, 900)
    log.close()
    assert code == 0, f"{tag} exited {code}:\n{log_path.read_text(errors='replace')[-4000:]}"
    return json.loads((work / f"{tag}.json").read_text())


def test_checkpoints_on_s3_give_the_hdfs_providers_output_across_a_restart(s3, tmp_path):
    files = st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=81)
    checkpoint = f"s3a://{BUCKET}/{tmp_path.name}"
    runs = {}
    for part, (start, stop) in enumerate(((0, N_FILES // 2), (N_FILES // 2, N_FILES)), start=1):
        st.write_files(tmp_path / "events", files, start, stop)
        # each part a driver of its own: the second continues the first's checkpoints
        runs[HDFS, part] = _run(tmp_path, f"hdfs-{part}", HDFS, str(tmp_path / "ck-hdfs"), {}, s3)
        runs[TTLSTATE, part] = _run(tmp_path, f"ttlstate-{part}", TTLSTATE, checkpoint, TTLSTATE_CONFS, s3)
    for q in ("agg", "dedup"):
        for part in (1, 2):
            expected, actual = runs[HDFS, part][q], runs[TTLSTATE, part][q]
            assert actual["ttlstate_metrics"] and not expected["ttlstate_metrics"], q
            assert len(expected["batches"]) >= N_FILES // 2, (q, part, sorted(expected["batches"]))  # and no-data batches
            assert actual["batches"] == expected["batches"], (q, part)
        assert sum(len(rows) for part in (1, 2) for rows in runs[HDFS, part][q]["batches"].values()) >= 200, q
    # the state is in the bucket: changelogs of every version, and snapshots with their SSTs
    keys = [o["Key"] for page in s3.client().get_paginator("list_objects_v2").paginate(
        Bucket=BUCKET, Prefix=f"{tmp_path.name}/") for o in page.get("Contents", [])]
    for q in ("agg", "dedup"):
        state = [k for k in keys if k.startswith(f"{tmp_path.name}/{q}/state/")]
        assert any(k.endswith(".changelog") for k in state), state[:20]
        assert any(k.endswith(".manifest") for k in state) and any(k.endswith(".sst") for k in state), state[:40]
