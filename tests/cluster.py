"""Helpers of the cluster tests: a `local-cluster` session, its executors, where tasks ran.

`local-cluster[N,cores,memoryMB]` starts a standalone master and N workers inside the
driver JVM; every executor is its own JVM (`CoarseGrainedExecutorBackend`), started by its
worker with the pip-installed pyspark as SPARK_HOME, and so owns its own ttlstate store
service. Nothing here is mocked: executors are found with `ps`, killed with SIGKILL, and
where each task ran is read from Spark's own status REST API.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

import streaming as st

MASTER = "local-cluster[2,1,2048]"
SHUFFLE_PARTITIONS = 4


def build_session(app_name: str = "ttlstate-cluster", warehouse: str | None = None,
                  master: str = MASTER):
    """`ttlstate.configure(...)` on the tests' builder, on a local cluster, then getOrCreate().

    The UI stays on (its REST API tells where tasks ran); maintenance runs every second so a
    store another executor took over is unloaded promptly; `spark.locality.wait=0` lets a
    task run on whichever executor is free, so stores move between executors.
    """
    import ttlstate

    b = (st.session_builder(app_name, warehouse).master(master)
         .config("spark.ui.enabled", "true")
         .config("spark.executor.memory", "1g")
         .config("spark.locality.wait", "0")
         .config("spark.sql.streaming.stateStore.maintenanceInterval", "1s"))
    spark = st.get_or_create(ttlstate.configure(b))
    spark.sparkContext.setLogLevel("WARN")
    return spark


def stop_session(spark) -> None:
    """Stops the session and deletes what its workers wrote under SPARK_HOME/work."""
    sc = spark.sparkContext
    app_id = sc.applicationId
    spark.stop()
    work = pathlib.Path(spark_home()) / "work"
    shutil.rmtree(work / app_id, ignore_errors=True)
    try:
        work.rmdir()  # only if no other application is using it
    except OSError:
        pass


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


# ---------------------------------------------------------------------------------------
# Processes

@dataclass(frozen=True)
class Executor:
    executor_id: str
    pid: int


class Pid(int):
    """A pid remembered with its process's start time (clock ticks after boot), so that
    `alive` does not take a later process that reused the number for it: the kernel's
    pid_max is 32768 here, and a whole test run wraps around it."""

    def __new__(cls, pid: int, started: int):
        self = super().__new__(cls, pid)
        self.started = started
        return self


def _stat(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command name: [0] state, [1] parent, [19] start."""
    return pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def _processes() -> list[tuple[Pid, int, str]]:
    """(pid, parent pid, command line) of every process, read from /proc (whole command
    lines: an executor's runs to tens of kilobytes, more than `ps` shows)."""
    rows = []
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            stat = _stat(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
        rows.append((Pid(int(entry.name), int(stat[19])), int(stat[1]), args.strip()))
    return rows


def executors(app_id: str) -> list[Executor]:
    """The live executor JVMs of application `app_id`."""
    found = []
    for pid, _ppid, args in _processes():
        if "CoarseGrainedExecutorBackend" in args and f"--app-id {app_id}" in args:
            m = re.search(r"--executor-id (\S+)", args)
            if m:
                found.append(Executor(m.group(1), pid))
    return sorted(found, key=lambda e: int(e.executor_id))


def store_services(jvm_pid: int) -> list[int]:
    """Pids of the ttlstate store service a JVM started, and of that service's workers."""
    procs = _processes()
    services = [pid for pid, ppid, args in procs if ppid == jvm_pid and "ttlstate.service" in args]
    workers = [pid for pid, ppid, _ in procs if ppid in services]
    return services + workers


def session_worker_pids(spark) -> list[int]:
    """The store worker processes of the session JVM's own service (local mode)."""
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    return store_services(jvm_pid)[1:]


def service_dir(service_pid: int) -> pathlib.Path | None:
    """The `--dir` of a running store service (its sockets and its stores' local files)."""
    for pid, _ppid, args in _processes():
        if pid == service_pid:
            m = re.search(r"--dir (\S+)", args)
            return pathlib.Path(m.group(1)) if m else None
    return None


def alive(pid: int) -> bool:
    """Whether `pid` runs; a zombie is dead for our purposes (nobody has reaped it yet),
    and so is a `Pid` whose number a later process took."""
    try:
        stat = _stat(pid)
    except OSError:
        return False
    return stat[0] != "Z" and (not isinstance(pid, Pid) or int(stat[19]) == pid.started)


def kill(pid: int) -> None:
    os.kill(pid, signal.SIGKILL)


def process_report(pids) -> str:
    """What each of `pids` is doing, for a failure message: its state, parent, kernel wait
    channel and command line, and which processes hold its stdin (a store service stops at
    EOF on stdin, once no process holds the pipe's other end)."""
    lines = []
    for pid in pids:
        proc = pathlib.Path(f"/proc/{pid}")
        try:
            stat = _stat(pid)
            wchan = (proc / "wchan").read_text().strip() or "-"
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            stdin = os.readlink(proc / "fd" / "0")
        except OSError as e:
            lines.append(f"  pid {pid}: gone or unreadable ({e})")
            continue
        holders = sorted({int(fd.parent.parent.name) for fd in pathlib.Path("/proc").glob("[0-9]*/fd/*")
                          if _link(fd) == stdin} - {pid}) if stdin.startswith("pipe:") else []
        lines.append(f"  pid {pid}: state {stat[0]}, parent {stat[1]}, waiting in {wchan}, stdin {stdin}"
                     f"{f' also held by {holders}' if holders else ''}: {args[:160]}")
    return "\n".join(lines)


def _link(path: pathlib.Path) -> str | None:
    try:
        return os.readlink(path)
    except OSError:
        return None


def wait_until(condition, timeout_s: float, what: str, interval_s: float = 0.2):
    """Polls `condition()` until it returns a truthy value; returns it or fails with `what`."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def wait_for_executors(spark, n: int, timeout_s: float = 120) -> list[Executor]:
    app_id = spark.sparkContext.applicationId
    return wait_until(lambda: (lambda es: es if len(es) >= n else None)(executors(app_id)),
                      timeout_s, f"{n} executors of {app_id}")


def occupy_executor(spark, api: "StatusApi", executor_id: str, seconds: float,
                    timeout_s: float = 60) -> threading.Thread:
    """Makes executor `executor_id` (one core) busy for `seconds` with a sleeping one-task
    job, so the tasks submitted meanwhile run on the other executors; returns the job's
    thread once the sleeping task runs there. A task that lands on another executor ends at
    once and the job is submitted again."""
    group = f"ttlstate-occupy-{executor_id}-{time.monotonic_ns()}"
    done = threading.Event()

    def sleep_if_on_target(_):
        import os as _os
        import time as _time

        pid = _os.getpid()
        while pid > 1:  # the executor JVM is an ancestor of this Python worker
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
            if b"--executor-id" in args:
                here = args[args.index(b"--executor-id") + 1].decode()
                if here == executor_id:
                    _time.sleep(seconds)
                return here
            with open(f"/proc/{pid}/stat") as f:
                pid = int(f.read().rsplit(")", 1)[1].split()[1])
        return None

    def run():
        sc = spark.sparkContext
        sc.setJobGroup(group, "ttlstate test: keep one executor busy")
        while not done.is_set():
            ran_on = sc.parallelize([0], 1).map(sleep_if_on_target).collect()[0]
            if ran_on == executor_id:
                return

    thread = threading.Thread(target=run, name=group, daemon=True)
    thread.start()

    def sleeping_there():
        for job in api.get("/jobs?status=running"):
            if job.get("jobGroup") == group:
                for sid in job.get("stageIds", []):
                    if any(t["executorId"] == executor_id for t in api.running_tasks(sid, 1)):
                        return True
        return False

    try:
        wait_until(sleeping_there, timeout_s, f"a sleeping task on executor {executor_id}")
    finally:
        done.set()  # no new attempt after this one
    return thread


# ---------------------------------------------------------------------------------------
# Where tasks ran (Spark's status REST API)

class StatusApi:
    """The driver's `/api/v1` for one application."""

    def __init__(self, spark):
        sc = spark.sparkContext
        self.base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"

    def get(self, path: str):
        with urllib.request.urlopen(self.base + path, timeout=30) as r:
            return json.loads(r.read())

    def batch_stage_ids(self, run_id: str) -> dict[int, list[int]]:
        """batch id -> stage ids of the jobs of one query run (`runId = ...` in the job's
        description, `batch = N` for its batch)."""
        stages: dict[int, list[int]] = {}
        for job in self.get("/jobs"):
            desc = job.get("description") or ""
            if f"runId = {run_id}" not in desc:
                continue
            m = re.search(r"batch = (\d+)", desc)
            if m:
                stages.setdefault(int(m.group(1)), []).extend(job.get("stageIds", []))
        return stages

    def active_stages(self, run_id: str) -> list[tuple[int, int]]:
        """(batch id, stage id) of the active stages of one query run's running jobs."""
        out = []
        for job in self.get("/jobs?status=running"):
            desc = job.get("description") or ""
            m = re.search(r"batch = (\d+)", desc)
            if f"runId = {run_id}" in desc and m:
                out.extend((int(m.group(1)), sid) for sid in job.get("stageIds", []))
        return out

    def running_tasks(self, stage_id: int, num_tasks: int) -> list[dict]:
        """The running tasks of a stage's active attempt, if the stage has `num_tasks`
        tasks (a stateful stage has one per state partition)."""
        out = []
        try:
            attempts = self.get(f"/stages/{stage_id}")
        except urllib.error.HTTPError:  # not submitted yet
            return out
        for a in attempts:
            if a.get("status") == "ACTIVE" and a.get("numTasks") == num_tasks:
                out.extend(t for t in self.get(f"/stages/{stage_id}/{a['attemptId']}/taskList"
                                                "?length=100000")
                           if t.get("status") == "RUNNING")
        return out

    def tasks(self, stage_id: int) -> list[dict]:
        """Every task of every attempt of a stage."""
        out = []
        for attempt in self.get(f"/stages/{stage_id}"):
            out.extend(self.get(f"/stages/{stage_id}/{attempt['attemptId']}/taskList"
                                "?length=100000"))
        return out

    def state_placements(self, run_id: str,
                         partitions: int = SHUFFLE_PARTITIONS) -> dict[int, dict[int, str]]:
        """batch id -> {state partition: executor id of its successful task}.

        The stateful stage of a batch is the one with `partitions` tasks that read a
        shuffle (the file scan of one small file per batch has a single task).
        """
        placements: dict[int, dict[int, str]] = {}
        for batch, stage_ids in sorted(self.batch_stage_ids(run_id).items()):
            for sid in stage_ids:
                tasks = [t for t in self.tasks(sid) if t.get("status") == "SUCCESS"]
                reads_shuffle = any((t.get("taskMetrics") or {}).get("shuffleReadMetrics", {})
                                    .get("remoteBlocksFetched", 0)
                                    + (t.get("taskMetrics") or {}).get("shuffleReadMetrics", {})
                                    .get("localBlocksFetched", 0) > 0 for t in tasks)
                parts = {t.get("partitionId", t["index"]): t["executorId"] for t in tasks}
                if len(parts) == partitions and reads_shuffle:
                    placements.setdefault(batch, {}).update(parts)
        return placements


def moves(placements: dict[int, dict[int, str]]) -> list[tuple[int, int, str, str]]:
    """(batch, partition, executor before, executor now) for every store that ran on
    another executor than in the previous batch that ran it."""
    last: dict[int, str] = {}
    out = []
    for batch in sorted(placements):
        for part, ex in sorted(placements[batch].items()):
            if part in last and last[part] != ex:
                out.append((batch, part, last[part], ex))
            last[part] = ex
    return out
