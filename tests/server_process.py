"""What the tests' servers share (tests/kafka_broker.py, tests/s3_server.py): the classpaths
`make servers` writes, free loopback ports, and child processes that die with the test run."""

from __future__ import annotations

import ctypes
import pathlib
import signal
import socket
import subprocess

SERVERS = pathlib.Path(__file__).resolve().parents[1] / "build" / "servers"


def classpath(path: pathlib.Path) -> list[str]:
    """The jars of a classpath file `make servers` wrote."""
    if not path.is_file():
        raise RuntimeError(f"{path} is missing: run `make servers` (Maven resolves the test servers' and "
                           f"clients' jars into ~/.m2 and writes their classpaths there)")
    return [p for p in path.read_text().strip().split(":") if p]


def die_with_parent() -> None:
    """`preexec_fn` of a server process: SIGKILL when the process that started it dies (no
    orphan server after a killed test run)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process(proc: subprocess.Popen | None, timeout_s: float) -> None:
    """SIGTERM, then SIGKILL after `timeout_s`; waits for the process either way."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
