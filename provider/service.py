"""The store service: `python -m ttlstate.service --dir DIR`, started by the JVM shim.

Reads the token and the ttlstate confs from stdin (docs/PROTOCOL.md, "Service start-up"),
binds one socket per worker in DIR, forks the workers, prints
`READY <pid> <workers> <workerTimeoutMs>`,
then supervises: a worker that dies is forked again on the same listening socket. When
stdin reaches EOF (the JVM is gone, even after SIGKILL), when its parent (the JVM) is gone
while another process still holds stdin's other end, or on SIGTERM, the service kills its
workers and deletes DIR. Workers also die with the service (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import argparse
import ctypes
import logging
import os
import shutil
import signal
import socket
import sys
import threading
import time

from . import conf, writer
from .errors import InvalidConfError

log = logging.getLogger("ttlstate.service")

_PR_SET_PDEATHSIG = 1
# glibc's mallopt parameters, and the size above which memory is mapped and trimmed.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
_MALLOC_RETURN_BYTES = 128 * 1024


def _die_with_parent():
    """Ask Linux to SIGKILL this process when its parent (the service) exits."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _return_freed_memory():
    """Make glibc give freed memory back to the OS
    (docs/decisions/050-rocksdb-budget-per-worker.md). Its default raises the
    mmap threshold to the largest block freed so far (up to 32 MiB), so after the first
    memtable or large frame is freed, such blocks come from the heap and stay in the
    workers' RSS. A fixed 128 KiB threshold (mapped blocks go back when freed) and trimming
    the heap's top above 128 KiB took about 50 MiB off the workers' PSS of the
    dropDuplicates benchmark at the same rows/s. Workers inherit it with the fork; not glibc:
    nothing to do."""
    try:
        libc = ctypes.CDLL(None)
        libc.mallopt(_M_MMAP_THRESHOLD, _MALLOC_RETURN_BYTES)
        libc.mallopt(_M_TRIM_THRESHOLD, _MALLOC_RETURN_BYTES)
    except (OSError, AttributeError):
        pass


def read_startup(stream) -> tuple[bytes, dict[str, str]]:
    """Token line, then key=value lines, then an empty line."""
    token_line = stream.readline()
    if not token_line:
        raise SystemExit("ttlstate.service: no token on stdin")
    token = bytes.fromhex(token_line.strip())
    confs: dict[str, str] = {}
    for line in iter(stream.readline, ""):
        line = line.rstrip("\n")
        if not line:
            break
        key, _, value = line.partition("=")
        confs[key] = value
    return token, confs


def worker_timeout_ms(confs: dict[str, str]) -> int:
    """The query's `workerTimeout` (the registry's default when unset): the JVM's request
    timeout until a store's OPEN reply resolves the store's own value."""
    return conf.resolve(confs, "store")["workerTimeout"]


def worker_count(confs: dict[str, str]) -> int:
    resolved = conf.resolve(confs, "service")
    if "workers" in resolved:
        return resolved["workers"]
    try:
        cores = int(confs.get("executorCores", ""))
    except ValueError:
        cores = 0
    return max(1, cores or os.cpu_count() or 1)


# A worker that fails this soon after its start (exits with an error code: an exception at
# start-up; or crashes: a fault in native code, an abort), this many times in a row, cannot
# start: restarting it forever would leave the JVM waiting for a HELLO reply, so the service
# stops and the JVM reports why. A kill does not count: the JVM kills (SIGKILL) a worker that
# exceeds `workerTimeout`, which may be 1 s, and the service stops its workers with SIGTERM.
FAST_EXIT_S = 2.0
MAX_FAST_EXITS = 5
# The service's exit codes besides 0 (the JVM reports them with the end of the service's stderr).
EXIT_INVALID_CONF = 2
EXIT_NO_WORKER_MODULE = 3  # ttlstate.worker does not import
EXIT_WORKERS_CANNOT_START = 4  # a worker failed MAX_FAST_EXITS times in a row as it started
CRASH_SIGNALS = frozenset({signal.SIGSEGV, signal.SIGBUS, signal.SIGABRT, signal.SIGILL, signal.SIGFPE})


def failed_at_start(status: int, lived_s: float) -> bool:
    """Whether a worker that ended with wait status `status` after `lived_s` seconds failed to start."""
    if lived_s >= FAST_EXIT_S:
        return False
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status) != 0
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) in CRASH_SIGNALS


def describe_exit(status: int) -> str:
    """A wait status in words: 'exited with code 1', 'was killed by SIGSEGV'."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return f"was killed by {name}"
    return f"exited with code {os.WEXITSTATUS(status)}"


class Supervisor:
    def __init__(self, service_dir: str, token: bytes, workers: int, timeout_ms: int):
        self.dir = service_dir
        self.parent = os.getppid()  # the JVM that started the service
        self.timeout_ms = timeout_ms
        self.token = token
        self.listeners = []
        self.pids: dict[int, tuple[int, float]] = {}  # pid -> (worker index, when it was forked: monotonic)
        self.fast_exits = [0] * workers  # per worker index: failed starts in a row (failed_at_start)
        self.stopping = threading.Event()
        for i in range(workers):
            path = os.path.join(service_dir, f"w{i}.sock")
            if os.path.exists(path):
                os.unlink(path)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            os.chmod(path, 0o600)
            s.listen(128)
            self.listeners.append(s)

    def fork_worker(self, index: int):
        pid = os.fork()
        if pid == 0:  # child
            code = 0
            try:
                _die_with_parent()
                if os.getppid() == 1:
                    os._exit(0)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                for j, s in enumerate(self.listeners):
                    if j != index:
                        s.close()
                # Not sys.stdin.close(): the parent's stdin thread holds its lock at fork.
                devnull = os.open(os.devnull, os.O_RDONLY)
                os.dup2(devnull, 0)
                os.close(devnull)
                from .worker import serve
                serve(index, self.listeners[index], self.token)
            except BaseException:  # noqa: BLE001
                log.exception("worker %d crashed", index)
                code = 1
            finally:
                os._exit(code)
        self.pids[pid] = (index, time.monotonic())
        log.info("started worker %d as pid %d", index, pid)

    def run(self) -> bool:
        """Serves until stopped; False if it stopped because a worker kept failing at start-up."""
        for i in range(len(self.listeners)):
            self.fork_worker(i)
        print(f"READY {os.getpid()} {len(self.listeners)} {self.timeout_ms}", flush=True)
        healthy = True
        while not self.stopping.is_set():
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid and pid in self.pids:
                index, started = self.pids.pop(pid)
                failed = failed_at_start(status, time.monotonic() - started)
                self.fast_exits[index] = self.fast_exits[index] + 1 if failed else 0
                if self.fast_exits[index] >= MAX_FAST_EXITS:
                    log.error("worker %d failed %d times in a row within %.0f s of its start (last: pid %d %s); "
                              "stopping the service (the log above says why it failed)",
                              index, MAX_FAST_EXITS, FAST_EXIT_S, pid, describe_exit(status))
                    healthy = False
                    break
                log.warning("worker %d (pid %d) %s; restarting it", index, pid, describe_exit(status))
                self.fork_worker(index)
            elif not pid:
                if self.parent_gone():
                    break
                self.stopping.wait(0.1)
        self.shutdown()
        return healthy

    def parent_gone(self) -> bool:
        """Whether the process that started the service has exited (this process has a new
        parent). Stdin's EOF says so too, unless another process holds its other end: one the
        JVM's process forked without closing its descriptors."""
        if os.getppid() == self.parent:
            return False
        log.warning("the process that started the service (pid %d) is gone; stopping", self.parent)
        return True

    def shutdown(self):
        for pid in list(self.pids):
            _kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 3
        while self.pids and time.monotonic() < deadline:
            for pid in list(self.pids):
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    done = pid
                if done:
                    self.pids.pop(pid, None)
            time.sleep(0.02)
        for pid in list(self.pids):
            _kill(pid, signal.SIGKILL)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        shutil.rmtree(self.dir, ignore_errors=True)
        log.info("service stopped")


def _kill(pid: int, sig: int):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ttlstate.service")
    ap.add_argument("--dir", required=True, help="private service directory (mode 0700)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=os.environ.get("TTLSTATE_LOG_LEVEL", "INFO"), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s")
    token, confs = read_startup(sys.stdin)
    writer.set_spark_version(confs.get("sparkVersion", ""))  # recorded in every manifest
    try:
        workers = worker_count(confs)
        timeout_ms = worker_timeout_ms(confs)
    except InvalidConfError as e:
        print(f"{e.error_class}: {e}", file=sys.stderr, flush=True)
        return EXIT_INVALID_CONF
    try:  # before READY, and inherited by every worker: a broken install fails the start at once
        from . import worker  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure: the JVM shows this traceback
        log.exception("cannot import the store worker (ttlstate.worker)")
        return EXIT_NO_WORKER_MODULE
    os.makedirs(args.dir, mode=0o700, exist_ok=True)
    os.chmod(args.dir, 0o700)
    _return_freed_memory()
    sup = Supervisor(args.dir, token, workers, timeout_ms)

    def on_stdin_eof():
        sys.stdin.read()  # returns at EOF: the JVM closed the pipe or died
        sup.stopping.set()

    threading.Thread(target=on_stdin_eof, name="stdin-watch", daemon=True).start()
    signal.signal(signal.SIGTERM, lambda *_: sup.stopping.set())
    signal.signal(signal.SIGINT, lambda *_: sup.stopping.set())
    return 0 if sup.run() else EXIT_WORKERS_CANNOT_START


if __name__ == "__main__":
    sys.exit(main())
