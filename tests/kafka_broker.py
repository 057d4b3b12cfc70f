"""A real Kafka broker for the tests (pytest -m kafka): one KRaft node (broker and controller in
one process, no ZooKeeper) started from the jars `make servers` resolved, on loopback ports,
its log directory under the test's tmp; stopped and removed by `stop()`."""

from __future__ import annotations

import base64
import pathlib
import re
import shutil
import subprocess
import time
import uuid

from server_process import SERVERS, classpath, die_with_parent, free_port, stop_process

BROKER_CLASSPATH = SERVERS / "kafka-broker.classpath"
CONNECTOR_CLASSPATH = SERVERS / "spark-kafka.classpath"
# The connector's jars Spark needs besides its own (the rest of the connector's dependencies,
# Scala and Spark's, are pyspark's own jars)
CONNECTOR_ARTIFACTS = ("spark-sql-kafka-0-10", "spark-token-provider-kafka-0-10", "kafka-clients", "commons-pool2")

LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d %p %c{{1}}: %m%n
rootLogger.level = info
rootLogger.appenderRef.file.ref = file
"""


def connector_jars() -> list[str]:
    """Spark's Kafka connector and the jars it needs that pyspark does not ship."""
    jars = [p for p in classpath(CONNECTOR_CLASSPATH)
            if any(re.match(re.escape(a) + r"[-_]", pathlib.Path(p).name) for a in CONNECTOR_ARTIFACTS)]
    assert len(jars) == len(CONNECTOR_ARTIFACTS), jars
    return jars


def kraft_cluster_id() -> str:
    """A random KRaft cluster id that the storage tool's argument parser takes.

    A base64 id that starts with '-' reads as an option ("--cluster-id: expected
    one argument"); Kafka's own Uuid.randomUuid() skips those ids for that reason.
    """
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


class KafkaBroker:
    def __init__(self, work: pathlib.Path):
        self.work = work
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None
        self.log = work / "broker.log"

    def _java(self, main: str, *args: str, **popen) -> subprocess.Popen:
        return subprocess.Popen(
            ["java", "-Xmx512m", "-XX:+UseSerialGC", f"-Dlog4j2.configurationFile={self.work / 'log4j2.properties'}",
             "-cp", ":".join(classpath(BROKER_CLASSPATH)), main, *args], preexec_fn=die_with_parent, **popen)

    def start(self, timeout_s: float = 90) -> "KafkaBroker":
        self.work.mkdir(parents=True, exist_ok=True)
        (self.work / "log4j2.properties").write_text(LOG4J2.format(log=self.log))
        props = self.work / "server.properties"
        props.write_text("\n".join([
            "process.roles=broker,controller", "node.id=1",
            f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER", "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={self.work / 'data'}",
            # one partition a topic: a batch's records then reach a shuffle in offset order
            # wherever its one map task runs, so which of a key's duplicates
            # dropDuplicatesWithinWatermark keeps does not depend on the cluster's layout
            "num.partitions=1",
            "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1", "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true", ""]))
        cluster_id = kraft_cluster_id()
        fmt = self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", str(props),
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, _ = fmt.communicate(timeout=120)
        if fmt.returncode != 0:
            raise RuntimeError(f"formatting the broker's storage failed ({fmt.returncode}): {out[-2000:]}")
        self.proc = self._java("kafka.Kafka", str(props), stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the broker exited ({self.proc.returncode}): {self._log_tail()}")
            if self.log.exists() and "Kafka Server started" in self.log.read_text(errors="replace"):
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the broker did not start in {timeout_s:.0f} s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else "(no log)"

    def stop(self) -> None:
        stop_process(self.proc, 30)
        self.proc = None
        shutil.rmtree(self.work / "data", ignore_errors=True)
