"""A Spark Connect server as its own process, started with the documented command line
(docs/guide/connect.md), for tests: a free port, wait until it listens, stop it and everything it
started (the JVM and its store services), and say what survived."""

from __future__ import annotations

import os
import pathlib
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time

import psutil

ROOT = pathlib.Path(__file__).resolve().parents[1]
README_PORT = "spark.connect.grpc.binding.port=15002"


def readme_command() -> str:
    """The server command of docs/guide/connect.md, as written."""
    section = (ROOT / "docs" / "guide" / "connect.md").read_text()
    return textwrap.dedent(re.search(r"```bash\n(.*?)```", section, re.S).group(1)).strip()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env() -> dict[str, str]:
    """The environment the documentation asks for: this venv's Python first on PATH."""
    drop = ("PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "SPARK_HOME")
    base = {k: v for k, v in os.environ.items() if k not in drop}
    return dict(base, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")


class ConnectServer:
    """`with ConnectServer(command, log) as server:` runs `command` (a bash line holding the
    documented port conf) on a free port; `server.url` is its `sc://` address."""

    def __init__(self, command: str, log: pathlib.Path, start_timeout: float = 240):
        assert README_PORT in command, command
        self.template = command
        self.log = log
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.seen: dict[int, psutil.Process] = {}  # every process of the server seen so far
        self._on_port(free_port())

    def _on_port(self, port: int) -> None:
        self.port = port
        self.command = self.template.replace(README_PORT, f"spark.connect.grpc.binding.port={port}")
        self.url = f"sc://localhost:{port}"

    def __enter__(self) -> "ConnectServer":
        # the port was free when chosen; another process may take it before the server binds
        # it (then the server exits with a BindException): once more on a new port
        for attempt in range(2):
            if self._start():
                return self
            if attempt == 0 and "java.net.BindException" in self.log_tail(20000):
                self._on_port(free_port())  # `seen` keeps the first try's processes: none may survive
                continue
            raise AssertionError(f"the Connect server exited {self.proc.returncode}:\n{self.log_tail()}")

    def _start(self) -> bool:
        """Starts the server; True once it listens on `port` (a socket of its own process tree,
        not another process's), False if it exited first."""
        out = open(self.log, "w")
        self.proc = subprocess.Popen(["bash", "-c", self.command], stdout=out, stderr=subprocess.STDOUT,
                                     env=env(), cwd=self.log.parent, start_new_session=True)
        out.close()
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            if self.port in self.listening_ports():
                return True
            time.sleep(0.5)
        self.stop()
        raise AssertionError(f"the Connect server did not listen on {self.port}:\n{self.log_tail()}")

    def listening_ports(self) -> set[int]:
        """TCP ports the server's processes listen on."""
        ports = set()
        for p in self.processes():
            try:
                ports |= {c.laddr.port for c in p.net_connections(kind="tcp") if c.status == psutil.CONN_LISTEN}
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return ports

    def __exit__(self, *exc):
        self.stop()

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:]

    def processes(self) -> list[psutil.Process]:
        """The server's process and its descendants now (remembered for `stop`)."""
        try:
            root = psutil.Process(self.proc.pid)
            now = [root] + root.children(recursive=True)
        except psutil.NoSuchProcess:
            now = []
        for p in now:
            self.seen.setdefault(p.pid, p)
        return now

    def store_services(self) -> list[psutil.Process]:
        out = []
        for p in self.processes():
            try:
                if "ttlstate.service" in " ".join(p.cmdline()):
                    out.append(p)
            except psutil.NoSuchProcess:
                pass
        return out

    def stop(self) -> None:
        """SIGTERM to the server's process group (as `stop-connect-server.sh` sends), SIGKILL
        after 60 s; then waits for every process it ever had."""
        if self.proc is None:
            return
        self.processes()
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)
        psutil.wait_procs(list(self.seen.values()), timeout=30)

    def survivors(self) -> list[int]:
        """Processes of the server still running (after `stop`)."""
        alive = []
        for pid, p in self.seen.items():
            try:
                if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(pid)
            except psutil.NoSuchProcess:
                pass
        return alive
