"""`python -m ttlstate ...` (the offline tools) run as a user runs them, for the tests."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
import time


def cli(*args, rc: int | None = 0, tmp_dir=None) -> subprocess.CompletedProcess:
    """Runs the tools with `args` (and TMPDIR=`tmp_dir`, if given); asserts the exit status is
    `rc` (unless None)."""
    proc = subprocess.run([sys.executable, "-m", "ttlstate", *map(str, args)],
                          capture_output=True, text=True, timeout=600, env=tmpdir_env(tmp_dir))
    if rc is not None:
        assert proc.returncode == rc, (f"python -m ttlstate {' '.join(map(str, args))}: exit "
                                       f"{proc.returncode}, expected {rc}\n{proc.stdout}\n{proc.stderr}")
    return proc


def tmpdir_env(tmp_dir) -> dict | None:
    """The environment of a command whose temporary files go to `tmp_dir` (None: inherited)."""
    return {**os.environ, "TMPDIR": str(tmp_dir)} if tmp_dir else None


def cli_json(*args, tmp_dir=None):
    return json.loads(cli(*args, "--json", tmp_dir=tmp_dir).stdout)


def conf_args(confs: dict[str, str]) -> list[str]:
    """`--conf KEY=VALUE` for each of `confs`."""
    return [a for k, v in confs.items() for a in ("--conf", f"{k}={v}")]


def cli_meanwhile(*args, tmp_dir, step: str, action) -> subprocess.CompletedProcess:
    """Runs the tools with `args` and TMPDIR=`tmp_dir`, and calls `action()` once an entry
    matching the glob `step` appears in `tmp_dir` (the command made its temporary directory for
    that step); returns the finished process, whatever its exit status."""
    tmp_dir = pathlib.Path(tmp_dir)
    tmp_dir.mkdir(parents=True, exist_ok=True)
    out, err = tmp_dir / "cli.stdout", tmp_dir / "cli.stderr"
    with open(out, "w") as o, open(err, "w") as e:
        proc = subprocess.Popen([sys.executable, "-m", "ttlstate", *map(str, args)], stdout=o, stderr=e,
                                env=tmpdir_env(tmp_dir))
        try:
            deadline = time.monotonic() + 300
            while not any(tmp_dir.glob(step)):
                assert proc.poll() is None, f"the command ended before {step}: {err.read_text()[-3000:]}"
                assert time.monotonic() < deadline, f"no {step} in {tmp_dir} after 300 s"
                time.sleep(0.01)
            action()
            proc.wait(timeout=600)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out.read_text(), err.read_text())
