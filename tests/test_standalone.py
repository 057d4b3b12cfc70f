"""`python -m ttlstate.standalone` for real: a two-worker Spark standalone cluster on
localhost, the TTL demo on it, and nothing left behind (no process, no file)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.cluster]

TIMEOUT_S = 600


def run_standalone(cwd) -> tuple[int, str]:
    proc = subprocess.Popen([sys.executable, "-m", "ttlstate.standalone"], cwd=cwd,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace")
    try:
        out, _ = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the script stops its cluster on SIGTERM
        try:
            out, _ = proc.communicate(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"ttlstate.standalone did not finish in {TIMEOUT_S} s:\n{out}")
    return proc.returncode, out


def processes_mentioning(*marks: str) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid=,stat=,args="], capture_output=True, text=True,
                         check=True).stdout
    return [line for line in out.splitlines()
            if any(m in line for m in marks) and line.split()[1][0] != "Z"]


def found(pattern: str, out: str) -> re.Match:
    m = re.search(pattern, out, re.M)
    assert m, f"no match for {pattern!r} in the output:\n{out}"
    return m


def test_demo_runs_on_two_workers_and_everything_is_stopped_and_removed(tmp_path):
    rc, out = run_standalone(tmp_path)
    print(out)  # shown by pytest when the test fails (or with -rP)

    root = found(r"^\[standalone\] temp dir: (\S+)$", out).group(1)
    port = found(r"^\[standalone\] master: spark://127\.0\.0\.1:(\d+) ", out).group(1)
    assert rc == 0, f"exit code {rc}:\n{out}"
    found(r"^\[standalone\] workers up: 2 ALIVE ", out)
    found(r"^  \| counts restarted after the TTL: yes \(100 users with live state, 100 expired\)$",
          out)
    app = found(r"^\[standalone\] application (app-\S+) \(ttlstate-demo\) FINISHED: "
                r"2 executors on 2 workers \((worker-\S+): 1, (worker-\S+): 1\)$", out)
    assert app.group(2) != app.group(3)
    found(r"^\[standalone\] stopped: master and 2 workers ", out)
    found(r"^\[standalone\] summary: OK \(exit 0\): .* cluster stopped, "
          r"0 processes left running$", out)

    # nothing survives: no Master/Worker/executor JVM, no store service, no demo driver
    assert processes_mentioning(root, f"127.0.0.1:{port}", app.group(1)) == []
    # and nothing stays on disk: the temp dir, the working directory, pyspark's own work dir
    assert not os.path.exists(root)
    assert list(tmp_path.iterdir()) == []
    from pyspark.find_spark_home import _find_spark_home
    assert not os.path.exists(os.path.join(_find_spark_home(), "work", app.group(1)))
