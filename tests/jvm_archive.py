"""Class-data-sharing archives of Spark's driver JVM, for the tests: starting a local session took
7.7 s (9 CPU-seconds) on this 2-core machine, 4.4 s (6) with the archive mapped instead of
Spark's classes loaded and verified again, and the suite starts hundreds of drivers and offline
commands (one test_migrate case: 91 CPU-seconds without, 70 with).

A JVM maps an archive only if its classpath starts with the archive's, so there is one archive per
driver classpath: `spark.driver.extraClassPath` goes before Spark's jars. `ensure()` makes the one
for an extra classpath once per pyspark install, JDK and jars (under build/test-jvm/, a few
seconds' run of a streaming query with JDK 17's `-XX:ArchiveClassesAtExit`, one process at a time).
conftest hands `jdk_options(path)` of the plain one (`spark.jars` only, as the user's path and the
offline commands have it) to every JVM the tests start; `use_for(builder)`, called right before
`getOrCreate()`, gives the driver the archive of the builder's extra classpath (ttlstate.configure
puts the shim jar there, the test FileSystem's sessions its jar too): a session built that way
matched no archive before, and started 11-12 s (13-14 CPU-seconds) instead of 6 (8). The S3
drivers (tests/checkpoint_pipeline.py) get theirs the same way, and test_s3's offline commands
through `driver_options` in their `--conf`s; that archive holds S3A's client classes too. A JVM
matching none (servers, other Spark lines, the launcher's own small JVM) starts as before,
silently: the flags only turn the archive's warnings off.
`python jvm_archive.py OUT WORK [EXTRA_CLASSPATH]` is the run that dumps."""

from __future__ import annotations

import fcntl
import functools
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


@functools.lru_cache(maxsize=1)
def _java_version() -> list[str]:
    return [line for line in subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
            if "Picked up" not in line]


def _key(jvm_flags: str, extra_classpath: str) -> str:
    import pyspark

    jars = os.path.join(os.path.dirname(pyspark.__file__), "jars")
    facts = [pyspark.__version__, jars, os.stat(jars).st_mtime_ns, _java_version(), jvm_flags]
    if extra_classpath:  # the JVM checks each entry's size and time: a rebuilt jar needs a new archive
        facts.append([(p, os.stat(p).st_size, os.stat(p).st_mtime_ns) for p in extra_classpath.split(os.pathsep)])
    return f"spark-{pyspark.__version__}-{hashlib.sha256(json.dumps(facts).encode()).hexdigest()[:16]}"


def ensure(jvm_flags: str, extra_classpath: str = "") -> str | None:
    """The archive's path for this pyspark and JDK with `jvm_flags`, and a driver whose
    `spark.driver.extraClassPath` is `extra_classpath`; made if missing (one process at a time:
    another waits for it). None (and a line on stderr) if it could not be made: the JVMs then
    start without it."""
    try:
        path = os.path.join(ARCHIVE_DIR, _key(jvm_flags, extra_classpath) + ".jsa")
        if os.path.exists(path):
            return path
        os.makedirs(ARCHIVE_DIR, exist_ok=True)
        with open(path + ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if os.path.exists(path):  # made by the process that held the lock
                return path
            partial = f"{path}.{os.getpid()}.partial"
            with tempfile.TemporaryDirectory(prefix="ttlstate-jvm-archive-") as work:
                env = {**os.environ, "JDK_JAVA_OPTIONS": f"{jvm_flags} -Djava.io.tmpdir={work}"}
                proc = subprocess.run([sys.executable, __file__, partial, work, extra_classpath], env=env,
                                      capture_output=True, text=True, timeout=300)
            if proc.returncode != 0 or not os.path.exists(partial):
                raise RuntimeError(f"exit {proc.returncode}: {proc.stderr[-2000:]}")
            os.replace(partial, path)
        return path
    except Exception as e:  # noqa: BLE001 - a missing archive costs time, never a result
        print(f"tests/jvm_archive.py: no class-data-sharing archive, JVMs start without one: {e}", file=sys.stderr)
        return None


def use_for(builder) -> None:
    """Gives the driver `builder.getOrCreate()` starts the archive of the builder's
    `spark.driver.extraClassPath` (made if missing), through `spark.driver.extraJavaOptions`: the
    java command line comes after JDK_JAVA_OPTIONS, so its flag wins in the driver only, and the
    JVMs the driver starts (a local cluster's executors, Spark's jars only) keep the plain one.
    Does nothing unless the tests gave the JVMs an archive (conftest) or with no extra classpath."""
    options = driver_options(builder._options.get("spark.driver.extraClassPath", ""))
    if options:
        java_options = builder._options.get("spark.driver.extraJavaOptions", "")
        builder.config("spark.driver.extraJavaOptions", f"{java_options} {options}".strip())


def driver_options(extra_classpath: str) -> str:
    """The driver JVM options that map the archive of `extra_classpath` (made if missing), for a
    `spark.driver.extraJavaOptions` of the tests' own (an offline command's `--conf`); "" where
    the tests gave the JVMs no archive (conftest) or without an extra classpath."""
    flags = os.environ.get("TTLSTATE_TEST_JVM_FLAGS")
    if flags is None or not extra_classpath or "-XX:SharedArchiveFile=" not in os.environ.get("JDK_JAVA_OPTIONS", ""):
        return ""
    path = ensure(flags, extra_classpath)
    return f"-XX:SharedArchiveFile={path}" if path else ""


def _dump(out: str, work: str, extra_classpath: str):
    """A streaming aggregation on ttlstate and a batch query, in a driver with `extra_classpath`
    before Spark's jars that writes the classes it loaded from its classpath to `out` as it exits."""
    sys.path.insert(0, _HERE)
    import streaming as st
    import ttlstate

    events = os.path.join(work, "events")
    os.mkdir(events)
    with open(os.path.join(events, "0.json"), "w") as f:
        f.writelines(json.dumps({"k": i % 7, "v": i}) + "\n" for i in range(100))
    builder = (st.session_builder("ttlstate-jvm-archive").config("spark.jars", ttlstate.jar_path())
               .config("spark.sql.streaming.stateStore.providerClass", st.TTLSTATE)
               .config("spark.driver.extraJavaOptions", f"-XX:ArchiveClassesAtExit={out}"))
    if extra_classpath:
        builder = builder.config("spark.driver.extraClassPath", extra_classpath)
    spark = builder.getOrCreate()
    stream = spark.readStream.schema("k INT, v INT").json(events).groupBy("k").count()
    query = (stream.writeStream.outputMode("update").format("memory").queryName("counts")
             .option("checkpointLocation", os.path.join(work, "ck")).trigger(availableNow=True).start())
    query.awaitTermination()
    assert spark.sql("SELECT sum(`count`) FROM counts").first()[0] == 100
    if "hadoop-aws" in extra_classpath:  # S3A's client too (made, never connected: no request)
        jvm = spark._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        for k, v in {"fs.s3a.endpoint": "http://127.0.0.1:9", "fs.s3a.access.key": "archive",
                     "fs.s3a.secret.key": "archive", "fs.s3a.bucket.probe": "0",
                     "fs.s3a.path.style.access": "true"}.items():
            conf.set(k, v)
        jvm.org.apache.hadoop.fs.FileSystem.newInstance(jvm.java.net.URI("s3a://archive/"), conf).close()
    spark.stop()


if __name__ == "__main__":
    _dump(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else "")
