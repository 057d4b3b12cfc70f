"""`python -m ttlstate.standalone`: the demo on a Spark standalone cluster on localhost.

Starts a standalone master and N workers (1 core, 2g each) from the pip-installed pyspark
(`bin/spark-class`: the wheel has no `sbin/start-*.sh`), waits until the workers are
ALIVE, runs `python -m ttlstate.demo --master spark://...` against them, checks in the
master's and workers' JSON status that the demo ran with executors on the workers, then
stops every process it started. All files (logs, work and local dirs, the demo's
checkpoint, JVM temp files) live in one temp dir, deleted at the end unless `--keep`.
Exits with the demo's exit code, or non-zero if anything else failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field

HOST = "127.0.0.1"
APP_NAME = "ttlstate-demo"  # the demo's appName
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class ClusterError(Exception):
    """The cluster did not come up, or the demo's application is not where it should be."""


@dataclass
class Cluster:
    root: str
    master_port: int
    ui_port: int
    daemons: list[tuple[str, subprocess.Popen]] = field(default_factory=list)
    demo: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.master_port}"

    @property
    def ui(self) -> str:
        return f"http://{HOST}:{self.ui_port}"

    @property
    def pgid(self) -> int | None:
        """The daemons' process group (the master's pid); executors and their store
        services inherit it."""
        return self.daemons[0][1].pid if self.daemons else None

    def log(self, name: str) -> str:
        return os.path.join(self.root, "logs", f"{name}.log")


def step(msg: str) -> None:
    print(f"[standalone] {msg}", flush=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def spark_home() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.environ.get("SPARK_HOME") or _find_spark_home()


DIRS = ("logs", "work", "local", "tmp")  # daemon logs, worker work dirs, SPARK_LOCAL_DIRS, TMPDIR


def make_dirs(root: str) -> None:
    for name in DIRS:
        os.makedirs(os.path.join(root, name))


def base_env(root: str) -> dict[str, str]:
    """Environment of every process: daemons, and through the workers their executors.

    TMPDIR and java.io.tmpdir point into the temp dir too: an executor's store service
    keeps its Unix sockets under java.io.tmpdir (Spark's executor local dirs are too long
    for a socket path, PythonService.java), and its local checkpoint cache under TMPDIR.
    """
    tmp = os.path.join(root, "tmp")
    env = dict(os.environ)
    env.update(SPARK_HOME=spark_home(), SPARK_LOCAL_IP=HOST,
               SPARK_LOCAL_DIRS=os.path.join(root, "local"), PYSPARK_PYTHON=sys.executable,
               TMPDIR=tmp, SPARK_DAEMON_JAVA_OPTS=f"-Djava.io.tmpdir={tmp}")
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


def demo_env(root: str) -> dict[str, str]:
    """The demo's environment: its driver and executors keep JVM temp files in the temp dir."""
    env = base_env(root)
    opt = shlex.quote(f"-Djava.io.tmpdir={env['TMPDIR']}")
    env["PYSPARK_SUBMIT_ARGS"] = (f"--driver-java-options {opt} "
                                  f"--conf spark.executor.extraJavaOptions={opt} pyspark-shell")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def spawn(cluster: Cluster, name: str, args: list[str], process_group: int) -> None:
    cmd = [os.path.join(spark_home(), "bin", "spark-class"), *args]
    with open(cluster.log(name), "wb") as log:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                env=base_env(cluster.root), cwd=cluster.root,
                                process_group=process_group)
    cluster.daemons.append((name, proc))


def start(cluster: Cluster, workers: int) -> None:
    """Master first (it founds the process group), then the workers."""
    spawn(cluster, "master", [MASTER_CLASS, "--host", HOST, "--port", str(cluster.master_port),
                              "--webui-port", str(cluster.ui_port)], process_group=0)
    for i in range(1, workers + 1):
        work_dir = os.path.join(cluster.root, "work", f"worker-{i}")
        spawn(cluster, f"worker-{i}",
              [WORKER_CLASS, "--host", HOST, "--cores", "1", "--memory", "2g",
               "--work-dir", work_dir, "--webui-port", "0", cluster.url],
              process_group=cluster.pgid)


def tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as e:
        return f"(no log: {e})\n"


def logs_tail(cluster: Cluster, names: list[str]) -> str:
    return "".join(f"--- last lines of {cluster.log(n)}:\n{tail(cluster.log(n))}" for n in names)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


def wait_for_workers(cluster: Cluster, n: int, timeout_s: float) -> list[dict]:
    """Polls the master's /json/ until n workers are ALIVE; fails with the logs' tails if a
    daemon exits or the timeout passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        dead = [(name, p.returncode) for name, p in cluster.daemons if p.poll() is not None]
        if dead:
            raise ClusterError(f"{', '.join(f'{n} exited with {rc}' for n, rc in dead)}\n"
                               + logs_tail(cluster, [name for name, _ in dead]))
        try:
            alive = [w for w in get_json(cluster.ui + "/json/").get("workers", [])
                     if w.get("state") == "ALIVE"]
        except (OSError, ValueError):
            alive = []  # the master's UI is not up yet (or answered with a half-ready, empty page)
        if len(alive) >= n:
            return alive
        if time.monotonic() > deadline:
            raise ClusterError(f"only {len(alive)} of {n} workers ALIVE after {timeout_s:.0f} s\n"
                               + logs_tail(cluster, [name for name, _ in cluster.daemons]))
        time.sleep(0.5)


def run_demo(cluster: Cluster, timeout_s: float) -> int:
    """Runs the demo against the cluster in its own process group, streaming its output;
    returns its exit code. Stops it (and its driver JVM) on timeout or Ctrl-C."""
    cmd = [sys.executable, "-m", "ttlstate.demo", "--master", cluster.url]
    step(f"demo running: python {' '.join(cmd[1:])}")
    proc = cluster.demo = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, errors="replace", env=demo_env(cluster.root), cwd=cluster.root,
        process_group=0)
    timed_out = threading.Event()

    def on_timeout() -> None:
        timed_out.set()
        stop_group(proc.pid, [proc])

    timer = threading.Timer(timeout_s, on_timeout)
    timer.daemon = True
    timer.start()
    try:
        for line in proc.stdout:
            print(f"  | {line}", end="", flush=True)
        rc = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            step("stopping the demo")
        stop_group(proc.pid, [proc])  # also whatever of its group is still exiting (driver JVM)
        proc.stdout.close()
    if timed_out.is_set():
        step(f"demo timed out after {timeout_s:.0f} s and was stopped")
        rc = rc or 1
    step(f"demo exited with {rc}")
    return rc


def demo_app(cluster: Cluster, timeout_s: float = 30) -> dict:
    """The demo's application in the master's completedapps (waits until it is there)."""
    deadline = time.monotonic() + timeout_s
    while True:
        status = get_json(cluster.ui + "/json/")
        apps = [a for a in status.get("completedapps", []) if a.get("name") == APP_NAME]
        if apps:
            return apps[-1]
        if time.monotonic() > deadline:
            running = [a.get("id") for a in status.get("activeapps", [])]
            raise ClusterError(f"no completed application {APP_NAME!r} in the master's status "
                               f"after {timeout_s:.0f} s (active: {running})")
        time.sleep(0.5)


def app_executors(workers: list[dict], app_id: str) -> dict[str, int]:
    """worker id -> how many executors of `app_id` it ran (from each worker's /json/)."""
    ran = {}
    for w in workers:
        status = get_json(w["webuiaddress"].rstrip("/") + "/json/")
        n = sum(1 for e in status.get("executors", []) + status.get("finishedexecutors", [])
                if e.get("appid") == app_id)
        if n:
            ran[w["id"]] = n
    return ran


def stop_group(pgid: int, procs: list[subprocess.Popen], timeout_s: float = 20) -> bool:
    """SIGTERM to the process group, SIGKILL after `timeout_s`; True if SIGTERM sufficed."""
    def group_gone() -> bool:
        for p in procs:
            p.poll()  # reap our own children so they do not linger as zombies
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        return all(p.returncode is not None for p in procs) and not group_members(pgid)

    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if group_gone():
            return True
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for p in procs:
        p.wait()
    return False


def processes() -> list[tuple[int, int, str]]:
    """(pid, pgid, args) of every live process (zombies left out)."""
    out = subprocess.run(["ps", "-eo", "pid=,pgid=,stat=,args="], capture_output=True,
                         text=True, check=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and not parts[2].startswith("Z"):
            rows.append((int(parts[0]), int(parts[1]), parts[3]))
    return rows


def group_members(pgid: int) -> list[int]:
    return [pid for pid, g, _ in processes() if g == pgid]


def survivors(cluster: Cluster, pgids: set[int]) -> list[tuple[int, str]]:
    """Processes that outlived the stop: in one of our process groups, or whose command
    line names the temp dir or the master's port (Master/Worker/executor JVMs, store
    services)."""
    marks = (cluster.root, f"{HOST}:{cluster.master_port}")
    me = os.getpid()
    return [(pid, args) for pid, g, args in processes()
            if pid != me and (g in pgids or any(m in args for m in marks))]


def stop_all(cluster: Cluster) -> None:
    """Stops the demo's process group if it still runs, then the daemons' (their executors
    and store services included)."""
    if cluster.demo is not None:
        stop_group(cluster.demo.pid, [cluster.demo])
    if cluster.pgid is not None:
        clean = stop_group(cluster.pgid, [p for _, p in cluster.daemons])
        step(f"stopped: master and {len(cluster.daemons) - 1} workers "
             + ("(SIGTERM)" if clean else "(SIGTERM was not enough: SIGKILL)"))


def kill_survivors(cluster: Cluster) -> int:
    """Kills (and reports) whatever outlived stop_all; returns how many."""
    pgids = {p.pid for p in (cluster.demo, *(p for _, p in cluster.daemons[:1])) if p}
    left = survivors(cluster, pgids)
    for pid, args in left:
        step(f"LEFT RUNNING, killing: {pid} {args[:200]}")
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(left)


def _interrupt(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ttlstate.standalone", description=__doc__)
    ap.add_argument("--workers", type=int, default=2, help="workers (1 core, 2g each; default 2)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir (logs, work dirs)")
    ap.add_argument("--start-timeout", type=float, default=120,
                    help="seconds to wait for the workers to be ALIVE (default 120)")
    ap.add_argument("--demo-timeout", type=float, default=480,
                    help="seconds after which the demo is stopped (default 480)")
    args = ap.parse_args(argv)

    signal.signal(signal.SIGTERM, _interrupt)  # a `kill` cleans up like Ctrl-C does
    root = tempfile.mkdtemp(prefix="ttlstate-standalone-")
    cluster = Cluster(root, free_port(), free_port())
    rc, ran = 1, {}
    try:
        make_dirs(root)
        step(f"temp dir: {root}")
        start(cluster, args.workers)
        step(f"master: {cluster.url} (web UI {cluster.ui}); starting {args.workers} workers")
        workers = wait_for_workers(cluster, args.workers, args.start_timeout)
        step(f"workers up: {len(workers)} ALIVE "
             "(" + ", ".join(w["id"] for w in workers) + ")")
        rc = run_demo(cluster, args.demo_timeout)
        app = demo_app(cluster)
        ran = app_executors(workers, app["id"])
        step(f"application {app['id']} ({app['name']}) {app['state']}: "
             f"{sum(ran.values())} executors on {len(ran)} workers "
             f"({', '.join(f'{w}: {n}' for w, n in sorted(ran.items()))})")
        if len(ran) != args.workers:
            step(f"error: the demo ran executors on {len(ran)} of {args.workers} workers")
            rc = rc or 1
    except (ClusterError, OSError) as e:  # OSError: a status page did not answer
        step(f"error: {e}")
        rc = rc or 1
    except KeyboardInterrupt:
        step("interrupted")
        rc = 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # cleanup is not interruptible
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_all(cluster)
        left = kill_survivors(cluster)
        if left:
            rc = rc or 1
        if args.keep:
            step(f"temp dir kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)
            if os.path.exists(root):
                step(f"error: could not remove the temp dir {root}")
                rc = rc or 1
            else:
                step(f"temp dir removed: {root}")
    ran_on = (f"{APP_NAME} ran {sum(ran.values())} executors on {len(ran)} workers"
              if ran else "no executors of the demo seen")
    step(f"summary: {'OK' if rc == 0 else 'FAILED'} (exit {rc}): {ran_on} of {cluster.url}; "
         f"cluster stopped, {left} processes left running")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
