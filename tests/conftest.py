"""Fixtures of the end-to-end tests: one shared local SparkSession that can run both providers.

The provider is a per-query SQL conf (`spark.sql.streaming.stateStore.providerClass`), so
each query sets it right before it starts (`streaming.run_query`). The session is built
with `ttlstate.configure(...)`, which puts the shim jar on the classpath.

The provider under test (the "candidate") is chosen in one place, here: ttlstate by
default; `TTLSTATE_E2E_CANDIDATE=rocksdb` runs the same suite with Spark's own
RocksDBStateStoreProvider instead (`=hdfs`: HDFS against itself), which proves the tests
themselves (they must pass with a correct provider) independently of ttlstate.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import zipfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jvm_archive  # noqa: E402
import streaming  # noqa: E402

TTLSTATE = streaming.TTLSTATE
HDFS = streaming.HDFS

_CANDIDATES = {"ttlstate": streaming.TTLSTATE, "rocksdb": streaming.SPARK_ROCKSDB,
               "hdfs": streaming.HDFS}
_candidate_name = os.environ.get("TTLSTATE_E2E_CANDIDATE", "ttlstate")
if _candidate_name not in _CANDIDATES:
    raise pytest.UsageError(
        f"TTLSTATE_E2E_CANDIDATE={_candidate_name!r}; choose one of {sorted(_CANDIDATES)}")
CANDIDATE = _CANDIDATES[_candidate_name]

_SHIM_CLASS = "io/ttlstate/spark/TtlStateStoreProvider.class"


def shim_jar() -> str:
    """The shim jar, checked; fails the test with what to do when it is missing or stale."""
    import ttlstate

    try:
        jar = ttlstate.jar_path()
    except FileNotFoundError as e:
        pytest.fail(f"{e}\nRun `make jar` (or `cd /work/main && gradle --offline -q jar`) "
                    "to build the ttlstate shim jar before the end-to-end tests.", pytrace=False)
    with zipfile.ZipFile(jar) as z:
        if _SHIM_CLASS not in z.namelist():
            pytest.fail(f"The shim jar {jar} has no {_SHIM_CLASS}: it is stale or the shim is "
                        "unfinished. Run `make jar` (gradle --offline -q jar) to rebuild it.",
                        pytrace=False)
    return jar


class _SessionHolder:
    """Keeps the shared session; rebuilds it if a test stopped it (fresh-session restarts)."""

    def __init__(self, warehouse: str):
        self.warehouse = warehouse
        self.session = None

    def get(self):
        s = self.session
        if s is None or s.sparkContext._jsc is None:
            self.session = streaming.build_session(warehouse=self.warehouse)
        return self.session

    def restart(self):
        """Stops the session (SparkContext, SparkEnv, every loaded provider) and builds anew."""
        if self.session is not None and self.session.sparkContext._jsc is not None:
            self.session.stop()
        self.session = None
        return self.get()

    def stop(self):
        if self.session is not None and self.session.sparkContext._jsc is not None:
            self.session.stop()
        self.session = None


@pytest.fixture(scope="session")
def _session_holder(tmp_path_factory):
    if CANDIDATE == TTLSTATE:
        shim_jar()
    else:
        import ttlstate
        try:
            ttlstate.jar_path()
        except FileNotFoundError as e:
            pytest.fail(f"{e}\nRun `make jar` to build the ttlstate shim jar.", pytrace=False)
    holder = _SessionHolder(str(tmp_path_factory.mktemp("warehouse")))
    yield holder
    holder.stop()


@pytest.fixture
def spark(_session_holder):
    """The shared local[2] session (rebuilt if an earlier test stopped it)."""
    return _session_holder.get()


@pytest.fixture
def no_other_stores_loaded(spark):
    """Unloads every store an earlier test left loaded (`streaming.unload_all_stores`; Spark's
    maintenance unloads them only 60 s or more later in a full suite). The caches of a JVM with
    the same `cache.maxBytes` share one budget (docs/decisions/069-view-takes-back-its-share.md),
    so a test that counts cache misses counts its own queries' only, whatever ran before it in
    the session."""
    import streaming
    streaming.unload_all_stores(spark)


@pytest.fixture
def js(spark, tmp_path):
    """Spark's provider API driven through py4j (`jvm_state.JvmState`), its stores keeping their
    local checkpoint cache in the test's tmp."""
    from jvm_state import JvmState
    return JvmState(spark, cache_dir=str(tmp_path / "cache"))


@pytest.fixture
def restart_spark(_session_holder):
    """A callable that stops the shared session and returns a freshly built one."""
    return _session_holder.restart


@pytest.fixture(scope="session")
def ttlstate_jar():
    """Path of the shim jar; fails with what to do if it is missing or lacks the provider."""
    return shim_jar()


@pytest.fixture(scope="session")
def candidate():
    """Class name of the provider under test (ttlstate unless TTLSTATE_E2E_CANDIDATE says)."""
    return CANDIDATE


# ---------------------------------------------------------------------------------------
# The test FileSystem (io.ttlstate.testfs.FaultyFileSystem, scheme `faulty:`): see
# tests/checkpoint_queries.py. Its jar is built by `make jar` into jvm-shim/build/libs/.

_TESTFS_ENTRY = "io/ttlstate/testfs/FaultyFileSystem.class"


def testfs_jar_checked() -> str:
    """The test FileSystem jar, checked; fails the test with what to do when it is missing."""
    import checkpoint_queries

    try:
        jar = checkpoint_queries.testfs_jar()
    except FileNotFoundError as e:
        pytest.fail(str(e), pytrace=False)
    with zipfile.ZipFile(jar) as z:
        if _TESTFS_ENTRY not in z.namelist():
            pytest.fail(f"The test FileSystem jar {jar} has no {_TESTFS_ENTRY}: run `make jar`.",
                        pytrace=False)
    return jar


@pytest.fixture(scope="session")
def testfs_jar():
    """Path of the test FileSystem jar (scheme `faulty:`). A JVM's classpath is fixed when it
    starts, so sessions that use it are built with it from the start:
    `checkpoint_queries.testfs_session_confs(jar)` gives the builder confs (`spark.jars`,
    `spark.driver.extraClassPath`, `spark.hadoop.fs.faulty.impl`), and
    `checkpoint_queries.run_subprocess` runs steps in such a session in a fresh JVM."""
    return testfs_jar_checked()


# Flags of every JVM the tests start (through JDK_JAVA_OPTIONS): a test JVM lives seconds to
# minutes, and on 2 cores much of its CPU went to the C2 compiler and G1's threads. C1 alone and
# the serial collector took test_e2e_restart.py from 158 to 97 CPU-seconds (docs/TESTING.md).
# C1 alone shrinks the code cache's default from 240 to 48 MB, and an xdist worker's driver, which
# runs hundreds of queries' generated classes, filled it: "Out of space in CodeCache for adapters"
# failed a query in CI (stop 62). The reservation is address space; the JVM commits what it uses.
# TTLSTATE_TEST_JVM_FLAGS replaces them (empty: the JVM's defaults, as production runs).
TEST_JVM_FLAGS = os.environ.get("TTLSTATE_TEST_JVM_FLAGS",
                                "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m")


def pytest_configure(config):
    """One directory for the test run's temporary files, deleted afterwards, so tests leave
    nothing in /tmp: the local checkpoint cache of sessions built by `streaming.session_builder`
    (`TTLSTATE_TEST_CACHE_DIR`), and `java.io.tmpdir` of every JVM the tests start
    (`JDK_JAVA_OPTIONS`, which the `java` launcher reads): Spark's local and artifact dirs,
    lz4-java's library, ttlstate's default cache dir, which a JVM that a test kills, or a server
    started as the README says, would otherwise leave in /tmp. Subprocesses inherit both, and
    the test JVM flags (TEST_JVM_FLAGS) with them, and the class-data-sharing archive of Spark's
    driver (tests/jvm_archive.py; TTLSTATE_TEST_JVM_ARCHIVE=0 goes without)."""
    report = os.environ.get("TTLSTATE_TEST_CPU_REPORT")  # CPU-seconds by file (tests/cpu_by_file.py)
    if report:
        import cpu_by_file
        if not hasattr(config, "workerinput"):  # the controller, or a run without workers, starts it
            open(report, "w").close()
        config.pluginmanager.register(cpu_by_file.CpuByFile(os.path.abspath(report)), "ttlstate-cpu-by-file")
    if "TTLSTATE_TEST_CACHE_DIR" not in os.environ:
        run = config._ttlstate_run_dir = tempfile.mkdtemp(prefix="ttlstate-test-")
        cache, jvm_tmp = os.path.join(run, "cache"), os.path.join(run, "jvm")
        os.mkdir(cache)
        os.mkdir(jvm_tmp)
        os.environ["TTLSTATE_TEST_CACHE_DIR"] = cache
        os.environ["TTLSTATE_TEST_JVM_FLAGS"] = TEST_JVM_FLAGS  # jvm_archive.use_for's, in every process
        archive = jvm_archive.ensure(TEST_JVM_FLAGS) if os.environ.get("TTLSTATE_TEST_JVM_ARCHIVE", "1") != "0" else None
        os.environ["JDK_JAVA_OPTIONS"] = " ".join(filter(None, [
            os.environ.get("JDK_JAVA_OPTIONS", ""), TEST_JVM_FLAGS, archive and jvm_archive.jdk_options(archive),
            f"-Djava.io.tmpdir={jvm_tmp}"]))


def pytest_unconfigure(config):
    path = getattr(config, "_ttlstate_run_dir", None)
    if path:
        shutil.rmtree(path, ignore_errors=True)


# ---------------------------------------------------------------------------------------
# The order of files: slowest first (tests/file_times.json, written by
# `python buildsys/test_times.py REPORT --write-schedule tests/file_times.json`). pytest-xdist's
# `--dist loadfile --no-loadscope-reorder` (the Makefile's XDIST) hands out files in collection
# order, so the long files start first and the short ones fill in at the end, and the two workers
# finish together (without the flag xdist orders files by their number of tests). A file not in
# the table counts as slow (it starts early); the order of tests inside a file does not change.

_FILE_TIMES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "file_times.json")


def pytest_collection_modifyitems(config, items):
    _deselect_thorough(config, items)
    _slowest_files_first(items)


def _deselect_thorough(config, items):
    """Tests marked `thorough` (repetitions for confidence; a smaller test checks the same
    claim in every run) run only with TTLSTATE_THOROUGH=1, as `make test-thorough` sets."""
    if streaming.THOROUGH:
        return
    thorough = [item for item in items if item.get_closest_marker("thorough") is not None]
    if thorough:
        config.hook.pytest_deselected(items=thorough)
        items[:] = [item for item in items if item.get_closest_marker("thorough") is None]


def _slowest_files_first(items):
    import json

    try:
        with open(_FILE_TIMES) as f:
            seconds = json.load(f)
    except (OSError, ValueError):
        return
    unknown = max(seconds.values(), default=0.0)
    first_seen: dict[str, int] = {}
    for i, item in enumerate(items):
        first_seen.setdefault(item.nodeid.split("::", 1)[0], i)

    def key(pair):
        i, item = pair
        path = item.nodeid.split("::", 1)[0]
        return (-seconds.get(path, unknown), first_seen[path], i)

    items[:] = [item for _, item in sorted(enumerate(items), key=key)]
