"""`make spark-tests`: Spark's own PySpark streaming and stateful tests, once on stock Spark and
once with ttlstate forced on every SparkSession, and the tests whose outcome differs.

The test modules ship in the installed pyspark's `python/lib/pyspark.zip` (the wheel's `pyspark`
package has no tests); they are extracted under build/spark-tests/src and run from there with
SPARK_HOME set to the installed pyspark, one pytest process per module (Spark's own runner does
the same: a first SparkContext's confs become JVM system properties that later test classes of
the same process would inherit), each writing a junit-xml file.

How ttlstate is forced (the `ttlstate` side):
- SPARK_CONF_DIR/spark-defaults.conf holds what `ttlstate.configure` sets on a builder (the jar
  on spark.jars and the driver classpath, the provider class, the session extensions, ...):
  spark-submit, which starts every PySpark JVM, reads it, so it applies to every session a test
  creates, however it creates it (SparkContext(conf=...), SparkSession(sc), the builder).
- buildsys/spark_tests_site/sitecustomize.py: Spark's tests of transformWithState, offline
  repartition and real-time mode set the provider to Spark's RocksDB one in their SparkConf, which
  outranks spark-defaults; with TTLSTATE_FORCE_PROVIDER set it turns such a `SparkConf.set` into
  ttlstate's class. A sitecustomize alone would miss sessions whose confs come from the JVM side
  (spark-defaults, `--conf`), spark-defaults alone the tests that choose a provider: both it is.
The `stock` side runs with an empty spark-defaults.conf and no sitecustomize.

Each difference (a test passed on one side and not the other) is reported; those that match an
EXPECTED_REFUSALS entry (the test id matches its pattern and ttlstate's failure names its error)
are expected: Spark 4.3 accepts only its own RocksDB provider there (docs/guide/operators.md,
"What ttlstate does not serve"; tests/test_spark_tests.py checks that the page and this list agree). The exit
status is 0 only when every other difference is gone.
"""

from __future__ import annotations

import argparse
import dataclasses
import fnmatch
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SITE_DIR = pathlib.Path(__file__).resolve().parent / "spark_tests_site"
DEFAULT_OUT = ROOT / "build" / "spark-tests"
SIDES = ("stock", "ttlstate")

# The modules run, as paths inside pyspark.zip.
MODULES = (
    "pyspark/sql/tests/streaming/test_streaming.py",
    "pyspark/sql/tests/streaming/test_streaming_foreach.py",
    "pyspark/sql/tests/streaming/test_streaming_foreach_batch.py",
    "pyspark/sql/tests/streaming/test_streaming_listener.py",
    "pyspark/sql/tests/streaming/test_streaming_offline_state_repartition.py",
    "pyspark/sql/tests/pandas/test_pandas_grouped_map_with_state.py",
    "pyspark/sql/tests/pandas/streaming/test_pandas_transform_with_state.py",
    "pyspark/sql/tests/pandas/streaming/test_pandas_transform_with_state_checkpoint_v2.py",
    "pyspark/sql/tests/pandas/streaming/test_pandas_transform_with_state_state_variable.py",
    "pyspark/sql/tests/pandas/streaming/test_pandas_transform_with_state_state_variable_checkpoint_v2.py",
    "pyspark/sql/tests/pandas/streaming/test_transform_with_state.py",
    "pyspark/sql/tests/pandas/streaming/test_transform_with_state_checkpoint_v2.py",
    "pyspark/sql/tests/pandas/streaming/test_transform_with_state_state_variable.py",
    "pyspark/sql/tests/pandas/streaming/test_transform_with_state_state_variable_checkpoint_v2.py",
    "pyspark/sql/tests/pandas/streaming/test_tws_tester.py",
)

# Streaming modules of the zip left out, and why.
EXCLUDED = {
    "pyspark/sql/tests/streaming/test_streaming_kafka_rtm.py":
        "needs a Kafka broker in Docker (testcontainers, kafka-python) and the Kafka connector "
        "jar of a Spark source build; none is here",
    "pyspark/sql/tests/connect/streaming/":
        "Spark Connect parity: the same test bodies through a Connect server started in-process; "
        "the state store runs in that server's JVM exactly as in the classic modules, so they "
        "would repeat the classic results at twice the run time",
    "pyspark/sql/tests/connect/pandas/streaming/": "Spark Connect parity (as above)",
}


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A feature Spark 4.3 serves only with its own RocksDB provider: the tests (an fnmatch
    pattern on test ids) that fail with ttlstate for that reason, and the error they fail with."""
    feature: str
    tests: str
    error: str

    def explains(self, test_id: str, message: str) -> bool:
        return fnmatch.fnmatchcase(test_id, self.tests) and self.error in message


# Keep in step with docs/guide/operators.md, "What ttlstate does not serve" (tests/test_spark_tests.py).
TWS_REFUSED = "UNSUPPORTED_FEATURE.STORE_BACKEND_NOT_SUPPORTED_FOR_TWS"
REPARTITION = "pyspark.sql.tests.streaming.test_streaming_offline_state_repartition."
EXPECTED_REFUSALS = (
    Refusal("transformWithState", "pyspark.sql.tests.pandas.streaming.*", TWS_REFUSED),
    Refusal("transformWithState", REPARTITION + "*_tws*", TWS_REFUSED),
    Refusal("offline state repartition", REPARTITION + "*",
            "STATE_REPARTITION_INVALID_CHECKPOINT.UNSUPPORTED_PROVIDER"),
    Refusal("real-time mode", "pyspark.sql.tests.streaming.test_streaming.*real_time*",
            "STREAMING_REAL_TIME_MODE.SQL_CONFIGURATION_NOT_SUPPORTED"),
)


@dataclasses.dataclass(frozen=True)
class Result:
    """One test's outcome: passed, failed (a failure or an error), or skipped; and the message."""
    outcome: str
    message: str = ""


@dataclasses.dataclass(frozen=True)
class Difference:
    test_id: str
    stock: str
    ttlstate: str
    message: str
    refusal: Refusal | None

    @property
    def expected(self) -> bool:
        return self.refusal is not None


MISSING = "missing"


def parse_junit(path: pathlib.Path) -> dict[str, Result]:
    """Results of a junit-xml file by test id (`classname.name`)."""
    results = {}
    for case in ET.parse(path).getroot().iter("testcase"):
        test_id = f"{case.get('classname')}.{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed"
                message = f"{child.get('message') or ''}\n{child.text or ''}"
                break
            if child.tag == "skipped":
                outcome, message = "skipped", child.get("message") or ""
        results[test_id] = Result(outcome, message)
    return results


def compare(stock: dict[str, Result], ttl: dict[str, Result],
            refusals=EXPECTED_REFUSALS) -> list[Difference]:
    """The tests whose outcome differs between the two sides (a test absent from one side is
    `missing` there), each with the refusal that explains it, if one does: only a test that
    passed on stock and failed with ttlstate, with a failure naming the refusal's error."""
    differences = []
    for test_id in sorted(set(stock) | set(ttl)):
        s, t = stock.get(test_id), ttl.get(test_id)
        s_out = s.outcome if s else MISSING
        t_out = t.outcome if t else MISSING
        if s_out == t_out:
            continue
        message = t.message if t_out == "failed" else (s.message if s else "")
        refusal = None
        if s_out == "passed" and t_out == "failed":
            refusal = next((r for r in refusals if r.explains(test_id, t.message)), None)
        differences.append(Difference(test_id, s_out, t_out, message, refusal))
    return differences


def counts(results: dict[str, Result]) -> dict[str, int]:
    out = {"passed": 0, "failed": 0, "skipped": 0}
    for r in results.values():
        out[r.outcome] += 1
    return out


ERROR_CLASS = re.compile(r"\[([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)\]")


def first_line(message: str, limit: int = 240) -> str:
    """The most telling line of a failure: the first naming a Spark error class, else the first
    naming an exception, else the first."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for test in (ERROR_CLASS.search, lambda line: "Error" in line or "Exception" in line):
        for line in lines:
            if test(line):
                inner = list(ERROR_CLASS.finditer(line))  # the innermost error: the last named
                return line[inner[-1].start():][:limit] if inner else line[:limit]
    return lines[0][:limit] if lines else ""


def report(stock: dict[str, Result], ttl: dict[str, Result], differences: list[Difference],
           out=sys.stdout) -> int:
    """Prints counts and differences; returns the exit status (0: only expected differences)."""
    for side, results in (("stock", stock), ("ttlstate", ttl)):
        c = counts(results)
        print(f"{side:9} {len(results)} tests: {c['passed']} passed, {c['failed']} failed, "
              f"{c['skipped']} skipped", file=out)
    unexpected = [d for d in differences if not d.expected]
    expected = [d for d in differences if d.expected]
    print(f"differences: {len(differences)} ({len(expected)} expected refusals, "
          f"{len(unexpected)} unexpected)", file=out)
    for d in expected:
        print(f"  expected  {d.test_id}: {d.stock} -> {d.ttlstate} ({d.refusal.feature}: "
              f"{d.refusal.error})", file=out)
    for d in unexpected:
        print(f"  UNEXPECTED {d.test_id}: stock {d.stock}, ttlstate {d.ttlstate}: "
              f"{first_line(d.message)}", file=out)
    return 1 if unexpected else 0


def pyspark_home() -> pathlib.Path:
    import pyspark
    return pathlib.Path(pyspark.__file__).resolve().parent


def extract(out: pathlib.Path) -> pathlib.Path:
    """The installed pyspark's pyspark.zip, extracted (again when the zip changed)."""
    zip_path = pyspark_home() / "python" / "lib" / "pyspark.zip"
    src = out / "src"
    stamp = src / ".extracted-from"
    tag = f"{zip_path} {zip_path.stat().st_mtime_ns} {zip_path.stat().st_size}"
    if not (stamp.is_file() and stamp.read_text() == tag):
        shutil.rmtree(src, ignore_errors=True)
        with zipfile.ZipFile(zip_path) as z:
            z.extractall(src)
        stamp.write_text(tag)
    return src


def write_test_support(work: pathlib.Path) -> pathlib.Path:
    """The input files Spark's tests read from `python/test_support/sql/streaming` relative to
    the working directory (Spark's source tree; not in the wheel), written here by this script:
    a text file of the two lines test_streaming_foreach_batch expects, and `time/`, `time;id`
    rows (10 rows, 6 distinct ids) for test_streaming_drop_duplicate_within_watermark."""
    streaming = work / "python" / "test_support" / "sql" / "streaming"
    (streaming / "time").mkdir(parents=True, exist_ok=True)
    (streaming / "text-test.txt").write_text("hello\nthis\n")
    rows = [(0, 1), (1, 2), (3, 3), (4, 3), (9, 4), (9, 1), (10, 3), (20, 5), (21, 6), (25, 2)]
    (streaming / "time" / "text-with-time-test.txt").write_text(
        "".join(f"2025-01-01 00:00:{s:02d};{i}\n" for s, i in rows))
    return work


def side_environment(side: str, out: pathlib.Path, src: pathlib.Path) -> dict[str, str]:
    conf_dir = out / side / "conf"
    conf_dir.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    for key in ("PYSPARK_SUBMIT_ARGS", "SPARK_CONF_DIR", "TTLSTATE_FORCE_PROVIDER",
                "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(key, None)
    path = [str(src)]
    lines = []
    if side == "ttlstate":
        from pyspark.sql import SparkSession
        import ttlstate
        options = ttlstate.configure(SparkSession.Builder())._options
        lines = [f"{k} {v}" for k, v in options.items()]
        env["TTLSTATE_FORCE_PROVIDER"] = ttlstate.PROVIDER_CLASS
        path.insert(0, str(SITE_DIR))
    (conf_dir / "spark-defaults.conf").write_text("".join(line + "\n" for line in lines))
    env.update(SPARK_CONF_DIR=str(conf_dir), SPARK_HOME=str(pyspark_home()),
               PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               PYTHONPATH=os.pathsep.join(path + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return env


def run_side(side: str, modules, out: pathlib.Path, src: pathlib.Path, timeout: float) -> dict:
    """Runs every module on one side; returns {module: {"status", "seconds"}}."""
    env = side_environment(side, out, src)
    ini = out / "pytest.ini"
    ini.write_text("[pytest]\naddopts = -p no:cacheprovider\n")
    work = write_test_support(out / side / "work")
    status = {}
    for module in modules:
        xml = out / side / "junit" / (module.replace("/", ".").removesuffix(".py") + ".xml")
        xml.parent.mkdir(parents=True, exist_ok=True)
        xml.unlink(missing_ok=True)
        log = xml.with_suffix(".log")
        start = time.monotonic()
        with open(log, "w") as log_file:
            proc = subprocess.Popen(
                [sys.executable, "-m", "pytest", "-q", "-c", str(ini), f"--rootdir={src}",
                 f"--junitxml={xml}", str(src / module)],
                cwd=work, env=env, stdout=log_file, stderr=subprocess.STDOUT,
                start_new_session=True)
            try:
                code = proc.wait(timeout=timeout)
                state = f"exit {code}"
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
                state = f"timeout after {timeout:.0f} s"
        seconds = time.monotonic() - start
        status[module] = {"status": state, "seconds": round(seconds, 1)}
        print(f"[{side}] {module}: {state}, {seconds:.0f} s", flush=True)
    return status


def load_side(side: str, out: pathlib.Path, modules) -> dict[str, Result]:
    """A side's results; a module whose junit file is missing (timed out, crashed) is one
    failed pseudo-test `<module>::<run>`."""
    results = {}
    for module in modules:
        xml = out / side / "junit" / (module.replace("/", ".").removesuffix(".py") + ".xml")
        if xml.is_file():
            results.update(parse_junit(xml))
        else:
            results[f"{module}::<run>"] = Result("failed", f"no junit-xml: see {xml.with_suffix('.log')}")
    return results


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sides", default="stock,ttlstate",
                        help="sides to run (comma-separated); a side not run is read from the "
                             "junit files of an earlier run")
    parser.add_argument("--compare-only", action="store_true", help="run nothing, compare files")
    parser.add_argument("--modules", nargs="*", help="module paths in pyspark.zip (default: all)")
    parser.add_argument("--out", type=pathlib.Path, default=DEFAULT_OUT)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per module")
    args = parser.parse_args(argv)
    modules = args.modules or list(MODULES)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    print("excluded modules:")
    for module, why in EXCLUDED.items():
        print(f"  {module}: {why}")
    if not args.compare_only:
        src = extract(out)
        for side in [s for s in args.sides.split(",") if s]:
            if side not in SIDES:
                parser.error(f"--sides: unknown side {side!r}; allowed: {', '.join(SIDES)}")
            start = time.monotonic()
            status = run_side(side, modules, out, src, args.timeout)
            print(f"[{side}] {time.monotonic() - start:.0f} s", flush=True)
            (out / side / "status.json").write_text(json.dumps(status, indent=1))
    stock, ttl = load_side("stock", out, modules), load_side("ttlstate", out, modules)
    return report(stock, ttl, compare(stock, ttl))


if __name__ == "__main__":
    sys.exit(main())
