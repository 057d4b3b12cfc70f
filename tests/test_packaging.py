"""The package as users get it (issue 19): a wheel built by the standard Python build from a
copy of the source tree, installed alone into a fresh virtual environment, holds the shim jar
and runs the demo (a streaming aggregation with TTL on ttlstate).

The copy holds what git tracks plus untracked files that are not ignored (so no
`provider/jars/` and no `jvm-shim/build/`): the jar in the wheel can only come from the
build backend (`buildsys/ttlstate_build.py`). The build runs with pip's build isolation, as
`pip wheel .` does for a user (pip fetches setuptools and the pyspark the backend asks for,
from its cache when it has them). The fresh venv sees the system's site-packages for the
heavy dependencies (pyspark, rocksdict, ...), but ttlstate itself comes from the wheel only.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
JAR_ENTRY = "ttlstate/jars/ttlstate-shim.jar"
SERVICES = "META-INF/services/org.apache.spark.sql.SparkSessionExtensionsProvider"  # the session extensions

pytestmark = pytest.mark.slow


def _source_copy(dest: pathlib.Path) -> pathlib.Path:
    """The tree as a fresh clone would have it (plus uncommitted edits), without build output."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: cannot tell sources from build output")
    files = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "-c", "-o", "--exclude-standard"],
                           check=True, capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():  # deleted but still tracked: skip
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    assert not (dest / "provider" / "jars").exists()
    return dest


def _ends(text: str, n: int = 3000) -> str:
    """The head and the tail of a long output (an exception's message starts far from its end)."""
    return text if len(text) <= 2 * n else f"{text[:n]}\n[...]\n{text[-n:]}"


def _run(cmd, cwd=None, env=None, timeout=900) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    assert proc.returncode == 0, (f"{' '.join(map(str, cmd))}: exit {proc.returncode}\n{_ends(proc.stdout)}\n"
                                  f"{_ends(proc.stderr)}")
    return proc


def test_wheel_from_a_fresh_tree_holds_the_jar_and_runs_the_demo(tmp_path):
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", dist, src])
    wheels = list(dist.glob("ttlstate-*.whl"))
    assert len(wheels) == 1, wheels
    with zipfile.ZipFile(wheels[0]) as z:
        names = z.namelist()
        assert JAR_ENTRY in names, names
        with z.open(JAR_ENTRY) as jar, zipfile.ZipFile(jar) as j:
            classes = j.namelist()
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    assert "io/ttlstate/spark/TtlStateStoreProvider.class" in classes
    assert "io/ttlstate/spark/MaxSQLMetric.class" in classes  # the Scala part
    assert SERVICES in classes  # Spark installs the session extensions from it
    assert "ttlstate = ttlstate.cli:main" in entry_points

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--system-site-packages", venv])
    py = venv / "bin" / "python"
    # --ignore-installed: a ttlstate in the system's site-packages (an editable install) must
    # not count as installed; --no-deps: the heavy dependencies come from the system.
    _run([py, "-m", "pip", "install", "-q", "--no-deps", "--ignore-installed", wheels[0]])
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    where = _run([py, "-c", "import ttlstate, os; print(ttlstate.__file__); "
                            "print(os.path.isfile(ttlstate.jar_path()))"], cwd=tmp_path, env=env)
    module, jar_exists = where.stdout.split()
    assert pathlib.Path(module).is_relative_to(venv), module
    assert jar_exists == "True"
    usage = _run([venv / "bin" / "ttlstate", "--help"], cwd=tmp_path, env=env)
    assert usage.stdout.startswith("usage: ttlstate"), usage.stdout

    demo = _run([py, "-m", "ttlstate.demo", "--ttl", "3 seconds", "--files", "2"],
                cwd=tmp_path, env=env, timeout=600)
    assert "counts restarted after the TTL: yes" in demo.stdout, demo.stdout


def test_python_m_build_gives_an_sdist_and_a_wheel_that_runs_alone_in_a_fresh_venv(tmp_path):
    """`python -m build` (the sdist, then the wheel built from the sdist, as `build` does) from
    a fresh copy of the tree; the wheel, installed with its dependencies (pip's cache or PyPI)
    into a venv that sees nothing of this environment, runs the demo."""
    src = _source_copy(tmp_path / "src")
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "build", "--outdir", dist, src], timeout=1800)
    sdists, wheels = list(dist.glob("ttlstate-*.tar.gz")), list(dist.glob("ttlstate-*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, sorted(p.name for p in dist.iterdir())
    with tarfile.open(sdists[0]) as t:
        members = t.getnames()
    assert any(m.endswith("/provider/jars/ttlstate-shim.jar") for m in members), members
    assert any(m.endswith("/buildsys/ttlstate_build.py") for m in members), members
    with zipfile.ZipFile(wheels[0]) as z:
        assert JAR_ENTRY in z.namelist()
        with z.open(JAR_ENTRY) as jar, zipfile.ZipFile(jar) as j:
            manifest = j.read("META-INF/MANIFEST.MF").decode()
            assert "io/ttlstate/spark/TtlStateStoreProvider.class" in j.namelist()
            assert SERVICES in j.namelist()
    import ttlstate
    assert f"Implementation-Version: {ttlstate.__version__}" in manifest, manifest

    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", venv])  # no system site-packages: only the wheel and its deps
    py = venv / "bin" / "python"
    _run([py, "-m", "pip", "install", "-q", wheels[0]], timeout=1800)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON", "SPARK_HOME")}
    where = _run([py, "-c", "import ttlstate, pyspark; print(ttlstate.__file__); print(pyspark.__file__)"],
                 cwd=tmp_path, env=env)
    assert all(pathlib.Path(p).is_relative_to(venv) for p in where.stdout.split()), where.stdout
    demo = _run([py, "-m", "ttlstate.demo", "--ttl", "3 seconds", "--files", "2"],
                cwd=tmp_path, env=env, timeout=900)
    assert "counts restarted after the TTL: yes" in demo.stdout, demo.stdout
