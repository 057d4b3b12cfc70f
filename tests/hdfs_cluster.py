"""HDFS for the tests (pytest -m hdfs): Hadoop's MiniDFSCluster (a namenode and its datanodes, real
RPC and data transfer over loopback sockets) in a JVM of its own, started from the minicluster
`make servers` resolved (buildsys/servers/MiniHdfs.java), its blocks under the test's tmp."""

from __future__ import annotations

import contextlib
import pathlib
import subprocess
import threading

from server_process import SERVERS, classpath, die_with_parent, stop_process

MINICLUSTER_CLASSPATH = SERVERS / "minicluster.classpath"
MINICLUSTER_MAINS = SERVERS / "mains"  # MiniHdfs and MiniYarn, compiled by make servers


def start_minicluster_main(main: str, args: list[str], heap: str, cwd: pathlib.Path, log: pathlib.Path,
                           timeout_s: float, what: str) -> tuple[subprocess.Popen, str]:
    """Starts `java MAIN ARGS` of buildsys/servers (stdin and stdout piped, stderr to `log`) and
    waits for its `READY ...` line: (process, that line). Kills it and raises if none comes."""
    if not (MINICLUSTER_MAINS / f"{main}.class").is_file():
        raise RuntimeError(f"{MINICLUSTER_MAINS}/{main}.class is missing: run `make servers`")
    cp = ":".join([str(MINICLUSTER_MAINS), *classpath(MINICLUSTER_CLASSPATH)])
    proc = subprocess.Popen(["java", f"-Xmx{heap}", "-cp", cp, main, *args], cwd=cwd, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=open(log, "w"), text=True, bufsize=1,
                            preexec_fn=die_with_parent)
    timer = threading.Timer(timeout_s, proc.kill)
    timer.start()
    try:
        line = proc.stdout.readline().strip()
    finally:
        timer.cancel()
    if not line.startswith("READY "):
        stop_process(proc, 10)
        raise RuntimeError(f"{what} did not start ({line!r}): {log.read_text(errors='replace')[-3000:]}")
    return proc, line


class HdfsCluster:
    def __init__(self, work: pathlib.Path, datanodes: int = 3):
        self.work = work
        self.datanodes = datanodes
        self.uri = ""  # hdfs://127.0.0.1:PORT once started
        self.proc: subprocess.Popen | None = None
        self._lock = threading.Lock()  # one command and its reply at a time

    def start(self, timeout_s: float = 120) -> "HdfsCluster":
        self.work.mkdir(parents=True, exist_ok=True)
        self.proc, line = start_minicluster_main(
            "MiniHdfs", [str(self.work / "dfs"), str(self.datanodes)], "768m", self.work, self.work / "hdfs.log",
            timeout_s, "the MiniDFSCluster")
        self.uri = line.split()[1]
        return self

    def _ask(self, command: str) -> str:
        with self._lock:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
            reply = self.proc.stdout.readline().strip()
        if not reply or reply.startswith("ERROR"):
            raise RuntimeError(f"MiniHdfs {command!r}: {reply or 'no reply (the cluster exited)'}")
        return reply

    def exists(self, path: str) -> bool:
        return self._ask(f"exists {path}") == "true"

    def list(self, path: str) -> list[str]:
        """The paths of the files under `path`, recursively (none if it does not exist)."""
        return self._ask(f"list {path}").split("\t")[1:]

    def stop_datanode(self, index: int) -> None:
        """Shut a datanode down: its sockets close, transfers through it fail mid-way."""
        self._ask(f"stop-datanode {index}")

    def live_datanodes(self) -> int:
        return int(self._ask("live-datanodes"))

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()  # end of input: MiniHdfs shuts the cluster down
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                stop_process(self.proc, 10)
        self.proc = None


@contextlib.contextmanager
def running_hdfs(work: pathlib.Path, datanodes: int = 3):
    cluster = HdfsCluster(work, datanodes).start()
    try:
        yield cluster
    finally:
        cluster.stop()
