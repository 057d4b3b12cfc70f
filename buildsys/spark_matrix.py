"""`make test-matrix`: the smoke subset (pytest marker `matrix`) on every earlier Spark line, each
in its own virtual environment, then the upgrade of their checkpoints on this environment's
Spark (issue 19 item 3, docs/decisions/055-one-package-for-spark-4-0-to-4-3.md).

For each pyspark version given (default: the newest release of 4.0, 4.1 and 4.2 at the time of
writing) a venv `.venvs/spark-<line>` is created, or reused when it already holds that pyspark
and the same dependencies (a stamp file records them): that pyspark, ttlstate's runtime
dependencies and its `test` extra from pyproject.toml, and ttlstate itself editable with
`--no-deps` (the jar `make jar` built serves every line). There `pytest -m matrix` runs: the
shim's link check against the line's jars, equivalence with the HDFS provider (aggregation,
dropDuplicates, stream-stream join, session window), restarts from the checkpoint, TTL expiry
on a count aggregation, the offline CLI (inspect, dump, verify) on the checkpoints of real
queries, and `test_write_a_checkpoint_for_the_next_line`, which leaves the checkpoints of the
first half of an input in a shared directory (build/spark-matrix/upgrade, emptied first).

Then, with this interpreter (Spark 4.3), `tests/test_spark_upgrade.py` continues each of those
checkpoints and compares with an uninterrupted 4.3 run (`--current upgrade`, what .ci/run
uses after the full suite), or the whole smoke subset plus that (`--current smoke`, the
default: the matrix then passes on 4.3 too). A line's pytest that fails, collects nothing
(exit 5) or skips a test fails the matrix; every line runs anyway, and a summary with test
counts and durations ends the output.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import shutil
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_VERSIONS = ["4.0.5", "4.1.4", "4.2.1"]
UPGRADE_TEST = "tests/test_spark_upgrade.py"
WRITE = f"{UPGRADE_TEST}::test_write_a_checkpoint_for_the_next_line"
CONTINUE = f"{UPGRADE_TEST}::test_continue_a_checkpoint_of_an_earlier_line"


def log(msg: str) -> None:
    print(f"test-matrix: {msg}", flush=True)


def line_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def requirements(pyspark_version: str) -> list[str]:
    """pyspark==version, ttlstate's other runtime dependencies and its `test` extra."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = [d for d in project["dependencies"] if not d.replace(" ", "").startswith("pyspark")]
    return [f"pyspark=={pyspark_version}", *deps, *project["optional-dependencies"]["test"]]


def shown(path: pathlib.Path) -> str:
    """`path` relative to the repository when it is inside it (--venvs may point elsewhere)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def venv_python(venv: pathlib.Path) -> pathlib.Path:
    return venv / "bin" / "python"


def ensure_venv(version: str, venvs: pathlib.Path) -> pathlib.Path:
    """The venv of `version`'s line, created or brought up to date; returns its python."""
    venv = venvs / f"spark-{line_of(version)}"
    py = venv_python(venv)
    stamp = venv / "ttlstate-matrix.json"
    want = {"requirements": requirements(version), "ttlstate": str(ROOT)}
    if py.exists() and stamp.exists() and json.loads(stamp.read_text()) == want:
        probe = subprocess.run(
            [str(py), "-c", "import importlib.metadata as m, ttlstate; "
             "print(m.version('pyspark')); print(ttlstate.__file__)"],
            capture_output=True, text=True)
        lines = probe.stdout.split()
        if probe.returncode == 0 and lines[0] == version and lines[1].startswith(str(ROOT)):
            log(f"{shown(venv)}: reused (pyspark {version})")
            return py
    t0 = time.monotonic()
    log(f"{shown(venv)}: creating (pyspark {version})")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, *want["requirements"]], check=True)
    subprocess.run([*pip, "--no-deps", "-e", str(ROOT)], check=True)
    stamp.write_text(json.dumps(want))
    log(f"{shown(venv)}: ready in {time.monotonic() - t0:.0f}s")
    return py


def child_env(upgrade: pathlib.Path, require: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH",
                        "VIRTUAL_ENV", "TTLSTATE_TEST_CACHE_DIR")}
    env["TTLSTATE_UPGRADE_DIR"] = str(upgrade)
    # the smoke subset starts few JVMs: dumping a class-data-sharing archive for each line
    # (tests/jvm_archive.py, about 30 s) would cost more than it saves
    env["TTLSTATE_TEST_JVM_ARCHIVE"] = "0"
    if require:
        env["TTLSTATE_UPGRADE_REQUIRE"] = ",".join(require)
    return env


def run_pytest(label: str, python: pathlib.Path, args: list[str], env: dict,
               report: pathlib.Path, output: pathlib.Path | None = None) -> dict:
    """One pytest run; its output goes to the terminal, or to `output` (printed when it ends)
    when several lines run at once."""
    report.unlink(missing_ok=True)
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider",
           f"--junitxml={report}", *args]
    log(f"{label}: {' '.join(cmd[1:])}")
    t0 = time.monotonic()
    if output is None:
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
    else:
        with open(output, "w") as out:
            rc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
        log(f"{label}: output\n{output.read_text(errors='replace').rstrip()}")
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if report.exists():
        suite = ET.parse(report).getroot()
        suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
        counts = {k: int(suite.get(k, 0)) for k in counts}
    passed = counts["tests"] - counts["failures"] - counts["errors"] - counts["skipped"]
    ok = rc == 0 and counts["tests"] > 0 and counts["skipped"] == 0
    return dict(label=label, rc=rc, ok=ok, seconds=time.monotonic() - t0, passed=passed, **counts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--versions", nargs="*", default=DEFAULT_VERSIONS,
                    help=f"pyspark versions of the earlier lines (default: {' '.join(DEFAULT_VERSIONS)})")
    ap.add_argument("--current", choices=["smoke", "upgrade", "none"], default="smoke",
                    help="on this interpreter's Spark: the smoke subset and the upgrade test "
                         "(smoke), the upgrade test only (upgrade), or nothing")
    ap.add_argument("--venvs", default=str(ROOT / ".venvs"))
    ap.add_argument("--work", default=str(ROOT / "build" / "spark-matrix"))
    ap.add_argument("--prepare", action="store_true",
                    help="only create or update the venvs, run no test (.ci/run does this in the "
                         "background while the full suite runs)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="earlier lines run at once (each pytest in its own process; default 1)")
    ap.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    a = ap.parse_args(argv)
    if a.prepare:
        pathlib.Path(a.venvs).mkdir(parents=True, exist_ok=True)
        for version in a.versions:
            ensure_venv(version, pathlib.Path(a.venvs))
        return 0

    import pyspark
    current = pyspark.__version__
    if line_of(current) != "4.3":
        log(f"this interpreter's pyspark is {current}; the upgrade test continues on 4.3")
    venvs, work = pathlib.Path(a.venvs), pathlib.Path(a.work)
    venvs.mkdir(parents=True, exist_ok=True)
    upgrade = work / "upgrade"
    shutil.rmtree(upgrade, ignore_errors=True)
    upgrade.mkdir(parents=True)

    if a.jobs < 1:
        ap.error(f"--jobs {a.jobs}: expected 1 or more")
    t_all = time.monotonic()
    venv_of = {}
    results = []
    for version in a.versions:  # venvs one at a time: pip's cache is shared
        t0 = time.monotonic()
        try:
            venv_of[version] = (ensure_venv(version, venvs), time.monotonic() - t0)
        except subprocess.CalledProcessError as e:
            results.append(dict(label=f"spark {version}", rc=e.returncode, ok=False,
                                seconds=time.monotonic() - t0, tests=0, passed=0, failures=0,
                                errors=1, skipped=0, setup=time.monotonic() - t0))
            log(f"spark {version}: setting up the venv failed: {e}")

    def run_line(version: str) -> dict:
        py, setup = venv_of[version]
        output = work / f"pytest-{line_of(version)}.log" if a.jobs > 1 else None
        r = run_pytest(f"spark {version}", py,
                       ["-m", "matrix", "--deselect", CONTINUE, *a.pytest_args],
                       child_env(upgrade, []), work / f"junit-{line_of(version)}.xml", output)
        r["setup"] = setup
        return r

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        results += list(pool.map(run_line, [v for v in a.versions if v in venv_of]))
    if a.current != "none":
        require = [line_of(v) for v in a.versions]
        args = (["-m", "matrix", "--deselect", WRITE] if a.current == "smoke"
                else [CONTINUE])
        # only the continuations of the lines that ran (pytest deselects by node id prefix)
        args += [f"--deselect={CONTINUE}[{line}-" for line in ("4.0", "4.1", "4.2")
                 if line not in require]
        r = run_pytest(f"spark {current} (this env)", pathlib.Path(sys.executable),
                       [*args, *a.pytest_args], child_env(upgrade, require),
                       work / "junit-current.xml")
        r["setup"] = 0.0
        results.append(r)

    log("summary")
    for r in results:
        log(f"  {r['label']:<24} {'ok  ' if r['ok'] else 'FAIL'} {r['passed']} passed, "
            f"{r['failures']} failed, {r['errors']} errors, {r['skipped']} skipped; "
            f"venv {r['setup']:.0f}s, pytest {r['seconds']:.0f}s (exit {r['rc']})")
    ok = all(r["ok"] for r in results) and bool(results)
    log(f"{'passed' if ok else 'FAILED'} in {time.monotonic() - t_all:.0f}s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
