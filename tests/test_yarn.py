"""ttlstate on YARN (issue 44): `spark-submit --master yarn`, client and cluster deploy modes, of
a PySpark stateful query (the aggregation and dropDuplicatesWithinWatermark with TTL) on a
MiniYARNCluster of 2 NodeManagers (tests/yarn_cluster.py), its checkpoint on a MiniDFSCluster;
ttlstate's jar through `--jars` and its Python as the documentation's (docs/guide/clusters.md) alternative to a packed
environment says (the same Python, with ttlstate installed, on every node:
`spark.pyspark.python`). The executors in YARN containers start the store service; in client
mode an executor's container is SIGKILLed mid-stream. The output is batch for batch the HDFS
provider's (local mode, local checkpoint), and no store service is left running when the
application ends."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

import pytest

import checkpoint_pipeline as pipeline
import streaming as st
from hdfs_cluster import running_hdfs
from streaming import HDFS, TTLSTATE
from yarn_cluster import processes, running_yarn

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

N_FILES = 4
HERE = st.pathlib.Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    work = tmp_path_factory.mktemp("yarn")
    with running_hdfs(work / "hdfs", datanodes=1) as hdfs, running_yarn(work / "yarn", hdfs.uri) as yarn:
        yield hdfs, yarn


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The input files, and the HDFS provider's output in local mode (a local checkpoint)."""
    work = tmp_path_factory.mktemp("yarn-reference")
    st.write_files(work / "events", st.generate_events(N_FILES, 200, n_keys=50, n_values=10, seed=85))
    return work / "events", pipeline.run(work, "hdfs-provider", HDFS, str(work / "ck"), {})


def _submit(yarn, work, mode: str, events, checkpoint: str):
    import ttlstate
    from pyspark.find_spark_home import _find_spark_home

    spec = dict(queries=["agg", "dedup"], input=events.as_uri(), checkpoint=checkpoint, submitted=True,
                out_file=str(work / f"{mode}.json"), confs={st.PROVIDER_CLASS_KEY: TTLSTATE, **pipeline.TTLSTATE_CONFS},
                log_level="WARN")
    (work / f"{mode}.spec.json").write_text(json.dumps(spec))
    args = ["--deploy-mode", mode, "--name", f"ttlstate-yarn-{mode}",
            "--conf", f"spark.yarn.jars=local:{_find_spark_home()}/jars/*",
            "--conf", f"spark.pyspark.python={sys.executable}", "--conf", f"spark.pyspark.driver.python={sys.executable}",
            "--conf", "spark.executor.instances=2", "--conf", "spark.executor.cores=1",
            "--conf", "spark.executor.memory=768m", "--conf", "spark.driver.memory=768m",
            "--conf", "spark.yarn.am.memory=512m", "--conf", "spark.yarn.maxAppAttempts=1",
            "--conf", "spark.ui.enabled=false", *_container_jvm_flags(),
            "--jars", ttlstate.jar_path(), "--py-files", str(HERE / "streaming.py"),
            str(HERE / "checkpoint_pipeline.py"), str(work / f"{mode}.spec.json")]
    return yarn.submit(args, work / f"{mode}.log")


def _container_jvm_flags() -> list[str]:
    """The tests' JVM flags (conftest) for the containers too, whose environment YARN makes
    without ours: the application master's (the driver's in cluster mode) and the executors'."""
    flags = os.environ.get("TTLSTATE_TEST_JVM_FLAGS")
    if not flags:
        return []
    return ["--conf", f"spark.yarn.appMasterEnv.JDK_JAVA_OPTIONS={flags}",
            "--conf", f"spark.executorEnv.JDK_JAVA_OPTIONS={flags}"]


def _executor_containers(work) -> list[tuple[int, str]]:
    return [p for p in processes("YarnCoarseGrainedExecutorBackend") if str(work) in p[1]]


@pytest.mark.parametrize("mode", ["client", "cluster"])
def test_spark_submit_on_yarn(clusters, reference, tmp_path, mode):
    hdfs, yarn = clusters
    events, expected = reference
    ck = f"/checkpoints/yarn-{mode}"
    proc = _submit(yarn, tmp_path, mode, events, hdfs.uri + ck)
    killed = []

    def kill_an_executor_after_the_first_commit():
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if hdfs.list(f"{ck}/agg/commits"):
                executors = _executor_containers(yarn.work)
                if executors:
                    os.kill(executors[0][0], signal.SIGKILL)
                    killed.append(executors[0])
                    return
            time.sleep(0.3)

    killer = threading.Thread(target=kill_an_executor_after_the_first_commit, daemon=True)
    if mode == "client":
        killer.start()
    try:
        code = proc.wait(900)
    finally:
        if proc.poll() is None:
            proc.kill()
    log = (tmp_path / f"{mode}.log").read_text(errors="replace")
    assert code == 0, log[-6000:]
    if mode == "client":
        killer.join(5)
        assert killed, "no executor container was running after the first commit"
    actual = json.loads((tmp_path / f"{mode}.json").read_text())
    pipeline.assert_same_batches({1: expected}, {1: actual}, min_batches=N_FILES, min_rows=100)
    # nothing of ours left running once the application ended: no store service, no executor
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (processes("ttlstate.service") and
                                           [p for p in processes("ttlstate.service") if str(yarn.work) in p[1]]
                                           or _executor_containers(yarn.work)):
        time.sleep(1)
    assert not [p for p in processes("ttlstate.service") if str(yarn.work) in p[1]]
    assert not _executor_containers(yarn.work)
