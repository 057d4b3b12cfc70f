"""`make spark-tests` (buildsys/spark_tests.py): its comparison of the two sides' junit results on
small result files written here, and the agreement of its expected refusals with docs/guide/operators.md."""

import io
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "buildsys"))

import spark_tests  # noqa: E402
from spark_tests import Refusal, Result  # noqa: E402

M = "pkg.test_mod.Tests"


def junit(path: pathlib.Path, cases: dict[str, str]) -> pathlib.Path:
    """A junit-xml file as pytest writes it; `cases` maps test name to outcome or
    `failed:<message>` / `error:<message>` / `skipped:<reason>`."""
    body = []
    for name, outcome in cases.items():
        kind, _, message = outcome.partition(":")
        inner = "" if kind == "passed" else (
            f'<{"failure" if kind == "failed" else kind} message="{message}">trace of {name}'
            f'</{"failure" if kind == "failed" else kind}>')
        body.append(f'<testcase classname="{M}" name="{name}" time="0.1">{inner}</testcase>')
    path.write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
                    + "".join(body) + "</testsuite></testsuites>")
    return path


def test_junit_outcomes_and_counts(tmp_path):
    results = spark_tests.parse_junit(junit(tmp_path / "a.xml", {
        "test_ok": "passed", "test_bad": "failed:boom", "test_err": "error:setup broke",
        "test_skip": "skipped:no kafka"}))
    assert {k: r.outcome for k, r in results.items()} == {
        f"{M}.test_ok": "passed", f"{M}.test_bad": "failed", f"{M}.test_err": "failed",
        f"{M}.test_skip": "skipped"}
    assert "boom" in results[f"{M}.test_bad"].message
    assert "trace of test_err" in results[f"{M}.test_err"].message
    assert spark_tests.counts(results) == {"passed": 1, "failed": 2, "skipped": 1}


def test_differences_both_ways_and_only_documented_refusals_expected(tmp_path):
    refusals = (Refusal("feature X", f"{M}.test_x_*", "X_NOT_SUPPORTED"),)
    stock = spark_tests.parse_junit(junit(tmp_path / "stock.xml", {
        "test_same": "passed", "test_both_fail": "failed:a", "test_x_refused": "passed",
        "test_x_other_error": "passed", "test_y_refused_elsewhere": "passed",
        "test_reverse": "failed:flaky", "test_skip_vs_pass": "skipped:r", "test_gone": "passed"}))
    ttl = spark_tests.parse_junit(junit(tmp_path / "ttl.xml", {
        "test_same": "passed", "test_both_fail": "failed:b",
        "test_x_refused": "failed:[X_NOT_SUPPORTED] no", "test_x_other_error": "error:NPE",
        "test_y_refused_elsewhere": "failed:[X_NOT_SUPPORTED] no", "test_reverse": "passed",
        "test_skip_vs_pass": "passed", "test_new": "passed"}))
    diffs = {d.test_id.rsplit(".", 1)[1]: d for d in spark_tests.compare(stock, ttl, refusals)}
    assert set(diffs) == {"test_x_refused", "test_x_other_error", "test_y_refused_elsewhere",
                          "test_reverse", "test_skip_vs_pass", "test_gone", "test_new"}
    assert [k for k, d in diffs.items() if d.expected] == ["test_x_refused"]
    assert diffs["test_x_refused"].refusal is refusals[0]
    assert (diffs["test_reverse"].stock, diffs["test_reverse"].ttlstate) == ("failed", "passed")
    assert (diffs["test_gone"].stock, diffs["test_gone"].ttlstate) == ("passed", "missing")
    assert (diffs["test_new"].stock, diffs["test_new"].ttlstate) == ("missing", "passed")

    out = io.StringIO()
    assert spark_tests.report(stock, ttl, list(diffs.values()), out=out) == 1
    text = out.getvalue()
    assert "stock     8 tests: 5 passed, 2 failed, 1 skipped" in text
    assert "ttlstate  8 tests: 4 passed, 4 failed, 0 skipped" in text
    assert "differences: 7 (1 expected refusals, 6 unexpected)" in text
    assert "X_NOT_SUPPORTED" in text and "UNEXPECTED pkg.test_mod.Tests.test_reverse" in text

    only_expected = [d for d in diffs.values() if d.expected]
    assert spark_tests.report(stock, ttl, only_expected, out=io.StringIO()) == 0


def test_a_module_without_results_is_one_failed_pseudo_test(tmp_path):
    junit_dir = tmp_path / "ttlstate" / "junit"
    junit_dir.mkdir(parents=True)
    junit(junit_dir / "pyspark.sql.tests.a.xml", {"test_ok": "passed"})
    results = spark_tests.load_side("ttlstate", tmp_path, ["pyspark/sql/tests/a.py",
                                                         "pyspark/sql/tests/b.py"])
    assert results[f"{M}.test_ok"] == Result("passed")
    assert results["pyspark/sql/tests/b.py::<run>"].outcome == "failed"


def test_the_innermost_error_class_names_a_failure():
    message = ("py4j.protocol.Py4JJavaError: An error occurred\n"
               "[STREAM_FAILED] Query terminated with exception: [A.B_C] the cause")
    assert spark_tests.first_line(message) == "[A.B_C] the cause"


def readme_refusals():
    """(feature, test pattern, error class) of each row of the documented table of what ttlstate
    does not serve (docs/guide/operators.md)."""
    page = (ROOT / "docs" / "guide" / "operators.md").read_text()
    section = page.split("## What ttlstate does not serve", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) != 3 or set(cells[0]) <= {"-", " "}:
            continue
        if cells[0] == "Feature":
            continue
        tests = re.findall(r"`([^`]+)`", cells[1])
        error = re.search(r"`\[([A-Z0-9_.]+)\]", cells[2])
        assert tests and error, line
        rows += [(re.sub(r"[`*]", "", cells[0]), t, error.group(1)) for t in tests]
    return rows


def test_readme_lists_exactly_the_refusals_the_script_expects():
    script = [(r.feature, r.tests, r.error) for r in spark_tests.EXPECTED_REFUSALS]
    assert sorted(readme_refusals()) == sorted(script)
    assert "make spark-tests" in (ROOT / "docs" / "guide" / "operators.md").read_text()


def test_forcing_sitecustomize_rewrites_the_provider_and_leaves_pyspark_importable(tmp_path):
    """The sitecustomize of the ttlstate side, in a fresh Python importing pyspark from the
    installed pyspark.zip as Spark's Python workers do: a SparkConf's provider class becomes the
    forced one, other keys are kept, and the worker modules still import (a patched zipimporter
    once broke every module of the zip)."""
    import subprocess
    zip_path = spark_tests.pyspark_home() / "python" / "lib" / "pyspark.zip"
    code = ("import pyspark, pyspark.daemon, pyspark.worker\n"
            "from pyspark import SparkConf\n"
            "c = SparkConf(loadDefaults=False)\n"
            "c.set('spark.sql.streaming.stateStore.providerClass', 'RocksDBProvider')\n"
            "c.set('spark.sql.shuffle.partitions', '5')\n"
            "print(pyspark.__file__); print(sorted(c.getAll()))\n")
    env = {**__import__("os").environ, "TTLSTATE_FORCE_PROVIDER": "Forced",
           "PYTHONPATH": f"{spark_tests.SITE_DIR}:{zip_path}"}
    out = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path,
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0].startswith(str(zip_path))
    assert out[1] == str([("spark.sql.shuffle.partitions", "5"),
                          ("spark.sql.streaming.stateStore.providerClass", "Forced")])
