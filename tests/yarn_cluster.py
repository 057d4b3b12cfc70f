"""YARN for the tests (pytest -m yarn): Hadoop's MiniYARNCluster (a ResourceManager and
NodeManagers that launch containers as processes) in a JVM of its own, started from the
minicluster `make servers` resolved (buildsys/servers/MiniYarn.java), its `fs.defaultFS` an HDFS
of tests/hdfs_cluster.py; and `spark-submit --master yarn` against it."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import subprocess
import sys

from hdfs_cluster import start_minicluster_main


class YarnCluster:
    def __init__(self, work: pathlib.Path, hdfs_uri: str, node_managers: int = 2):
        self.work = work
        self.hdfs_uri = hdfs_uri
        self.node_managers = node_managers
        self.conf_dir = work / "conf"  # HADOOP_CONF_DIR of spark-submit
        self.proc: subprocess.Popen | None = None

    def start(self, timeout_s: float = 180) -> "YarnCluster":
        (self.work / "cluster").mkdir(parents=True, exist_ok=True)
        self.proc, _ = start_minicluster_main(
            "MiniYarn", [str(self.conf_dir), self.hdfs_uri, str(self.node_managers)], "1g", self.work / "cluster",
            self.work / "yarn.log", timeout_s, "the MiniYARNCluster")
        return self

    def submit(self, args: list[str], log: pathlib.Path) -> subprocess.Popen:
        """`spark-submit --master yarn ARGS` (pyspark's), its output in `log`."""
        from pyspark.find_spark_home import _find_spark_home
        env = dict(os.environ, HADOOP_CONF_DIR=str(self.conf_dir))
        return subprocess.Popen([os.path.join(_find_spark_home(), "bin", "spark-submit"), "--master", "yarn", *args],
                                stdout=open(log, "w"), stderr=subprocess.STDOUT, env=env, cwd=self.work)

    def stop(self) -> None:
        """Ends the cluster at once: SIGKILL, then any process still running under its work
        directory (a container the applications left). Not MiniYARNCluster.stop(): after an
        application each NodeManager waits there 10 s for log deletions scheduled hours ahead
        (NonAggregatingLogHandler) and more for the application's cleanup (36 s in all with
        two NodeManagers); the container logs stay in the work directory this way."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc is not None:
            self.proc.stdin.close()
            self.proc.stdout.close()
        self.proc = None
        for pid, _ in processes(f"{self.work}/"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running_yarn(work: pathlib.Path, hdfs_uri: str, node_managers: int = 2):
    cluster = YarnCluster(work, hdfs_uri, node_managers).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def processes(pattern: str) -> list[tuple[int, str]]:
    """(pid, command line) of this machine's processes whose command line contains `pattern`."""
    out = []
    for d in pathlib.Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if pattern in cmd:
                out.append((int(d.name), cmd))
    return out


PYTHON = sys.executable
