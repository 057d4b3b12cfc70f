"""`python -m ttlstate ...` (the offline tools) run as a user runs them, for the tests."""

from __future__ import annotations

import json
import subprocess
import sys


def cli(*args, rc: int | None = 0) -> subprocess.CompletedProcess:
    """Runs the tools with `args`; asserts the exit status is `rc` (unless None)."""
    proc = subprocess.run([sys.executable, "-m", "ttlstate", *map(str, args)],
                          capture_output=True, text=True, timeout=600)
    if rc is not None:
        assert proc.returncode == rc, (f"python -m ttlstate {' '.join(map(str, args))}: exit "
                                       f"{proc.returncode}, expected {rc}\n{proc.stdout}\n{proc.stderr}")
    return proc


def cli_json(*args):
    return json.loads(cli(*args, "--json").stdout)


def conf_args(confs: dict[str, str]) -> list[str]:
    """`--conf KEY=VALUE` for each of `confs`."""
    return [a for k, v in confs.items() for a in ("--conf", f"{k}={v}")]
