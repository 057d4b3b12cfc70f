"""CPU-seconds of each test file, for deciding where the suite's time can be cut
(`TTLSTATE_TEST_CPU_REPORT=build/cpu-by-file.jsonl make test`; tests/conftest.py registers this
plugin then, and only then). The suite is CPU-bound on two cores, so a file's CPU is what it
takes from the others; its wall time says more about the load beside it (test_s3.py took 973 s in
one CI run and 357 s in another while using about the same CPU).

A file's CPU is its worker's own, that of every process the worker reaped while the file ran,
and the growth of every live descendant's (the shared Spark session's JVM, servers). Each worker
is made a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so the processes a driver leaves
behind (its JVM outlives the Python that started it) become the worker's children and are
counted when reaped, which happens at each file's end. Each file's line is appended to the
report as JSON (file, cpu, wall); the run ends with the 25 heaviest files and the total. A
measurement, not part of CI: reaping any exited child would also take the exit status of a
subprocess a session-scoped fixture still holds (none does today), which Python then reports
as 0."""

from __future__ import annotations

import ctypes
import json
import os
import time

import pytest

_PR_SET_CHILD_SUBREAPER = 36
_TICK = os.sysconf("SC_CLK_TCK")


def _descendants_cpu() -> float:
    """CPU-seconds of this process's live descendants, each with its reaped children's."""
    children: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...
        children.setdefault(int(fields[1]), []).append(int(name))
        cpu[int(name)] = sum(int(x) for x in fields[11:15]) / _TICK  # utime stime cutime cstime
    total, todo = 0.0, list(children.get(os.getpid(), []))
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += children.get(pid, [])
    return total


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + _descendants_cpu()


def _reap_orphans():
    """Waits for every exited child: at a file's end none of the file's subprocesses is still
    being waited for by a test, so these are the orphans handed to this process."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class CpuByFile:
    def __init__(self, report: str):
        self.report = report
        self.file: str | None = None
        self.start_cpu = self.start_wall = 0.0
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        path = item.nodeid.split("::")[0]
        if path != self.file:
            self.file, self.start_cpu, self.start_wall = path, _cpu(), time.monotonic()
        yield
        if nextitem is None or nextitem.nodeid.split("::")[0] != path:
            _reap_orphans()
            with open(self.report, "a") as f:
                f.write(json.dumps({"file": path, "cpu": round(_cpu() - self.start_cpu, 1),
                                    "wall": round(time.monotonic() - self.start_wall, 1)}) + "\n")

    def pytest_terminal_summary(self, terminalreporter, config):
        if hasattr(config, "workerinput") or not os.path.exists(self.report):
            return
        with open(self.report) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        terminalreporter.section(f"CPU-seconds by file ({self.report})")
        for r in sorted(rows, key=lambda r: -r["cpu"])[:25]:
            terminalreporter.write_line(f"{r['cpu']:8.1f}  {r['wall']:8.1f} s  {r['file']}")
        terminalreporter.write_line(f"{sum(r['cpu'] for r in rows):8.1f}  CPU-seconds in {len(rows)} files")
