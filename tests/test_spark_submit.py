"""The README's spark-submit example, run exactly as written (issue 19): the script and the
command are taken from the README's "On a cluster" section, only the two data paths change."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.slow

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _example():
    section = README.split("## On a cluster", 1)[1].split("\n## ", 1)[0]
    # the README indents its blocks inside a list item
    script = textwrap.dedent(re.search(r"```python\n(.*?)```", section, re.S).group(1))
    command = textwrap.dedent(re.search(r"```bash\n(.*?)```", section, re.S).group(1)).strip()
    return script, command


def test_the_readme_spark_submit_example_runs_with_ttlstate(tmp_path):
    script, command = _example()
    assert "--jars" in command and "TtlStateStoreProvider" in command and "ttlstate.ttl=10m" in command
    (tmp_path / "ttl_counts.py").write_text(script)
    events = tmp_path / "events"
    events.mkdir()
    (events / "part-0.json").write_text("".join(json.dumps({"key": k}) + "\n" for k in "abcab"))
    checkpoint = tmp_path / "checkpoints" / "ttl-counts"
    command = command.replace("/data/events", str(events)).replace("/data/checkpoints/ttl-counts", str(checkpoint))
    env = dict(os.environ, PATH=f"{pathlib.Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    rows = dict(re.findall(r"^\|\s*(\w)\s*\|\s*(\d+)\s*\|$", run.stdout, re.M))
    assert rows == {"a": "2", "b": "2", "c": "1"}, run.stdout[-2000:]
    # the state is ttlstate's, with the TTL of the command
    inspect = subprocess.run([sys.executable, "-m", "ttlstate", "inspect", str(checkpoint)],
                             capture_output=True, text=True, timeout=300)
    assert inspect.returncode == 0, inspect.stderr
    assert "10m" in inspect.stdout or "600000" in inspect.stdout or "600 s" in inspect.stdout, inspect.stdout
