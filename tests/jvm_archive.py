"""A class-data-sharing archive of Spark's driver JVM, for the tests: starting a local session took
7.7 s (9 CPU-seconds) on this 2-core machine, 4.4 s (6) with the archive mapped instead of
Spark's classes loaded and verified again, and the suite starts hundreds of drivers and offline
commands (one test_migrate case: 91 CPU-seconds without, 70 with; test_s3, test_hdfs,
test_kafka and test_repartition together, whose S3 drivers cannot use it: 817 and 761). `ensure()` makes the archive once per pyspark install and JDK (under build/test-jvm/, a
few seconds' run of a streaming query with JDK 17's `-XX:ArchiveClassesAtExit`); conftest hands
`jdk_options(path)` to every JVM the tests start. A JVM whose classpath does not start with the
archive's (servers, drivers with an extra classpath, other Spark lines) starts as before, silently:
the flags only turn the archive's warnings off. `python jvm_archive.py OUT` is the run that dumps."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
ARCHIVE_DIR = os.path.join(os.path.dirname(_HERE), "build", "test-jvm")
_QUIET = "-Xlog:cds=off -Xlog:cds+dynamic=off"


def jdk_options(path: str) -> str:
    return f"-XX:SharedArchiveFile={path} {_QUIET}"


def _key(jvm_flags: str) -> str:
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    java = [line for line in subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
            if "Picked up" not in line]
    facts = [pyspark.__version__, jars, os.stat(jars).st_mtime_ns, java, jvm_flags]
    return f"spark-{pyspark.__version__}-{hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]}"


def ensure(jvm_flags: str) -> str | None:
    """The archive's path for this pyspark and JDK with `jvm_flags`, made if missing; None (and a
    line on stderr) if it could not be made: the tests then run without it."""
    try:
        path = os.path.join(ARCHIVE_DIR, _key(jvm_flags) + ".jsa")
        if os.path.exists(path):
            return path
        os.makedirs(ARCHIVE_DIR, exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with tempfile.TemporaryDirectory(prefix="ttlstate-jvm-archive-") as work:
            env = {**os.environ, "JDK_JAVA_OPTIONS": f"{jvm_flags} -Djava.io.tmpdir={work}"}
            proc = subprocess.run([sys.executable, __file__, partial, work], env=env, capture_output=True,
                                  text=True, timeout=300)
        if proc.returncode != 0 or not os.path.exists(partial):
            raise RuntimeError(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
        os.replace(partial, path)
        return path
    except Exception as e:  # noqa: BLE001 - a missing archive costs time, never a result
        print(f"tests/jvm_archive.py: no class-data-sharing archive, JVMs start without one: {e}", file=sys.stderr)
        return None


def _dump(out: str, work: str):
    """A streaming aggregation on ttlstate and a batch query, in a driver that writes the classes
    it loaded from Spark's classpath to `out` as it exits."""
    sys.path.insert(0, _HERE)
    import streaming as st
    import ttlstate

    events = os.path.join(work, "events")
    os.mkdir(events)
    with open(os.path.join(events, "0.json"), "w") as f:
        f.writelines(json.dumps({"k": i % 7, "v": i}) + "\n" for i in range(100))
    spark = (st.session_builder("ttlstate-jvm-archive").config("spark.jars", ttlstate.jar_path())
             .config("spark.sql.streaming.stateStore.providerClass", st.TTLSTATE)
             .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={out}").getOrCreate())
    stream = spark.readStream.schema("k INT, v INT").json(events).groupBy("k").count()
    query = (stream.writeStream.outputMode("update").format("memory").queryName("counts")
             .option("checkpointLocation", os.path.join(work, "ck")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert spark.sql("SELECT sum(`count`) FROM counts").first()[0] == 100
    spark.stop()


if __name__ == "__main__":
    _dump(sys.argv[1], sys.argv[2])
