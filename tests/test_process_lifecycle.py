"""No ttlstate Python process outlives its JVM: after spark.stop(), and after SIGKILL.

Each test has a PySpark driver in a subprocess (so the shared session of the other
tests is not touched) run a small ttlstate query in a session of its own and report its
JVM's pid. The test finds the store service (`python -m ttlstate.service --dir DIR`) and its
worker processes among the JVM's descendants with psutil, then stops Spark or SIGKILLs the
JVM and polls until they are gone.

A driver (its Python and its JVM) serves the tests in turn while its JVM lives (`drivers`):
each test's query runs in a new SparkContext with that test's configuration (after
spark.stop(), as a PySpark program may do), so its store service is a new one. Starting a
driver and its JVM took most of each test's CPU time; the SIGKILL ends the first driver,
the tests of broken installs share the second.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time

import psutil
import pytest

from service_client import BROKEN_WORKER_SETUPS, FAILED_START_LINES, service_code, service_processes

pytestmark = pytest.mark.slow

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
GONE_WITHIN_S = 15

DRIVER = textwrap.dedent("""
    import json, pathlib, sys
    sys.path.insert(0, sys.argv[1])
    import streaming as st
    import ttlstate

    root = pathlib.Path(sys.argv[2])
    spark, runs = None, 0
    # `run` builds a session (a new SparkContext if an earlier one was stopped) and runs a
    # small ttlstate query in it; `run PYTHON` has the store service started with PYTHON
    # (spark.pyspark.python) and reports the query's failure.
    for line in sys.stdin:
        command, _, python = line.strip().partition(" ")
        if command == "run":
            runs += 1
            work = root / f"run{runs}"
            if spark is not None:
                spark.stop()
            builder = st.session_builder("ttlstate-lifecycle", warehouse=str(work / "warehouse"))
            if python:
                builder = builder.config("spark.pyspark.python", python)
            spark = st.get_or_create(ttlstate.configure(builder))
            spark.sparkContext.setLogLevel("WARN")
            jvm = spark.sparkContext._jvm
            pid = int(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getPid())
            print(json.dumps({"event": "started", "jvm_pid": pid}), flush=True)
            if python:
                st.write_files(work / "events", st.generate_events(2, 10, seed=5))
            else:
                st.write_files(work / "events", st.generate_events(3, 20, seed=5))
            try:
                res = st.run_query(spark, st.TTLSTATE, st.agg_by_key, "update", work / "events",
                                   work / "checkpoint")
                st.assert_provider_served(res, st.TTLSTATE)
                print(json.dumps({"event": "ran", "jvm_pid": pid, "rows": len(res.rows)}), flush=True)
            except Exception as e:  # noqa: BLE001
                print(json.dumps({"event": "failed", "error": str(e)}), flush=True)
        elif command == "stop":
            spark.stop()
            spark = None
            print(json.dumps({"event": "stopped"}), flush=True)
        elif command == "exit":
            break
""")


class Driver:
    """The driver subprocess, its stdout events, and every process it led to."""

    def __init__(self, tmp_path):
        self.jvm: psutil.Process | None = None  # once a run reported it
        self.log = tmp_path / "driver.log"
        self._log_file = open(self.log, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-c", DRIVER, TESTS_DIR, str(tmp_path)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log_file,
            text=True, start_new_session=True)
        self._events: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.seen: dict[int, psutil.Process] = {}

    def _read(self):
        for line in self.proc.stdout:
            line = line.strip()
            if line.startswith("{"):
                try:
                    self._events.put(json.loads(line))
                except ValueError:
                    pass
        self._events.put({"event": "eof"})

    def expect(self, event: str, timeout: float = 240) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                ev = self._events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                ev = {"event": "timeout"}
            if ev["event"] == event:
                return ev
            if ev["event"] in ("eof", "timeout", "failed") or time.monotonic() > deadline:
                pytest.fail(f"driver: expected {event!r}, got {ev}; exit code "
                            f"{self.proc.poll()}; log tail:\n{self.log_tail()}")

    def send(self, line: str):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def log_tail(self, n: int = 40) -> str:
        self._log_file.flush()
        lines = self.log.read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def remember(self, procs):
        for p in procs:
            self.seen[p.pid] = p

    def close(self):
        """Ends the driver, and kills by pid whatever it led to that is still alive."""
        try:
            if self.proc.poll() is None:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
                try:
                    self.proc.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            # The JVM exits by itself once the driver is gone; give it a moment.
            wait_until_gone(list(self.seen.values()), [], timeout=10)
            for p in self.seen.values():
                if alive(p):
                    p.kill()
            self._log_file.close()


def alive(p: psutil.Process) -> bool:
    """Running (a zombie has exited; the same pid reused by another process is not p)."""
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def cmdline(p: psutil.Process) -> list[str]:
    try:
        return p.cmdline()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return []


def is_service(p: psutil.Process) -> bool:
    """The service and its workers (forked from it: the same command line)."""
    return "ttlstate.service" in " ".join(cmdline(p))


def service_dir(p: psutil.Process) -> str:
    args = cmdline(p)
    return args[args.index("--dir") + 1]


def ttlstate_processes_of(jvm: psutil.Process) -> list[psutil.Process]:
    return [p for p in jvm.children(recursive=True) if is_service(p) and alive(p)]


def wait_until_gone(procs, paths, timeout=GONE_WITHIN_S) -> tuple[list, list]:
    """Polls until no process in `procs` runs and no path in `paths` exists."""
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in procs if alive(p)]
        paths_left = [d for d in paths if os.path.exists(d)]
        if (not left and not paths_left) or time.monotonic() > deadline:
            return left, paths_left
        time.sleep(0.1)


def describe(procs) -> str:
    return "; ".join(f"pid {p.pid}: {' '.join(cmdline(p))}" for p in procs)


class Drivers:
    """Hands out a driver: the same one while its process and its JVM live, else a new one."""

    def __init__(self, root):
        self.root, self.count, self.current = root, 0, None

    def get(self) -> Driver:
        d = self.current
        if d is not None and (d.proc.poll() is not None or (d.jvm is not None and not alive(d.jvm))):
            self.discard()
        if self.current is None:
            self.count += 1
            work = self.root / f"driver{self.count}"
            work.mkdir()
            self.current = Driver(work)
        return self.current

    def discard(self):
        """Ends the current driver (after its JVM was killed, or a test failed with it)."""
        if self.current is not None:
            d, self.current = self.current, None
            d.close()


@pytest.fixture(scope="module")
def drivers(tmp_path_factory):
    pool = Drivers(tmp_path_factory.mktemp("lifecycle"))
    yield pool
    pool.discard()


def run_in_driver(driver: Driver, python: str = "") -> psutil.Process:
    """Has the driver run its query in a new session; returns its JVM (remembered)."""
    driver.send(f"run {python}".strip())
    jvm = psutil.Process(driver.expect("started")["jvm_pid"])
    assert driver.jvm is None or driver.jvm.pid == jvm.pid, (driver.jvm, jvm)
    driver.jvm = jvm
    driver.remember([jvm])
    return jvm


def start_and_find_service(driver: Driver):
    """Runs the driver's query; returns the JVM, the service's processes and its dir."""
    jvm = run_in_driver(driver)
    ran = driver.expect("ran")
    assert ran["rows"] > 0 and ran["jvm_pid"] == jvm.pid
    # The JVM is the `java` that py4j started under the driver subprocess.
    javas = [p for p in psutil.Process(driver.proc.pid).children(recursive=True)
             if p.name() == "java"]
    assert jvm.pid in [p.pid for p in javas], (jvm, javas)

    procs = ttlstate_processes_of(jvm)
    driver.remember(procs)
    services = [p for p in procs if p.ppid() == jvm.pid]
    assert len(services) == 1, f"expected one store service under the JVM: {describe(procs)}"
    service = services[0]
    workers = [p for p in procs if p.ppid() == service.pid]
    assert workers, f"the service has no worker processes: {describe(procs)}"
    d = service_dir(service)
    assert os.path.basename(d).startswith("ttlstate-"), d
    mode = stat.S_IMODE(os.stat(d).st_mode)
    assert mode == 0o700, f"service dir {d} has mode {oct(mode)}, expected 0o700"
    return jvm, procs, d


def test_no_ttlstate_process_after_spark_stop(ttlstate_jar, drivers):
    driver = drivers.get()
    ok = False
    try:
        jvm, procs, d = start_and_find_service(driver)
        driver.send("stop")
        driver.expect("stopped", timeout=120)
        left, dirs_left = wait_until_gone(procs, [d])
        assert alive(jvm), "the JVM should still run after spark.stop() (py4j gateway)"
        assert not left, (f"{len(left)} ttlstate process(es) still run {GONE_WITHIN_S} s after "
                          f"spark.stop(): {describe(left)}")
        assert not ttlstate_processes_of(jvm), describe(ttlstate_processes_of(jvm))
        assert not dirs_left, f"the service dir {d} still exists after spark.stop()"
        ok = True
    finally:
        if not ok:
            drivers.discard()


def test_no_ttlstate_process_after_jvm_sigkill(ttlstate_jar, drivers):
    driver = drivers.get()
    try:
        jvm, procs, d = start_and_find_service(driver)
        os.kill(jvm.pid, signal.SIGKILL)
        left, dirs_left = wait_until_gone(procs, [d])
        assert not alive(jvm)
        assert not left, (f"{len(left)} ttlstate process(es) still run {GONE_WITHIN_S} s after "
                          f"the JVM was SIGKILLed: {describe(left)}")
        orphans = service_processes(d)
        assert not orphans, describe(orphans)
        assert not dirs_left, f"the service dir {d} still exists after the JVM was killed"
    finally:
        drivers.discard()


# The store service's interpreter with its workers broken (service_client.BROKEN_WORKER_SETUPS).
BROKEN_PYTHON = """#!/bin/sh
if [ "$1" = "-m" ]; then shift 2; fi
exec {python} -c "{code}" "$@"
"""
# What the query's error says for each
BROKEN = {
    "import": ["exited with code 3 before it was ready", "cannot import the store worker (ttlstate.worker)"],
    **{broken: ["exited with code 4", line, "times in a row"] for broken, line in FAILED_START_LINES.items()},
}


@pytest.mark.parametrize("broken", sorted(BROKEN))
def test_a_store_service_that_cannot_start_its_workers_fails_the_query(ttlstate_jar, tmp_path, broken, drivers):
    """The query fails with the service's own error, and no ttlstate process is left: before,
    its workers died at import or start and were restarted for as long as the JVM waited for a
    HELLO reply (the query's workerTimeout, 10 minutes by default). The session's
    spark.pyspark.python names the broken interpreter (the shim starts the service with it)."""
    python = tmp_path / "python-with-broken-workers"
    python.write_text(BROKEN_PYTHON.format(python=sys.executable, code=service_code(BROKEN_WORKER_SETUPS[broken])))
    python.chmod(0o755)
    driver = drivers.get()
    ok = False
    try:
        jvm = run_in_driver(driver, str(python))
        failed = driver.expect("failed", timeout=180)
        for text in BROKEN[broken]:
            assert text in failed["error"], (text, failed["error"][-3000:])
        assert not wait_until_gone(ttlstate_processes_of(jvm), [])[0], describe(ttlstate_processes_of(jvm))
        ok = True
    finally:
        if not ok:
            drivers.discard()
